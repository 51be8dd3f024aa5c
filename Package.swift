// swift-tools-version: 6.0
// NoteKit: SwiftData's programming model on Linux, persisted as append-only JSON segments.
// The toolchain only: no package dependencies, by design; NoteKitMirror alone links a system library, libpq.
import PackageDescription

let package = Package(
    name: "NoteKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "NoteKit", targets: ["NoteKit"]),
        // The notes domain (Note, Folder, NoteDrawing, NoteRevision, NoteAttachment and their rules), built on the
        // engine like any dependent's models.
        .library(name: "NoteKitNotes", targets: ["NoteKitNotes"]),
        .library(name: "NoteKitFileStore", targets: ["NoteKitFileStore"]),
        // Mirroring a store to PostgreSQL: the one product that links a system library (libpq). A dependent that
        // does not use it never needs libpq.
        .library(name: "NoteKitMirror", targets: ["NoteKitMirror"]),
        .executable(name: "notekit", targets: ["notekit"]),
        .executable(name: "notekit-stress", targets: ["notekit-stress"]),
    ],
    targets: [
        .target(name: "NoteKit"),
        .target(name: "NoteKitNotes", dependencies: ["NoteKit"]),
        .target(name: "NoteKitFileStore", dependencies: ["NoteKit"]),
        // libpq's C interface, found through pkg-config (Debian: libpq-dev).
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "NoteKitMirror", dependencies: ["NoteKit", "NoteKitFileStore", "CLibPQ"]),
        // The command-line parser of the three executables (notekit, notekit-bench, notekit-stress): not a product.
        .target(name: "NoteKitCommandLine"),
        .executableTarget(name: "notekit",
                          dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitMirror", "NoteKitCommandLine"]),
        .executableTarget(name: "notekit-bench",
                          dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitMirror", "NoteKitCommandLine"]),
        // What notekit-stress runs and the reliability tests drive: seed 001's FieldNotes app (its models, persistence
        // and migration plan), the stress workloads and the kill and share drivers. Not a product.
        .target(name: "NoteKitStressSupport", dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore"]),
        // What Fixtures/v1–v4 hold and the frozen schemas that wrote them, for notekit-fixtures and the replay tests.
        // Not a product.
        .target(name: "NoteKitFixtures", dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore"]),
        // What the test targets share: the kinds of store every behaviour test runs on, temporary directories,
        // a file system that fails on purpose. No product depends on a target under Tests/.
        .target(name: "NoteKitTestSupport", dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitStressSupport"],
                path: "Tests/TestSupport"),
        // The kill test's child and its long mode (docs/reliability/kill.md): `swift run -c release notekit-stress kill`.
        .executableTarget(name: "notekit-stress",
                          dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitMirror", "NoteKitStressSupport",
                                         "NoteKitCommandLine"]),
        // Writes Fixtures/v1–v4 through the frozen schemas: `swift run notekit-fixtures Fixtures`.
        .executableTarget(name: "notekit-fixtures", dependencies: ["NoteKitFixtures"]),
        .testTarget(name: "NoteKitTests",
                    dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitStressSupport", "NoteKitTestSupport"]),
        // The mirror against a PostgreSQL server each test starts from the machine's binaries.
        .testTarget(name: "MirrorTests", dependencies: ["NoteKit", "NoteKitFileStore", "NoteKitMirror", "NoteKitNotes", "NoteKitStressSupport",
                                                        "NoteKitTestSupport", "notekit", "notekit-stress"]),
        // The notes domain's rules (R1–R10, T1–T7) on both stores.
        .testTarget(name: "NoteKitNotesTests", dependencies: ["NoteKit", "NoteKitNotes", "NoteKitTestSupport"]),
        // Depends on the executables so that `swift test` builds them: the command-line tests run `notekit`, the
        // kill test runs `notekit-stress`, the cold-phase tests `notekit-bench`.
        .testTarget(name: "FileStoreTests",
                    dependencies: ["NoteKit", "NoteKitNotes", "NoteKitFileStore", "NoteKitFixtures", "NoteKitStressSupport",
                                   "NoteKitTestSupport", "notekit", "notekit-stress", "notekit-bench"]),
    ],
    swiftLanguageModes: [.v6]
)
