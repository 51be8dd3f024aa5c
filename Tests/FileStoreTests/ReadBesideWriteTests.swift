import Dispatch
import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Synchronization
import Testing

@testable import NoteKitFileStore

/// Holds a save in its flush: once armed, the next `sync()` of a segment waits until released.
final class FlushGate: Sendable {
    private let armed = Mutex(false)
    private let entered = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    /// The next flush of a segment waits in ``release()``'s absence.
    func arm() { armed.withLock { $0 = true } }

    /// Called by a flush: waits, when armed, until ``release()`` (and disarms).
    func pass() {
        guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
        entered.signal()
        released.wait()
    }

    /// Whether a flush started waiting within `seconds`.
    func waitUntilEntered(seconds: Double) -> Bool { entered.wait(timeout: .now() + seconds) == .success }

    /// Lets the waiting flush go on.
    func release() { released.signal() }
}

/// The real file system, whose segment flushes pass a ``FlushGate`` first.
struct GatedFlushFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem = POSIXFileSystem()
    let gate: FlushGate

    func create(_ path: String) throws -> any StoreFile { try gated(base.create(path), path) }
    func openForAppending(_ path: String) throws -> any StoreFile { try gated(base.openForAppending(path), path) }
    func openForAppending(_ path: String, at end: Int) throws -> any StoreFile {
        try gated(base.openForAppending(path, at: end), path)
    }

    private func gated(_ file: any StoreFile, _ path: String) -> any StoreFile {
        path.contains("/segments/") ? GatedFile(base: file, gate: gate) : file
    }
}

/// A segment file whose flush passes the gate.
final class GatedFile: StoreFile {
    let base: any StoreFile
    let gate: FlushGate

    init(base: any StoreFile, gate: FlushGate) {
        self.base = base
        self.gate = gate
    }

    var size: Int { base.size }
    func append(_ bytes: UnsafeRawBufferPointer) throws { try base.append(bytes) }
    func sync() throws {
        gate.pass()
        try base.sync()
    }
    func close() throws { try base.close() }
    func reserve(upTo capacity: Int) throws { try base.reserve(upTo: capacity) }
}

/// The real file system, whose new segments' flushes (a compaction's, a rotation's) pass a ``FlushGate`` first; the
/// flushes of appends to an existing segment do not.
struct GatedNewSegmentFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem = POSIXFileSystem()
    let gate: FlushGate

    func create(_ path: String) throws -> any StoreFile {
        let file = try base.create(path)
        return path.contains("/segments/") ? GatedFile(base: file, gate: gate) : file
    }
}

/// Issue 37, item 4: a fetch on one context is never blocked by another context's save in progress; it answers from
/// the last committed state, as a reader of GRDB's `DatabasePool` or of SQLite in WAL mode does.
@Suite("Reads beside a write: a fetch does not wait for another context's save", .serialized)
struct ReadBesideWriteTests {
    /// How long a read may take before it counts as waiting for the save: far longer than any read of three rows.
    static let patience = 5.0

    /// Runs `body` on a thread of its own: not on Dispatch's or Swift's shared pools, which the waiting test itself
    /// occupies (a block queued there may never start).
    static func onThread(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.start()
    }

    /// A save running on a thread of its own: `saved` is signalled when it returns, `error` says how it failed.
    final class SaveOnThread: Sendable {
        let saved = DispatchSemaphore(value: 0)
        let error = Mutex<String?>(nil)

        /// Starts `change` and the save of a new context of `container`.
        init(_ container: ModelContainer, _ change: @escaping @Sendable (ModelContext) throws -> Void) {
            ReadBesideWriteTests.onThread { [self] in
                let writer = ModelContext(container)
                do {
                    try change(writer)
                    try writer.save()
                } catch { self.error.withLock { $0 = "\(error)" } }
                saved.signal()
            }
        }
    }

    /// Runs `read` on a thread of its own while a save waits at `gate`, expects it to finish within ``patience``,
    /// then lets the save go on and waits for both.
    static func read(beside gate: FlushGate, _ save: SaveOnThread, waitingFor what: String,
                     sourceLocation: SourceLocation = #_sourceLocation, _ read: @escaping @Sendable () -> Void) {
        let saved = save.saved
        let done = DispatchSemaphore(value: 0)
        onThread {
            read()
            done.signal()
        }
        let answered = done.wait(timeout: .now() + patience) == .success
        #expect(answered, "the fetch waited \(patience) s for \(what)", sourceLocation: sourceLocation)
        gate.release()
        saved.wait()
        if !answered { done.wait() }
    }

    @Test("A fetch while another context's save waits in its flush answers at once, from the last commit",
          arguments: [FileStoreConfiguration.Sharing.perSave, .exclusive])
    func fetchDuringFlush(sharing: FileStoreConfiguration.Sharing) throws {
        try Self.fetchWhileSaveIsHeld(sharing: sharing, rotating: false)
    }

    /// A save that finds the active segment full starts a new one first: a new file, its records, flushes and a new
    /// manifest, which the gate holds at the new segment's flush.
    @Test("A fetch while another context's save starts a new segment answers at once, from the last commit",
          arguments: [FileStoreConfiguration.Sharing.perSave, .exclusive])
    func fetchDuringRotation(sharing: FileStoreConfiguration.Sharing) throws {
        try Self.fetchWhileSaveIsHeld(sharing: sharing, rotating: true)
    }

    /// One save committed, then another held in a segment's flush (`rotating`: the flush of the new segment it
    /// starts first) while another context fetches.
    static func fetchWhileSaveIsHeld(sharing: FileStoreConfiguration.Sharing, rotating: Bool) throws {
        let url = TemporaryStores.newURL("read-beside-write")
        defer { try? FileManager.default.removeItem(at: url) }
        let gate = FlushGate()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.fileSystem = GatedFlushFileSystem(gate: gate)
            $0.sharing = sharing
            if rotating { $0.maximumSegmentSize = 1 }
        }
        defer { try? StoreFiles.close(container) }
        let first = ModelContext(container)
        first.insert(Note.titled("committed"))
        try first.save()

        gate.arm()
        let save = SaveOnThread(container) { $0.insert(Note.titled("in flight")) }
        let entered = gate.waitUntilEntered(seconds: Self.patience)
        #expect(entered, "the save reached its flush")

        let titles = Mutex<[String]?>(nil)
        let transaction = Mutex<UInt64?>(nil)
        Self.read(beside: gate, save, waitingFor: "the other context's save") {
            let reader = ModelContext(container)
            let found = try? reader.fetch(FetchDescriptor<Note>()).map(\.title)
            titles.withLock { $0 = found }
            transaction.withLock { $0 = StoreFiles.store(container).transactionNumber }
        }
        #expect(save.error.withLock { $0 } == nil)
        #expect(titles.withLock { $0 } == ["committed"], "the last commit, without the save in flight")
        #expect(transaction.withLock { $0 } == 1)

        let after = try ModelContext(container).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
        #expect(after.map(\.title) == ["committed", "in flight"])
        #expect(StoreFiles.store(container).transactionNumber == 2)
        if rotating { #expect(StoreFiles.store(container).statistics.segments.count >= 2, "the save started a segment") }
    }

    @Test("A fetch while another context's save compacts the store automatically answers at once, with that save",
          arguments: [FileStoreConfiguration.Sharing.perSave, .exclusive])
    func fetchBesideAutomaticCompaction(sharing: FileStoreConfiguration.Sharing) throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            for title in ["first", "second", "third"] { context.insert(Note.titled(title)) }
            try context.save()
            try StoreFiles.close(container)
        }
        let gate = FlushGate()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.fileSystem = GatedNewSegmentFileSystem(gate: gate)
            $0.sharing = sharing
            $0.automaticCompaction = .init(minimumLogSize: 1, garbageRatio: 0)
        }
        defer { try? StoreFiles.close(container) }

        gate.arm()
        let save = SaveOnThread(container) { writer in
            let first = try writer.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == "first" }))
            first.first?.title = "renamed"
        }
        let entered = gate.waitUntilEntered(seconds: Self.patience)
        #expect(entered, "the save's compaction reached the flush of its new segment")

        let titles = Mutex<[String]?>(nil)
        Self.read(beside: gate, save, waitingFor: "the other context's compaction") {
            let found = try? ModelContext(container).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
            titles.withLock { $0 = found?.map(\.title) }
        }
        #expect(save.error.withLock { $0 } == nil)
        #expect(titles.withLock { $0 } == ["renamed", "second", "third"], "the save, committed before it compacted")
        #expect(StoreFiles.store(container).statistics.segments.count == 1, "the save compacted")
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("A fetch that finds the checkpoint damaged while a save is in its flush waits for the save, then reads it once")
    func reloadDuringFlushWaitsForTheSave() throws {
        let (url, written) = try CheckpointFixture.store(count: 3_000)
        let before = try ModelContext(written).fetchCount(FetchDescriptor<CheckpointItem>())
        try StoreFiles.close(written)
        defer { try? FileManager.default.removeItem(at: url) }
        let gate = FlushGate()
        let container = try StoreFiles.open(url, CheckpointFixture.models) {
            $0.fileSystem = GatedFlushFileSystem(gate: gate)
            $0.sharing = .exclusive
        }
        defer { try? StoreFiles.close(container) }

        gate.arm()
        let save = SaveOnThread(container) { writer in
            let item = CheckpointItem()
            item.code = "saved while the checkpoint broke"
            writer.insert(item)
        }
        #expect(gate.waitUntilEntered(seconds: Self.patience), "the save reached its flush")
        // Every page but the header flipped in place: the next read of a row from the checkpoint fails, and the
        // store must replay the segments, whose last record is the save not flushed yet.
        let layout = StoreLayout(root: url.path)
        var bytes = try POSIXFileSystem().read(layout.checkpoint)
        for page in stride(from: 4096, to: bytes.count, by: 4096) { bytes[page + 5] ^= 0x40 }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: layout.checkpoint))
        try handle.write(contentsOf: Data(bytes))
        try handle.close()

        let read = DispatchSemaphore(value: 0)
        let codes = Mutex<[String]?>(nil)
        ReadBesideWriteTests.onThread {
            let found = try? ModelContext(container).fetch(FetchDescriptor<CheckpointItem>()).map(\.code)
            codes.withLock { $0 = found }
            read.signal()
        }
        // The reader needs a replay, which would read the unflushed record as committed: it waits for the save.
        let early = read.wait(timeout: .now() + 0.5) == .success
        #expect(!early, "the replay did not wait for the save in flight")
        gate.release()
        save.saved.wait()
        if !early { read.wait() }
        #expect(save.error.withLock { $0 } == nil)
        let found = codes.withLock { $0 } ?? []
        #expect(found.count == before + 1, "every item once, the new one included: \(found.count) of \(before + 1)")
        #expect(found.filter { $0 == "saved while the checkpoint broke" }.count == 1)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<CheckpointItem>()) == before + 1)
        #expect(StoreFiles.store(container).transactionNumber == StoreFiles.store(container).statistics.lastTransactionNumber)
    }
}
