import Foundation
import NoteKitTestSupport
import Testing

/// Type-checks a Swift source file against the NoteKit module this test run was built with, using the toolchain's
/// `swiftc`, to test what the compiler tells a user about a declaration.
struct SnippetCompiler {
    /// One diagnostic the compiler printed.
    struct Diagnostic: CustomStringConvertible {
        let line: Int
        let severity: String
        let message: String
        var description: String { "\(line): \(severity): \(message)" }
    }

    let swiftc: URL
    let moduleDirectory: URL
    /// The compiled modules (Glibc's, Foundation's C modules, CLibPQ's) every compile of this process shares: built
    /// by the first compile, a second or so, and read by the others, a tenth of a second each. The cache does not
    /// hold NoteKit's modules, which are read from `moduleDirectory`. Removed when the process ends.
    static let moduleCache = TemporaryStores.newURL("swift-module-cache")

    /// The compiler, or nil when `swiftc` or the built module cannot be found (see ``unavailableReason``).
    static let shared: SnippetCompiler? = {
        guard let swiftc = findSwiftc(), let modules = findModuleDirectory() else { return nil }
        return SnippetCompiler(swiftc: swiftc, moduleDirectory: modules)
    }()

    static var unavailableReason: Comment {
        findSwiftc() == nil ? "swiftc is not on PATH" : "the built NoteKit.swiftmodule was not found"
    }

    /// The diagnostics of type-checking `source` in Swift 6 mode, with `-I` the built modules.
    ///
    /// - Parameter module: a module the snippet may import, built first from its name and source (its own
    ///   diagnostics are returned if it does not build).
    func diagnostics(of source: String, importing module: (name: String, source: String)? = nil) throws -> [Diagnostic] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notekit-snippet-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = Self.moduleCache.path
        if let module {
            let file = directory.appendingPathComponent("\(module.name).swift")
            try Data(module.source.utf8).write(to: file)
            let built = try run(["-emit-module", "-parse-as-library", "-module-name", module.name, "-swift-version", "6",
                                 "-I", moduleDirectory.path] + Self.systemLibraryArguments + ["-module-cache-path", cache,
                                 "-emit-module-path", directory.appendingPathComponent("\(module.name).swiftmodule").path,
                                 file.path], reporting: file)
            if !built.isEmpty { return built }
        }
        let file = directory.appendingPathComponent("Snippet.swift")
        try Data(source.utf8).write(to: file)
        return try run(["-typecheck", "-swift-version", "6", "-I", moduleDirectory.path, "-I", directory.path]
                        + Self.systemLibraryArguments + ["-module-cache-path", cache, file.path], reporting: file)
    }

    /// Runs the compiler and returns the diagnostics it printed for `file`.
    private func run(_ arguments: [String], reporting file: URL) throws -> [Diagnostic] {
        let process = Process()
        process.executableURL = swiftc
        process.arguments = arguments
        // The driver's temporary directories (`TemporaryDirectory.*`, which it leaves behind) go in the snippet's
        // own directory, which is removed after it, not in /tmp.
        process.environment = ProcessInfo.processInfo.environment
            .merging(["TMPDIR": file.deletingLastPathComponent().path]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // `Snippet.swift:7:6: error: message`; the compiler also prints the source under each diagnostic.
        let prefix = file.path + ":"
        let diagnostics = text.split(separator: "\n").compactMap { line -> Diagnostic? in
            guard line.hasPrefix(prefix) else { return nil }
            let parts = line.dropFirst(prefix.count).split(separator: ":", maxSplits: 3)
            guard parts.count == 4, let number = Int(parts[0]) else { return nil }
            return Diagnostic(line: number, severity: parts[2].trimmingCharacters(in: .whitespaces),
                              message: parts[3].trimmingCharacters(in: .whitespaces))
        }
        // A failure that names no line of the file (a module not found, a bad option) is still a failure.
        if process.terminationStatus != 0, !diagnostics.contains(where: { $0.severity == "error" }) {
            return diagnostics + [Diagnostic(line: 0, severity: "error", message: text)]
        }
        return diagnostics
    }

    private static func findSwiftc() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent("swiftc") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// What importing NoteKitMirror needs besides the built modules: the `CLibPQ` module map, and libpq's header
    /// directory (`/usr/include/postgresql` on Debian, as SwiftPM's pkg-config look-up finds it).
    static let systemLibraryArguments: [String] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        var headers = ["/usr/include/postgresql"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pkg-config", "--cflags-only-I", "libpq"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let found = text.split(whereSeparator: \.isWhitespace).filter { $0.hasPrefix("-I") }.map { String($0.dropFirst(2)) }
            if process.terminationStatus == 0, !found.isEmpty { headers = found }
        }
        return ["-I", root.appendingPathComponent("Sources/CLibPQ").path] + headers.flatMap { ["-Xcc", "-I\($0)"] }
    }()

    /// `Modules` beside the test executable, where SwiftPM puts the modules it built; else the package's
    /// `.build/debug/Modules`.
    private static func findModuleDirectory() -> URL? {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("Modules")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return [beside, root.appendingPathComponent(".build/debug/Modules")].first {
            FileManager.default.fileExists(atPath: $0.appendingPathComponent("NoteKit.swiftmodule").path)
        }
    }
}
