import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

/// docs/FORMAT.md, *Reserved space*: a writable open reserves disk space at the end of the last segment, so that a
/// durable save overwrites allocated blocks instead of growing the file; the zeros are not records. Exclusive writers
/// and writers shared per save both reserve; a shared writer that takes the log over from another writes into the
/// space the other reserved.
@Suite("File store: space reserved at the end of the last segment")
struct ReservedSpaceTests {
    private func size(_ url: URL) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int
    }

    /// Where the last record of the segment ends.
    private func recordsEnd(_ segment: URL) throws -> Int {
        StoreFiles.withoutReservedSpace(try Data(contentsOf: segment))
    }

    private func savedNotes(_ titles: [String], segmentReservation: Int? = nil) throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .exclusive
            if let segmentReservation { $0.segmentReservation = segmentReservation }
        }
        let context = ModelContext(container)
        for title in titles {
            context.insert(Note.titled(title))
            try context.save()
        }
        try StoreFiles.close(container)
        return url
    }

    /// A writer on a new store at `url`, shared as `sharing`, that has saved one note titled `title`.
    private func writerWithOneNote(_ url: URL, _ sharing: FileStoreConfiguration.Sharing,
                                   title: String = "first") throws -> (ModelContainer, ModelContext) {
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = sharing }
        let context = ModelContext(container)
        context.insert(Note.titled(title))
        try context.save()
        return (container, context)
    }

    @Test("Saves write into reserved space: the file's length changes once per reservation, and closing cuts it off",
          arguments: [FileStoreConfiguration.Sharing.exclusive, .perSave])
    func savesWriteIntoReservedSpace(sharing: FileStoreConfiguration.Sharing) throws {
        let url = TemporaryStores.newURL()
        let (container, context) = try writerWithOneNote(url, sharing)
        let segment = StoreFiles.segment(url)
        let reservedLength = try size(segment)
        #expect(reservedLength >= (try recordsEnd(segment)) + (256 << 10), "256 KiB reserved after the record")
        for index in 0..<20 {
            context.insert(Note.titled("note \(index)"))
            try context.save()
        }
        #expect(try size(segment) == reservedLength, "twenty saves wrote into the reserved space")
        #expect(try StoreVerifier.verify(at: url).ok, "reserved space is not damage, nor a torn tail")
        try StoreFiles.close(container)
        #expect(try size(segment) == (try recordsEnd(segment)), "a closed store ends with its last record")
        #expect(try StoreFiles.recordOffsets(segment).count == 2 + 21)
    }

    @Test("A last segment ending in zeros opens with every save and no torn tail; a writable open cuts them off")
    func zerosAfterTheLastRecordOpen() throws {
        let url = try savedNotes(["t1", "t2", "t3"])
        let segment = StoreFiles.segment(url)
        let end = try size(segment)
        let handle = try FileHandle(forWritingTo: segment)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(count: 100_000))
        try handle.close()

        #expect(try StoreVerifier.verify(at: url).ok)
        do {
            let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
            #expect(StoreFiles.store(reader).recovery.tornTail == nil)
            #expect(try ModelContext(reader).fetch(FetchDescriptor<Note>()).count == 3)
            #expect(try size(segment) == end + 100_000, "a read-only open writes nothing")
        }
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        #expect(StoreFiles.store(container).recovery.tornTail == nil)
        #expect(try size(segment) == end, "the writable open cut the zeros off before appending")
        let context = ModelContext(container)
        #expect(try context.fetch(FetchDescriptor<Note>()).count == 3)
        context.insert(Note.titled("t4"))
        try context.save()
        try StoreFiles.close(container)
        #expect(!FileManager.default.fileExists(atPath: url.appendingPathComponent("quarantine").path))
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).count == 4)
    }

    @Test("A torn record followed by reserved zeros is quarantined without the zeros")
    func tornRecordBeforeZeros() throws {
        let url = try savedNotes(["t1", "t2", "t3"])
        let segment = StoreFiles.segment(url)
        var bytes = try Data(contentsOf: segment)
        let last = try StoreFiles.recordOffsets(segment).last!
        let torn = bytes[last..<(last + 40)]
        bytes = bytes[..<last] + torn + Data(count: 50_000)
        try bytes.write(to: segment)

        let container = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        let tail = try #require(StoreFiles.store(container).recovery.tornTail)
        #expect(tail.offset == last)
        let quarantined = try Data(contentsOf: URL(fileURLWithPath: try #require(tail.quarantinedAt)))
        #expect(quarantined == torn, "the torn bytes, not the reserved zeros after them")
        #expect(try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.title).sorted() == ["t1", "t2"])
    }

    @Test("Zeros after the last record of a segment that is not the last are damage, named with file and offset")
    func zerosInAnEarlierSegmentAreDamage() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) {
                $0.sharing = .exclusive
                $0.maximumSegmentSize = 600
            }
            let context = ModelContext(container)
            for index in 0..<6 {
                context.insert(Note.titled("note \(index)"))
                try context.save()
            }
            #expect(StoreFiles.store(container).statistics.segments.count > 1)
            let first = StoreFiles.segment(url, StoreFiles.store(container).statistics.segments[0])
            #expect(try size(first) == (try recordsEnd(first)), "rotation cut the reserved space off")
            try StoreFiles.close(container)
        }
        let first = StoreFiles.segment(url, 1)
        let end = try size(first)
        let handle = try FileHandle(forWritingTo: first)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(count: 4096))
        try handle.close()
        #expect(try !StoreVerifier.verify(at: url).ok)
        let error = try #require(throws: FileStoreError.self) {
            _ = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        }
        guard case let .damagedRecord(file, offset, kind, _) = error else {
            Issue.record("expected a damaged record, got \(error)")
            return
        }
        #expect(file == first.path && offset == end && kind == .malformed)
    }

    @Test("A reader refreshing picks up each save written into reserved space, and nothing when none came")
    func readerRefreshesPastReservedSpace() throws {
        let url = TemporaryStores.newURL()
        let (writer, context) = try writerWithOneNote(url, .exclusive)
        let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        let readerStore = StoreFiles.store(reader)
        #expect(try readerStore.refresh().isEmpty, "nothing new: zeros follow the last record")
        for round in 1...3 {
            context.insert(Note.titled("note \(round)"))
            try context.save()
            #expect(try readerStore.refresh().count == 1, "round \(round)")
            #expect(try readerStore.refresh().isEmpty)
        }
        #expect(try ModelContext(reader).fetch(FetchDescriptor<Note>()).count == 4)
        try StoreFiles.close(writer)
    }

    @Test("Two writers shared per save write in turn into the space either reserved, cutting nothing off; the last to close cuts it")
    func sharedWritersTakeOverReservedSpace() throws {
        let url = TemporaryStores.newURL()
        let first = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .perSave }
        let second = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .perSave }
        let contexts = [ModelContext(first), ModelContext(second)]
        let segment = StoreFiles.segment(url)
        contexts[0].insert(Note.titled("first"))
        try contexts[0].save()
        let reservedLength = try size(segment)
        #expect(reservedLength >= (try recordsEnd(segment)) + (256 << 10), "256 KiB reserved after the record")
        for index in 0..<20 {
            let context = contexts[index % 2]
            context.insert(Note.titled("note \(index)"))
            try context.save()
            #expect(try size(segment) == reservedLength, "save \(index) wrote into the reserved space")
        }
        #expect(try StoreVerifier.verify(at: url).ok, "reserved space is not damage, nor a torn tail")
        for context in contexts { #expect(try context.fetch(FetchDescriptor<Note>()).count == 21) }
        #expect(!FileManager.default.fileExists(atPath: url.appendingPathComponent("quarantine").path))
        try StoreFiles.close(first)
        #expect(try size(segment) == (try recordsEnd(segment)), "a writer closing cuts the reserved space off")
        let context = contexts[1]
        context.insert(Note.titled("after the other closed"))
        try context.save()
        #expect(try size(segment) >= (try recordsEnd(segment)) + (256 << 10), "the open one reserves again")
        try StoreFiles.close(second)
        #expect(try size(segment) == (try recordsEnd(segment)), "a closed store ends with its last record")
        #expect(try StoreFiles.recordOffsets(segment).count == 2 + 22)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).count == 22)
    }

    @Test("A writer shared per save that finds a torn record before reserved zeros quarantines the record without the zeros")
    func sharedWriterQuarantinesTornRecordBeforeZeros() throws {
        let url = TemporaryStores.newURL()
        let (writer, context) = try writerWithOneNote(url, .perSave, title: "t1")
        let segment = StoreFiles.segment(url)
        let end = try recordsEnd(segment)
        // Another writer died in the middle of its append: the first 40 bytes of a record, where the next one begins.
        let torn = Data("00000400 deadbeef {\"k\":\"tx\",\"tx\":2,\"ops\":[".utf8.prefix(40))
        let handle = try FileHandle(forWritingTo: segment)
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: torn)
        try handle.close()
        context.insert(Note.titled("t2"))
        try context.save()
        let quarantine = url.appendingPathComponent("quarantine")
        let names = try FileManager.default.contentsOfDirectory(atPath: quarantine.path)
        #expect(names.count == 1)
        let quarantined = try Data(contentsOf: quarantine.appendingPathComponent(try #require(names.first)))
        #expect(quarantined == torn, "the torn bytes, not the reserved zeros after them")
        #expect(try StoreVerifier.verify(at: url).ok)
        try StoreFiles.close(writer)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).map(\.title).sorted() == ["t1", "t2"])
    }

    @Test("Reservation 0 turns it off, for either sharing", arguments: [FileStoreConfiguration.Sharing.exclusive, .perSave])
    func noReservationWhenZero(sharing: FileStoreConfiguration.Sharing) throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = sharing
            $0.segmentReservation = 0
        }
        let context = ModelContext(container)
        context.insert(Note.titled("one"))
        try context.save()
        let segment = StoreFiles.segment(url)
        #expect(try size(segment) == (try recordsEnd(segment)))
        try StoreFiles.close(container)
    }
}

/// Counts, per path, the calls that `stat` a file or open it by path to read it, through POSIX. Unlike
/// `CountingFileSystem` (CheckpointTests), which counts bytes and leaves `openForReading` to the protocol's default
/// (a handle that reads its path again, so that reads through handles are counted too), this one forwards
/// `openForReading` to POSIX: a handle's reads are the descriptor's, and only opening it counts.
final class StatCountingFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem = POSIXFileSystem()
    private let counts = Mutex<[String: Int]>([:])

    func calls(_ path: String) -> Int { counts.withLock { $0[path] ?? 0 } }
    func reset() { counts.withLock { $0 = [:] } }
    fileprivate func counted<T>(_ path: String, _ body: () throws -> T) rethrows -> T {
        counts.withLock { $0[path, default: 0] += 1 }
        return try body()
    }

    func status(_ path: String) throws -> StoreFileStatus? { try counted(path) { try base.status(path) } }
    func read(_ path: String) throws -> [UInt8] { try counted(path) { try base.read(path) } }
    func read(_ path: String, from offset: Int) throws -> [UInt8] {
        try counted(path) { try base.read(path, from: offset) }
    }
    func read(_ path: String, from offset: Int, count n: Int) throws -> [UInt8] {
        try counted(path) { try base.read(path, from: offset, count: n) }
    }
    func tryLock(_ path: String) throws -> (any StoreLockHandle)? { try counted(path) { try base.tryLock(path) } }
    func openLockFile(_ path: String) throws -> any StoreLockFile { try counted(path) { try base.openLockFile(path) } }
    func openForReading(_ path: String) throws -> any StoreReadableFile {
        CountedFile(file: try counted(path) { try base.openForReading(path) }, system: self)
    }

    /// A file opened for reading whose `size()` and reads count under "size " and "read " followed by its path.
    private final class CountedFile: StoreReadableFile {
        let file: any StoreReadableFile, system: StatCountingFileSystem
        init(file: any StoreReadableFile, system: StatCountingFileSystem) { (self.file, self.system) = (file, system) }
        var path: String { file.path }
        func size() throws -> Int { try system.counted("size " + path) { try file.size() } }
        func read(from offset: Int, count: Int) throws -> [UInt8] {
            try system.counted("read " + path) { try file.read(from: offset, count: count) }
        }
    }
}

@Suite("File store: a writer's saves and reads leave the segment's inode alone")
struct SegmentInodeTests {
    @Test("A writer shared per save, saving and reading in turn, never stats its segment or opens it by path again: on Linux 6.13 and later a stat makes the next write's flush write the inode too",
          arguments: [FileStoreConfiguration.Sharing.perSave, .exclusive])
    func savesDoNotStatTheSegment(sharing: FileStoreConfiguration.Sharing) throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let counting = StatCountingFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = sharing
            $0.fileSystem = counting
        }
        let context = ModelContext(container)
        context.insert(Note.titled("first"))
        try context.save()
        _ = try context.fetch(FetchDescriptor<Note>())
        let segment = StoreFiles.segment(url).path
        counting.reset()
        for index in 0..<10 {
            context.insert(Note.titled("note \(index)"))
            try context.save()
            #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == index + 2)
        }
        #expect(counting.calls(segment) == 0, "ten saves and fetches stat'ed or reopened the segment")
        try StoreFiles.close(container)
    }
}

extension SegmentInodeTests {
    /// A writer shared per save through `counting`, configured by `configure`, that saved once, then ten times more
    /// with the counts reset in between.
    static func tenCountedSaves(_ url: URL, _ counting: StatCountingFileSystem,
                                configure: (inout FileStoreConfiguration) -> Void) throws
        -> (ModelContainer, ModelContext) {
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .perSave
            $0.fileSystem = counting
            configure(&$0)
        }
        let context = ModelContext(container)
        context.insert(Note.titled("first"))
        try context.save()
        counting.reset()
        for index in 0..<10 {
            context.insert(Note.titled("note \(index)"))
            try context.save()
        }
        return (container, context)
    }

    @Test("A save shared per save looks at the MANIFEST and at the end of the log once: catching up and settling after the write reuse what the refresh saw under the lock")
    func sharedSaveLooksOnce() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let counting = StatCountingFileSystem()
        // No automatic refresh: what is counted is the save's own catching up, not a read's before it.
        let (container, _) = try Self.tenCountedSaves(url, counting) { $0.automaticRefreshInterval = nil }
        let segment = StoreFiles.segment(url).path, manifest = url.appendingPathComponent("MANIFEST").path
        #expect(counting.calls(manifest) == 10, "the MANIFEST's status, once a save")
        #expect(counting.calls("size " + segment) == 10, "the segment's length, once a save")
        #expect(counting.calls("read " + segment) <= 10, "the byte after the last record, at most once a save")
        try StoreFiles.close(container)
    }

    @Test("A writer shared per save keeps LOCK open from its first save to its close and takes the flock on it for each save: no open, status or path resolution of LOCK a save")
    func sharedWriterKeepsTheLockFileOpen() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let counting = StatCountingFileSystem()
        let (container, context) = try Self.tenCountedSaves(url, counting) { $0.lockTimeout = 0 }
        let lock = url.appendingPathComponent("LOCK").path
        #expect(counting.calls(lock) == 0, "LOCK opened again for a save")
        // Another open of this process (its own descriptor) still waits for the lock: the flock decides.
        let other = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .perSave
            $0.lockTimeout = 0
        }
        let held = try #require(try POSIXFileSystem().tryLock(lock))
        let otherContext = ModelContext(other)
        otherContext.insert(Note.titled("refused"))
        #expect(throws: FileStoreError.self) { try otherContext.save() }
        context.insert(Note.titled("refused too"))
        #expect(throws: FileStoreError.self) { try context.save() }
        held.unlock()
        try otherContext.save()
        try context.save()
        #expect(try ModelContext(other).fetchCount(FetchDescriptor<Note>()) == 13)
        try StoreFiles.close(other)
        try StoreFiles.close(container)
    }

    /// The files this process has open that were deleted since, by path (Linux's `/proc/self/fd`).
    static func openDeletedFiles(under url: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
            .filter { $0.hasPrefix(url.path) && $0.hasSuffix(" (deleted)") }
    }

    @Test("A writer shared per save holds no segment its compaction deleted: the held segment follows the log")
    func compactedSegmentIsLetGo() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .perSave }
        let context = ModelContext(container)
        for title in ["one", "two"] {
            context.insert(Note.titled(title))
            try context.save()
        }
        try StoreFiles.store(container).compact()
        #expect(Self.openDeletedFiles(under: url).isEmpty)
        context.insert(Note.titled("three"))
        try context.save()
        #expect(Self.openDeletedFiles(under: url).isEmpty)
        try StoreFiles.close(container)
    }
}
