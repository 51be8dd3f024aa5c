import Foundation
import NoteKit
import NoteKitNotes
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing

@testable import NoteKitFileStore

/// Writers share a store by default (issue 15, items 2 and 3): each save takes the lock for the save only, a writer
/// that finds it taken waits the busy timeout before a `locked` error naming the holder, and every read of a shared
/// or read-only open sees what any process committed before it started.
@Suite("File store: writers share by default")
struct SharedWritersTests {
    /// `notekit-stress`, built by `swift test` beside the tests.
    static let stress = ProcessStressTests.KillTests.executable

    /// Runs `notekit-stress add` on the store at `url`; returns its exit status and standard error.
    private static func start(_ url: URL, title: String, deleting: String? = nil) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = stress
        process.arguments = ["add", "--store", url.path, "--title", title] + (deleting.map { ["--delete", $0] } ?? [])
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return (process, errors)
    }

    private static func finish(_ child: (Process, Pipe)) -> (status: Int32, errors: String) {
        let errors = child.1.fileHandleForReading.readDataToEndOfFile()
        child.0.waitUntilExit()
        return (child.0.terminationStatus, String(decoding: errors, as: UTF8.self))
    }

    private static func titles(_ context: ModelContext) throws -> [String] {
        try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title)])).map(\.title)
    }

    // MARK: Writers share by default

    @Test("Ten writer processes started at once, each adding one object, all succeed",
          arguments: ["an existing store", "a store none of them finds"])
    func tenWriters(store: String) throws {
        let url = TemporaryStores.newURL()
        if store == "an existing store" {
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                               configurations: [FileStoreConfiguration(url: url)])
            try StoreFiles.close(container)
        }
        let children = try (0..<10).map { try Self.start(url, title: "note \($0)") }
        let outcomes = children.map(Self.finish)
        for (index, outcome) in outcomes.enumerated() {
            #expect(outcome.status == 0, "writer \(index) failed: \(outcome.errors)")
        }
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        #expect(try Self.titles(ModelContext(container)) == (0..<10).map { "note \($0)" })
        #expect(container.store.transactionNumber == 10)
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    /// Another process's creation, as an open that started before it finished sees it: the open found no
    /// manifest, and another writer created the store and saved into it before the open read segment 1.
    @Test("An open that races another process's creation of the store opens what that process created: no damage",
          arguments: ["a writable open", "a read-only open"])
    func openRacingCreation(open: String) throws {
        let url = TemporaryStores.newURL()
        do {
            let writer = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                            configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(writer)
            let note = NoteRecord()
            note.title = "theirs"
            context.insert(note)
            try context.save()
            try StoreFiles.close(writer)
        }
        // The manifest is put back just before the open reads segment 1: as if the creator wrote it and another
        // writer saved after the open looked for it.
        let manifest = url.appendingPathComponent("MANIFEST"), aside = url.appendingPathComponent("MANIFEST.aside")
        try FileManager.default.moveItem(at: manifest, to: aside)
        let racing = InterleavingFileSystem()
        racing.interleave(beforeReadsOf: url.path + "/segments/") {
            try FileManager.default.moveItem(at: aside, to: manifest)
        }
        let mode: FileStoreConfiguration.Mode = open == "a read-only open" ? .readOnly : .readWrite(createIfMissing: true)
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [FileStoreConfiguration(url: url, mode: mode,
                                                                                   fileSystem: racing)])
        #expect(racing.interleavings == 1)
        #expect(try Self.titles(ModelContext(container)) == ["theirs"])
        try StoreFiles.close(container)
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("A read-only open of a store whose creation has not written its manifest yet finds no store, not damage")
    func readOnlyOpenDuringCreation() throws {
        let url = TemporaryStores.newURL()
        try StoreFiles.close(try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                                configurations: [FileStoreConfiguration(url: url)]))
        // What a creation has written before its manifest: segment 1 with its segment and schema records.
        try FileManager.default.removeItem(at: url.appendingPathComponent("MANIFEST"))
        let before = StoreFiles.contents(of: url)
        #expect(throws: FileStoreError.storeNotFound(path: url.path)) {
            _ = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                   configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        }
        #expect(StoreFiles.contents(of: url) == before, "a read-only open writes nothing")
    }

    // MARK: Reads see other processes' commits

    @Test("A .perSave-style writer sees another process's insert and delete at its next fetch and in history",
          arguments: ["a writer shared per save", "a read-only open"])
    func seesOtherProcess(open: String) async throws {
        let url = TemporaryStores.newURL()
        let configuration = open == "a read-only open" ? FileStoreConfiguration(url: url, mode: .readOnly)
            : FileStoreConfiguration(url: url, sharing: .perSave)
        var doomedID: UUID
        do {
            // The store as the app left it: two notes.
            let writer = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                            configurations: [FileStoreConfiguration(url: url, sharing: .perSave)])
            let context = ModelContext(writer)
            let mine = NoteRecord(), doomed = NoteRecord()
            mine.title = "mine"
            doomed.title = "doomed"
            context.insert(mine)
            context.insert(doomed)
            try context.save()
            doomedID = doomed.id
            try StoreFiles.close(writer)
        }
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
        let context = ModelContext(container)
        let loaded = try context.fetch(FetchDescriptor<NoteRecord>())
        #expect(loaded.count == 2)
        let persistence = FieldNotePersistence(modelContainer: container)
        let before = try await persistence.deletedNoteIDs(after: nil)
        #expect(before.ids.isEmpty)
        let stream = container.store.transactions()

        let child = Self.finish(try Self.start(url, title: "theirs", deleting: "doomed"))
        try #require(child.status == 0, "the other process failed: \(child.errors)")

        // No refresh() anywhere: the next fetch, count, lookup and history read see the other process's commit.
        #expect(try Self.titles(context) == ["mine", "theirs"])
        #expect(try context.fetchCount(FetchDescriptor<NoteRecord>()) == 2)
        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.map(\.token.transactionNumber) == [1, 2])
        #expect(history.last?.author == "add theirs")
        #expect(history.last?.changes.count == 2, "one insert and one delete")
        let after = try await persistence.deletedNoteIDs(after: before.nextToken)
        #expect(after.ids == [doomedID], "seed 001's deletedNoteIDs(after:) sees the deletion")
        let announced = await withTaskGroup(of: UInt64?.self) { group in
            group.addTask { for await record in stream { return record.number }; return nil }
            group.addTask { try? await Task.sleep(for: .seconds(10)); return nil }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        #expect(announced == 2, "the stream announces the commit the fetch picked up")
        if open == "a writer shared per save" {
            let note = NoteRecord()
            note.title = "mine again"
            context.insert(note)
            try context.save()
            #expect(container.store.transactionNumber == 3)
        }
        try StoreFiles.close(container)
    }

    @Test("Every read of a writer shared per save sees another writer's commit first: fetch, fetchCount, fetchIdentifiers, model(for:), history",
          arguments: ["fetch", "fetchCount", "fetchIdentifiers", "model(for:)", "fetchHistory"])
    func everyReadPath(read: String) throws {
        let url = TemporaryStores.newURL()
        let mine = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .perSave }
        let theirs = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .perSave }
        let reading = ModelContext(mine)
        #expect(try reading.fetchCount(FetchDescriptor<Folder>()) == 0)
        let writing = ModelContext(theirs)
        let folder = Folder(name: "theirs")
        writing.insert(folder)
        try writing.save()
        // The other open's store stands in for another process: this open learns of the commit only from the files.
        switch read {
        case "fetch": #expect(try reading.fetch(FetchDescriptor<Folder>()).map(\.name) == ["theirs"])
        case "fetchCount": #expect(try reading.fetchCount(FetchDescriptor<Folder>()) == 1)
        case "fetchIdentifiers":
            #expect(try reading.fetchIdentifiers(FetchDescriptor<Folder>()) == [folder.persistentModelID])
        case "model(for:)": #expect(reading[folder.persistentModelID, as: Folder.self]?.name == "theirs")
        default:
            #expect(try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.transactionNumber)
                == [1])
        }
        try StoreFiles.close(mine)
        try StoreFiles.close(theirs)
    }

    /// The number of the first record `stream` yields within `seconds`, or nil; stops listening either way.
    private static func firstNumber(of stream: AsyncStream<HistoryRecord>, within seconds: Double) async -> UInt64? {
        await withTaskGroup(of: UInt64?.self) { group in
            group.addTask { for await record in stream { return record.number }; return nil }
            group.addTask { try? await Task.sleep(for: .seconds(seconds)); return nil }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
    }

    /// Whether `condition` holds within `seconds`, looking every 20 ms.
    private static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test("While someone listens to transactions(), another writer's commit is announced without a read; the check stops with the last listener and at close",
          arguments: ["a read-only open", "a writer shared per save"])
    func listenersAreFollowed(open: String) async throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let listening = try StoreFiles.open(url, NotesSchema.models) {
            if open == "a read-only open" { $0.mode = .readOnly }
        }
        let store = StoreFiles.store(listening)
        var stream: AsyncStream<HistoryRecord>? = store.transactions()
        let context = ModelContext(writer)
        context.insert(Folder(name: "announced"))
        try context.save()
        // Nobody reads the listening open: only a check in the background can find the commit.
        // Generous: the stream answers as soon as the check finds the commit; a loaded machine may be slow to run it.
        #expect(await Self.firstNumber(of: try #require(stream), within: 30) == 1)
        stream = nil
        #expect(await Self.eventually(within: 30) { !store.isFollowing }, "the last listener left: the check stops")

        let again = store.transactions()
        #expect(store.isFollowing)
        try store.close()
        #expect(await Self.firstNumber(of: again, within: 1) == nil, "closing ends the stream")
        #expect(await Self.eventually(within: 30) { !store.isFollowing }, "the store closed: the check stops")
        try StoreFiles.close(writer)
    }

    @Test("The background check for listeners runs while every thread of Swift's cooperative pool is busy")
    func followingIsNotStarvedByThePool() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let listening = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        let store = StoreFiles.store(listening)
        let stream = store.transactions()
        // An application's tasks that block their threads (synchronous I/O, a lock): as many as the pool has.
        let release = DispatchSemaphore(value: 0)
        let blockers = ProcessInfo.processInfo.activeProcessorCount
        for _ in 0..<blockers { Task.detached { release.wait() } }
        defer { for _ in 0..<blockers { release.signal() } }
        let context = ModelContext(writer)
        context.insert(Folder(name: "announced"))
        try context.save()
        // Polled from this thread, without reading the listening open (a read would pick the commit up itself).
        let deadline = ContinuousClock.now + .seconds(5)
        while store.statistics.lastTransactionNumber < 1, ContinuousClock.now < deadline { usleep(5_000) }
        #expect(store.statistics.lastTransactionNumber == 1,
                "the check found the other writer's commit with the pool busy")
        _ = stream
        try StoreFiles.close(listening)
        try StoreFiles.close(writer)
    }

    @Test("An exclusive writable open runs no background check for its listeners: nobody else can commit")
    func exclusiveIsNotFollowed() throws {
        let store = StoreFiles.store(try StoreFiles.open(TemporaryStores.newURL(), NotesSchema.models) {
            $0.sharing = .exclusive
        })
        let stream = store.transactions()
        #expect(!store.isFollowing)
        _ = stream
        try store.close()
    }

    // MARK: The busy wait

    /// A monotonic clock that moves on by `step` seconds each time it is read, and counts the readings.
    final class RacingClock: Sendable {
        private let state: Mutex<(now: ContinuousClock.Instant, readings: Int)>
        let step: Duration

        init(step: Duration) {
            self.step = step
            state = Mutex((ContinuousClock.now, 0))
        }

        var readings: Int { state.withLock { $0.readings } }

        func now() -> ContinuousClock.Instant {
            state.withLock { state in
                state.readings += 1
                state.now += step
                return state.now
            }
        }

        var clocks: StoreClocks { StoreClocks(monotonic: { self.now() }) }
    }

    @Test("A writer that finds the lock taken waits the default busy timeout of 5 s, by the monotonic clock, then throws locked",
          arguments: ["open", "save"])
    func busyWait(what: String) throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(writer)
        context.insert(Folder(name: "before"))
        try context.save()
        // Each reading of the clock moves it on by half a second: a 5 s wait ends after about ten tries, at once
        // in real time. A wait counted in tries or measured by another clock would end elsewhere.
        let clock = RacingClock(step: .milliseconds(500))
        let other = what == "save" ? try StoreFiles.open(url, NotesSchema.models) { $0.clocks = clock.clocks } : nil
        // Another process's save: it holds the lock and does not let go.
        let held = try #require(try POSIXFileSystem().tryLock(url.appendingPathComponent("LOCK").path))
        defer { held.unlock() }
        let started = ContinuousClock.now
        let readingsBefore = clock.readings
        let thrown: (any Error)?
        if let other {
            let busy = ModelContext(other)
            busy.insert(Folder(name: "during"))
            thrown = #expect(throws: FileStoreError.self) { try busy.save() }
        } else {
            thrown = #expect(throws: FileStoreError.self) {
                _ = try StoreFiles.open(url, NotesSchema.models) { $0.clocks = clock.clocks }
            }
        }
        let refusal = try #require(Self.locked(thrown), "expected locked, got \(String(describing: thrown))")
        #expect(refusal.path == url.path)
        #expect(refusal.timeout == 5)
        #expect(clock.readings - readingsBefore >= 10, "the wait read the monotonic clock until 5 s had passed by it")
        #expect(ContinuousClock.now - started < .seconds(4), "the wait went by the monotonic clock it was given")
    }

    @Test("The locked error names the holder's pid from LOCK, and no pid when the one there is dead: the flock decides")
    func holderPID() throws {
        let url = TemporaryStores.newURL()
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models))
        let lockPath = url.appendingPathComponent("LOCK").path
        // A holder that is not a FileStore: it takes the flock and writes a pid of its choice.
        let descriptor = open(lockPath, O_RDWR)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        try #require(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
        func refusal(naming pid: Int32) throws -> FileStoreError? {
            let text = Array("\(pid)\n".utf8) + [UInt8](repeating: 0x20, count: 12)
            _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            do {
                _ = try StoreFiles.open(url, NotesSchema.models) { $0.lockTimeout = 0 }
                return nil
            } catch let error as FileStoreError {
                return error
            }
        }
        let alive = try refusal(naming: getpid())
        #expect(Self.locked(alive)?.holder == getpid())
        #expect(alive?.description.contains("pid \(getpid())") == true, "\(String(describing: alive))")

        // A pid that no process has any longer.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let dead = try refusal(naming: gone.processIdentifier)
        #expect(Self.locked(dead) != nil && Self.locked(dead)?.holder == nil)
        #expect(dead?.description.contains("pid") == false, "\(String(describing: dead))")
    }

    @Test("A pid left in LOCK by a holder that died keeps no writer out")
    func stalePID() throws {
        let url = TemporaryStores.newURL()
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models))
        try Data("1\n".utf8).write(to: url.appendingPathComponent("LOCK"))
        let writer = try StoreFiles.open(url, NotesSchema.models) { $0.lockTimeout = 0 }
        let context = ModelContext(writer)
        context.insert(Folder(name: "saved"))
        try context.save()
        try StoreFiles.close(writer)
    }

    @Test("An exclusive open in another process makes a shared writer wait its busy timeout, then fail with locked naming that process")
    func exclusiveElsewhere() async throws {
        let url = TemporaryStores.newURL()
        let exclusive = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        let path = url.path
        let holder = getpid()
        await #expect(processExitsWith: .success) { [path = path as String, holder = holder as Int32] in
            let started = ContinuousClock.now
            do {
                _ = try StoreFiles.open(URL(fileURLWithPath: path), NotesSchema.models) { $0.lockTimeout = 0.5 }
                exit(1)
            } catch let error as FileStoreError {
                let waited = ContinuousClock.now - started
                guard waited >= .milliseconds(500) else { exit(2) }
                guard let refusal = Self.locked(error), refusal.holder == holder, refusal.timeout == 0.5,
                      error.description.contains("pid \(holder)") else { exit(3) }
                exit(0)
            }
        }
        try StoreFiles.close(exclusive)
    }

    /// The path, holder and busy timeout of a `locked` refusal; nil for any other error.
    static func locked(_ error: (any Error)?) -> (path: String, holder: Int32?, timeout: Double)? {
        guard case .locked(let path, let holder, let timeout) = error as? FileStoreError else { return nil }
        return (path, holder, timeout)
    }
}
