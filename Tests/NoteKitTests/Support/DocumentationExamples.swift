import Foundation

/// The Swift examples of a Markdown file (a DocC article or the README), as the programs the examples test
/// type-checks (CONTRIBUTING.md, "Examples in the docs").
///
/// Every ```` ```swift ```` block of a file is compiled. A block that begins with an `import` is a program of its own;
/// a block that does not continues the program before it, so it may use what that one declared. Every program also
/// imports `NoteKit` and the module whose catalog holds the file. A block after the HTML comment
/// `<!-- example: fragment -->` (on the line before the fence, blank lines between allowed) is not compiled: an
/// excerpt of something that is not a program, such as `Package.swift`.
struct DocumentationExamples {
    /// One program: its source, and for each of its lines the line of the Markdown file it came from (0 for the
    /// imports the test adds).
    struct Program {
        let source: String
        let origins: [Int]
    }

    /// A marker the test does not know, or a fence left open: the file is wrong, not the example.
    struct MarkupError: Error, CustomStringConvertible {
        let file: String
        let line: Int
        let problem: String
        var description: String { "\(file):\(line): \(problem)" }
    }

    let programs: [Program]
    /// The number of blocks marked as fragments.
    let fragments: Int

    /// The Markdown files whose examples are compiled: every article of every catalog (`Sources/*/*.docc/*.md`) and
    /// the README, relative to the package root.
    static func files(root: URL = packageRoot) -> [String] {
        let manager = FileManager.default
        let sources = root.appendingPathComponent("Sources")
        let modules = (try? manager.contentsOfDirectory(atPath: sources.path)) ?? []
        var files: [String] = []
        for module in modules.sorted() {
            let catalog = "Sources/\(module)/\(module).docc"
            let articles = (try? manager.contentsOfDirectory(atPath: root.appendingPathComponent(catalog).path)) ?? []
            files += articles.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
        return files + ["README.md"]
    }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The module a file documents: `NoteKitFileStore` for `Sources/NoteKitFileStore/…`, nil for the README.
    static func module(of file: String) -> String? {
        let parts = file.split(separator: "/")
        return parts.count > 2 && parts[0] == "Sources" ? String(parts[1]) : nil
    }

    /// Splits `text`, the contents of `file`, into its programs.
    ///
    /// - Throws: ``MarkupError`` for an unknown `example:` marker, a marker before a block that is not Swift, a
    ///   ```` ```swift ```` fence with more words (docc would not highlight it), or a block left open.
    init(_ text: String, file: String) throws {
        let imports = ["NoteKit", Self.module(of: file)].compactMap { $0 }
            .reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            .map { "import \($0)" }
        var programs: [Program] = []
        var source: [String] = []
        var origins: [Int] = []
        var fragments = 0
        func finish() {
            if !source.isEmpty {
                programs.append(Program(source: (imports + source).joined(separator: "\n") + "\n",
                                        origins: Array(repeating: 0, count: imports.count) + origins))
            }
            source = []
            origins = []
        }
        let lines = text.components(separatedBy: "\n")
        var marker: (text: String, line: Int)?
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("<!-- example:"), trimmed.hasSuffix("-->") {
                let text = trimmed.dropFirst("<!-- example:".count).dropLast(3)
                marker = (text.trimmingCharacters(in: .whitespaces), index + 1)
                index += 1
                continue
            }
            guard trimmed.hasPrefix("```") else {
                if !trimmed.isEmpty { marker = nil }
                index += 1
                continue
            }
            // A fence: its block ends at the next line that is a bare fence.
            let indent = line.prefix { $0 == " " }.count
            let info = trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces)
            guard let end = lines[(index + 1)...].firstIndex(where: {
                $0.trimmingCharacters(in: .whitespaces) == "```"
            }) else { throw MarkupError(file: file, line: index + 1, problem: "a code block is never closed") }
            if info.hasPrefix("swift ") {
                // docc takes the whole info string as the listing's language: the block would lose its highlighting.
                throw MarkupError(file: file, line: index + 1, problem: "```\(info): write ```swift, after "
                                  + "<!-- example: fragment --> on the line before for a block that is not compiled")
            }
            if info == "swift" {
                switch marker?.text {
                case "fragment"?:
                    fragments += 1
                case nil:
                    let block = ((index + 1)..<end).map { number in
                        String(lines[number].dropFirst(min(indent, lines[number].prefix { $0 == " " }.count)))
                    }
                    let first = block.first { line in
                        let code = line.trimmingCharacters(in: .whitespaces)
                        return !code.isEmpty && !code.hasPrefix("//")
                    }
                    if first?.hasPrefix("import ") == true { finish() }
                    source += block
                    origins += ((index + 1)..<end).map { $0 + 1 }
                case let other?:
                    throw MarkupError(file: file, line: marker?.line ?? index + 1,
                                      problem: "unknown marker 'example: \(other)' (the one marker is fragment)")
                }
            } else if let marker {
                throw MarkupError(file: file, line: marker.line,
                                  problem: "'example: \(marker.text)' precedes a block that is not ```swift")
            }
            marker = nil
            index = end + 1
        }
        finish()
        self.programs = programs
        self.fragments = fragments
    }
}
