import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing
@testable import NoteKit
import NoteKitNotes

// `NoteRecord` and `NotebookRecord` in this module are FetchModels' own; the FieldNotes records used here are reached
// through `FieldNotePersistence` and `NoteStore`, and `PhotoRecord` is NoteKitTestSupport's.

@Suite("Model actor: a context on its own serial executor, and seed 001's persistence layer on it")
@MainActor
struct ModelActorTests {
    private let day = Date(timeIntervalSinceReferenceDate: 800_000_000)

    // MARK: Seed 001

    @Test("A pinned note survives a reload (seed 001's pinnedNoteSurvivesReload)", arguments: StoreKind.allCases)
    func pinnedNoteSurvivesReload(kind: StoreKind) async throws {
        let persistence = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        let note = FieldNote(title: "Kingfisher", location: NoteLocation(latitude: 57.3, longitude: -4.4))

        let store = NoteStore(persistence: persistence)
        store.add(note)
        store.togglePin(note)

        let reloaded = NoteStore(persistence: persistence)
        await store.load()          // waits for both writes
        await reloaded.load()
        #expect(reloaded.notes.map(\.isPinned) == [true])
        #expect(reloaded.notes.first?.location?.latitude == 57.3)
        #expect(try await persistence.pinnedNotes(limit: 5).map(\.id) == [note.id])
        #expect(try await persistence.note(id: note.id)?.isPinned == true)
        #expect(store.errors.isEmpty && reloaded.errors.isEmpty)
    }

    // MARK: The store's writes

    @Test("Writes reach the store in the order they were made, even when earlier ones are slower",
          arguments: StoreKind.allCases)
    func writesKeepTheirOrder(kind: StoreKind) async throws {
        let base = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        // Each write waits less than the one before it: writes not chained one after another overtake each other.
        let persistence = ScriptedPersistence(base, yieldsBeforeWrite: { max(0, 60 - 4 * $0) })
        let store = NoteStore(persistence: persistence)
        let birds = Notebook(name: "Birds")
        let heron = FieldNote(title: "Heron", createdAt: day, notebookID: birds.id)
        let wren = FieldNote(title: "Wren", createdAt: day + 60)
        let kite = FieldNote(title: "Kite", createdAt: day + 120)
        let owl = FieldNote(title: "Owl", createdAt: day + 180)

        store.add(birds)
        store.add(heron)
        store.add(wren)
        store.togglePin(heron)
        store.add(kite)
        store.delete(kite)          // added then deleted: gone
        store.togglePin(wren)
        store.togglePin(wren)       // toggled twice: unpinned
        store.delete(wren)
        store.add(wren)             // deleted then added again: present, as first saved (unpinned)
        store.add(owl)
        store.togglePin(owl)
        #expect(store.writeCount == 12)
        await store.waitForPendingWrites()

        #expect(await persistence.events == [
            .savedNotebook(birds.id),
            .savedNote(heron.id, isPinned: false),
            .savedNote(wren.id, isPinned: false),
            .savedNote(heron.id, isPinned: true),
            .savedNote(kite.id, isPinned: false),
            .deletedNote(kite.id),
            .savedNote(wren.id, isPinned: true),
            .savedNote(wren.id, isPinned: false),
            .deletedNote(wren.id),
            .savedNote(wren.id, isPinned: false),
            .savedNote(owl.id, isPinned: false),
            .savedNote(owl.id, isPinned: true),
        ])
        let stored = try await base.fetchNotes()
        #expect(stored.map(\.title) == ["Owl", "Wren", "Heron"])
        #expect(stored.map(\.isPinned) == [true, false, true])
        #expect(stored.last?.notebookID == birds.id)
        #expect(Set(stored) == Set(store.notes), "the store holds what the user sees")
        #expect(store.errors.isEmpty)
    }

    @Test("A write that fails is recorded in errors, and the writes after it still run")
    func failedWriteIsRecorded() async throws {
        let base = FieldNotePersistence(modelContainer: try .fieldNotes())
        let doomed = FieldNote(title: "Doomed", createdAt: day)
        let persistence = ScriptedPersistence(base, failingSaves: [doomed.id])
        let store = NoteStore(persistence: persistence)
        store.add(doomed)
        store.add(FieldNote(title: "After", createdAt: day + 60))
        await store.waitForPendingWrites()

        #expect(store.errors.map(\.operation) == [.write])
        #expect(store.errors.first?.underlying is ScriptedPersistence.InjectedFailure)
        #expect(try await base.fetchNotes().map(\.title) == ["After"])
    }

    // MARK: Loading

    @Test("load() fetches only after the writes queued before it have landed", arguments: StoreKind.allCases)
    func loadWaitsForPendingWrites(kind: StoreKind) async throws {
        let base = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        // Slow writes: a load that does not wait for them fetches while they are still on their way.
        let persistence = ScriptedPersistence(base, yieldsBeforeWrite: { _ in 20 })
        let store = NoteStore(persistence: persistence)
        let notes = (0..<4).map { FieldNote(title: "Note \($0)", createdAt: day + Double($0) * 60) }
        for note in notes { store.add(note) }
        store.togglePin(notes[0])

        await store.load()
        let events = await persistence.events
        #expect(events.count == 7)
        #expect(events.prefix(5).allSatisfy { $0.isWrite }, "every queued write landed before the first fetch")
        #expect(events.suffix(2) == [.fetchedNotebooks, .fetchedNotes(count: 4)])
        #expect(store.notes.map(\.title) == ["Note 3", "Note 2", "Note 1", "Note 0"])
        #expect(store.notes.map(\.isPinned) == [false, false, false, true])
        #expect(store.errors.isEmpty)
    }

    @Test("load() reads again when a write is made while it fetches, so the write is not lost from notes",
          arguments: StoreKind.allCases)
    func loadRereadsAfterARacingWrite(kind: StoreKind) async throws {
        let base = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        let persistence = ScriptedPersistence(base)
        let store = NoteStore(persistence: persistence)
        store.add(FieldNote(title: "Before the load", createdAt: day))
        await store.waitForPendingWrites()

        await persistence.holdNextFetchOfNotes()
        let loading = Task { await store.load() }
        await persistence.waitUntilFetchIsHeld()     // the fetch has its snapshot, without the note below
        store.add(FieldNote(title: "During the load", createdAt: day + 60))
        await persistence.releaseHeldFetch()
        await loading.value

        #expect(store.notes.map(\.title) == ["During the load", "Before the load"])
        let fetches = await persistence.events.filter { !$0.isWrite }
        #expect(fetches == [.fetchedNotebooks, .fetchedNotes(count: 1), .fetchedNotebooks, .fetchedNotes(count: 2)],
                "the stale snapshot is dropped and the store read again")
        #expect(store.errors.isEmpty)
    }

    // MARK: The executor

    @Test("A model actor's methods run on its executor, off the main thread, always with the same context")
    func methodsRunOnTheExecutor() async throws {
        let probe = ExecutorProbe(modelContainer: try StoreKind.inMemory.makeContainer([Author.self]))
        let executor = try #require(probe.modelExecutor as? DefaultSerialModelExecutor)
        #expect(!executor.isCurrent, "the test itself runs on the main actor")

        var samples = [await probe.sample()]
        samples += await withTaskGroup(of: ExecutorProbe.Sample.self) { group in
            for _ in 0..<20 { group.addTask { await probe.sample() } }
            var samples: [ExecutorProbe.Sample] = []
            for await sample in group { samples.append(sample) }
            return samples
        }
        #expect(samples.allSatisfy { $0.onExecutor && !$0.onMainThread })
        #expect(Set(samples.map(\.context)) == [ObjectIdentifier(executor.modelContext)])
    }

    @Test("Concurrent calls from many tasks run one at a time on the actor's context and lose nothing",
          arguments: StoreKind.allCases)
    func concurrentCallsAreSerial(kind: StoreKind) async throws {
        let container = try kind.makeContainer([Author.self])
        let probe = ExecutorProbe(modelContainer: container)
        let ids = try await withThrowingTaskGroup(of: PersistentIdentifier.self) { group in
            for index in 0..<100 { group.addTask { try await probe.insertAuthor(named: "Author \(index)") } }
            var ids: [PersistentIdentifier] = []
            for try await id in group { ids.append(id) }
            return ids
        }
        #expect(probe.overlaps.withLock { $0 } == 0, "no two calls ran at once")
        #expect(Set(ids).count == 100)
        let reader = ModelContext(container)
        let names = try reader.fetch(FetchDescriptor<Author>()).map(\.name)
        #expect(Set(names) == Set((0..<100).map { "Author \($0)" }))
        #expect(await probe.name(of: ids[0]) != nil, "the actor's subscript finds a model by identifier")
    }

    @Test("The actor's subscript returns the model for an identifier, or nil for a missing one or another type")
    func subscriptByIdentifier() async throws {
        let container = try StoreKind.inMemory.makeContainer([Author.self])
        let probe = ExecutorProbe(modelContainer: container)
        let id = try await probe.insertAuthor(named: "Ursula")
        #expect(await probe.name(of: id) == "Ursula")
        #expect(await probe.bookTitle(of: id) == nil, "an Author is not a Book")
        let elsewhere = ModelContext(container)
        let other = Author(name: "Deleted")
        elsewhere.insert(other)
        try elsewhere.save()
        try elsewhere.delete(other)
        try elsewhere.save()
        #expect(await probe.name(of: other.persistentModelID) == nil)
    }

    // MARK: Delete rules through the actor

    @Test("Deleting a note through the actor deletes its photos, and only its photos", arguments: StoreKind.allCases)
    func deletingANoteCascadesToItsPhotos(kind: StoreKind) async throws {
        let container = try ModelContainer.fieldNotes(on: kind)
        let persistence = FieldNotePersistence(modelContainer: container)
        let heron = FieldNote(title: "Heron", createdAt: day)
        let kept = FieldNote(title: "Kept", createdAt: day + 60)
        try await persistence.save(heron)
        try await persistence.save(kept)
        let bytes = Data((0..<4096).map { UInt8($0 % 251) })
        try await persistence.attachPhoto(named: "heron-1.jpg", data: bytes, toNote: heron.id)
        try await persistence.attachPhoto(named: "heron-2.jpg", data: bytes, toNote: heron.id)
        try await persistence.attachPhoto(named: "kept.jpg", data: bytes, toNote: kept.id)
        #expect(try await persistence.note(id: heron.id)?.attachments.map(\.fileName) == ["heron-1.jpg", "heron-2.jpg"])
        let missing = UUID()
        await #expect(throws: FieldNotesError.noteNotFound(missing)) {
            try await persistence.attachPhoto(named: "nowhere.jpg", data: bytes, toNote: missing)
        }

        try await persistence.deleteNote(id: heron.id)

        let reader = ModelContext(container)
        let photos = try reader.fetch(FetchDescriptor<PhotoRecord>())
        #expect(photos.map(\.fileName) == ["kept.jpg"])
        #expect(photos.first?.data == bytes)
        #expect(try await persistence.fetchNotes().map(\.id) == [kept.id])
    }
}

// MARK: Test doubles

/// Seed 001's persistence, with each call recorded in the order it reached the store, and with knobs to slow
/// writes down, make saves fail, or hold a fetch of notes after it has read its snapshot.
actor ScriptedPersistence: NotePersisting {
    enum Event: Hashable, Sendable {
        case savedNotebook(Notebook.ID)
        case savedNote(FieldNote.ID, isPinned: Bool)
        case deletedNote(FieldNote.ID)
        case fetchedNotebooks
        case fetchedNotes(count: Int)

        var isWrite: Bool {
            switch self {
            case .savedNotebook, .savedNote, .deletedNote: true
            case .fetchedNotebooks, .fetchedNotes: false
            }
        }
    }

    struct InjectedFailure: Error {}

    let base: FieldNotePersistence
    /// Calls, in the order they completed against `base`.
    private(set) var events: [Event] = []

    /// How many times write number n (from 0) yields before it reaches `base`.
    private let yieldsBeforeWrite: @Sendable (Int) -> Int
    private var writesStarted = 0
    private let failingSaves: Set<FieldNote.ID>

    private var holdsNextFetchOfNotes = false
    private var heldFetch: CheckedContinuation<Void, Never>?
    private var waitingForHeldFetch: [CheckedContinuation<Void, Never>] = []

    init(_ base: FieldNotePersistence, yieldsBeforeWrite: @escaping @Sendable (Int) -> Int = { _ in 0 },
         failingSaves: Set<FieldNote.ID> = []) {
        self.base = base
        self.yieldsBeforeWrite = yieldsBeforeWrite
        self.failingSaves = failingSaves
    }

    func fetchNotes() async throws -> [FieldNote] {
        let notes = try await base.fetchNotes()
        events.append(.fetchedNotes(count: notes.count))
        if holdsNextFetchOfNotes {
            holdsNextFetchOfNotes = false
            await withCheckedContinuation { continuation in
                heldFetch = continuation
                for waiter in waitingForHeldFetch { waiter.resume() }
                waitingForHeldFetch = []
            }
        }
        return notes
    }

    func save(_ note: FieldNote) async throws {
        await delayWrite()
        if failingSaves.contains(note.id) { throw InjectedFailure() }
        try await base.save(note)
        events.append(.savedNote(note.id, isPinned: note.isPinned))
    }

    func deleteNote(id: FieldNote.ID) async throws {
        await delayWrite()
        try await base.deleteNote(id: id)
        events.append(.deletedNote(id))
    }

    func fetchNotebooks() async throws -> [Notebook] {
        let notebooks = try await base.fetchNotebooks()
        events.append(.fetchedNotebooks)
        return notebooks
    }

    func save(_ notebook: Notebook) async throws {
        await delayWrite()
        try await base.save(notebook)
        events.append(.savedNotebook(notebook.id))
    }

    /// Makes the next `fetchNotes()` wait, after reading, until ``releaseHeldFetch()``.
    func holdNextFetchOfNotes() {
        holdsNextFetchOfNotes = true
    }

    /// Returns once a fetch of notes has read its snapshot and is held.
    func waitUntilFetchIsHeld() async {
        guard heldFetch == nil else { return }
        await withCheckedContinuation { waitingForHeldFetch.append($0) }
    }

    func releaseHeldFetch() {
        heldFetch?.resume()
        heldFetch = nil
    }

    private func delayWrite() async {
        let yields = yieldsBeforeWrite(writesStarted)
        writesStarted += 1
        for _ in 0..<yields { await Task.yield() }
    }
}

/// A model actor that reports where its methods run and whether two of them ever ran at once.
actor ExecutorProbe: ModelActor {
    nonisolated let modelContainer: ModelContainer
    nonisolated let modelExecutor: any ModelExecutor
    /// Calls of ``insertAuthor(named:)`` running now, counted outside the actor's own isolation.
    private nonisolated let running = Mutex(0)
    /// How many calls started while another was running.
    nonisolated let overlaps = Mutex(0)

    init(modelContainer: ModelContainer) {
        self.modelContainer = modelContainer
        modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
    }

    struct Sample: Sendable {
        let onExecutor: Bool
        let onMainThread: Bool
        let context: ObjectIdentifier
    }

    func sample() -> Sample {
        Sample(onExecutor: (modelExecutor as? DefaultSerialModelExecutor)?.isCurrent ?? false,
               onMainThread: Thread.isMainThread, context: ObjectIdentifier(modelContext))
    }

    func insertAuthor(named name: String) throws -> PersistentIdentifier {
        if running.withLock({ count in count += 1; return count }) > 1 { overlaps.withLock { $0 += 1 } }
        defer { running.withLock { $0 -= 1 } }
        let author = Author(name: name)
        modelContext.insert(author)
        // Reading back everything saved so far makes each call long enough for an overlap to show.
        _ = try modelContext.fetchCount(FetchDescriptor<Author>())
        try modelContext.save()
        return author.persistentModelID
    }

    func name(of id: PersistentIdentifier) -> String? {
        self[id, as: Author.self]?.name
    }

    func bookTitle(of id: PersistentIdentifier) -> String? {
        self[id, as: Book.self]?.title
    }
}
