// swift-tools-version: 6.0
// NoteKit: SwiftData's programming model on Linux, persisted as append-only JSON segments.
// The toolchain only: no package dependencies, by design.
import PackageDescription

let package = Package(
    name: "NoteKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "NoteKit", targets: ["NoteKit"]),
        .library(name: "NoteKitFileStore", targets: ["NoteKitFileStore"]),
        .executable(name: "notekit", targets: ["notekit"]),
    ],
    targets: [
        .target(name: "NoteKit"),
        .target(name: "NoteKitFileStore", dependencies: ["NoteKit"]),
        .executableTarget(name: "notekit", dependencies: ["NoteKit", "NoteKitFileStore"]),
        .executableTarget(name: "notekit-bench", dependencies: ["NoteKit", "NoteKitFileStore"]),
        // What both test targets share: the kinds of store every behaviour test runs on, temporary directories,
        // a file system that fails on purpose.
        .target(name: "NoteKitTestSupport", dependencies: ["NoteKit", "NoteKitFileStore"], path: "Tests/TestSupport"),
        // Writes Fixtures/v1–v3 through the frozen schemas: `swift run notekit-fixtures Fixtures`.
        .executableTarget(name: "notekit-fixtures", dependencies: ["NoteKitTestSupport"], path: "Tests/FixtureGenerator"),
        .testTarget(name: "NoteKitTests", dependencies: ["NoteKit", "NoteKitFileStore", "NoteKitTestSupport"]),
        // Depends on the notekit executable so that `swift test` builds it: the command-line tests run it.
        .testTarget(name: "FileStoreTests",
                    dependencies: ["NoteKit", "NoteKitFileStore", "NoteKitTestSupport", "notekit"]),
    ],
    swiftLanguageModes: [.v6]
)
