import Foundation
import Testing

/// Issue 36, item 7: no product is built from code under `Tests/`. What a product ships (a library a dependent links,
/// an executable `swift run` builds) must not depend on test support, which may change with any test; what the tools
/// and the tests share lives in targets under `Sources/` (NoteKitStressSupport, NoteKitFixtures).
@Suite("The package: no product depends on code under Tests/")
struct PackageProductsTests {
    /// The package's root: this file is in Tests/NoteKitTests/.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A target of the manifest: where its sources are and the targets of this package it depends on.
    struct Target {
        let name: String
        let type: String
        let path: String
        let dependencies: [String]
    }

    /// The package's manifest as `swift package dump-package` prints it: its targets by name, and each product's
    /// targets, with the executable product SwiftPM makes of every executable target no product names.
    struct Manifest {
        var targets: [String: Target] = [:]
        var products: [String: [String]] = [:]

        init(json: [String: Any]) {
            for target in json["targets"] as? [[String: Any]] ?? [] {
                guard let name = target["name"] as? String, let type = target["type"] as? String else { continue }
                // A dependency is {"byName": [name, condition]}, {"target": [name, condition]} or {"product": […]}
                // (another package's product, which no target here is).
                let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap { dependency in
                    ((dependency["byName"] ?? dependency["target"]) as? [Any])?.first as? String
                }
                // Without a path, SwiftPM looks in Tests/NAME for a test target and Sources/NAME for the others.
                let path = target["path"] as? String ?? (type == "test" ? "Tests/\(name)" : "Sources/\(name)")
                targets[name] = Target(name: name, type: type, path: path, dependencies: dependencies)
            }
            for product in json["products"] as? [[String: Any]] ?? [] {
                guard let name = product["name"] as? String else { continue }
                products[name] = product["targets"] as? [String] ?? []
            }
            let named = Set(products.values.joined())
            for target in targets.values where target.type == "executable" && !named.contains(target.name) {
                products[target.name] = [target.name]
            }
        }

        /// A chain of dependencies from `start` to a target whose sources are under Tests/, if there is one.
        func chainToTests(from start: String) -> [String]? {
            var visited: Set<String> = []
            func search(_ name: String, _ chain: [String]) -> [String]? {
                guard visited.insert(name).inserted, let target = targets[name] else { return nil }
                if target.path.hasPrefix("Tests/") { return chain + ["\(name) (\(target.path))"] }
                for dependency in target.dependencies {
                    if let found = search(dependency, chain + [name]) { return found }
                }
                return nil
            }
            return search(start, [])
        }
    }

    /// `swift package dump-package` of this package. It only reads the manifest, so it does not take the lock of the
    /// build directory (`--ignore-lock`), which the `swift test` running this test holds.
    static func manifest() throws -> Manifest {
        // The tool's temporary directories (`TemporaryDirectory.*`, which it leaves behind) go in one of the test's
        // own, removed after it, not in /tmp.
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("notekit-dump-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--ignore-lock", "--package-path", root.path, "dump-package"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary.path]) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "swift package dump-package: \(message)")
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Manifest(json: json)
    }

    @Test("No library or executable product depends, directly or through other targets, on a target under Tests/")
    func noProductDependsOnTests() throws {
        let manifest = try Self.manifest()
        // The check sees the package: its products, including the executables it makes of executable targets, and
        // the test support under Tests/ they must not reach.
        #expect(manifest.products.keys.contains("notekit-stress"))
        #expect(manifest.products.keys.contains("notekit-fixtures"))
        #expect(manifest.targets["NoteKitTestSupport"]?.path.hasPrefix("Tests/") == true)
        for (product, targets) in manifest.products.sorted(by: { $0.key < $1.key }) {
            for target in targets {
                let chain = manifest.chainToTests(from: target)?.joined(separator: " → ")
                #expect(chain == nil, "product \(product) depends on code under Tests/: \(chain ?? "")")
            }
        }
    }
}
