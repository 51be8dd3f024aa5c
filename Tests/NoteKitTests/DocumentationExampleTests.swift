import Foundation
import Testing

/// The Swift examples of the DocC articles and the README type-check against the modules this test run built
/// (issue 16: examples that compile). How a file's blocks become programs: ``DocumentationExamples``.
@Suite("Documentation examples")
struct DocumentationExampleTests {
    @Test("Every Swift example of an article or the README type-checks without a warning",
          arguments: DocumentationExamples.files())
    func examplesCompile(_ file: String) throws {
        let compiler = try #require(SnippetCompiler.shared, SnippetCompiler.unavailableReason)
        let url = DocumentationExamples.packageRoot.appendingPathComponent(file)
        let text = try String(contentsOf: url, encoding: .utf8)
        let examples = try DocumentationExamples(text, file: file)
        for problem in try Self.problems(of: examples, file: file, compiler: compiler) {
            Issue.record(Comment(rawValue: problem))
        }
    }

    @Test("A broken example is reported at its line of the article, and a fragment is not compiled")
    func brokenExample() throws {
        let compiler = try #require(SnippetCompiler.shared, SnippetCompiler.unavailableReason)
        let article = """
            # Example

            ```swift
            let schema = try Schema([])
            ```

            Text between the blocks; the next block continues the program.

            ```swift
            let count: Int = schema.entities
            ```

            <!-- example: fragment -->
            ```swift
            dependencies: [.package(url: "…", from: "0.1.0")],
            ```
            """
        let examples = try DocumentationExamples(article, file: "Sources/NoteKit/NoteKit.docc/Example.md")
        #expect(examples.programs.count == 1)
        #expect(examples.fragments == 1)
        let problems = try Self.problems(of: examples, file: "Example.md", compiler: compiler)
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("Example.md:10: error: cannot convert value of type") == true,
                "\(problems)")
    }

    @Test("An unknown marker, or a word after ```swift, is refused, naming its line")
    func unknownMarker() {
        #expect(throws: DocumentationExamples.MarkupError.self) {
            try DocumentationExamples("text\n<!-- example: fragmnet -->\n```swift\nlet x = 1\n```\n", file: "A.md")
        }
        // docc takes a whole info string as the language: `swift fragment` would be shown without highlighting.
        #expect(throws: DocumentationExamples.MarkupError.self) {
            try DocumentationExamples("```swift fragment\nlet x = 1\n```\n", file: "A.md")
        }
    }

    @Test("A block that begins with an import starts a program; one that does not continues the one before")
    func programs() throws {
        let compiler = try #require(SnippetCompiler.shared, SnippetCompiler.unavailableReason)
        let article = """
            ```swift
            let name = "first"
            ```

            ```swift
            print(name)
            ```

            ```swift
            // A program of its own: it may declare `name` again.
            import NoteKit
            let name = 2
            ```

            ```swift
            let doubled: Int = name * 2
            ```
            """
        let examples = try DocumentationExamples(article, file: "README.md")
        #expect(examples.programs.count == 2)
        #expect(try Self.problems(of: examples, file: "README.md", compiler: compiler) == [])
    }

    /// The errors and warnings of every program of `examples`, each as `file:line: severity: message` with the line
    /// of the Markdown file.
    static func problems(of examples: DocumentationExamples, file: String,
                         compiler: SnippetCompiler) throws -> [String] {
        try examples.programs.flatMap { program in
            try compiler.diagnostics(of: program.source).filter { $0.severity == "error" || $0.severity == "warning" }
                .map { diagnostic in
                    let origin = diagnostic.line > 0 && diagnostic.line <= program.origins.count
                        ? program.origins[diagnostic.line - 1] : 0
                    return "\(file):\(origin): \(diagnostic.severity): \(diagnostic.message)"
                }
        }
    }
}
