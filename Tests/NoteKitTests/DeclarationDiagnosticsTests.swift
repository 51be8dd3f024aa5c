import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

/// One model whose properties each make a mistake a porter makes (or, for the last ones, make none), type-checked
/// once against the built module; each test reads the diagnostics of its lines.
private enum Snippet {
    static let declarations: [(key: String, line: String)] = [
        ("missingDefault", "@Attribute var title: String"),
        ("missingDefaultWithOptions", "@Attribute(.unique) var code: String"),
        ("optionalModel", "@Attribute var folder: Folder?"),
        ("optionalModelWithOptions", "@Attribute(.unique) var home: Folder?"),
        ("models", "@Attribute var folders: [Folder] = []"),
        ("model", "@Attribute var owner = Folder()"),
        ("relationshipOfValues", "@Relationship var tags: [String] = []"),
        ("relationshipOfOptionalValue", "@Relationship(deleteRule: .cascade) var label: String?"),
        ("nonOptionalToOne", "@Relationship var parent: Folder"),
        ("valid", "@Attribute var subtitle: String?"),
        ("valid", "@Attribute(.unique, originalName: \"handle\") var slug: String?"),
        ("valid", "@Attribute var body = \"\""),
        ("valid", "@Attribute var tagNames: [String] = []"),
        ("valid", "@Relationship var archive: Folder?"),
        ("valid", "@Relationship(deleteRule: .cascade) var children: [Folder] = []"),
        ("valid", "@Attribute var isPinned = false"),
        ("retroactiveBoolSort",
         "static var pinnedFirst: [SortDescriptor<Specimen>] { [SortDescriptor(\\.isPinned, order: .reverse)] }"),
    ]

    static let header = [
        "import NoteKit",
        "final class Folder: PersistentModel {",
        "    @Attribute var name = \"\"",
        "    required init() {}",
        "}",
        "final class Specimen: PersistentModel {",
    ]

    /// What a porter wrote before NoteKit could sort by a `Bool`; it must not make that sort ambiguous.
    static let footer = [
        "extension Bool: @retroactive Comparable {",
        "    public static func < (lhs: Bool, rhs: Bool) -> Bool { !lhs && rhs }",
        "}",
    ]

    static let source = (header + declarations.map { "    " + $0.line } + ["    required init() {}", "}"] + footer)
        .joined(separator: "\n")

    /// The compiler's diagnostics, by snippet key.
    static let diagnostics: Result<[String: [SnippetCompiler.Diagnostic]], any Error> = Result {
        guard let compiler = SnippetCompiler.shared else { return [:] }
        var byKey: [String: [SnippetCompiler.Diagnostic]] = [:]
        for diagnostic in try compiler.diagnostics(of: source) {
            let index = diagnostic.line - header.count - 1
            let key = declarations.indices.contains(index) ? declarations[index].key : "elsewhere"
            byKey[key, default: []].append(diagnostic)
        }
        return byKey
    }

    static func diagnostics(_ key: String) throws -> [SnippetCompiler.Diagnostic] {
        try diagnostics.get()[key] ?? []
    }
}

@Suite("Declaration mistakes get a diagnostic that says what to write",
       .enabled(if: SnippetCompiler.shared != nil, SnippetCompiler.unavailableReason))
struct DeclarationDiagnosticsTests {
    @Test("A persisted property without a default: the compiler asks for a default value or an optional type",
          arguments: ["missingDefault", "missingDefaultWithOptions"])
    func missingDefault(key: String) throws {
        let diagnostics = try Snippet.diagnostics(key)
        #expect(diagnostics.count == 1, "\(diagnostics)")
        let message = try #require(diagnostics.first).message
        #expect(diagnostics.first?.severity == "error")
        #expect(message.contains("give the attribute a default value (`@Attribute var title = \"\"`)"), "\(message)")
        #expect(message.contains("or make it optional (`@Attribute var title: String?`)"), "\(message)")
        #expect(!message.contains("ExpressibleByNilLiteral"), "\(message)")
    }

    @Test("@Attribute on a model, an optional model or an array of models: the compiler suggests @Relationship",
          arguments: ["optionalModel", "optionalModelWithOptions", "models", "model"])
    func attributeOfModelType(key: String) throws {
        let diagnostics = try Snippet.diagnostics(key)
        #expect(diagnostics.count == 1, "\(diagnostics)")
        let message = try #require(diagnostics.first).message
        #expect(message.contains("declare it with @Relationship"), "\(message)")
    }

    @Test("@Relationship on a value type or a non-optional model: the compiler says what a relationship holds",
          arguments: ["relationshipOfValues", "relationshipOfOptionalValue", "nonOptionalToOne"])
    func relationshipOfValueType(key: String) throws {
        let diagnostics = try Snippet.diagnostics(key)
        #expect(!diagnostics.isEmpty)
        #expect(diagnostics.allSatisfy { $0.severity == "error" })
        let message = try #require(diagnostics.first).message
        #expect(message.contains("@Relationship holds an optional model (`@Relationship var folder: Folder?`) or an "
                                 + "array of models"), "\(message)")
        #expect(message.contains("declare a property of any other type with @Attribute"), "\(message)")
        #expect(!diagnostics.contains { $0.message.contains("ModelObject") || $0.message.contains("RelationshipValue") },
                "no internal names: \(diagnostics)")
    }

    @Test("The correct declarations next to them get no diagnostic at all")
    func validDeclarations() throws {
        #expect(try Snippet.diagnostics("valid").isEmpty)
        #expect(try Snippet.diagnostics("elsewhere").isEmpty)
    }

    @Test("A porter's own retroactive Bool: Comparable leaves SortDescriptor(\\.isPinned) unambiguous")
    func retroactiveBoolConformance() throws {
        #expect(try Snippet.diagnostics("retroactiveBoolSort").isEmpty)
    }
}

@Suite("Declaration mistakes the compiler cannot see are refused when the schema is built")
struct DeclarationSchemaErrorTests {
    @Test("An attribute whose type is a model (or an array of models) is refused, suggesting @Relationship",
          arguments: StoreKind.allCases)
    func attributeHoldingModels(kind: StoreKind) throws {
        for (type, typeName) in [(GenericAttributeHolder<Tutorial.Folder>.self as any PersistentModel.Type, "Folder"),
                                 (GenericAttributeHolder<[Tutorial.Folder]>.self, "Array<Folder>"),
                                 (GenericAttributeHolder<CodableTarget>.self, "CodableTarget")] {
            do {
                _ = try kind.makeContainer([type])
                Issue.record("\(type): the container opened")
            } catch let error as SchemaError {
                #expect(error == .attributeHoldsModels(entity: "GenericAttributeHolder", property: "target",
                                                       type: "Optional<\(typeName)>"))
                #expect(error.description.contains("declare it with @Relationship"), "\(error)")
            }
        }
    }
}
