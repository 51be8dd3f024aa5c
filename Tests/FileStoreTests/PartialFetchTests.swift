import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Observation
import Testing

// Issue 17, item 5 (second half) and item 2's faults: `propertiesToFetch` decodes only the listed attributes (the
// others are loaded, all at once, when one of them is first read), and `relationshipKeyPathsForPrefetching` reads
// the named relationships' targets in one store call. Every test runs on the in-memory store, where rows are in
// memory already (the lists change nothing there), and on the file store opened through its checkpoint, where
// rows are read and decoded on demand.

final class PartialNote: PersistentModel {
    @Attribute var title = ""
    @Attribute var body = ""
    @Attribute var rank = 0
    @Attribute var pinned = false
    @Attribute var created = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var place: String?
    @Transient var scratch = 0
    @Relationship var folder: PartialFolder?

    static var indexes: [[PartialKeyPath<PartialNote>]] { [[\.pinned, \.created]] }

    required init() {}
}

final class PartialFolder: PersistentModel {
    @Attribute var name = ""
    @Relationship var parent: PartialFolder?
    @Relationship(inverse: \PartialNote.folder) var notes: [PartialNote] = []

    required init() {}
}

/// The two ways rows reach a context: in memory, or read on demand through a checkpoint.
enum PartialStore: String, CaseIterable, CustomStringConvertible {
    case inMemory
    case checkpoint

    var description: String { rawValue }

    static let models: [any PersistentModel.Type] = [PartialNote.self, PartialFolder.self]

    /// A container holding `count` notes in three folders (Work inside Inbox): note n has title "note n", body
    /// "body n", rank n, place "p n" for odd n, is pinned for even n, and was created at n seconds.
    func open(count: Int = 40) throws -> PartialFixture {
        switch self {
        case .inMemory:
            let container = try ModelContainer(for: Schema(Self.models),
                                               configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
            try Self.seed(container, count: count)
            return PartialFixture(container: container, counting: nil, segment: nil)
        case .checkpoint:
            let url = TemporaryStores.newURL("partial")
            let writer = try StoreFiles.open(url, Self.models) { $0.automaticCompaction = nil }
            try Self.seed(writer, count: count)
            try StoreFiles.store(writer).compact()
            try StoreFiles.close(writer)
            let counting = CountingFileSystem()
            let container = try StoreFiles.open(url, Self.models) { $0.fileSystem = counting }
            let segment = StoreLayout(root: url.path).segment(try CheckpointFixture.manifest(url).segments[0])
            let fixture = PartialFixture(container: container, counting: counting, segment: segment)
            #expect(StoreFiles.store(container).state.withLock { $0.rows.hasBase })
            return fixture
        }
    }

    private static func seed(_ container: ModelContainer, count: Int) throws {
        let context = ModelContext(container)
        let inbox = PartialFolder(), work = PartialFolder(), home = PartialFolder()
        (inbox.name, work.name, home.name) = ("Inbox", "Work", "Home")
        work.parent = inbox
        let folders = [inbox, work, home]
        for folder in folders { context.insert(folder) }
        for n in 0..<count {
            let note = PartialNote()
            note.title = "note \(n)"
            note.body = "body \(n)"
            note.rank = n
            note.pinned = n % 2 == 0
            note.created = Date(timeIntervalSinceReferenceDate: Double(n))
            note.place = n % 2 == 1 ? "p \(n)" : nil
            note.folder = folders[n % 3]
            context.insert(note)
        }
        try context.save()
    }
}

/// A container of the fixture, and what its store reads.
struct PartialFixture {
    let container: ModelContainer
    let counting: CountingFileSystem?
    let segment: String?

    /// The bytes of the segment read since the last reset (0 on the in-memory store).
    var segmentBytes: Int { segment.map { counting!.bytesRead($0) } ?? 0 }
    func reset() { counting?.reset() }

    /// The attribute values the checkpoint decoded so far (0 on the in-memory store).
    var valuesDecoded: Int {
        StoreFiles.store(container).state.withLock { state in
            (state.rows.base(of: "PartialNote") as? CheckpointRowBase)?.valuesDecoded ?? 0
        }
    }

    var isCheckpoint: Bool { segment != nil }
}

private func pinnedNewest(_ limit: Int = 10) -> FetchDescriptor<PartialNote> {
    var descriptor = FetchDescriptor<PartialNote>(predicate: #Predicate { $0.pinned },
                                                  sortBy: [SortDescriptor(\.created, order: .reverse)])
    descriptor.fetchLimit = limit
    return descriptor
}

/// Every persisted value of a note, as text.
private func values(_ note: PartialNote) -> String {
    "\(note.title)|\(note.body)|\(note.rank)|\(note.pinned)|\(note.created.timeIntervalSinceReferenceDate)|"
        + "\(note.place ?? "-")|\(note.folder?.name ?? "-")"
}

@Suite("Fetching: propertiesToFetch loads the listed attributes, the others when first read")
struct PartialFetchTests {
    @Test("Over a checkpoint, a fetch decodes the listed attributes and what its predicate and sort read, no more")
    func decodesOnlyTheListedAttributes() throws {
        var fullDecoded = 0
        for partial in [false, true] {
            let fixture = try PartialStore.checkpoint.open(count: 400)
            var descriptor = pinnedNewest(20)
            if partial { descriptor.propertiesToFetch = [\.title] }
            let before = fixture.valuesDecoded
            let found = try ModelContext(fixture.container).fetch(descriptor)
            #expect(found.count == 20)
            let decoded = fixture.valuesDecoded - before
            if !partial {
                fullDecoded = decoded
                // Every attribute of every row read: six attributes of at least the 20 results.
                #expect(decoded >= 20 * 6)
            } else {
                // title, and pinned and created (the predicate, the sort and the index): three of six.
                #expect(decoded * 2 <= fullDecoded, "decoded \(decoded) values, a whole fetch \(fullDecoded)")
                #expect(decoded >= 20 * 3)
            }
            withExtendedLifetime(found) {}
        }
    }

    @Test("Over a checkpoint, the first read of an unlisted attribute reads the object's row once, and fills every slot")
    func firstUnlistedReadLoadsTheRow() throws {
        let fixture = try PartialStore.checkpoint.open()
        let context = ModelContext(fixture.container)
        var descriptor = pinnedNewest(5)
        descriptor.propertiesToFetch = [\.title]
        let found = try context.fetch(descriptor)
        let note = try #require(found.first)
        fixture.reset()
        #expect(note.title == "note 38" && note.pinned && note.created == Date(timeIntervalSinceReferenceDate: 38))
        #expect(fixture.segmentBytes == 0, "a listed attribute read \(fixture.segmentBytes) bytes")
        #expect(note.body == "body 38")
        let rowBytes = fixture.segmentBytes
        #expect(rowBytes > 0 && rowBytes < 400, "the fault read \(rowBytes) bytes")
        fixture.reset()
        #expect(note.rank == 38 && note.place == nil)
        #expect(fixture.segmentBytes == 0, "the other unlisted attributes read \(fixture.segmentBytes) bytes")
        // The other results are still partial: each loads its own row.
        #expect(found[1].body == "body 36")
        #expect(fixture.segmentBytes > 0)
    }

    @Test("Reading any property gives its stored value, listed or not", arguments: PartialStore.allCases)
    func everyPropertyReadsItsValue(store: PartialStore) throws {
        let fixture = try store.open()
        var descriptor = FetchDescriptor<PartialNote>(sortBy: [SortDescriptor(\.rank)])
        let whole = try ModelContext(fixture.container).fetch(descriptor).map(values)
        descriptor.propertiesToFetch = [\.title, \.place]
        let partial = try ModelContext(fixture.container).fetch(descriptor).map(values)
        #expect(partial == whole)
        #expect(partial.count == 40 && partial[3] == "note 3|body 3|3|false|3.0|p 3|Inbox")
    }

    @Test("Writing an unloaded attribute and saving saves it and keeps every other value", arguments: PartialStore.allCases)
    func writingAnUnloadedAttributeSaves(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        var descriptor = pinnedNewest(3)
        descriptor.propertiesToFetch = [\.title]
        let note = try #require(try context.fetch(descriptor).first)
        #expect(!note.hasChanges && !context.hasChanges)
        // A write of the value the store holds changes nothing, as for a whole object.
        note.body = "body 38"
        #expect(!note.hasChanges)
        note.body = "rewritten"
        #expect(note.hasChanges && context.changedModelsArray.count == 1)
        try context.save()
        let reader = ModelContext(fixture.container)
        let stored = try #require(try reader.fetch(pinnedNewest(1)).first)
        #expect(values(stored) == "note 38|rewritten|38|true|38.0|-|Home")
        // Setting an unloaded optional to nil when the store holds a value is a change.
        var odd = FetchDescriptor<PartialNote>(predicate: #Predicate { $0.rank == 39 })
        odd.propertiesToFetch = [\.title]
        let other = try #require(try context.fetch(odd).first)
        other.place = nil
        #expect(other.hasChanges)
        try context.save()
        #expect(try ModelContext(fixture.container).fetch(odd).first?.place == nil)
    }

    @Test("Rollback and undo after writing an unloaded attribute restore the stored value", arguments: PartialStore.allCases)
    func rollbackAndUndoRestore(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        context.undoManager = ModelUndoManager()
        var descriptor = pinnedNewest(2)
        descriptor.propertiesToFetch = [\.title]
        let notes = try context.fetch(descriptor)
        notes[0].rank = 1000
        context.rollback()
        #expect(notes[0].rank == 38 && notes[0].body == "body 38" && !context.hasChanges)
        context.undoManager?.beginUndoGrouping()
        notes[1].body = "changed"
        context.undoManager?.endUndoGrouping()
        context.undoManager?.undo()
        #expect(notes[1].body == "body 36" && notes[1].rank == 36 && notes[1].title == "note 36")
        #expect(!notes[1].hasChanges)
    }

    @Test("A registered whole object stays whole after a partial fetch; a later whole fetch fills a partial one",
          arguments: PartialStore.allCases)
    func partialFetchNeverUnloads(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        let whole = try context.fetch(pinnedNewest(2))
        var descriptor = pinnedNewest(4)
        descriptor.propertiesToFetch = [\.title]
        let partial = try context.fetch(descriptor)
        #expect(partial[0] === whole[0] && partial[1] === whole[1])
        fixture.reset()
        #expect(partial[0].body == "body 38" && partial[1].rank == 36)
        #expect(fixture.segmentBytes == 0, "a whole object read \(fixture.segmentBytes) bytes")
        // partial[2] and [3] are partial on the checkpoint; a whole fetch fills them.
        let again = try context.fetch(pinnedNewest(4))
        #expect(again[2] === partial[2])
        fixture.reset()
        #expect(partial[2].body == "body 34" && partial[3].place == nil)
        #expect(fixture.segmentBytes == 0, "a filled object read \(fixture.segmentBytes) bytes")
    }

    @Test("A row deleted by another context before the fault fires: unloaded attributes read as their defaults, recorded in readFailures",
          arguments: PartialStore.allCases)
    func deletedBeforeTheFaultFires(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        var descriptor = pinnedNewest(1)
        descriptor.propertiesToFetch = [\.title]
        let note = try #require(try context.fetch(descriptor).first)
        let other = ModelContext(fixture.container)
        try other.delete(model: PartialNote.self, where: #Predicate { $0.rank == 38 })
        try other.save()
        #expect(note.title == "note 38" && note.folder?.name == "Home")
        if fixture.isCheckpoint {
            // Never loaded, and no longer stored: the declared defaults, each recorded once.
            #expect(note.body == "" && note.rank == 0 && note.place == nil)
            #expect(Set(context.readFailures.map(\.property)) == ["body", "rank", "place"])
            #expect(context.readFailures.allSatisfy { $0.model == note.persistentModelID })
        } else {
            // The in-memory store's rows are whole: nothing was left to load.
            #expect(note.body == "body 38" && note.rank == 38 && context.readFailures.isEmpty)
        }
    }

    @Test("Pending objects are returned as they are; relationship, transient and nested key paths are accepted",
          arguments: PartialStore.allCases)
    func pendingObjectsAndOtherKeyPaths(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        let fresh = PartialNote()
        fresh.title = "fresh"
        fresh.body = "unsaved"
        fresh.pinned = true
        fresh.created = Date(timeIntervalSinceReferenceDate: 100)
        context.insert(fresh)
        let changed = try #require(try context.fetch(FetchDescriptor<PartialNote>(
            predicate: #Predicate { $0.rank == 36 })).first)
        changed.body = "edited"
        var descriptor = pinnedNewest(3)
        descriptor.propertiesToFetch = [\.title, \.folder, \.scratch, \.folder?.name, \.persistentModelID]
        let found = try context.fetch(descriptor)
        #expect(found.count == 3 && found[0] === fresh && found[2] === changed)
        #expect(found.map(values) == ["fresh|unsaved|0|true|100.0|-|-", "note 38|body 38|38|true|38.0|-|Home",
                                      "note 36|edited|36|true|36.0|-|Inbox"])
        // Only key paths that are no attribute at all: every attribute is loaded when first read, none is listed.
        var none = pinnedNewest(2)
        none.propertiesToFetch = [\.folder, \.scratch]
        let bare = try ModelContext(fixture.container).fetch(none)
        #expect(bare.map(values) == ["note 38|body 38|38|true|38.0|-|Home", "note 36|body 36|36|true|36.0|-|Inbox"])
    }

    @Test("Observation sees an unloaded attribute's changes, and a refresh from another context's save",
          arguments: PartialStore.allCases)
    func observationOfPartialObjects(store: PartialStore) throws {
        let fixture = try store.open()
        let context = ModelContext(fixture.container)
        var descriptor = pinnedNewest(1)
        descriptor.propertiesToFetch = [\.title]
        let note = try #require(try context.fetch(descriptor).first)
        let fired = Locked(0)
        withObservationTracking { _ = note.body } onChange: { fired.withLock { $0 += 1 } }
        note.body = "new body"
        #expect(fired.withLock { $0 } == 1)
        context.rollback()

        // Another context changes a listed and an unlisted attribute; a fetch brings both in.
        let other = try #require(try context.fetch(pinnedNewest(2)).last)
        let titleFired = Locked(0)
        var partialAgain = pinnedNewest(2)
        partialAgain.propertiesToFetch = [\.title]
        let second = try #require(try ModelContext(fixture.container).fetch(partialAgain).last)
        withObservationTracking { _ = other.title } onChange: { titleFired.withLock { $0 += 1 } }
        second.title = "renamed"
        second.rank = 99
        try #require(second.modelContext).save()
        _ = try context.fetch(partialAgain)
        #expect(titleFired.withLock { $0 } == 1 && other.title == "renamed" && other.rank == 99)
    }
}

@Suite("Fetching: relationshipKeyPathsForPrefetching reads the targets in one pass")
struct PrefetchTests {
    @Test("Over a checkpoint, following a prefetched to-one relationship reads nothing")
    func prefetchedToOneReadsNothing() throws {
        for prefetching in [false, true] {
            let fixture = try PartialStore.checkpoint.open(count: 300)
            let context = ModelContext(fixture.container)
            var descriptor = pinnedNewest(30)
            if prefetching { descriptor.relationshipKeyPathsForPrefetching = [\.folder] }
            let notes = try context.fetch(descriptor)
            fixture.reset()
            let names = notes.map { $0.folder?.name ?? "-" }
            #expect(Set(names) == ["Inbox", "Work", "Home"])
            if prefetching {
                #expect(fixture.segmentBytes == 0, "following note.folder read \(fixture.segmentBytes) bytes")
            } else {
                #expect(fixture.segmentBytes > 0)
            }
        }
    }

    @Test("Over a checkpoint, following a prefetched to-many relationship reads nothing")
    func prefetchedToManyReadsNothing() throws {
        for prefetching in [false, true] {
            let fixture = try PartialStore.checkpoint.open(count: 60)
            let context = ModelContext(fixture.container)
            var descriptor = FetchDescriptor<PartialFolder>(sortBy: [SortDescriptor(\.name)])
            if prefetching { descriptor.relationshipKeyPathsForPrefetching = [\.notes] }
            let folders = try context.fetch(descriptor)
            fixture.reset()
            // Keep the notes: the context does not keep objects without changes alive by itself.
            let notes = folders.map(\.notes)
            #expect(notes.map(\.count) == [20, 20, 20])
            #expect(notes[0].allSatisfy { $0.rank % 3 == 2 })
            if prefetching {
                #expect(fixture.segmentBytes == 0, "following folder.notes read \(fixture.segmentBytes) bytes")
            } else {
                #expect(fixture.segmentBytes > 0)
            }
        }
    }

    @Test("Prefetching reads the targets in one store call, whatever the number of results; other key paths prefetch nothing",
          arguments: PartialStore.allCases)
    func oneStoreCall(store: PartialStore) throws {
        let fixture = try store.open()
        let counting = CountingStore(fixture.container.store)
        // A context over the counting store: the same container's store, seen through the counter.
        let container = try ModelContainer(for: Schema(PartialStore.models),
                                           configurations: [CountingStoreConfiguration(counting)])
        let context = ModelContext(container)
        var descriptor = FetchDescriptor<PartialNote>(sortBy: [SortDescriptor(\.rank)])
        // A nested path and an attribute are accepted and prefetch nothing.
        descriptor.relationshipKeyPathsForPrefetching = [\.folder, \.folder?.parent, \.title]
        let notes = try context.fetch(descriptor)
        #expect(counting.lookups.withLock { $0 } == [3], "40 notes, 3 folders: one call for the 3")
        fixture.reset()
        #expect(notes.compactMap { $0.folder?.name }.count == 40)
        #expect(fixture.segmentBytes == 0)
        // Targets registered already are not read again.
        let folders = notes.compactMap(\.folder)
        counting.lookups.withLock { $0 = [] }
        _ = try context.fetch(descriptor)
        #expect(counting.lookups.withLock { $0 } == [])
        withExtendedLifetime(folders) {}
    }
}

/// A store that counts the identifiers each `rows(for:)` call asks for, over another store.
final class CountingStore: DataStore {
    let base: any DataStore
    let lookups = Locked<[Int]>([])
    init(_ base: any DataStore) { self.base = base }
    var schema: Schema { base.schema }
    var transactionNumber: UInt64 { base.transactionNumber }
    func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        lookups.withLock { $0.append(ids.count) }
        return base.rows(for: ids)
    }
    func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult { try base.fetch(request) }
    func identifier(entity: String, uniqueConstraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        base.identifier(entity: entity, uniqueConstraint: uniqueConstraint, key: key)
    }
    func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) -> [PersistentIdentifier] {
        base.identifiers(entity: entity, relationship: relationship, referencing: target)
    }
    func save(_ changes: ChangeSet) throws -> SaveResult { try base.save(changes) }
}

struct CountingStoreConfiguration: DataStoreConfiguration {
    let store: CountingStore
    init(_ store: CountingStore) { self.store = store }
    var name: String { "counting" }
    func makeStore(schema: Schema) throws -> any DataStore { store }
}
