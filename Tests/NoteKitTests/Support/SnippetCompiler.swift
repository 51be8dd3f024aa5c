import Foundation
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

    /// The compiler, or nil when `swiftc` or the built module cannot be found (see ``unavailableReason``).
    static let shared: SnippetCompiler? = {
        guard let swiftc = findSwiftc(), let modules = findModuleDirectory() else { return nil }
        return SnippetCompiler(swiftc: swiftc, moduleDirectory: modules)
    }()

    static var unavailableReason: Comment {
        findSwiftc() == nil ? "swiftc is not on PATH" : "the built NoteKit.swiftmodule was not found"
    }

    /// The diagnostics of type-checking `source` in Swift 6 mode, with `-I` the built modules.
    func diagnostics(of source: String) throws -> [Diagnostic] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notekit-snippet-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("Snippet.swift")
        try Data(source.utf8).write(to: file)
        let process = Process()
        process.executableURL = swiftc
        process.arguments = ["-typecheck", "-swift-version", "6", "-I", moduleDirectory.path,
                             "-module-cache-path", directory.appendingPathComponent("cache").path, file.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // `Snippet.swift:7:6: error: message`; the compiler also prints the source under each diagnostic.
        let prefix = file.path + ":"
        return text.split(separator: "\n").compactMap { line -> Diagnostic? in
            guard line.hasPrefix(prefix) else { return nil }
            let parts = line.dropFirst(prefix.count).split(separator: ":", maxSplits: 3)
            guard parts.count == 4, let number = Int(parts[0]) else { return nil }
            return Diagnostic(line: number, severity: parts[2].trimmingCharacters(in: .whitespaces),
                              message: parts[3].trimmingCharacters(in: .whitespaces))
        }
    }

    private static func findSwiftc() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent("swiftc") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

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
