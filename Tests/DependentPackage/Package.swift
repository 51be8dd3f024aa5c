// swift-tools-version: 6.0
// A dependent of NoteKit, as a user's tool would be: it declares its own `Note` and `Folder` (seed 003's names) in a module of its own and
// must compile next to NoteKit and NoteKitFileStore with no ambiguity. Built and run by `.ci/run`; its source is also
// type-checked by `swift test` (DependentPackageTests).
import PackageDescription

let package = Package(
    name: "TodoTool",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "NoteKit", path: "../..")],
    targets: [
        .target(name: "TodoModels", dependencies: [.product(name: "NoteKit", package: "NoteKit")]),
        .executableTarget(name: "TodoTool", dependencies: [
            "TodoModels",
            .product(name: "NoteKit", package: "NoteKit"),
            .product(name: "NoteKitFileStore", package: "NoteKit"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
