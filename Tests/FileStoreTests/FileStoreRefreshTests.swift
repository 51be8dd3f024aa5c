import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitFixtures
import NoteKitTestSupport
import Observation
import Synchronization
import Testing

/// A read-only open picks up what the writer commits: on refresh, automatically, across rotation and compaction,
/// and from another process.
@Suite("File store: refresh")
struct FileStoreRefreshTests {
    private func reader(_ url: URL, interval: Double? = nil) throws -> ModelContainer {
        try StoreFiles.open(url, NotesSchema.models) {
            $0.mode = .readOnly
            $0.automaticRefreshInterval = interval
        }
    }

    private func titles(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
    }

    private func history(_ container: ModelContainer) throws -> [UInt64] {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.transactionNumber)
    }

    @Test("refresh() picks up the writer's commits: objects, values of loaded objects, and history")
    func pickUp() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let writing = ModelContext(writer)
        let note = Note.titled("a")
        writing.insert(note)
        try writing.save()

        let reader = try reader(url)
        let reading = ModelContext(reader)
        let loaded = try #require(try reading.fetch(FetchDescriptor<Note>()).first)
        writing.author = "writer"
        writing.insert(Note.titled("b"))
        try writing.save()
        note.title = "a2"
        try writing.save()
        #expect(try titles(reader) == ["a"], "nothing changes before a refresh")

        let picked = try StoreFiles.store(reader).refresh()
        #expect(picked.map(\.number) == [2, 3])
        #expect(picked.map(\.author) == ["writer", "writer"])
        #expect(try titles(reader) == ["a2", "b"])
        _ = try reading.fetch(FetchDescriptor<Note>())
        #expect(loaded.title == "a2", "an unchanged loaded object takes the new values when fetched again")
        #expect(try history(reader) == [1, 2, 3])
        #expect(try StoreFiles.store(reader).refresh().isEmpty, "nothing new")
        #expect(try StoreFiles.store(writer).refresh().isEmpty, "a writable open has the lock: nobody else wrote")
    }

    @Test("Refresh follows the writer into new segments, and reloads after a compaction")
    func rotationAndCompaction() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models) {
            $0.maximumSegmentSize = 2048
            $0.automaticCompaction = nil
        }
        let writing = ModelContext(writer)
        writing.insert(Note.titled("first"))
        try writing.save()
        let reader = try reader(url)
        for index in 0..<30 {
            writing.insert(Note.titled("n\(index)"))
            try writing.save()
        }
        #expect(StoreFiles.store(writer).statistics.segments.count > 2, "the writer rotated")
        #expect(try StoreFiles.store(reader).refresh().count == 30)
        #expect(try titles(reader).count == 31)

        try StoreFiles.store(writer).compact()
        writing.insert(Note.titled("after compaction"))
        try writing.save()
        let picked = try StoreFiles.store(reader).refresh()
        #expect(picked.map(\.number) == [32])
        #expect(try titles(reader).count == 32)
        #expect(try history(reader) == Array(1...32))
        // And incrementally again, in the compacted segment.
        writing.insert(Note.titled("later"))
        try writing.save()
        #expect(try StoreFiles.store(reader).refresh().map(\.number) == [33])
    }

    /// A store whose last `count` transaction records were cut off, and their bytes.
    private func storeMissingLast(_ count: Int) throws -> (URL, [[UInt8]]) {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(writer)
        for index in 0..<(2 + count) {
            context.insert(Note.titled("n\(index)"))
            try context.save()
        }
        try StoreFiles.close(writer)
        let segment = StoreFiles.segment(url)
        let bytes = try [UInt8](Data(contentsOf: segment))
        let offsets = try StoreFiles.recordOffsets(segment)
        let cut = offsets[offsets.count - count]
        let records = (0..<count).map { index in
            Array(bytes[offsets[offsets.count - count + index]..<(index == count - 1 ? bytes.count : offsets[offsets.count - count + index + 1])])
        }
        try Data(bytes[..<cut]).write(to: segment)
        return (url, records)
    }

    private func append(_ bytes: [UInt8], to url: URL) throws {
        let handle = try FileHandle(forWritingTo: StoreFiles.segment(url))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    @Test("A record still being appended waits for the next refresh")
    func partialRecord() throws {
        let (url, records) = try storeMissingLast(1)
        let reader = try reader(url)
        #expect(try titles(reader).count == 2)
        let record = records[0]
        try append(Array(record[..<(record.count / 2)]), to: url)
        #expect(try StoreFiles.store(reader).refresh().isEmpty)
        try append(Array(record[(record.count / 2)...]), to: url)
        #expect(try StoreFiles.store(reader).refresh().map(\.number) == [3])
        #expect(try titles(reader).count == 3)
    }

    @Test("Damage in what was appended is an error naming the place; the reader keeps its state")
    func damagedAppend() throws {
        let (url, records) = try storeMissingLast(2)
        let reader = try reader(url)
        let sizeBefore = try Data(contentsOf: StoreFiles.segment(url)).count
        var damaged = records[0]
        damaged[damaged.count - 3] ^= 0x01   // in the payload: the checksum no longer matches
        try append(damaged + records[1], to: url)
        #expect {
            try StoreFiles.store(reader).refresh()
        } throws: { error in
            guard case let .damagedRecord(file, offset, kind, _) = error as? FileStoreError else { return false }
            return file.hasSuffix("000001.seg") && offset == sizeBefore && kind == .checksumMismatch
        }
        #expect(try titles(reader).count == 2)
        #expect(try history(reader) == [1, 2])

        // Repaired, the next refresh applies both.
        let segment = StoreFiles.segment(url)
        let bytes = try [UInt8](Data(contentsOf: segment))
        try Data(bytes[..<sizeBefore] + records[0] + records[1]).write(to: segment)
        #expect(try StoreFiles.store(reader).refresh().map(\.number) == [3, 4])
    }

    @Test("With automatic refresh, reads see the writer's commits without asking, and the stream announces them")
    func automatic() async throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let writing = ModelContext(writer)
        writing.insert(Note.titled("a"))
        try writing.save()
        let reader = try reader(url, interval: 0)
        let stream = reader.transactions()
        writing.insert(Note.titled("b"))
        try writing.save()
        #expect(try titles(reader) == ["a", "b"])
        for await transaction in stream {
            #expect(transaction.token.transactionNumber == 2)
            #expect(transaction.changes.count == 1)
            break
        }
        #expect(StoreFiles.store(reader).statistics.lastTransactionNumber == 2)
    }

    @Test("An automatic refresh that fails keeps the reader's state and says why in statistics.lastRefreshError")
    func failedAutomaticRefreshIsReported() throws {
        let url = TemporaryStores.newURL()
        let old = try Schema(versionedSchema: PreAttachmentSchema.self)
        let writer = try ModelContainer(for: old, configurations: [FileStoreConfiguration(url: url)])
        let writing = ModelContext(writer)
        let note = PreAttachmentSchema.Note()
        note.title = "a"
        writing.insert(note)
        try writing.save()
        try StoreFiles.close(writer)
        let reader = try ModelContainer(for: old, configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        let store = StoreFiles.store(reader)
        #expect(store.statistics.lastRefreshError == nil)
        // Another process moves the store to a newer schema: this reader's older one cannot follow.
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models))
        let titles = try ModelContext(reader).fetch(FetchDescriptor<PreAttachmentSchema.Note>()).map(\.title)
        #expect(titles == ["a"], "the reader keeps the state it had")
        let error = try #require(store.statistics.lastRefreshError)
        #expect(!"\(error)".isEmpty)
    }

    @Test("Observation fires for a loaded object when a refresh brings a new value")
    func observation() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let writing = ModelContext(writer)
        let note = Note.titled("before")
        writing.insert(note)
        try writing.save()
        let reader = try reader(url)
        let reading = ModelContext(reader)
        let loaded = try #require(try reading.fetch(FetchDescriptor<Note>()).first)
        let fired = Mutex(false)
        withObservationTracking { _ = loaded.title } onChange: { fired.withLock { $0 = true } }
        note.title = "after"
        try writing.save()
        try StoreFiles.store(reader).refresh()
        _ = try reading.fetch(FetchDescriptor<Note>())
        #expect(fired.withLock { $0 })
        #expect(loaded.title == "after")
    }

    @Test("Another process's commits and their history reach a process that has the store open")
    func twoProcesses() async throws {
        let url = TemporaryStores.newURL()
        do {
            let writer = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(writer)
            context.insert(Note.titled("parent"))
            try context.save()
            try StoreFiles.close(writer)
        }
        let reader = try reader(url)
        let path = url.path

        // The child inserts, edits and deletes, compacts, and saves again; then exits.
        await #expect(processExitsWith: .success) { [path = path as String] in
            let container = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models)
            let context = ModelContext(container)
            context.author = "child"
            let notes = ["c1", "c2", "c3"].map(Note.titled)
            for note in notes {
                context.insert(note)
                try context.save()
            }
            notes[0].title = "c1 edited"
            try context.save()
            try context.delete(notes[1])
            try context.save()
            try StoreFiles.store(container).compact()
            context.insert(Note.titled("c4"))
            try context.save()
            try StoreFiles.close(container)
            exit(0)
        }
        let picked = try StoreFiles.store(reader).refresh()
        #expect(picked.map(\.number) == Array(2...7))
        #expect(Set(picked.map(\.author)) == ["child"])
        #expect(try titles(reader) == ["c1 edited", "c3", "c4", "parent"])
        let transactions = try ModelContext(reader).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(transactions.map(\.author) == [nil, "child", "child", "child", "child", "child", "child"])
        let deletes = transactions[5].changes.filter { if case .delete = $0 { true } else { false } }
        #expect(deletes.count == 1)

        // A second child appends without compacting: the reader reads only what was appended.
        await #expect(processExitsWith: .success) { [path = path as String] in
            let container = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models)
            let context = ModelContext(container)
            context.author = "second child"
            context.insert(Note.titled("c5"))
            try context.save()
            try StoreFiles.close(container)
            exit(0)
        }
        #expect(try StoreFiles.store(reader).refresh().map(\.author) == ["second child"])
        #expect(try titles(reader).contains("c5"))
    }
}
