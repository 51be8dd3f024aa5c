import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

@Suite("File store: commits, durability and the one-writer lock")
struct FileStoreWritingTests {
    @Test("One save is one record, flushed before save() returns")
    func oneRecordPerSave() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = fileSystem }
        let context = ModelContext(container)
        fileSystem.clearLog()
        let folder = Folder(name: "F")
        context.insert(folder)
        for index in 0..<3 { folder.notes.append(Note.titled("\(index)")) }
        try context.save()
        let calls = fileSystem.calls
        #expect(calls.filter { $0.operation == .write }.count == 1)
        #expect(calls.last?.operation == .fsync)
        let offsets = try StoreFiles.recordOffsets(StoreFiles.segment(url))
        #expect(offsets.count == 3, "segment, schema, one transaction")
        let text = String(decoding: try Data(contentsOf: StoreFiles.segment(url)), as: UTF8.self)
        #expect(text.components(separatedBy: "\n").count == 5, "magic line, three records, final newline")
    }

    @Test("A save, compaction or history deletion of a closed store is refused as closed, before it takes the store's lock",
          arguments: [true, false])
    func saveAfterClose(shared: Bool) throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.fileSystem = fileSystem
            $0.sharing = shared ? .perSave : .exclusive
        }
        let store = StoreFiles.store(container)
        try StoreFiles.close(container)
        fileSystem.clearLog()
        var changes = ChangeSet(author: nil)
        changes.inserted.append(ModelSnapshot(id: PersistentIdentifier(entityName: "Note", primaryKey: UUID()),
                                              attributes: [], relationships: []))
        let closed = SaveError.readOnly(reason: "\(url.path) was closed")
        #expect(throws: closed) { try store.save(changes) }
        #expect(throws: closed) { try store.compact() }
        #expect(throws: closed) { try store.deleteHistory([1...1]) }
        #expect(fileSystem.calls.isEmpty, "\(fileSystem.calls.map(\.operation))")
    }

    @Test("A save whose write fails throws, keeps the changes pending, and can be retried")
    func failedWrite() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = fileSystem }
        let context = ModelContext(container)
        context.insert(Note.titled("kept"))
        try context.save()
        let note = Note()
        note.title = "retried"
        context.insert(note)
        for failure in [FaultyFileSystem.Failure.error(ENOSPC), .shortWrite(bytes: 40)] {
            fileSystem.arm(.init(.write, failure: failure))
            #expect(throws: StoreIOError.self) { try context.save() }
            #expect(context.hasChanges && note.modelContext === context)
        }
        fileSystem.disarm()
        try context.save()
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(StoreFiles.store(reopened).recovery.tornTail == nil, "a failed write leaves no partial record behind")
        let titles = try ModelContext(reopened).fetch(FetchDescriptor<Note>()).map(\.title)
        #expect(titles == ["kept", "retried"])
    }

    @Test("A failed flush is never retried as success: the store stops accepting writes until reopened")
    func failedFlush() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = fileSystem }
        let context = ModelContext(container)
        context.insert(Note.titled("before"))
        try context.save()
        context.insert(Note.titled("unsure"))
        fileSystem.arm(.init(.fsync))
        #expect(throws: StoreIOError.self) { try context.save() }
        fileSystem.disarm()
        #expect(context.hasChanges, "the save was not acknowledged")
        // The refusal says which write stopped the store (issue 36, item 5).
        #expect {
            try context.save()
        } throws: { error in
            guard case let FileStoreError.writesStopped(kind, reason) = error else { return false }
            return kind == .flush && reason.contains("flushing")
        }
        try? StoreFiles.close(container)

        // After reopening, the save either made it whole or not at all; the store takes writes again.
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        let reader = ModelContext(reopened)
        let titles = try reader.fetch(FetchDescriptor<Note>()).map(\.title)
        #expect(titles == ["before"] || titles == ["before", "unsure"])
        reader.insert(Note())
        try reader.save()
    }

    @Test("Deferred durability writes every save at once and flushes on sync and close")
    func deferredDurability() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.fileSystem = fileSystem
            $0.durability = .deferred(interval: 3600)
        }
        let context = ModelContext(container)
        fileSystem.clearLog()
        for index in 0..<5 {
            context.insert(Note.titled("\(index)"))
            try context.save()
        }
        #expect(fileSystem.calls.filter { $0.operation == .write }.count == 5)
        #expect(fileSystem.calls.filter { $0.operation == .fsync }.isEmpty)
        // A reader sees every save already: a process crash loses nothing.
        let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(try ModelContext(reader).fetchCount(FetchDescriptor<Note>()) == 5)
        try StoreFiles.store(container).sync()
        #expect(fileSystem.calls.filter { $0.operation == .fsync }.count == 1)
    }

    @Test("A second writer in the same process is refused, or waits for the lock; readers open alongside")
    func lockInProcess() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        #expect(throws: FileStoreError.lockedInThisProcess(path: url.path)) {
            _ = try StoreFiles.open(url, NotesSchema.models) { $0.lockTimeout = 0 }
        }
        let started = Date()
        #expect(throws: FileStoreError.lockedInThisProcess(path: url.path)) {
            _ = try StoreFiles.open(url, NotesSchema.models) { $0.lockTimeout = 0.2 }
        }
        #expect(Date().timeIntervalSince(started) >= 0.2)
        let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(try ModelContext(reader).fetchCount(FetchDescriptor<Note>()) == 0)
        try StoreFiles.close(writer)
        let next = try StoreFiles.open(url, NotesSchema.models)
        try StoreFiles.close(next)
    }

    @Test("An open that waited for the lock while another writer created the store opens that store, and does not create it over again")
    func creationRace() throws {
        let url = TemporaryStores.newURL()
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        // The other writer: holds the lock while it creates the store.
        let held = try #require(try POSIXFileSystem().tryLock(url.appendingPathComponent("LOCK").path))
        let path = url.path
        // A thread of its own, since the open blocks while it waits: on a busy cooperative pool, a waiting task could
        // keep this test from going on until the wait ran out.
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            // Finds no manifest, then waits for the lock.
            let result = Result {
                try StoreFiles.close(StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) { $0.lockTimeout = 30 })
            }
            outcome.withLock { $0 = result }
            finished.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.3)
        let other = TemporaryStores.newURL()
        let container = try StoreFiles.open(other, NotesSchema.models)
        let context = ModelContext(container)
        context.insert(Note.titled("kept"))
        try context.save()
        try StoreFiles.close(container)
        for name in ["segments", "blobs", "MANIFEST"] {
            try FileManager.default.copyItem(at: other.appendingPathComponent(name), to: url.appendingPathComponent(name))
        }
        held.unlock()

        // The waiter, given the lock, finds the store the other writer created and opens it.
        finished.wait()
        try #require(outcome.withLock { $0 }).get()
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).map(\.title) == ["kept"])
        try StoreFiles.close(reopened)
    }

    @Test("A second writer process is refused with a typed error")
    func lockAcrossProcesses() async throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        _ = writer
        let path = url.path
        await #expect(processExitsWith: .success) { [path = path as String] in
            do {
                _ = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) { $0.lockTimeout = 0 }
                exit(1)
            } catch FileStoreError.locked {
                // A reader in the other process still works.
                let reader = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) { $0.mode = .readOnly }
                exit(try ModelContext(reader).fetchCount(FetchDescriptor<Note>()) == 0 ? 0 : 2)
            } catch {
                exit(3)
            }
        }
    }

    @Test("Opening a store written with another schema is refused before anything is written")
    func schemaMismatch() throws {
        let url = TemporaryStores.newURL()
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models))
        let before = StoreFiles.contents(of: url)
        #expect(throws: MigrationError.self) { _ = try StoreFiles.open(url, [EveryType.self]) }
        #expect(StoreFiles.contents(of: url) == before)
    }
}
