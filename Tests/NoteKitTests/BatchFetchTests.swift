import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 17, item 5: `enumerate(_:batchSize:allowEscapingMutations:block:)` and `fetch(_:batchSize:)` walk a large
/// result creating a batch of model objects at a time, and give the results `fetch(_:)` gives.
@Suite("Fetching in batches: enumerate and fetch(_:batchSize:)")
struct BatchFetchTests {
    static let count = 50
    static let batch = 8

    /// A store of `count` saved notes, created one second apart, every third one pinned, and a fresh context over it
    /// that has loaded nothing.
    struct Fixture {
        let container: ModelContainer
        let context: ModelContext

        init(_ kind: StoreKind) throws {
            container = try kind.makeContainer([NoteRecord.self])
            let writer = ModelContext(container)
            let start = Date(timeIntervalSince1970: 1_700_000_000)
            for index in 0..<BatchFetchTests.count {
                let note = NoteRecord(title: "note \(index)", body: "", createdAt: start + Double(index))
                note.isPinned = index % 3 == 0
                writer.insert(note)
            }
            try writer.save()
            context = ModelContext(container)
        }
    }

    /// Weak references to every object a walk was given, to count how many are still alive.
    final class Liveness {
        private final class Weak { weak var object: NoteRecord?; init(_ object: NoteRecord) { self.object = object } }
        private var seen: [Weak] = []
        private(set) var mostAlive = 0

        func saw(_ object: NoteRecord) {
            seen.append(Weak(object))
            mostAlive = max(mostAlive, alive)
        }

        var alive: Int { seen.count { $0.object != nil } }
    }

    static var byCreation: FetchDescriptor<NoteRecord> {
        FetchDescriptor(sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
    }

    // MARK: - enumerate

    @Test("Enumerate: every match comes to the block once, in the descriptor's order", arguments: StoreKind.allCases)
    func enumerateOrder(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var pinned = Self.byCreation
        pinned.predicate = #Predicate { $0.isPinned }
        var titles: [String] = []
        try fixture.context.enumerate(pinned, batchSize: Self.batch) { titles.append($0.title) }
        #expect(titles == (try fixture.context.fetch(pinned).map(\.title)))
        #expect(titles.count == 17 && titles.first == "note 48")
    }

    @Test("Enumerate: the default batch size is SwiftData's, 5,000", arguments: StoreKind.allCases)
    func enumerateDefaultBatch(kind: StoreKind) throws {
        let container = try kind.makeContainer([NoteRecord.self])
        let writer = ModelContext(container)
        for index in 0..<5_001 { writer.insert(NoteRecord(title: "\(index)")) }
        try writer.save()
        let context = ModelContext(container)
        var most = 0, calls = 0
        // The registry's count, not its keys: listing 5,000 keys at each of 5,001 calls took half a minute.
        try context.enumerate(FetchDescriptor<NoteRecord>()) { _ in
            calls += 1
            most = max(most, context.registry.count)
        }
        #expect(calls == 5_001 && most == 5_000, "two batches: 5,000 and 1 (most registered: \(most))")
    }

    @Test("Enumerate: a finished batch's objects are freed, and no more than a batch is alive at once",
          arguments: StoreKind.allCases)
    func enumerateFreesBatches(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let liveness = Liveness()
        var mostRegistered = 0
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note in
            liveness.saw(note)
            mostRegistered = max(mostRegistered, fixture.context.registry.count)
        }
        #expect(liveness.mostAlive <= Self.batch, "at most one batch alive, saw \(liveness.mostAlive)")
        #expect(mostRegistered <= Self.batch, "the registry held \(mostRegistered)")
        #expect(liveness.alive == 0, "nothing kept after the walk")
        #expect(fixture.context.registry.keys.isEmpty)
    }

    @Test("Enumerate: an object the block keeps stays alive, the others are still freed",
          arguments: StoreKind.allCases)
    func enumerateKeptObject(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var kept: [NoteRecord] = []
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note in
            if note.isPinned { kept.append(note) }
        }
        #expect(kept.count == 17)
        #expect(fixture.context.registry.keys.count == 17, "only the kept objects are still registered")
    }

    @Test("Enumerate: setting stop ends the walk after that object", arguments: StoreKind.allCases)
    func enumerateStop(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var titles: [String] = []
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note, stop in
            titles.append(note.title)
            if titles.count == 11 { stop = true }
        }
        #expect(titles == (try fixture.context.fetch(Self.byCreation).prefix(11).map(\.title)))
    }

    @Test("Enumerate: an error the block throws ends the walk and comes out unchanged", arguments: StoreKind.allCases)
    func enumerateBlockThrows(kind: StoreKind) throws {
        struct Enough: Error {}
        let fixture = try Fixture(kind)
        var calls = 0
        #expect(throws: Enough.self) {
            try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { _ in
                calls += 1
                if calls == 3 { throw Enough() }
            }
        }
        #expect(calls == 3)
    }

    @Test("Enumerate: a change left unsaved at the end of a batch throws, and stays pending",
          arguments: StoreKind.allCases)
    func enumerateRefusesEscapingMutations(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var calls = 0
        do {
            try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note in
                calls += 1
                if calls == 2 { note.title = "changed" }
            }
            Issue.record("the walk went on with an unsaved change")
        } catch let error as FetchError {
            guard case let .mutationsEscaped(entity, batch, models) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(entity == "NoteRecord" && batch == 0 && models.count == 1)
            #expect("\(error)".contains("allowEscapingMutations"), "\(error)")
        }
        #expect(calls == Self.batch, "the first batch ran to its end, the second never started")
        #expect(fixture.context.hasChanges, "the change is left to the caller to save or roll back")
    }

    @Test("Enumerate: an object inserted by the block counts as an escaping change", arguments: StoreKind.allCases)
    func enumerateRefusesInserts(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        #expect(throws: FetchError.self) {
            try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note in
                if note.title == "note 49" { fixture.context.insert(NoteRecord(title: "new")) }
            }
        }
    }

    @Test("Enumerate: changes pending before the walk are not the block's, and do not throw",
          arguments: StoreKind.allCases)
    func enumerateEarlierChanges(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let earlier = NoteRecord(title: "earlier", createdAt: .distantPast)
        fixture.context.insert(earlier)
        var titles: [String] = []
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { titles.append($0.title) }
        #expect(titles.count == Self.count + 1 && titles.last == "earlier", "pending changes count, as in fetch")
    }

    @Test("Enumerate: a block that saves its changes passes the guard", arguments: StoreKind.allCases)
    func enumerateSavingBlock(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch) { note in
            note.body = "seen"
            try fixture.context.save()
        }
        #expect(try ModelContext(fixture.container).fetch(Self.byCreation).allSatisfy { $0.body == "seen" })
    }

    @Test("Enumerate: with allowEscapingMutations the changes stay pending and save together",
          arguments: StoreKind.allCases)
    func enumerateAllowingMutations(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let liveness = Liveness()
        try fixture.context.enumerate(Self.byCreation, batchSize: Self.batch, allowEscapingMutations: true) { note in
            liveness.saw(note)
            if note.isPinned { note.body = "pinned" }
        }
        #expect(liveness.alive == 17, "the changed objects are kept by the context, the others are freed")
        try fixture.context.save()
        let bodies = try ModelContext(fixture.container).fetch(Self.byCreation).map(\.body)
        #expect(bodies.count { $0 == "pinned" } == 17)
    }

    @Test("Enumerate and fetch(_:batchSize:): a batch size below one is refused", arguments: StoreKind.allCases)
    func invalidBatchSize(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        for size in [0, -1] {
            #expect(throws: FetchError.invalidBatchSize(size)) {
                try fixture.context.enumerate(Self.byCreation, batchSize: size) { _ in }
            }
            #expect(throws: FetchError.invalidBatchSize(size)) {
                _ = try fixture.context.fetch(Self.byCreation, batchSize: size)
            }
            #expect(throws: FetchError.invalidBatchSize(size)) {
                _ = try fixture.context.fetchIdentifiers(Self.byCreation, batchSize: size)
            }
        }
        #expect("\(FetchError.invalidBatchSize(0))".contains("batch size 0"))
    }

    @Test("Enumerate: fetchOffset and fetchLimit apply as in fetch", arguments: StoreKind.allCases)
    func enumerateOffsetLimit(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var descriptor = Self.byCreation
        descriptor.fetchOffset = 5
        descriptor.fetchLimit = 20
        var titles: [String] = []
        try fixture.context.enumerate(descriptor, batchSize: Self.batch) { titles.append($0.title) }
        #expect(titles.count == 20 && titles.first == "note 44")
        #expect(titles == (try fixture.context.fetch(descriptor).map(\.title)))
    }

    @Test("Enumerate: a predicate evaluated in memory gives fetch's results, a batch alive at a time",
          arguments: StoreKind.allCases)
    func enumerateInMemoryPredicate(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var descriptor = Self.byCreation
        descriptor.predicate = #Predicate { $0.titleLength > 6 }    // "note 10" and up
        #expect(try fixture.context.explain(descriptor).evaluatedInMemory)
        let liveness = Liveness()
        var titles: [String] = []
        try fixture.context.enumerate(descriptor, batchSize: Self.batch) { note in
            liveness.saw(note)
            titles.append(note.title)
        }
        #expect(titles.count == 40)
        #expect(try titles == fixture.context.fetch(descriptor).map(\.title))
        #expect(liveness.mostAlive <= Self.batch, "saw \(liveness.mostAlive)")
    }

    @Test("Enumerate: objects inserted and not saved are included, deleted ones are not",
          arguments: StoreKind.allCases)
    func enumeratePendingChanges(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        context.insert(NoteRecord(title: "inserted", createdAt: .distantFuture))
        let doomed = try #require(try context.fetch(Self.byCreation).last)
        try context.delete(doomed)
        var titles: [String] = []
        try context.enumerate(Self.byCreation, batchSize: Self.batch) { titles.append($0.title) }
        #expect(titles.first == "inserted" && !titles.contains("note 0") && titles.count == Self.count)
        #expect(titles == (try context.fetch(Self.byCreation).map(\.title)))

        var saved = Self.byCreation
        saved.includePendingChanges = false
        titles = []
        try context.enumerate(saved, batchSize: Self.batch) { titles.append($0.title) }
        #expect(titles.count == Self.count && titles.last == "note 0" && !titles.contains("inserted"))
    }

    @Test("Enumerate: an object the block deletes before its turn is skipped", arguments: StoreKind.allCases)
    func enumerateDeletionDuringWalk(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let ids = try context.fetchIdentifiers(Self.byCreation)
        var titles: [String] = []
        try context.enumerate(Self.byCreation, batchSize: Self.batch, allowEscapingMutations: true) { note in
            titles.append(note.title)
            if note.title == "note 49" {
                // One later object deleted and saved, one deleted and left pending, in later batches.
                let saved = try #require(context.model(for: ids[20]))
                try context.delete(saved)
                try context.save()
                let pending = try #require(context.model(for: ids[30]))
                try context.delete(pending)
            }
        }
        #expect(titles.count == Self.count - 2)
        #expect(!titles.contains("note 29") && !titles.contains("note 19"))
    }

    @Test("Enumerate: deleting each object as it comes, then saving, deletes every match",
          arguments: StoreKind.allCases)
    func enumerateDeletingEach(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        var pinned = Self.byCreation
        pinned.predicate = #Predicate { $0.isPinned }
        var deleted = 0
        try fixture.context.enumerate(pinned, batchSize: Self.batch, allowEscapingMutations: true) { note in
            try fixture.context.delete(note)
            deleted += 1
        }
        try fixture.context.save()
        #expect(deleted == 17)
        let left = try ModelContext(fixture.container).fetch(Self.byCreation)
        #expect(left.count == Self.count - 17 && !left.contains { $0.isPinned })
    }

    // MARK: - fetch(_:batchSize:)

    @Test("fetch(_:batchSize:) gives fetch's results, creating a batch of objects at a time",
          arguments: StoreKind.allCases)
    func batchedFetch(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let results = try context.fetch(Self.byCreation, batchSize: Self.batch)
        #expect(context.registry.keys.isEmpty, "nothing is created before it is read")
        #expect(results.count == Self.count)
        #expect(results[37].title == "note 12", "random access")
        #expect(context.registry.keys.count <= Self.batch)

        let liveness = Liveness()
        var titles: [String] = []
        for note in results {
            liveness.saw(note)
            titles.append(note.title)
        }
        #expect(titles == (try context.fetch(Self.byCreation).map(\.title)))
        #expect(liveness.mostAlive <= Self.batch + 1,
                "the batch read and the loop's last object, saw \(liveness.mostAlive)")
        #expect(context.registry.keys.count <= Self.batch, "only the last batch read is held")
        let first = results[0]
        _ = results[Self.count - 1]
        #expect(results[0] === first, "a batch read again gives the instances still alive")
        #expect(results.reversed().map(\.title) == titles.reversed())
    }

    @Test("fetch(_:batchSize:) applies offset, limit, pending changes and in-memory predicates as fetch does",
          arguments: StoreKind.allCases)
    func batchedFetchOptions(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        context.insert(NoteRecord(title: "note inserted", createdAt: .distantFuture))
        var descriptor = Self.byCreation
        descriptor.predicate = #Predicate { $0.titleLength > 6 }
        descriptor.fetchOffset = 3
        descriptor.fetchLimit = 25
        let expected = try context.fetch(descriptor).map(\.title)
        #expect(expected.count == 25 && expected.first == "note 47")
        #expect(try context.fetch(descriptor, batchSize: Self.batch).map(\.title) == expected)
        #expect(try Array(context.fetchIdentifiers(descriptor, batchSize: Self.batch))
            == context.fetchIdentifiers(descriptor))
    }

    @Test("fetch(_:batchSize:): an object deleted and saved after the fetch reads as deleted",
          arguments: StoreKind.allCases)
    func batchedFetchDeletedLater(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let ids = try fixture.context.fetchIdentifiers(Self.byCreation)
        let results = try fixture.context.fetch(Self.byCreation, batchSize: Self.batch)
        let other = ModelContext(fixture.container)
        try other.delete(model: NoteRecord.self, where: #Predicate { $0.title == "note 10" })
        try other.save()
        #expect(results.count == Self.count, "the results are the fetch's")
        let gone = results[39]
        #expect(gone.persistentModelID == ids[39])
        #expect(gone.isDeleted, "its row is gone from the store")
        #expect(results[38].title == "note 11" && !results[38].isDeleted)
    }
}
