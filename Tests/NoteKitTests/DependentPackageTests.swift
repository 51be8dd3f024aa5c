import Foundation
import Testing

/// `import NoteKit` is the engine alone: the notes domain is the NoteKitNotes product, so a dependent may name its
/// own models `Note` and `Folder` (seed 003's names) without ambiguity.
@Suite("A dependent package: import NoteKit brings the engine, no notes-domain type",
       .enabled(if: SnippetCompiler.shared != nil, SnippetCompiler.unavailableReason))
struct DependentPackageTests {
    /// Tests/DependentPackage, which `.ci/run` also builds and runs as a package of its own.
    static let dependent = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("DependentPackage/Sources")

    @Test("A dependent's own Note and Folder, in a module of its own, compile next to NoteKit and NoteKitFileStore")
    func ownNoteAndFolderCompile() throws {
        let models = try String(contentsOf: Self.dependent.appendingPathComponent("TodoModels/Models.swift"),
                                encoding: .utf8)
        let tool = try String(contentsOf: Self.dependent.appendingPathComponent("TodoTool/main.swift"), encoding: .utf8)
        let diagnostics = try #require(SnippetCompiler.shared)
            .diagnostics(of: tool, importing: (name: "TodoModels", source: models))
        #expect(diagnostics.isEmpty, "\(diagnostics)")
    }

    @Test("No notes-domain type is visible through import NoteKit or import NoteKitFileStore",
          arguments: ["Note", "Folder", "NoteDrawing", "NoteRevision", "NoteAttachment", "NoteAttachments",
                      "NoteEditor", "NotesSchema", "FolderHierarchy", "AttachmentDirectory", "NoteClock"])
    func notesTypesAreNotInTheEngine(name: String) throws {
        let source = """
            import NoteKit
            import NoteKitFileStore
            let type: Any.Type = \(name).self
            """
        let diagnostics = try #require(SnippetCompiler.shared).diagnostics(of: source)
        #expect(diagnostics.contains { $0.severity == "error" && $0.message.contains("cannot find '\(name)' in scope") },
                "\(diagnostics)")
    }

    @Test("NoteKit adds no member to a user's standard types: arrays and optionals of models, scalars, strings",
          arguments: [("let notes: [Note] = []; _ = notes.models", "models"),
                      ("_ = [Note].empty", "empty"),
                      ("_ = [Note].isToMany", "isToMany"),
                      ("let note: Note? = nil; _ = note.models", "models"),
                      ("_ = Optional<Note>.isToMany", "isToMany"),
                      ("_ = Int.attributeType", "attributeType"),
                      ("_ = \"text\".storedValue", "storedValue")])
    func noMembersOnStandardTypes(statement: String, member: String) throws {
        let source = """
            import NoteKit
            import NoteKitNotes
            \(statement)
            """
        let diagnostics = try #require(SnippetCompiler.shared).diagnostics(of: source)
        // "has no member", or "is inaccessible" for what NoteKit keeps at `package` access: either way, not there.
        #expect(diagnostics.contains { $0.severity == "error" && $0.message.contains("'\(member)'") },
                "\(diagnostics)")
    }

    @Test("The notes domain is one import away: import NoteKitNotes")
    func notesModuleProvidesThem() throws {
        let source = """
            import NoteKit
            import NoteKitNotes
            let types: [Any.Type] = [Note.self, Folder.self, NoteDrawing.self, NoteRevision.self, NoteAttachment.self]
            let schema = NotesSchema.models
            """
        let diagnostics = try #require(SnippetCompiler.shared).diagnostics(of: source)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
    }
}
