import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Issue 18, items 3 and 4: a store's transactions go to the server and come back to other stores, merged field by
/// field by a hybrid logical clock. Each test has a server of its own and runs on both kinds of store.
@Suite("Export, import and merging through the server", .enabled(if: TemporaryPostgres.runsServerTests,
                                                                  Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct StoreMirrorTests {
    static let zone = "iCloud.com.example.fieldnotes"

    /// A server with the FieldNotes tables, and a way to make devices of it.
    typealias Zone = MirrorZone

    /// Every object of the store as text, sorted: what two converged stores agree on.
    static func dump(_ container: ModelContainer) throws -> [String] {
        let context = ModelContext(container)
        var lines: [String] = []
        for note in try context.fetch(FetchDescriptor<NoteRecord>()) {
            lines.append("note \(note.id) \(note.title)|\(note.body)|\(note.tags)|\(note.isPinned)|"
                + "\(note.placeName ?? "-")|\(note.notebook?.id.uuidString ?? "-")|"
                + note.photos.map(\.id.uuidString).sorted().joined(separator: ","))
        }
        for notebook in try context.fetch(FetchDescriptor<NotebookRecord>()) {
            lines.append("notebook \(notebook.id) \(notebook.name) "
                + notebook.notes.map(\.id.uuidString).sorted().joined(separator: ","))
        }
        for photo in try context.fetch(FetchDescriptor<PhotoRecord>()) {
            lines.append("photo \(photo.id) \(photo.fileName) \(photo.data.count) \(photo.note?.id.uuidString ?? "-")")
        }
        return lines.sorted()
    }

    static func note(_ container: ModelContainer, _ id: UUID) throws -> NoteRecord? {
        try ModelContext(container).fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.id == id })).first
    }

    @Test("What one store saves reaches another: values, relationships and external-storage bytes",
          arguments: StoreKind.allCases)
    func exportThenImport(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let context = ModelContext(a)
        let notebook = NotebookRecord()
        notebook.name = "Trips"
        let note = NoteRecord()
        note.title = "Ridge walk"
        note.body = "  spaces kept  "
        note.tags = ["hike", "2026"]
        note.placeName = "Col du Lautaret"
        note.latitude = 45.03
        context.insert(note)
        note.notebook = notebook
        let photo = PhotoRecord(fileName: "ridge.jpg", data: Data((0..<5000).map { UInt8($0 % 251) }))
        note.photos.append(photo)
        try context.save()

        let sent = try mirrorA.sync()
        #expect(sent.exportedTransactions == 1 && sent.importedChanges == 0)
        let received = try mirrorB.sync()
        #expect(received.importedChanges == 1 && received.importTransactions.count == 1)
        #expect(try Self.dump(b) == Self.dump(a))
        let copy = try #require(try Self.note(b, note.id))
        #expect(copy.photos.first?.data == photo.data)
        #expect(copy.latitude == 45.03 && copy.longitude == nil)
        // The blob went to the server once, by its content hash.
        #expect(try zone.query(#"SELECT count(*) FROM notekit.blobs"#) == [["1"]])

        // The import is a transaction of B's history by the mirror, and A never gets its own change back.
        let history = try ModelContext(b).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.map(\.author) == [StoreMirror.author])
        #expect(try mirrorA.sync().importedChanges == 0)
        #expect(try mirrorB.sync().exportedTransactions == 0, "an import is never sent back")
    }

    @Test("Edits of different fields of one object are both kept; of one field, the later edit wins",
          arguments: StoreKind.allCases)
    func fieldWiseLastWriterWins(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let note = NoteRecord()
        note.title = "Draft"
        let contextA = ModelContext(a)
        contextA.insert(note)
        try contextA.save()
        try mirrorA.sync()
        try mirrorB.sync()

        // Concurrent: A edits the title and the body, B edits the body later and pins it. Neither has synced.
        let noteA = try #require(try Self.note(a, note.id)), noteB = try #require(try Self.note(b, note.id))
        noteA.title = "Title from A"
        noteA.body = "body from A"
        try noteA.modelContext?.save()
        Thread.sleep(forTimeInterval: 0.01)
        noteB.body = "body from B"
        noteB.isPinned = true
        try noteB.modelContext?.save()

        // B sends first, A last: the order of arrival does not decide, the clocks do.
        try mirrorB.sync()
        try mirrorA.sync()
        try mirrorB.sync()
        for container in [a, b] {
            let merged = try #require(try Self.note(container, note.id))
            #expect(merged.title == "Title from A")
            #expect(merged.body == "body from B")
            #expect(merged.isPinned)
        }
        #expect(try Self.dump(a) == Self.dump(b))
    }

    @Test("A deletion reaches other stores with its delete rules; a delete racing an edit wins",
          arguments: StoreKind.allCases)
    func deletesAsTombstones(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let contextA = ModelContext(a)
        let keep = NoteRecord(), doomed = NoteRecord()
        keep.title = "keep"
        doomed.title = "doomed"
        contextA.insert(keep)
        contextA.insert(doomed)
        doomed.photos.append(PhotoRecord(fileName: "a.jpg", data: Data([1, 2, 3])))
        try contextA.save()
        try mirrorA.sync()
        try mirrorB.sync()
        #expect(try ModelContext(b).fetchCount(FetchDescriptor<PhotoRecord>()) == 1)

        // A deletes the note (its photo by the cascade rule); B edits it meanwhile.
        let doomedID = doomed.id
        try contextA.delete(try #require(try contextA.fetch(FetchDescriptor<NoteRecord>(
            predicate: #Predicate { $0.id == doomedID })).first))
        try contextA.save()
        let editedB = try #require(try Self.note(b, doomed.id))
        editedB.title = "edited while deleted elsewhere"
        try editedB.modelContext?.save()

        try mirrorB.sync()
        try mirrorA.sync()
        try mirrorB.sync()
        for container in [a, b] {
            #expect(try Self.note(container, doomed.id) == nil)
            #expect(try Self.note(container, keep.id) != nil)
            #expect(try ModelContext(container).fetchCount(FetchDescriptor<PhotoRecord>()) == 0)
        }
        #expect(try Self.dump(a) == Self.dump(b))
        let deleted = try zone.query(#"SELECT deleted_clock IS NOT NULL FROM notekit."e_NoteRecord" WHERE id = $1"#,
                                     [doomed.persistentModelID.primaryKey.uuidString.lowercased()])
        #expect(deleted == [["t"]], "the server keeps a tombstone")
    }

    @Test("Moving an object to another target reaches other stores, inverse relationships included",
          arguments: StoreKind.allCases)
    func relationshipMoves(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let contextA = ModelContext(a)
        let first = NotebookRecord(), second = NotebookRecord()
        first.name = "first"
        second.name = "second"
        let note = NoteRecord()
        contextA.insert(first)
        contextA.insert(second)
        contextA.insert(note)
        note.notebook = first
        try contextA.save()
        try mirrorA.sync()
        try mirrorB.sync()

        second.notes.append(note)
        try contextA.save()
        #expect(note.notebook?.name == "second")
        try mirrorA.sync()
        try mirrorB.sync()
        let context = ModelContext(b)
        let notebooks = try context.fetch(FetchDescriptor<NotebookRecord>(sortBy: [SortDescriptor(\.name)]))
        #expect(notebooks.map { $0.notes.count } == [0, 1])
        #expect(try Self.note(b, note.id)?.notebook?.name == "second")

        // Deleting the notebook (nullify) elsewhere leaves the note without one here.
        try context.delete(notebooks[1])
        try context.save()
        try mirrorB.sync()
        try mirrorA.sync()
        #expect(try Self.note(a, note.id)?.notebook == nil)
        #expect(try Self.dump(a) == Self.dump(b))
    }

    @Test("An edit made after importing another device's edit wins, whatever the two wall clocks say")
    func causalOrderBeatsSkew() throws {
        var ahead = HybridLogicalClock()
        let now = Date()
        // A machine whose clock is an hour ahead edits; the other, on time, sees it and edits after.
        let first = ahead.tick(at: now.addingTimeInterval(3600))
        var onTime = HybridLogicalClock()
        onTime.receive(first)
        let second = onTime.tick(at: now)
        #expect(second > first)
        // A wall clock stepping back never reorders a device's own edits.
        var device = HybridLogicalClock()
        let before = device.tick(at: now)
        let after = device.tick(at: now.addingTimeInterval(-86_400))
        #expect(after > before)
        #expect(HybridLogicalClock.physical(Date(timeIntervalSince1970: -5)) == 0)
        #expect(HybridLogicalClock.physical(.distantFuture) <= UInt64(Int64.max))
    }

    @Test("The later edit wins even when the earlier one is sent last", arguments: StoreKind.allCases)
    func laterEditWinsWhateverTheOrderOfArrival(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let note = NoteRecord()
        let contextA = ModelContext(a)
        contextA.insert(note)
        try contextA.save()
        try mirrorA.sync()
        try mirrorB.sync()

        let noteB = try #require(try Self.note(b, note.id))
        noteB.title = "earlier, from B"
        try noteB.modelContext?.save()
        Thread.sleep(forTimeInterval: 0.01)
        let noteA = try #require(try Self.note(a, note.id))
        noteA.title = "later, from A"
        try noteA.modelContext?.save()
        try mirrorA.sync()
        try mirrorB.sync()
        try mirrorA.sync()
        #expect(try Self.note(a, note.id)?.title == "later, from A")
        #expect(try Self.note(b, note.id)?.title == "later, from A")
    }

    @Test("A push retried after its success was lost is not recorded twice")
    func retriedPushIsIdempotent() throws {
        let zone = try Zone(.file)
        let (a, mirrorA) = try zone.device()
        let context = ModelContext(a)
        for index in 0..<3 {
            let note = NoteRecord()
            note.title = "note \(index)"
            context.insert(note)
            try context.save()
        }
        try mirrorA.sync()
        let before = try zone.query(#"SELECT count(*) FROM notekit.changes"#)
        #expect(before == [["3"]])
        // The device forgets its export, and the server its record of it: everything is sent again.
        let store = try #require(a.store as? FileStore)
        let file = MirrorStateFile(directory: store.configuration.url)
        var state = try #require(try file.load())
        state.exportedThrough = 0
        state.clockedThrough = 0
        state.pendingClocks = []
        try file.save(state)
        _ = try zone.query(#"UPDATE notekit.devices SET exported_token = NULL"#)
        let again = try mirrorA.sync()
        #expect(again.exportedTransactions == 3)
        #expect(try zone.query(#"SELECT count(*) FROM notekit.changes"#) == before)
        #expect(try zone.query(#"SELECT count(*) FROM notekit."e_NoteRecord""#) == [["3"]])
    }

    @Test("A server that lost the zone gets the whole store again, and other devices get it from there",
          arguments: StoreKind.allCases)
    func serverThatLostTheZone(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let context = ModelContext(a)
        let note = NoteRecord()
        note.title = "survives the server"
        context.insert(note)
        try context.save()
        try mirrorA.sync()
        _ = try zone.query("DROP SCHEMA notekit CASCADE")
        try zone.configuration.initializeSchema(for: a.schema)

        let report = try mirrorA.sync()
        #expect(report.exportedBaseline)
        let (b, mirrorB) = try zone.device()
        try mirrorB.sync()
        #expect(try Self.note(b, note.id)?.title == "survives the server")
        #expect(try Self.dump(b) == Self.dump(a))
    }

    @Test("History trimming never drops a transaction the mirror has not exported", arguments: StoreKind.allCases)
    func trimmingWaitsForExport(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let configuration: any DataStoreConfiguration = switch kind {
        case .inMemory: ModelConfiguration(isStoredInMemoryOnly: true)
        // Retention would keep two transactions; the mirror holds them all until they are sent.
        case .file: FileStoreConfiguration(url: TemporaryStores.newURL(), historyRetention: .latest(2))
        }
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [configuration])
        let mirror = try StoreMirror(container: container, configuration: zone.configuration)
        let context = ModelContext(container)
        for index in 0..<10 {
            let note = NoteRecord()
            note.title = "note \(index)"
            context.insert(note)
            try context.save()
        }
        if let store = container.store as? FileStore { try store.compact() }
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 10)

        let report = try mirror.sync()
        #expect(report.exportedTransactions == 10 && !report.exportedBaseline, "\(report)")
        // Once sent, the history may go.
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).isEmpty)
    }

    @Test("What a process without a mirror commits to the store is sent by the process that mirrors")
    func otherProcessesAreExported() throws {
        let zone = try Zone(.file)
        let (app, mirror) = try zone.device()
        let (other, otherMirror) = try zone.device()
        // The extension opens the same store without a mirror configuration.
        let url = try #require((app.store as? FileStore)?.configuration.url)
        let extensionContainer = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                                    configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(extensionContainer)
        let note = NoteRecord()
        note.title = "from the share extension"
        context.insert(note)
        try context.save()

        #expect(try mirror.sync().exportedTransactions == 1)
        try otherMirror.sync()
        #expect(try Self.note(other, note.id)?.title == "from the share extension")
    }

    @Test("A server row that does not decode is reported with its zone, entity and key, and skipped",
          arguments: StoreKind.allCases)
    func undecodableRowIsSkipped(kind: StoreKind) throws {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let context = ModelContext(a)
        let good = NoteRecord(), bad = NoteRecord()
        good.title = "good"
        bad.title = "bad"
        context.insert(good)
        context.insert(bad)
        try context.save()
        try mirrorA.sync()
        _ = try zone.query(#"UPDATE notekit."e_NoteRecord" SET a_title = '{"int": 5}' WHERE id = $1"#,
                           [bad.persistentModelID.primaryKey.uuidString.lowercased()])
        let report = try mirrorB.sync()
        #expect(report.skippedRows.map(\.id) == [bad.persistentModelID.primaryKey.uuidString.lowercased()])
        #expect(report.skippedRows.first?.entity == "NoteRecord" && report.skippedRows.first?.zone == Self.zone)
        #expect(report.skippedRows.first?.reason.contains("not a String") == true, "\(report.skippedRows)")
        #expect(try Self.note(b, good.id)?.title == "good")
        #expect(try Self.note(b, bad.id) == nil, "never applied in part")
    }

    @Test("Syncing before the server has the schema's tables (or this version's columns), or with a schema behind the zone, is refused")
    func refusedBeforeWriting() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        let container = try ModelContainer.fieldNotes()
        let mirror = try StoreMirror(container: container, configuration: configuration)
        #expect(throws: MirrorError.schemaNotInitialized(zone: Self.zone, namespace: "notekit")) { try mirror.sync() }
        try container.initializeMirrorSchema(configuration)
        try mirror.sync()
        // Tables made by an earlier version lack a column this one writes: refused until initialized again.
        _ = try PostgresConnection(server.connectionString).execute(
            #"ALTER TABLE notekit."e_NoteRecord" DROP COLUMN merged_into"#, purpose: "test")
        #expect(throws: MirrorError.schemaNotInitialized(zone: Self.zone, namespace: "notekit")) { try mirror.sync() }
        #expect(try container.initializeMirrorSchema(configuration).columnsAdded == ["notekit.e_NoteRecord.merged_into"])
        try mirror.sync()
        // A newer schema version joins the zone: this device must not write any more.
        _ = try PostgresConnection(server.connectionString).execute("""
            INSERT INTO notekit.zone_schemas (zone, schema_hash, major, minor, patch, schema)
            VALUES ($1, 'newer', 9, 0, 0, '{}'::jsonb)
            """, [Self.zone], purpose: "test")
        let note = NoteRecord()
        let context = ModelContext(container)
        context.insert(note)
        try context.save()
        #expect(throws: MirrorError.schemaBehindZone(zone: Self.zone, schemaVersion: container.schema.version.description,
                                                     zoneVersion: "9.0.0")) { try mirror.sync() }
        let sent = try PostgresConnection(server.connectionString).execute(
            #"SELECT count(*) FROM notekit."e_NoteRecord""#, purpose: "test").values
        #expect(sent == [["0"]])
    }
}
