import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitFixtures
import NoteKitTestSupport
import Testing

/// How an application names today's notes schema.
enum SchemaSpelling: String, CaseIterable, CustomStringConvertible, Sendable {
    /// `Schema(versionedSchema: NotesSchema.self)`, at 4.0.0.
    case versionedSchema
    /// `Schema([Note.self])`, the model list seed 000's application registers, with no version of its own.
    case modelList

    var description: String { rawValue }

    func todaysSchema() throws -> Schema {
        switch self {
        case .versionedSchema: try Schema(versionedSchema: NotesSchema.self)
        case .modelList: try Schema([Note.self])
        }
    }
}

/// DOMAIN.md M1–M6: the committed fixtures, written through frozen declarations, reopen under today's models.
@Suite("Migration fixtures: v1–v4 reopen under today's models")
struct FixtureReplayTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func fixture(_ version: Int) -> URL { fixtures.appendingPathComponent("v\(version)") }

    @Test("Every fixture matches its checksum list: committed fixtures are never modified", arguments: [1, 2, 3, 4])
    func checksums(version: Int) throws {
        #expect(try StoreFixture.verify(Self.fixture(version)) == [])
    }

    @Test("M1: each fixture was written through its frozen declarations, not today's models", arguments: [1, 2, 3])
    func m1(version: Int) throws {
        let frozen = try Schema(versionedSchema: NotesFixtureData.versionedSchema(version))
        let today = try Schema(NotesSchema.models, version: NotesSchema.versionIdentifier)
        #expect(frozen.contentHash != today.contentHash)
        // Opening a copy read-only with the frozen declarations needs no migration at all: the schemas match.
        let (container, copy) = try StoreFixture.openCopy(of: Self.fixture(version), schema: frozen) {
            $0.mode = .readOnly
        }
        defer { try? FileManager.default.removeItem(at: copy) }
        let segment = try String(contentsOf: StoreFiles.segment(copy), encoding: .utf8)
        #expect(segment.contains(#""hash":"\#(frozen.contentHash)""#))
        #expect(!segment.contains(today.contentHash))
        let stored = try container.store.fetch(StoreFetchRequest(entity: "Note", resultType: .count))
        #expect(stored.count == NotesFixtureData.notes(version: version).count)
        #expect(throws: FetchError.unknownEntity("Note"), "today's Note is not a model of the frozen schema") {
            try ModelContext(container).fetchCount(FetchDescriptor<Note>())
        }
    }

    @Test("M1: Fixtures/v4 was written through its frozen declarations (today's schema until the next change), in store format version 2")
    func m1FormatVersionTwo() throws {
        let frozen = try Schema(versionedSchema: AttachmentSchema.self)
        #expect(frozen.contentHash == (try Schema(versionedSchema: NotesSchema.self)).contentHash)
        let fixture = Self.fixture(4)
        let manifest = try String(contentsOf: fixture.appendingPathComponent("MANIFEST"), encoding: .utf8)
        let segment = try String(contentsOf: StoreFiles.segment(fixture), encoding: .utf8)
        #expect(manifest.hasPrefix("NOTEKIT/2 manifest\n") && segment.hasPrefix("NOTEKIT/2 segment\n"))
        #expect(manifest.contains(#""schemas":[{"hash":"\#(frozen.contentHash)""#), "the manifest copies the schema")
        #expect(segment.contains(#""hash":"\#(frozen.contentHash)""#))
        for version in 1...3 {
            let older = try String(contentsOf: Self.fixture(version).appendingPathComponent("MANIFEST"), encoding: .utf8)
            #expect(older.hasPrefix("NOTEKIT/1 manifest\n"), "v\(version) stays in format version 1")
        }
        let (container, copy) = try StoreFixture.openCopy(of: fixture, schema: frozen) { $0.mode = .readOnly }
        defer { try? FileManager.default.removeItem(at: copy) }
        let stored = try container.store.fetch(StoreFetchRequest(entity: "NoteAttachment", resultType: .count))
        #expect(stored.count == NotesFixtureData.attachments(version: 4).count)
        #expect(try StoreVerifier.verify(at: copy).ok)
    }

    @Test("M6: reopening a v4 store (format version 2) keeps notes, nested folders, filing, drawings, revisions and attachments, and migrates nothing",
          arguments: SchemaSpelling.allCases)
    func m6v4(spelling: SchemaSpelling) throws {
        try replay(version: 4, spelling, attachments: true) { context in
            let hierarchy = FolderHierarchy(context: context)
            let folders = try context.fetch(FetchDescriptor<Folder>())
            let byName = Dictionary(uniqueKeysWithValues: folders.map { ($0.name, $0) })
            #expect(Set(byName.keys) == Set(NotesFixtureData.folders(version: 4).map(\.name)))
            for spec in NotesFixtureData.folders(version: 4) {
                #expect(byName[spec.name]?.parent?.name == spec.parent, "\(spec.name)'s parent")
            }
            #expect(try hierarchy.isForest())
            try expectNotes(version: 4, in: context)
            let attachments = try context.fetch(FetchDescriptor<NoteAttachment>())
            let expected = NotesFixtureData.attachments(version: 4)
            #expect(Set(attachments.map(\.id)) == Set(expected.map(\.id)))
            for spec in expected {
                let attachment = try #require(attachments.first { $0.id == spec.id })
                #expect(attachment.fileName == spec.fileName && attachment.originalName == spec.originalName)
                #expect(attachment.contentType == spec.contentType && attachment.size == spec.size)
                #expect(attachment.note?.id == spec.note, "\(spec.originalName) stays attached to its note")
            }
            for note in try context.fetch(FetchDescriptor<Note>()) {
                #expect(Set(note.attachments.map(\.id)) == Set(expected.filter { $0.note == note.id }.map(\.id)))
            }
        }
        // Today's schema is the fixture's: the history holds its one schema, no migration was recorded.
        let (container, copy) = try StoreFixture.openCopy(of: Self.fixture(4), schema: try spelling.todaysSchema())
        defer { try? FileManager.default.removeItem(at: copy) }
        #expect(container.schema.version == AttachmentSchema.versionIdentifier)
        try StoreFiles.close(container)
        #expect(try StoreInspector.schemaHistory(at: copy).map(\.contentHash)
                    == [try Schema(versionedSchema: AttachmentSchema.self).contentHash])
    }

    @Test("M2: naming only Note registers all five entities")
    func m2() throws {
        let (container, copy) = try StoreFixture.openCopy(of: Self.fixture(3), schema: Schema([Note.self],
                                                                                            version: NotesSchema.versionIdentifier))
        defer { try? FileManager.default.removeItem(at: copy) }
        #expect(container.schema.entities.map(\.name) == ["Folder", "Note", "NoteAttachment", "NoteDrawing", "NoteRevision"])
        #expect(container.schema.contentHash == (try Schema(versionedSchema: NotesSchema.self)).contentHash)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == NotesFixtureData.notes(version: 3).count)
    }

    @Test("M3: reopening a v2 store keeps every folder as a root, filing, drawings, revisions, text and timestamps",
          arguments: SchemaSpelling.allCases)
    func m3(spelling: SchemaSpelling) throws {
        try replay(version: 2, spelling) { context in
            let hierarchy = FolderHierarchy(context: context)
            let folders = try context.fetch(FetchDescriptor<Folder>())
            #expect(folders.allSatisfy { $0.parent == nil && $0.children.isEmpty }, "every folder is a root folder")
            #expect(Set(try hierarchy.roots().map(\.name)) == Set(NotesFixtureData.folders(version: 2).map(\.name)))
            #expect(try hierarchy.isForest(), "the hierarchy is cycle free")
            try expectNotes(version: 2, in: context)
        }
    }

    @Test("M4: reopening a v3 store keeps notes, nested folders, filing, drawings and revisions; no attachments",
          arguments: SchemaSpelling.allCases)
    func m4(spelling: SchemaSpelling) throws {
        try replay(version: 3, spelling) { context in
            let hierarchy = FolderHierarchy(context: context)
            let folders = try context.fetch(FetchDescriptor<Folder>())
            let byName = Dictionary(uniqueKeysWithValues: folders.map { ($0.name, $0) })
            for spec in NotesFixtureData.folders(version: 3) {
                #expect(byName[spec.name]?.parent?.name == spec.parent, "\(spec.name)'s parent")
            }
            #expect(hierarchy.path(of: try #require(byName["NoteKit"])).map(\.name) == ["Work", "Projects", "NoteKit"])
            #expect(try hierarchy.isForest())
            try expectNotes(version: 3, in: context)
            #expect(try context.fetch(FetchDescriptor<Note>()).allSatisfy { $0.attachments.isEmpty })
            #expect(try context.fetchCount(FetchDescriptor<NoteAttachment>()) == 0)
        }
    }

    @Test("M5: reopening a v1 store keeps notes, folders, filing and drawings; every note has an empty history",
          arguments: SchemaSpelling.allCases)
    func m5(spelling: SchemaSpelling) throws {
        try replay(version: 1, spelling) { context in
            #expect(Set(try context.fetch(FetchDescriptor<Folder>()).map(\.name))
                    == Set(NotesFixtureData.folders(version: 1).map(\.name)))
            try expectNotes(version: 1, in: context)
            let notes = try context.fetch(FetchDescriptor<Note>())
            #expect(notes.allSatisfy { NoteEditor(context: context).history(of: $0).isEmpty })
            #expect(try context.fetchCount(FetchDescriptor<NoteRevision>()) == 0)
        }
    }

    @Test("A model list carries a fixture's version on; the fixture's own frozen declarations are then refused",
          arguments: [1, 2, 3])
    func modelListCarriesVersion(version: Int) throws {
        let frozen = NotesFixtureData.versionedSchema(version)
        let (container, copy) = try StoreFixture.openCopy(of: Self.fixture(version), schema: Schema([Note.self]))
        defer { try? FileManager.default.removeItem(at: copy) }
        #expect(container.schema.version == frozen.versionIdentifier)
        try StoreFiles.close(container)
        #expect(try StoreInspector.schemaHistory(at: copy).map(\.version)
                    == [frozen.versionIdentifier, frozen.versionIdentifier])
        // The store has moved past the frozen schema (by hash, at the same number): opening it with them again would
        // migrate backwards.
        let before = fileHashes(copy)
        do {
            _ = try ModelContainer(for: Schema(versionedSchema: frozen),
                                   configurations: [FileStoreConfiguration(url: copy)])
            Issue.record("the frozen v\(version) declarations must not migrate the store backwards")
        } catch MigrationError.schemaIsOlderThanStore {
            // Refused as older than the store: any other error fails the test.
        }
        #expect(fileHashes(copy) == before)
    }

    @Test("M6: every frozen schema has its fixture, each migrates to the next, and the newest is today's")
    func m6() throws {
        let frozen: [any VersionedSchema.Type] = [PreRevisionSchema.self, PreNestedFolderSchema.self,
                                                  PreAttachmentSchema.self, AttachmentSchema.self]
        for (index, schema) in frozen.enumerated() {
            #expect(schema.versionIdentifier == Schema.Version(index + 1, 0, 0))
            #expect(FileManager.default.fileExists(atPath: Self.fixture(index + 1).appendingPathComponent("MANIFEST").path))
        }
        for (older, newer) in zip(frozen, frozen.dropFirst()) {
            let migration = try LightweightMigration(from: try Schema(versionedSchema: older),
                                                     to: try Schema(versionedSchema: newer))
            #expect(!migration.diff.isRefused && !migration.diff.changes.isEmpty, "\(older) to \(newer)")
        }
        // A schema change makes today's schema differ from the newest frozen one: freeze today's declarations
        // (the version they replace) first, write Fixtures/vN through them, and add a replay test like those above.
        let newest = try Schema(versionedSchema: frozen.last!)
        let today = try Schema(versionedSchema: NotesSchema.self)
        #expect(NotesSchema.versionIdentifier == frozen.last!.versionIdentifier
                    && today.contentHash == newest.contentHash,
                "NotesSchema changed: freeze the version it replaces and add Fixtures/v\(frozen.count + 1)")
    }

    /// Copies the fixture, opens it with today's models, checks; edits, saves, reopens, checks; compacts, reopens,
    /// checks again.
    private func replay(version: Int, _ spelling: SchemaSpelling, attachments: Bool = false,
                        check: (ModelContext) throws -> Void) throws {
        let (container, copy) = try StoreFixture.openCopy(of: Self.fixture(version),
                                                          schema: try spelling.todaysSchema())
        defer { try? FileManager.default.removeItem(at: copy) }
        do {
            let context = ModelContext(container)
            try check(context)
            // An edit and a save under today's schema.
            let note = Note()
            note.title = "added after migration"
            context.insert(note)
            try context.save()
            try context.delete(note)
            try context.save()
            try StoreFiles.close(container)
        }
        let reopened = try StoreFiles.open(copy, NotesSchema.models)
        try check(ModelContext(reopened))
        try StoreFiles.store(reopened).compact()
        try StoreFiles.close(reopened)
        let compacted = try StoreFiles.open(copy, NotesSchema.models)
        try check(ModelContext(compacted))
        let text = try String(contentsOf: StoreFiles.segment(copy, 2), encoding: .utf8)
        #expect(text.contains(#""k":"rows","e":"NoteAttachment""#) == attachments, "attachments to write, or none")
        #expect(text.contains(#""k":"rows","e":"Note""#), "compaction writes the state in today's schema")
        try StoreFiles.close(compacted)
    }

    /// The notes read back exactly as the fixture wrote them: text, dates, filing, drawings, revisions.
    private func expectNotes(version: Int, in context: ModelContext) throws {
        let notes = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.createdAt)]))
        let expected = NotesFixtureData.notes(version: version)
        #expect(notes.map(\.id) == expected.map(\.id))
        for (note, spec) in zip(notes, expected) {
            #expect(note.title == spec.title && note.body == spec.body, "\(spec.title)")
            #expect(note.eventDate == spec.eventDate && note.createdAt == spec.createdAt && note.updatedAt == spec.updatedAt)
            #expect(note.folder?.name == spec.folder, "filing of \(spec.title)")
            #expect(note.drawing?.data == spec.drawing, "drawing of \(spec.title)")
            let history = NoteEditor(context: context).history(of: note)
            #expect(history.map(\.id) == spec.revisions.sorted { $0.capturedAt > $1.capturedAt }.map(\.id))
            for revision in history {
                let revisionSpec = try #require(spec.revisions.first { $0.id == revision.id })
                #expect(revision.title == revisionSpec.title && revision.body == revisionSpec.body)
                #expect(revision.updatedAt == revisionSpec.updatedAt && revision.capturedAt == revisionSpec.capturedAt)
                #expect(revision.eventDate == revisionSpec.eventDate)
            }
        }
        #expect(context.readFailures.isEmpty)
    }
}
