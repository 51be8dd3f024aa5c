import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// History on disk: it survives reopening and compaction, up to what was deleted.
@Suite("File store: history")
struct FileStoreHistoryTests {
    private func all(_ container: ModelContainer) throws -> [HistoryRecord] {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.record)
    }

    /// A store with five saves by two authors: inserts, an update, a delete with a tombstone.
    private func storeWithHistory(configure: (inout FileStoreConfiguration) -> Void = { _ in })
        throws -> (URL, ModelContainer) {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models, configure: configure)
        let context = ModelContext(container)
        context.author = "editor"
        let folder = Folder(name: "Work")
        context.insert(folder)
        try context.save()
        let notes = (0..<3).map { Note.titled("n\($0)") }
        for note in notes { note.folder = folder }
        try context.save()
        notes[0].title = "renamed"
        try context.save()
        context.author = nil
        try context.delete(notes[1])
        try context.save()
        context.insert(Note.titled("last"))
        try context.save()
        return (url, container)
    }

    @Test("History survives reopening: numbers, times, authors, changes and tombstones")
    func survivesReopening() throws {
        let (url, container) = try storeWithHistory()
        let before = try all(container)
        #expect(before.map(\.number) == [1, 2, 3, 4, 5])
        #expect(before.map(\.author) == ["editor", "editor", "editor", nil, nil])
        #expect(before[2].updated.map(\.properties) == [["title"]])
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try all(reopened) == before)
    }

    @Test("History survives compaction, with what was deleted staying deleted")
    func survivesCompaction() throws {
        let (url, container) = try storeWithHistory { $0.automaticCompaction = nil }
        let context = ModelContext(container)
        let third = DefaultHistoryToken(transactionNumber: 3)
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token < third }))
        let kept = try all(container)
        #expect(kept.map(\.number) == [3, 4, 5])
        try StoreFiles.store(container).compact()
        #expect(try all(container) == kept)
        context.insert(Note.titled("after"))
        try context.save()
        try StoreFiles.close(container)

        let reopened = try StoreFiles.open(url, NotesSchema.models)
        let history = try all(reopened)
        #expect(history.map(\.number) == [3, 4, 5, 6])
        #expect(Array(history.prefix(3)) == kept)
        let first = DefaultHistoryToken(transactionNumber: 1)
        #expect(throws: HistoryError.historyTokenExpired(oldestRetained: third)) {
            try ModelContext(reopened).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > first }))
        }
    }

    @Test("A deletion of history is recorded and survives reopening before any compaction")
    func deletionSurvivesReopening() throws {
        let (url, container) = try storeWithHistory { $0.automaticCompaction = nil }
        let fourth = DefaultHistoryToken(transactionNumber: 4)
        try ModelContext(container).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token < fourth }))
        try StoreFiles.close(container)
        let text = String(decoding: try Data(contentsOf: StoreFiles.segment(url)), as: UTF8.self)
        #expect(text.contains(#"{"k":"trim","deleted":[[1,3]]}"#))
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try all(reopened).map(\.number) == [4, 5])
    }

    @Test("A read-only open reads history but cannot delete it")
    func readOnlyDeletion() throws {
        let (url, container) = try storeWithHistory()
        try StoreFiles.close(container)
        let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(try all(reader).count == 5)
        #expect(throws: SaveError.self) {
            try ModelContext(reader).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        }
    }

    @Test("Retaining the latest transactions deletes older ones as the store goes, and at compaction")
    func retainLatest() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.historyRetention = .latest(10)
            $0.automaticCompaction = nil
        }
        let context = ModelContext(container)
        for index in 0..<200 {
            context.insert(Note.titled("n\(index)"))
            try context.save()
        }
        let kept = try all(container)
        #expect(kept.count >= 10 && kept.count <= 10 + 64, "bounded between compactions")
        #expect(kept.last?.number == 200)
        try StoreFiles.store(container).compact()
        #expect(try all(container).map(\.number) == Array(191...200))
        try StoreFiles.close(container)
        #expect(try all(try StoreFiles.open(url, NotesSchema.models) { $0.historyRetention = .latest(10) })
            .map(\.number) == Array(191...200))
    }

    @Test("With all history kept, automatic compaction does not rewrite it after every save")
    func automaticCompactionWithHistory() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 4_000, garbageRatio: 0.5)
        }
        let context = ModelContext(container)
        let note = Note.titled("edited")
        context.insert(note)
        try context.save()
        for round in 0..<600 {
            note.body = "edit \(round)"
            try context.save()
        }
        // Each compaction starts a segment with the next number; the log must double between two of them.
        let segment = try #require(StoreFiles.store(container).statistics.segments.last)
        #expect(segment > 1, "compaction ran")
        #expect(segment <= 12, "compacted \(segment - 1) times")
        #expect(try all(container).count == 601)
    }

    @Test("A lightweight migration is a transaction of its own in history")
    func migrationInHistory() throws {
        let (container, copy) = try StoreFixture.openCopy(of: FixtureReplayTests.fixture(1),
                                                          schema: Schema(versionedSchema: NotesSchema.self))
        defer {
            try? StoreFiles.close(container)
            try? FileManager.default.removeItem(at: copy)
        }
        let history = try all(container)
        let last = try #require(history.last)
        #expect(last.author == HistoryRecord.migrationAuthor)
        #expect(last.number == StoreFiles.store(container).statistics.lastTransactionNumber)
        #expect(history.dropLast().allSatisfy { $0.author != HistoryRecord.migrationAuthor })
        #expect(!history.dropLast().isEmpty, "the fixture's own transactions are history too")
    }
}
