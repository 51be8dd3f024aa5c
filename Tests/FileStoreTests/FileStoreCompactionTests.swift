import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

@Suite("File store: compaction")
struct FileStoreCompactionTests {
    private func rows(_ container: ModelContainer) throws -> [ModelSnapshot] {
        try container.schema.entities.flatMap { try container.store.fetch(StoreFetchRequest(entity: $0.name)).rows }
    }

    private func withoutTransactionNumbers(_ rows: [ModelSnapshot]) -> [ModelSnapshot] {
        rows.map { var row = $0; row.transactionNumber = 0; return row }
    }

    /// The bytes the segments hold, without the space an open store reserves at the end of the last one.
    private func bytes(_ url: URL) -> Int {
        StoreFiles.contents(of: url.appendingPathComponent("segments")).values
            .reduce(0) { $0 + StoreFiles.withoutReservedSpace($1) }
    }

    @Test("Compaction keeps the state identical, shrinks the bytes, and the state survives reopening")
    func compactionKeepsState() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.maximumSegmentSize = 4096
            // Kept history is not garbage; this test measures what compaction reclaims of superseded rows.
            $0.historyRetention = .latest(0)
        }
        let context = ModelContext(container)
        let editor = NoteEditor(context: context)
        let folder = Folder(name: "F")
        context.insert(folder)
        let notes = (0..<30).map { editor.createNote(.init(title: "n\($0)"), in: folder) }
        try context.save()
        for round in 0..<10 {
            for note in notes { note.body = "round \(round) " + String(repeating: "x", count: 50) }
            try context.save()
        }
        try context.delete(notes[0])
        try context.save()
        let before = try rows(container)
        let sizeBefore = bytes(url)
        let report = try StoreFiles.store(container).compact()
        #expect(report.bytesAfter < report.bytesBefore / 3)
        #expect(bytes(url) < sizeBefore / 3)
        #expect(withoutTransactionNumbers(try rows(container)) == withoutTransactionNumbers(before))
        #expect(try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path).count == 1)

        // Saves after a compaction append to the new segment, and everything reopens.
        notes[1].title = "after compaction"
        try context.save()
        let after = try rows(container)
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(withoutTransactionNumbers(try rows(reopened)) == withoutTransactionNumbers(after))
        #expect(StoreFiles.store(reopened).statistics.lastTransactionNumber
                == StoreFiles.store(container).transactionNumber)
    }

    @Test("Compaction keeps the schema history, and transaction numbers continue after it")
    func compactionKeepsHistoryNumbering() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        for index in 0..<3 {
            context.insert(Note.titled("\(index)"))
            try context.save()
        }
        try StoreFiles.store(container).compact()
        context.insert(Note())
        try context.save()
        #expect(StoreFiles.store(container).transactionNumber == 4)
        let text = String(decoding: try Data(contentsOf: StoreFiles.segment(url, 2)), as: UTF8.self)
        #expect(text.contains(#""k":"schema""#) && text.contains(#""k":"snapshot","lastTx":3"#))
        #expect(text.contains(#""k":"tx","tx":4"#))
    }

    @Test("Automatic compaction runs once most of the log is superseded")
    func automaticCompaction() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 8_000, garbageRatio: 0.6)
            $0.historyRetention = .latest(0)
        }
        let context = ModelContext(container)
        let note = Note()
        context.insert(note)
        try context.save()
        var compacted = false
        for round in 0..<200 {
            note.body = "edit \(round) " + String(repeating: "y", count: 100)
            try context.save()
            if StoreFiles.store(container).statistics.segments != [1] { compacted = true }
        }
        #expect(compacted)
        #expect(bytes(url) < 8_000 + 2_000)
        let statistics = StoreFiles.store(container).statistics
        #expect(statistics.lastCompactionError == nil)
    }

    /// Saves of ten new notes each until the log holds at least `bytes`, reporting whether a compaction ran.
    private func insertUntil(_ bytes: Int, _ container: ModelContainer) throws -> Bool {
        let context = ModelContext(container)
        let store = StoreFiles.store(container)
        let segments = store.statistics.segments
        var compacted = false
        var total = 0
        while store.statistics.logBytes < bytes || total < 20 {
            for index in 0..<10 { context.insert(Note.titled("note \(total + index) " + String(repeating: "z", count: 40))) }
            total += 10
            try context.save()
            if store.statistics.segments != segments { compacted = true }
            if total > 5_000 { break }
        }
        return compacted
    }

    @Test("Automatic compaction: an insert-only log past the replay limit is compacted, so opens read a checkpoint")
    func insertOnlyLogIsCheckpointed() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 8_000, garbageRatio: 0.5, replayLimit: 8_000)
        }
        #expect(try insertUntil(12_000, container), "nothing is superseded, yet the log was compacted")
        let statistics = StoreFiles.store(container).statistics
        #expect(statistics.garbageRatio == 0 && statistics.lastCompactionError == nil)
        #expect(statistics.lastCheckpointError == nil)
        #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent("CHECKPOINT").path))
    }

    @Test("Automatic compaction: without a replay limit, a log with nothing superseded is never compacted")
    func noReplayLimitMeansGarbageOnly() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 8_000, garbageRatio: 0.5, replayLimit: nil)
        }
        #expect(try !insertUntil(24_000, container))
        #expect(!FileManager.default.fileExists(atPath: url.appendingPathComponent("CHECKPOINT").path))
    }

    @Test("Automatic compaction: a reopened compacted store compacts again only once its log has doubled",
          arguments: [true, false])
    func reopenedStoreWaitsForDoubling(throughCheckpoint: Bool) throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.automaticCompaction = nil }
            _ = try insertUntil(20_000, container)
            try StoreFiles.store(container).compact()
            try StoreFiles.close(container)
        }
        // Without its checkpoint the open replays, and finds where the compaction's segment opening ends itself.
        if !throughCheckpoint { try FileManager.default.removeItem(at: url.appendingPathComponent("CHECKPOINT")) }
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 1_000, garbageRatio: 0.5, replayLimit: 1_000)
        }
        let store = StoreFiles.store(container)
        let compacted = store.statistics.segments, size = store.statistics.logBytes
        let context = ModelContext(container)
        for index in 0..<30 { context.insert(Note.titled("one more save, note \(index)")) }
        try context.save()
        #expect(store.statistics.logBytes - size > 1_000, "the save passed the replay limit")
        #expect(store.statistics.segments == compacted, "one save after reopening rewrote the whole store")
        #expect(try insertUntil(2 * size + 2_000, container), "once the log has doubled, it is compacted")
    }
}
