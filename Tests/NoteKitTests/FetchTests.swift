import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Seven notes in two notebooks, saved: every value a fetch test needs, known in advance.
///
/// | title          | created | tags               | pinned | latitude | placeName   | notebook |
/// |----------------|---------|--------------------|--------|----------|-------------|----------|
/// | Kingfisher     | +1 h    | bird, river        | yes    | 57.3     | Loch Ness   | Travel   |
/// | Heron          | +2 h    | bird               | no     | 51.5     | –           | Travel   |
/// | alpha          | +2 h    | x                  | no     | 3.5      | –           | –        |
/// | Crème brûlée   | +3 h    | recipe             | yes    | –        | –           | –        |
/// | Straße         | +4 h    | –                  | no     | 52.5     | Berlin      | Work     |
/// | Budget         | +5 h    | work, x            | yes    | –        | –           | Work     |
/// | Heron          | +6 h    | –                  | no     | –        | –           | –        |
///
/// Objects are created in table order, so identifier order is table order.
struct NoteFixture {
    let container: ModelContainer
    let context: ModelContext
    let notes: [NoteRecord]
    let travel: NotebookRecord
    let work: NotebookRecord

    static let base = Date(timeIntervalSinceReferenceDate: 700_000_000)
    static func hours(_ n: Double) -> Date { base.addingTimeInterval(n * 3600) }

    init(_ kind: StoreKind) throws {
        let container = try kind.makeContainer([NoteRecord.self])
        let context = ModelContext(container)
        let travel = NotebookRecord(name: "Travel"), work = NotebookRecord(name: "Work")
        context.insert(travel)
        context.insert(work)
        func note(_ title: String, _ hour: Double, _ tags: [String], pinned: Bool, latitude: Double? = nil,
                  place: String? = nil, in notebook: NotebookRecord? = nil) -> NoteRecord {
            let note = NoteRecord(title: title, body: "About \(title)", createdAt: Self.hours(hour), tags: tags,
                                  isPinned: pinned)
            note.latitude = latitude
            note.longitude = latitude.map { -$0 / 10 }
            note.placeName = place
            context.insert(note)
            note.notebook = notebook
            return note
        }
        notes = [
            note("Kingfisher", 1, ["bird", "river"], pinned: true, latitude: 57.3, place: "Loch Ness", in: travel),
            note("Heron", 2, ["bird"], pinned: false, latitude: 51.5, in: travel),
            note("alpha", 2, ["x"], pinned: false, latitude: 3.5),
            note("Crème brûlée", 3, ["recipe"], pinned: true),
            note("Straße", 4, [], pinned: false, latitude: 52.5, place: "Berlin", in: work),
            note("Budget", 5, ["work", "x"], pinned: true, in: work),
            note("Heron", 6, [], pinned: false),
        ]
        try context.save()
        (self.container, self.context, self.travel, self.work) = (container, context, travel, work)
    }

    subscript(_ title: String, hour hour: Double? = nil) -> NoteRecord {
        notes.first { $0.title == title && (hour == nil || $0.createdAt == Self.hours(hour!)) }!
    }

    /// The notes (of `context`) as "title@hour", to compare orders readably.
    static func labels(_ notes: [NoteRecord]) -> [String] {
        notes.map { "\($0.title)@\(Int($0.createdAt.timeIntervalSince(base) / 3600))" }
    }
}

@Suite("Fetch: descriptors, identity, pending changes")
struct FetchTests {
    typealias Fixture = NoteFixture

    // MARK: - FetchDescriptor

    @Test("A predicate selects objects; no predicate returns every object", arguments: StoreKind.allCases)
    func predicateSelects(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let pinned = try context.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned }))
        #expect(Set(pinned.map(\.title)) == ["Kingfisher", "Crème brûlée", "Budget"])
        #expect(try context.fetch(FetchDescriptor<NoteRecord>()).count == 7)
        #expect(try context.fetch(FetchDescriptor<NotebookRecord>()).count == 2)
    }

    @Test("Several sort keys, each forward or reverse; ties go by identifier", arguments: StoreKind.allCases)
    func multipleSortKeys(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let byTitleThenNewest = try context.fetch(FetchDescriptor<NoteRecord>(
            sortBy: [SortDescriptor(\.title), SortDescriptor(\.createdAt, order: .reverse)]))
        #expect(Fixture.labels(byTitleThenNewest)
                == ["Budget@5", "Crème brûlée@3", "Heron@6", "Heron@2", "Kingfisher@1", "Straße@4", "alpha@2"],
                "Swift's String order: uppercase before lowercase")

        let newestThenTitleReversed = try context.fetch(FetchDescriptor<NoteRecord>(
            sortBy: [SortDescriptor(\.createdAt, order: .reverse), SortDescriptor(\.title, order: .reverse)]))
        #expect(Fixture.labels(newestThenTitleReversed)
                == ["Heron@6", "Budget@5", "Straße@4", "Crème brûlée@3", "alpha@2", "Heron@2", "Kingfisher@1"])

        // Heron@2 and alpha@2 tie on createdAt: identifier order, ascending after an ascending last key…
        let oldest = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)]))
        #expect(Fixture.labels(oldest)
                == ["Kingfisher@1", "Heron@2", "alpha@2", "Crème brûlée@3", "Straße@4", "Budget@5", "Heron@6"])
        // …and descending after a descending one, as a reversed index scan delivers them.
        let newest = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)]))
        #expect(Fixture.labels(newest)
                == ["Heron@6", "Budget@5", "Straße@4", "Crème brûlée@3", "alpha@2", "Heron@2", "Kingfisher@1"])
    }

    @Test("An optional sort key puts nil first, and last when reversed", arguments: StoreKind.allCases)
    func optionalSortKeys(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let forward = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.latitude)]))
        #expect(Fixture.labels(forward)
                == ["Crème brûlée@3", "Budget@5", "Heron@6", "alpha@2", "Heron@2", "Straße@4", "Kingfisher@1"])
        let reverse = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.latitude, order: .reverse)]))
        #expect(Fixture.labels(reverse)
                == ["Kingfisher@1", "Straße@4", "Heron@2", "alpha@2", "Heron@6", "Budget@5", "Crème brûlée@3"])
        let places = try context.fetch(FetchDescriptor<NoteRecord>(
            sortBy: [SortDescriptor(\.placeName), SortDescriptor(\.createdAt)]))
        #expect(places.map(\.placeName) == [nil, nil, nil, nil, nil, "Berlin", "Loch Ness"])
        #expect(Fixture.labels(Array(places.prefix(5)))
                == ["Heron@2", "alpha@2", "Crème brûlée@3", "Budget@5", "Heron@6"])
    }

    @Test("fetchLimit and fetchOffset window the sorted results", arguments: StoreKind.allCases)
    func limitAndOffset(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        var descriptor = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt), SortDescriptor(\.title)])
        let all = Fixture.labels(try context.fetch(descriptor))
        #expect(all == ["Kingfisher@1", "Heron@2", "alpha@2", "Crème brûlée@3", "Straße@4", "Budget@5", "Heron@6"])

        descriptor.fetchLimit = 2
        #expect(Fixture.labels(try context.fetch(descriptor)) == Array(all.prefix(2)))
        descriptor.fetchLimit = nil
        descriptor.fetchOffset = 2
        #expect(Fixture.labels(try context.fetch(descriptor)) == Array(all.dropFirst(2)))
        descriptor.fetchLimit = 3
        #expect(Fixture.labels(try context.fetch(descriptor)) == ["alpha@2", "Crème brûlée@3", "Straße@4"])
        descriptor.fetchOffset = 6
        #expect(Fixture.labels(try context.fetch(descriptor)) == ["Heron@6"], "a limit past the end returns the rest")
        descriptor.fetchOffset = 100
        #expect(try context.fetch(descriptor).isEmpty, "an offset past the end returns nothing")

        // With a predicate, the window applies to the matches.
        var pinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                 sortBy: [SortDescriptor(\.createdAt)])
        pinned.fetchOffset = 1
        pinned.fetchLimit = 1
        #expect(try context.fetch(pinned).map(\.title) == ["Crème brûlée"])
    }

    @Test("A fetchLimit of zero or less means no limit, as in Core Data", arguments: StoreKind.allCases)
    func nonPositiveLimit(kind: StoreKind) throws {
        let fixture = try NoteFixture(kind)
        let all = try fixture.context.fetchCount(FetchDescriptor<NoteRecord>())
        #expect(all > 1)
        for limit in [0, -1, Int.min] {
            var descriptor = FetchDescriptor<NoteRecord>()
            descriptor.fetchLimit = limit
            #expect(try fixture.context.fetch(descriptor).count == all)
            descriptor.sortBy = [SortDescriptor(\.createdAt)]
            descriptor.fetchOffset = 1
            #expect(try fixture.context.fetch(descriptor).count == all - 1)
            descriptor.predicate = #Predicate { $0.tagCount >= 0 }
            #expect(try fixture.context.fetch(descriptor).count == all - 1, "in memory too")
        }
    }

    @Test("fetchCount honours the predicate, the limit and the offset", arguments: StoreKind.allCases)
    func fetchCount(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { !$0.isPinned })
        #expect(try context.fetchCount(descriptor) == 4)
        descriptor.fetchLimit = 3
        #expect(try context.fetchCount(descriptor) == 3)
        descriptor.fetchOffset = 2
        #expect(try context.fetchCount(descriptor) == 2)
        descriptor.fetchOffset = 10
        #expect(try context.fetchCount(descriptor) == 0)
        #expect(try context.fetchCount(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.title == "none" })) == 0)
        #expect(try context.fetchCount(FetchDescriptor<NoteRecord>()) == 7)
    }

    @Test("fetchIdentifiers returns what fetch returns, in the same order", arguments: StoreKind.allCases)
    func fetchIdentifiers(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        var descriptors = [
            FetchDescriptor<NoteRecord>(),
            FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title, order: .reverse)]),
            FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.latitude != nil },
                                        sortBy: [SortDescriptor(\.latitude)]),
        ]
        var windowed = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        windowed.fetchOffset = 1
        windowed.fetchLimit = 4
        descriptors.append(windowed)
        for descriptor in descriptors {
            #expect(try context.fetchIdentifiers(descriptor) == context.fetch(descriptor).map(\.persistentModelID))
        }
        // And with unsaved changes merged.
        fixture["alpha"].title = "Zulu"
        context.insert(NoteRecord(title: "Unsaved", createdAt: Fixture.hours(0)))
        for descriptor in descriptors {
            #expect(try context.fetchIdentifiers(descriptor) == context.fetch(descriptor).map(\.persistentModelID))
        }
    }

    @Test("model(for:) and context[id, as:] return the registered object or load it", arguments: StoreKind.allCases)
    func lookUpByIdentifier(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let heron = fixture["Heron", hour: 2]
        let id = heron.persistentModelID
        #expect(context.model(for: id) as? NoteRecord === heron)
        #expect(context[id, as: NoteRecord.self] === heron)
        #expect(context[id, as: NotebookRecord.self] == nil, "an identifier of another entity is not a NotebookRecord")

        let other = ModelContext(fixture.container)
        let loaded = try #require(other[id, as: NoteRecord.self])
        #expect(loaded !== heron)
        #expect(loaded.title == "Heron" && loaded.latitude == 51.5 && loaded.tags == ["bird"])
        #expect(loaded.notebook?.name == "Travel")
        #expect(other.model(for: id) as? NoteRecord === loaded, "loaded once, then the same instance")

        let unknown = PersistentIdentifier.make(entityName: "NoteRecord")
        #expect(other.model(for: unknown) == nil)
        #expect(other[unknown, as: NoteRecord.self] == nil)

        try context.delete(heron)
        try context.save()
        #expect(ModelContext(fixture.container).model(for: id) == nil, "a deleted object is gone")
    }

    // MARK: - Pending changes

    @Test("Unsaved inserts count, unsaved deletes do not, unsaved edits match by their new values",
          arguments: StoreKind.allCases)
    func includePendingChanges(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let fresh = NoteRecord(title: "Osprey", createdAt: Fixture.hours(0), tags: ["bird"], isPinned: true)
        context.insert(fresh)
        try context.delete(fixture["Kingfisher"])
        fixture["Budget"].isPinned = false
        fixture["Heron", hour: 2].isPinned = true
        fixture["Heron", hour: 2].createdAt = Fixture.hours(9)

        let pinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                 sortBy: [SortDescriptor(\.createdAt)])
        #expect(pinned.includePendingChanges, "the default, as in SwiftData")
        #expect(Fixture.labels(try context.fetch(pinned)) == ["Osprey@0", "Crème brûlée@3", "Heron@9"])
        #expect(try context.fetchCount(pinned) == 3)

        // The window applies after merging: the unsaved insert sorts first, the edited Heron last.
        var window = pinned
        window.fetchLimit = 2
        #expect(Fixture.labels(try context.fetch(window)) == ["Osprey@0", "Crème brûlée@3"])
        window.fetchOffset = 1
        #expect(Fixture.labels(try context.fetch(window)) == ["Crème brûlée@3", "Heron@9"])
        #expect(try context.fetchCount(window) == 2)
        window.fetchOffset = 3
        #expect(try context.fetch(window).isEmpty)

        let birds = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.tags.contains("bird") },
                                                sortBy: [SortDescriptor(\.title)])
        #expect(Fixture.labels(try context.fetch(birds)) == ["Heron@9", "Osprey@0"], "the deleted Kingfisher is gone")

        // Values an object no longer has do not match it.
        let oldTime = Fixture.hours(2)
        let atTwo = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.createdAt == oldTime })
        #expect(try context.fetch(atTwo).map(\.title) == ["alpha"])
        #expect(try context.fetchCount(FetchDescriptor<NoteRecord>()) == 7)
    }

    @Test("includePendingChanges false answers from the saved values", arguments: StoreKind.allCases)
    func excludePendingChanges(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        context.insert(NoteRecord(title: "Osprey", isPinned: true))
        try context.delete(fixture["Kingfisher"])
        fixture["Budget"].isPinned = false
        fixture["Heron", hour: 2].isPinned = true

        var pinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                 sortBy: [SortDescriptor(\.createdAt)])
        pinned.includePendingChanges = false
        let saved = try context.fetch(pinned)
        #expect(saved.map(\.title) == ["Kingfisher", "Crème brûlée", "Budget"],
                "the unsaved insert is left out; the unsaved delete and edits are not applied")
        #expect(saved[0] === fixture["Kingfisher"], "the context's own instances, as they are now")
        #expect(saved[2].isPinned == false)
        #expect(try context.fetchCount(pinned) == 3)
        #expect(try context.fetchIdentifiers(pinned) == saved.map(\.persistentModelID))
    }

    @Test("includePendingChanges false uses saved values when the predicate is evaluated in memory too",
          arguments: StoreKind.allCases)
    func excludePendingChangesInMemory(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        fixture["Budget"].tags = ["a", "b", "c"]     // saved: ["work", "x"]
        fixture["Kingfisher"].tags = []              // saved: ["bird", "river"]
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.tagCount > 1 },
                                                     sortBy: [SortDescriptor(\.createdAt)])
        descriptor.includePendingChanges = false
        #expect(try context.explain(descriptor).evaluatedInMemory)
        let titles = try context.fetch(descriptor).map(\.title)
        #expect(titles == ["Kingfisher", "Budget"], "the saved values match, as on the compiled path")
    }

    // MARK: - Other contexts

    @Test("A save in one context is seen by a later fetch in another, which refreshes its unchanged objects",
          arguments: StoreKind.allCases)
    func otherContextsSave(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let reader = ModelContext(fixture.container)
        let heron = try #require(try reader.fetch(FetchDescriptor<NoteRecord>(
            predicate: #Predicate { $0.title == "Heron" }, sortBy: [SortDescriptor(\.createdAt)])).first)
        #expect(heron.isPinned == false)

        let writer = fixture.context
        fixture["Heron", hour: 2].isPinned = true
        fixture["Heron", hour: 2].title = "Grey heron"
        writer.insert(NoteRecord(title: "Osprey", isPinned: true))
        try writer.save()

        let pinned = try reader.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                                  sortBy: [SortDescriptor(\.title)]))
        #expect(pinned.map(\.title) == ["Budget", "Crème brûlée", "Grey heron", "Kingfisher", "Osprey"])
        #expect(pinned.contains { $0 === heron }, "the registered instance, not a second one")
        #expect(heron.title == "Grey heron" && heron.isPinned, "refreshed with the saved values")
        #expect(!reader.hasChanges, "a refresh is not a change")
    }

    @Test("A fetch refreshes unchanged objects even while the context has unsaved changes of the same entity",
          arguments: StoreKind.allCases)
    func refreshWithPendingChanges(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let reader = ModelContext(fixture.container)
        let heron = try #require(try reader.fetch(FetchDescriptor<NoteRecord>(
            predicate: #Predicate { $0.title == "Heron" }, sortBy: [SortDescriptor(\.createdAt)])).first)
        reader.insert(NoteRecord(title: "Reader's draft"))    // the reader now has a pending insert

        fixture["Heron", hour: 2].title = "Grey heron"
        try fixture.context.save()

        let found = try reader.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.title == "Grey heron" }))
        #expect(found.count == 1 && found.first === heron, "matched by the saved value")
        #expect(heron.title == "Grey heron", "the object returned for `title == \"Grey heron\"` has that title")
    }

    // MARK: - Identity

    @Test("Fetching the same object twice returns the same instance", arguments: StoreKind.allCases)
    func identity(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = ModelContext(fixture.container)
        let first = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)]))
        let second = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)]))
        #expect(first.count == 7)
        #expect(zip(first, second).allSatisfy { $0 === $1 })
        let kingfisherID = first[0].persistentModelID
        let byID = try context.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate {
            $0.persistentModelID == kingfisherID }))
        #expect(byID.first === first[0])
        #expect(context.model(for: kingfisherID) as? NoteRecord === first[0])
        let travel = try #require(first[0].notebook)
        #expect(travel.notes.contains { $0 === first[0] }, "relationships resolve to the same instances")
        let notebooks = try context.fetch(FetchDescriptor<NotebookRecord>(predicate: #Predicate { $0.name == "Travel" }))
        #expect(notebooks.first === travel)

        // In the context that inserted them, fetch returns the inserted instances themselves.
        let inserted = try fixture.context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)]))
        #expect(inserted.allSatisfy { found in fixture.notes.contains { $0 === found } })
    }

    // MARK: - Seed 001

    /// Seed 001's `pinnedNoteSummary(limit:)`, line for line.
    static func pinnedNoteSummary(_ context: ModelContext, limit: Int) throws -> (total: Int, newest: [NoteRecord]) {
        var descriptor = FetchDescriptor<NoteRecord>(
            predicate: #Predicate { $0.isPinned },
            sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        let total = try context.fetchCount(descriptor)
        descriptor.fetchLimit = limit
        descriptor.relationshipKeyPathsForPrefetching = [\.notebook]
        return (total, try context.fetch(descriptor))
    }

    /// Seed 001's `noteRecord(id:)`.
    static func noteRecord(_ context: ModelContext, id: UUID) throws -> NoteRecord? {
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.id == id })
        descriptor.fetchLimit = 1
        return try context.fetch(descriptor).first
    }

    @Test("Seed 001: pinned notes newest first, with a total", arguments: StoreKind.allCases)
    func seedPinnedSummary(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = ModelContext(fixture.container)
        let summary = try Self.pinnedNoteSummary(context, limit: 2)
        #expect(summary.total == 3, "the count ignores the limit set after it")
        #expect(summary.newest.map(\.title) == ["Budget", "Crème brûlée"])
        #expect(summary.newest.first?.notebook?.name == "Work")
        let all = try Self.pinnedNoteSummary(context, limit: 10)
        #expect(all.newest.map(\.title) == ["Budget", "Crème brûlée", "Kingfisher"])
    }

    @Test("Seed 001: one note by its id attribute", arguments: StoreKind.allCases)
    func seedNoteByID(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = ModelContext(fixture.container)
        let straße = fixture["Straße"]
        let found = try #require(try Self.noteRecord(context, id: straße.id))
        #expect(found.persistentModelID == straße.persistentModelID)
        #expect(found.title == "Straße" && found.placeName == "Berlin")
        #expect(try Self.noteRecord(context, id: UUID()) == nil)
        let id = straße.id
        #expect(!(try context.explain(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.id == id }))
            .evaluatedInMemory))
    }

    // MARK: - Predicates the store cannot evaluate

    @Test("Issue 35: forms that used to run on objects (arithmetic, conditionals, paths, counts) run in the store, with the same results",
          arguments: StoreKind.allCases)
    func formerlyUnsupportedPredicates(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let cases: [(String, Predicate<NoteRecord>)] = [
            ("arithmetic", #Predicate { ($0.latitude ?? 0) * 2 > 100 }),
            ("ternary", #Predicate { ($0.isPinned ? 1 : 0) == 1 }),
            ("multi-step key path", #Predicate { $0.notebook?.name == "Travel" }),
            ("collection count", #Predicate { $0.tags.count > 1 }),
            ("string count", #Predicate { $0.title.count == 5 }),
            ("mixed with compiled parts", #Predicate { $0.isPinned && $0.tags.count >= 1 }),
        ]
        let expected: [String: [String]] = [
            "arithmetic": ["Kingfisher@1", "Heron@2", "Straße@4"],
            "ternary": ["Kingfisher@1", "Crème brûlée@3", "Budget@5"],
            "multi-step key path": ["Kingfisher@1", "Heron@2"],
            "collection count": ["Kingfisher@1", "Budget@5"],
            "string count": ["Heron@2", "alpha@2", "Heron@6"],
            "mixed with compiled parts": ["Kingfisher@1", "Crème brûlée@3", "Budget@5"],
        ]
        for (name, predicate) in cases {
            var descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.createdAt)])
            #expect(try !context.explain(descriptor).evaluatedInMemory, "\(name)")
            let titles = Fixture.labels(try context.fetch(descriptor))
            #expect(titles == expected[name], "\(name)")
            let reference = try fixture.notes.filter { try predicate.evaluate($0) }
            #expect(Set(titles) == Set(Fixture.labels(reference)), "\(name): Swift agrees")
            #expect(try context.fetchCount(descriptor) == titles.count, "\(name)")
            #expect(try context.fetchIdentifiers(descriptor) == context.fetch(descriptor).map(\.persistentModelID))
            descriptor.fetchOffset = 1
            descriptor.fetchLimit = 1
            #expect(Fixture.labels(try context.fetch(descriptor)) == Array(expected[name]!.dropFirst().prefix(1)),
                    "\(name): windowed")
        }

        // The Book model's pages, as the issue words it.
        let container = try kind.makeContainer([Book.self])
        let books = ModelContext(container)
        for (title, pages) in [("Short", 3), ("Medium", 6), ("Long", 400)] { books.insert(Book(title: title, pages: pages)) }
        try books.save()
        let doubled = FetchDescriptor<Book>(predicate: #Predicate { $0.pages * 2 > 10 }, sortBy: [SortDescriptor(\.pages)])
        #expect(try books.fetch(doubled).map(\.title) == ["Medium", "Long"])
        #expect(try !books.explain(doubled).evaluatedInMemory)

        // A sort through a to-one relationship runs in the store too.
        let byNotebook = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.notebook != nil },
                                                     sortBy: [SortDescriptor(\.notebook?.name), SortDescriptor(\.createdAt)])
        #expect(try !context.explain(byNotebook).evaluatedInMemory)
        #expect(Fixture.labels(try context.fetch(byNotebook)) == ["Kingfisher@1", "Heron@2", "Straße@4", "Budget@5"])
    }

    @Test("A predicate part that reads a computed property runs on the objects the store's part leaves, and explain names it",
          arguments: StoreKind.allCases)
    func residualPartsRunOnObjects(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned && $0.tagCount >= 1 },
                                                     sortBy: [SortDescriptor(\.createdAt)])
        let plan = try context.explain(descriptor)
        #expect(plan.evaluatedInMemory)
        #expect(plan.objectParts.count == 1 && plan.objectParts[0].contains("computed"), "\(plan.objectParts)")
        #expect(plan.index == ["isPinned", "createdAt"], "the store narrows by the part it runs: \(plan)")
        #expect(plan.rowsExamined == 3, "\(plan)")
        #expect(Fixture.labels(try context.fetch(descriptor)) == ["Kingfisher@1", "Crème brûlée@3", "Budget@5"])
        #expect("\(plan)".contains("computed or @Transient"))
    }

    @Test("Ties come back in the same order whether the fetch ran in the store or in memory",
          arguments: StoreKind.allCases)
    func tieOrderAcrossPaths(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        // Heron@2 and alpha@2 tie on createdAt. `tagCount >= 0` is always true but reads a computed property.
        let store = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        let memory = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.tagCount >= 0 },
                                                 sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        #expect(try !context.explain(store).evaluatedInMemory)
        #expect(try context.explain(memory).evaluatedInMemory)
        let fromStore = Fixture.labels(try context.fetch(store))
        let fromMemory = Fixture.labels(try context.fetch(memory))
        #expect(fromStore == ["Heron@6", "Budget@5", "Straße@4", "Crème brûlée@3", "alpha@2", "Heron@2", "Kingfisher@1"])
        #expect(fromMemory == fromStore)
        // Ascending sorts agree.
        let up = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)])
        let upMemory = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.tagCount >= 0 },
                                                   sortBy: [SortDescriptor(\.createdAt)])
        #expect(try context.fetch(up).map(\.persistentModelID) == context.fetch(upMemory).map(\.persistentModelID))
    }

    @Test("A forced unwrap of nil in a compiled predicate throws unwrappedNil naming the entity",
          arguments: StoreKind.allCases)
    func forcedUnwrapOfNil(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.latitude! > 3 })
        #expect(try !context.explain(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.latitude != nil && $0.latitude! > 3 }))
            .evaluatedInMemory)
        let nilLatitude = Set(fixture.notes.filter { $0.latitude == nil }.map(\.persistentModelID))
        do {
            _ = try context.fetch(descriptor)
            Issue.record("the fetch should have thrown")
        } catch let FetchError.unwrappedNil(entity, model) {
            #expect(entity == "NoteRecord")
            #expect(nilLatitude.contains(model), "names an object whose latitude is nil")
            #expect("\(FetchError.unwrappedNil(entity: entity, model: model))".contains("NoteRecord"))
        }
        #expect(throws: FetchError.self) { try context.fetchCount(descriptor) }
        #expect(throws: FetchError.self) { try context.fetchIdentifiers(descriptor) }

        // Guarded, it is fine.
        let guarded = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.latitude != nil && $0.latitude! > 50 },
                                                  sortBy: [SortDescriptor(\.latitude)])
        #expect(try context.fetch(guarded).map(\.title) == ["Heron", "Straße", "Kingfisher"])

        // An unsaved object with a nil latitude is named too.
        let located = ModelContext(try kind.makeContainer([NoteRecord.self]))
        let somewhere = NoteRecord(title: "Somewhere")
        somewhere.latitude = 10
        located.insert(somewhere)
        try located.save()
        #expect(try located.fetch(descriptor).map(\.title) == ["Somewhere"])
        let nowhere = NoteRecord(title: "Nowhere")
        located.insert(nowhere)
        #expect(throws: FetchError.unwrappedNil(entity: "NoteRecord", model: nowhere.persistentModelID)) {
            try located.fetch(descriptor)
        }
    }

    // MARK: - Text search

    @Test("localizedStandardContains matches ignoring case and diacritics, in the store", arguments: StoreKind.allCases)
    func localizedStandardContains(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        for (query, titles) in [("creme", ["Crème brûlée"]), ("STRASSE", ["Straße"]), ("BRULEE", ["Crème brûlée"]),
                                ("her", ["Kingfisher", "Heron", "Heron"]), ("ALP", ["alpha"]), ("", fixture.notes.map(\.title)),
                                ("xyz", [])] {
            let predicate = #Predicate<NoteRecord> { $0.title.localizedStandardContains(query) }
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.createdAt)])
            #expect(try !context.explain(descriptor).evaluatedInMemory, "compiled for the store")
            #expect(Set(try context.fetch(descriptor).map(\.title)) == Set(titles), "\(query)")
            #expect(try context.fetch(descriptor).count == titles.count, "\(query)")
            let evaluated = try fixture.notes.filter { try predicate.evaluate($0) }.map(\.title)
            #expect(Set(evaluated) == Set(titles), "Predicate.evaluate agrees for \(query)")
        }
        // Seed 001's search: an empty query or a match in the title or the body.
        for (searchText, count) in [("", 7), ("loch", 0), ("about CREME", 1), ("kingfisher", 1)] {
            let predicate = #Predicate<NoteRecord> { record in
                searchText.isEmpty
                    || record.title.localizedStandardContains(searchText)
                    || record.body.localizedStandardContains(searchText)
            }
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
            #expect(try context.fetchCount(descriptor) == count, "\(searchText)")
            #expect(try context.fetchCount(descriptor) == fixture.notes.filter { try predicate.evaluate($0) }.count)
        }
        // On optional text through `??`.
        let place = #Predicate<NoteRecord> { ($0.placeName ?? "").localizedStandardContains("LOCH") }
        #expect(try context.fetch(FetchDescriptor(predicate: place)).map(\.title) == ["Kingfisher"])
        #expect(try !context.explain(FetchDescriptor(predicate: place)).evaluatedInMemory)
    }

    @Test("TextSearch.contains folds case and diacritics")
    func textSearchContains() {
        #expect(TextSearch.contains("Crème brûlée", "creme"))
        #expect(TextSearch.contains("Crème brûlée", "BRÛLÉE"))
        #expect(TextSearch.contains("Straße", "STRASSE"))
        #expect(TextSearch.contains("Straße", "straße"))
        #expect(TextSearch.contains("Ärger", "arg"))
        #expect(TextSearch.contains("cafe\u{301}", "café"), "canonically equivalent forms")
        #expect(TextSearch.contains("café", "CAFE\u{301}"))
        #expect(TextSearch.contains("Zürich", "zurich"))
        #expect(TextSearch.contains("anything", ""), "an empty query matches everything")
        #expect(TextSearch.contains("", ""))
        #expect(!TextSearch.contains("", "a"))
        #expect(!TextSearch.contains("Heron", "heron!"))
        #expect(!TextSearch.contains("Crème", "creme brulee"))
        #expect(TextSearch.contains("😀 smile", "😀"))
        #expect(TextSearch.contains(Substring("Kingfisher"), "FISH"), "any StringProtocol")
    }

    // MARK: - Relationships and identifiers

    @Test("Predicates on to-one relationships and identifiers compile", arguments: StoreKind.allCases)
    func relationshipPredicates(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let travel = fixture.travel
        let travelID = travel.persistentModelID
        let heronID = fixture["Heron", hour: 2].persistentModelID
        let sort = [SortDescriptor<NoteRecord>(\.createdAt)]
        let cases: [(String, Predicate<NoteRecord>, [String])] = [
            ("notebook == nil", #Predicate { $0.notebook == nil }, ["alpha@2", "Crème brûlée@3", "Heron@6"]),
            ("notebook != nil", #Predicate { $0.notebook != nil }, ["Kingfisher@1", "Heron@2", "Straße@4", "Budget@5"]),
            ("notebook == travel", #Predicate { $0.notebook == travel }, ["Kingfisher@1", "Heron@2"]),
            ("notebook?.persistentModelID == id", #Predicate { $0.notebook?.persistentModelID == travelID },
             ["Kingfisher@1", "Heron@2"]),
            ("persistentModelID == id", #Predicate { $0.persistentModelID == heronID }, ["Heron@2"]),
            ("persistentModelID != id && notebook == travel",
             #Predicate { $0.persistentModelID != heronID && $0.notebook == travel }, ["Kingfisher@1"]),
        ]
        for (name, predicate, expected) in cases {
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
            #expect(try !context.explain(descriptor).evaluatedInMemory, "\(name)")
            #expect(Fixture.labels(try context.fetch(descriptor)) == expected, "\(name)")
            #expect(Fixture.labels(try fixture.notes.filter { try predicate.evaluate($0) }) == expected,
                    "\(name): Swift agrees")
            #expect(Fixture.labels(try ModelContext(fixture.container).fetch(descriptor)) == expected,
                    "\(name): another context")
        }

        // Unsaved relationship changes count.
        fixture["alpha"].notebook = travel
        try context.delete(fixture["Kingfisher"])
        let inTravel = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.notebook == travel }, sortBy: sort)
        #expect(Fixture.labels(try context.fetch(inTravel)) == ["Heron@2", "alpha@2"])
        let viaID = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.notebook?.persistentModelID == travelID },
                                                sortBy: sort)
        #expect(Fixture.labels(try context.fetch(viaID)) == ["Heron@2", "alpha@2"])
        try context.save()
        #expect(Fixture.labels(try ModelContext(fixture.container).fetch(inTravel)) == ["Heron@2", "alpha@2"])

        // A nullified relationship matches `== nil` after the notebook is deleted.
        try context.delete(fixture.work)
        try context.save()
        let unfiled = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.notebook == nil }, sortBy: sort)
        #expect(Fixture.labels(try ModelContext(fixture.container).fetch(unfiled))
                == ["Crème brûlée@3", "Straße@4", "Budget@5", "Heron@6"])
    }

    // MARK: - Membership, text, logic

    @Test("Membership, string tests, !, || and ?? compile and match as in Swift", arguments: StoreKind.allCases)
    func membershipAndLogic(kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context
        let wanted = ["Heron", "Budget", "Nothing"]
        let sort = [SortDescriptor<NoteRecord>(\.createdAt)]
        let cases: [(String, Predicate<NoteRecord>, [String])] = [
            ("[a, b].contains(title)", #Predicate { wanted.contains($0.title) }, ["Heron@2", "Budget@5", "Heron@6"]),
            ("literal array", #Predicate { ["alpha", "Straße"].contains($0.title) }, ["alpha@2", "Straße@4"]),
            ("tags.contains(x)", #Predicate { $0.tags.contains("x") }, ["alpha@2", "Budget@5"]),
            ("title.contains", #Predicate { $0.title.contains("er") }, ["Heron@2", "Kingfisher@1", "Heron@6"]),
            ("title.starts(with:)", #Predicate { $0.title.starts(with: "He") }, ["Heron@2", "Heron@6"]),
            ("case matters to starts(with:)", #Predicate { $0.title.starts(with: "he") }, []),
            ("!", #Predicate { !$0.isPinned }, ["Heron@2", "alpha@2", "Straße@4", "Heron@6"]),
            ("! of a compound", #Predicate { !($0.isPinned || $0.latitude == nil) }, ["Heron@2", "alpha@2", "Straße@4"]),
            ("||", #Predicate { $0.title == "alpha" || $0.tags.contains("recipe") }, ["alpha@2", "Crème brûlée@3"]),
            ("??", #Predicate { ($0.latitude ?? 0) > 1 }, ["Kingfisher@1", "Heron@2", "alpha@2", "Straße@4"]),
            ("?? with a default that matches", #Predicate { ($0.latitude ?? 100) > 52 },
             ["Kingfisher@1", "Crème brûlée@3", "Straße@4", "Budget@5", "Heron@6"]),
            ("optional ==", #Predicate { $0.placeName == "Berlin" }, ["Straße@4"]),
            ("optional != includes nil", #Predicate { $0.placeName != "Berlin" },
             ["Kingfisher@1", "Heron@2", "alpha@2", "Crème brûlée@3", "Budget@5", "Heron@6"]),
            ("Bool == false", #Predicate { $0.isPinned == false && $0.tags.contains("bird") }, ["Heron@2"]),
        ]
        for (name, predicate, expected) in cases {
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
            #expect(try !context.explain(descriptor).evaluatedInMemory, "\(name)")
            let found = Fixture.labels(try context.fetch(descriptor))
            #expect(Set(found) == Set(expected) && found.count == expected.count, "\(name): \(found)")
            let swift = Fixture.labels(try fixture.notes.filter { try predicate.evaluate($0) })
            #expect(Set(swift) == Set(found) && swift.count == found.count, "\(name): Swift agrees")
        }
    }
}
