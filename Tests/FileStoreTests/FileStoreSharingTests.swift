import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Several writable opens of one store, shared per save: each save catches up with the others' commits first.
@Suite("File store: writers sharing a store")
struct FileStoreSharingTests {
    private func open(_ url: URL, configure: (inout FileStoreConfiguration) -> Void = { _ in }) throws -> ModelContainer {
        try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .perSave
            configure(&$0)
        }
    }

    private func titles(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
    }

    @Test("Two writable opens take turns: each save applies the other's commits first, numbering stays one line")
    func twoWriters() throws {
        let url = TemporaryStores.newURL()
        let first = try open(url), second = try open(url)
        let a = ModelContext(first), b = ModelContext(second)
        a.author = "a"
        b.author = "b"
        for index in 0..<5 {
            a.insert(Note.titled("a\(index)"))
            try a.save()
            b.insert(Note.titled("b\(index)"))
            try b.save()
        }
        #expect(try titles(first).count == 10, "the first open's fetch picks up the second's last save by itself")
        #expect(try StoreFiles.store(first).refresh().isEmpty, "nothing left to pick up")
        #expect(try titles(first) == (0..<5).map { "a\($0)" } + (0..<5).map { "b\($0)" })
        #expect(try titles(second) == titles(first))
        let history = try ModelContext(second).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.map(\.token.transactionNumber) == Array(1...10))
        #expect(history.map(\.author) == Array(repeating: ["a", "b"], count: 5).flatMap { $0 })
        try StoreFiles.close(first)
        try StoreFiles.close(second)
        #expect(try StoreVerifier.verify(at: url).ok)
        #expect(try titles(try StoreFiles.open(url, NotesSchema.models)).count == 10)
    }

    @Test("An edit by one writer and an edit of another property by the other both stay")
    func concurrentEdits() throws {
        let url = TemporaryStores.newURL()
        let first = try open(url)
        let a = ModelContext(first)
        let note = Note.titled("shared")
        a.insert(note)
        try a.save()
        let second = try open(url)
        let b = ModelContext(second)
        let other = try #require(try b.fetch(FetchDescriptor<Note>()).first)
        note.title = "title by a"
        try a.save()
        other.body = "body by b"
        try b.save()
        try StoreFiles.store(first).refresh()
        let seen = try #require(try ModelContext(first).fetch(FetchDescriptor<Note>()).first)
        #expect(seen.title == "title by a" && seen.body == "body by b")
    }

    @Test("A unique key another writer took is refused at save, and the retry upserts into that object")
    func uniqueAcrossWriters() throws {
        let url = TemporaryStores.newURL()
        // Reads that do not pick up the other open's commits, so that the second open's context cannot know the key
        // is taken and only the save, under the lock, finds out.
        let first = try StoreFiles.open(url, [SharedTag.self]) {
            $0.sharing = .perSave
            $0.automaticRefreshInterval = nil
        }
        let second = try StoreFiles.open(url, [SharedTag.self]) {
            $0.sharing = .perSave
            $0.automaticRefreshInterval = nil
        }
        let a = ModelContext(first), b = ModelContext(second)
        let mine = SharedTag(name: "swift", uses: 1)
        a.insert(mine)
        try a.save()
        // The second open has not caught up: its context cannot know the key is taken, the store under the lock does.
        let theirs = SharedTag(name: "swift", uses: 2)
        b.insert(theirs)
        #expect(throws: SaveError.self) { try b.save() }
        #expect(b.hasChanges, "the refused save keeps its changes pending")
        try b.save()
        #expect(theirs.persistentModelID == mine.persistentModelID, "the retry updated the object that holds the key")
        try StoreFiles.store(first).refresh()
        let tags = try ModelContext(first).fetch(FetchDescriptor<SharedTag>())
        #expect(tags.map(\.uses) == [2])
    }

    @Test("A writer catches up after another compacted, and after another left a torn tail")
    func compactionAndTornTail() throws {
        let url = TemporaryStores.newURL()
        let first = try open(url) { $0.automaticCompaction = nil }
        let second = try open(url) { $0.automaticCompaction = nil }
        let a = ModelContext(first), b = ModelContext(second)
        for index in 0..<3 {
            a.insert(Note.titled("a\(index)"))
            try a.save()
        }
        try StoreFiles.store(first).compact()
        b.insert(Note.titled("b after compaction"))
        try b.save()
        #expect(try titles(second).count == 4)

        // A writer killed in the middle of an append leaves part of a record; the next save cuts it off.
        let segment = try #require(StoreFiles.store(second).statistics.segments.last)
        let handle = try FileHandle(forWritingTo: StoreFiles.segment(url, segment))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("00000040 00000000 {\"k\":\"tx\",\"tx\":".utf8))
        try handle.close()
        a.insert(Note.titled("a after the torn tail"))
        try a.save()
        let quarantine = url.appendingPathComponent("quarantine")
        #expect(try FileManager.default.contentsOfDirectory(atPath: quarantine.path).count == 1)
        try StoreFiles.close(first)
        try StoreFiles.close(second)
        #expect(try StoreVerifier.verify(at: url).ok)
        #expect(try titles(try StoreFiles.open(url, NotesSchema.models)).count == 5)
    }

    @Test("A writer whose log another writer moved past never cuts the other's records off: a failed reopen or flush while catching up, a failed flush at close or in sync()",
          arguments: [(FaultRules.Operation.openForAppending, "save"), (.fsync, "save"), (.fsync, "close"),
                      (.fsync, "sync")])
    func staleLogKeepsOthersRecords(operation: FaultRules.Operation, action: String) throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let first = try open(url) { $0.fileSystem = disk }, second = try open(url) { $0.fileSystem = disk }
        let a = ModelContext(first), b = ModelContext(second)
        a.insert(Note.titled("a"))
        try a.save()
        b.insert(Note.titled("b"))
        try b.save()
        // The first writer's log now ends before the second's record.
        disk.faults.arm(.init(operation))
        if action == "save" {
            a.insert(Note.titled("a again"))
            #expect(throws: (any Error).self) { try a.save() }
            disk.faults.disarm()
            do { try a.save() } catch FileStoreError.writesStopped {}
        } else if action == "sync" {
            #expect(throws: StoreIOError.self) { try StoreFiles.store(first).sync() }
        } else {
            #expect(throws: StoreIOError.self) { try StoreFiles.close(first) }
        }
        disk.faults.disarm()
        #expect(disk.faults.failureCount == 1)
        try? StoreFiles.close(first)
        try StoreFiles.close(second)
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: disk).isEmpty)
        for image in [disk, SimulatedDisk(image: disk.crashImage(.powerLoss))] {
            let reopened = try open(url) { $0.fileSystem = image }
            #expect(try titles(reopened).filter { $0.count == 1 } == ["a", "b"], "the second writer's save is there")
        }
    }

    @Test("An exclusive open keeps per-save writers out; a per-save open does not keep an exclusive one out for long")
    func exclusiveAndShared() throws {
        let url = TemporaryStores.newURL()
        let shared = try open(url) { $0.lockTimeout = 0.05 }
        let exclusive = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .exclusive
            $0.lockTimeout = 1
        }
        let context = ModelContext(shared)
        context.insert(Note.titled("refused"))
        #expect(throws: FileStoreError.lockedInThisProcess(path: url.path)) { try context.save() }
        try StoreFiles.close(exclusive)
        try context.save()
        #expect(try titles(shared) == ["refused"])
    }

    @Test("Two processes writing at once lose nothing")
    func twoProcesses() async throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try open(url)
            try StoreFiles.close(container)
        }
        let path = url.path
        async let first = #expect(processExitsWith: .success) { [path = path as String] in
            let container = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) {
                $0.sharing = .perSave
                $0.lockTimeout = 30
            }
            let context = ModelContext(container)
            context.author = "first"
            for index in 0..<100 {
                context.insert(Note.titled("first \(index)"))
                try context.save()
            }
            exit(0)
        }
        async let second = #expect(processExitsWith: .success) { [path = path as String] in
            let container = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) {
                $0.sharing = .perSave
                $0.lockTimeout = 30
                $0.maximumSegmentSize = 4096   // this writer also rotates segments under the other
            }
            let context = ModelContext(container)
            context.author = "second"
            for index in 0..<100 {
                context.insert(Note.titled("second \(index)"))
                try context.save()
            }
            exit(0)
        }
        _ = await (first, second)
        #expect(try StoreVerifier.verify(at: url).ok)
        let container = try StoreFiles.open(url, NotesSchema.models)
        let notes = try titles(container)
        #expect(notes.count == 200)
        let history = try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.map(\.token.transactionNumber) == Array(1...200))
        #expect(history.filter { $0.author == "first" }.count == 100)
    }
}

final class SharedTag: PersistentModel {
    @Attribute(.unique) var name = ""
    @Attribute var uses = 0
    required init() {}
    convenience init(name: String, uses: Int) {
        self.init()
        self.name = name
        self.uses = uses
    }
}
