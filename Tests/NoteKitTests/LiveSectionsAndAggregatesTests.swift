import Foundation
import NoteKitTestSupport
import Observation
import Synchronization
import Testing
@testable import NoteKit

/// Whether the observation of `read` fires within the deadline after `change`.
@MainActor
private func fires(_ read: @escaping () -> Void, after change: () throws -> Void) async rethrows -> Bool {
    let fired = Mutex(false)
    withObservationTracking(read) { fired.withLock { $0 = true } }
    try change()
    return await eventually { fired.withLock { $0 } }
}

/// The sections of `query` as titles and the titles of their notes.
@MainActor
private func layout(_ query: LiveQuery<QueryNote>) -> [String: [String]] {
    Dictionary(uniqueKeysWithValues: query.sections.map { ($0.title, $0.map(\.title)) })
}

private func note(_ title: String, rating: Int = 0, pinned: Bool = false, folder: QueryFolder? = nil,
                  at seconds: Double = 0) -> QueryNote {
    let note = QueryNote()
    note.title = title
    note.rating = rating
    note.isPinned = pinned
    note.folder = folder
    note.createdAt = Date(timeIntervalSinceReferenceDate: seconds)
    return note
}

private let queryModels: [any PersistentModel.Type] = [QueryFolder.self, QueryNote.self, QueryAttachment.self]

@Suite("Live query sections: results grouped by a key path's value, kept current")
@MainActor
struct LiveSectionTests {
    @Test("sectionBy a String attribute: sections in the key's order, each sorted by the descriptor, O(1) by title",
          arguments: StoreKind.allCases)
    func sectionsByAttribute(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let context = container.mainContext
        context.autosaveEnabled = false
        for (title, body, at) in [("b1", "Beta", 1.0), ("a1", "Alpha", 2), ("b2", "Beta", 3), ("a2", "Alpha", 4)] {
            let made = note(title, at: at)
            made.body = body
            context.insert(made)
        }
        try context.save()
        let query = LiveQuery(FetchDescriptor<QueryNote>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)]),
                              sectionBy: \.body, in: context)
        #expect(query.sections.titles == ["Alpha", "Beta"], "the section key path sorts first")
        #expect(query.sections.map { $0.map(\.title) } == [["a2", "a1"], ["b2", "b1"]])
        #expect(query.results.map(\.title) == ["a2", "a1", "b2", "b1"])
        #expect(query.sections[sectionTitle: "Beta"]?.map(\.title) == ["b2", "b1"])
        #expect(query.sections[sectionTitle: "Gamma"] == nil)
        #expect(query.sections[1].id == "Beta")
        #expect(query.sections[1][0].title == "b2", "a section is indexed from 0")

        // A save that moves a note to a new section, and one that empties a section.
        let other = ModelContext(container)
        let moved = try #require(try other.fetch(FetchDescriptor<QueryNote>(predicate: #Predicate { $0.title == "b1" }))
            .first)
        moved.body = "Gamma"
        #expect(try await fires({ _ = query.sections }, after: { try other.save() }))
        #expect(layout(query) == ["Alpha": ["a2", "a1"], "Beta": ["b2"], "Gamma": ["b1"]])
        try other.delete(model: QueryNote.self, where: #Predicate { $0.body == "Alpha" })
        #expect(try await fires({ _ = query.sections }, after: { try other.save() }))
        #expect(query.sections.titles == ["Beta", "Gamma"])
    }

    @Test("sectionBy a path through a to-one relationship: nil is the untitled section, a rename regroups",
          arguments: StoreKind.allCases)
    func sectionsThroughRelationship(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let context = ModelContext(container)
        let work = QueryFolder("Work")
        let home = QueryFolder("Home")
        context.insert(work)
        context.insert(home)
        context.insert(note("w1", folder: work, at: 1))
        context.insert(note("h1", folder: home, at: 2))
        context.insert(note("loose", at: 3))
        context.insert(note("w2", folder: work, at: 4))
        try context.save()

        let query = LiveQuery(FetchDescriptor<QueryNote>(sortBy: [SortDescriptor(\.createdAt)]),
                              sectionBy: \.folder?.name, in: ModelContext(container))
        #expect(try !query.context.explain(FetchDescriptor<QueryNote>(sortBy: [SortDescriptor(\.folder?.name)]))
            .evaluatedInMemory, "the section's sort runs in the store")
        #expect(query.sections.titles == ["", "Home", "Work"], "nil sorts first, titled \"\"")
        #expect(layout(query) == ["": ["loose"], "Home": ["h1"], "Work": ["w1", "w2"]])

        // Only a folder changes: the notes' sections still change, so the query fetches again.
        work.name = "Archive"
        #expect(try await fires({ _ = query.sections }, after: { try context.save() }))
        #expect(query.sections.titles == ["", "Archive", "Home"])
        #expect(layout(query)["Archive"] == ["w1", "w2"])
    }

    @Test("A sort that already starts with the section key path keeps its order; no sectionBy means no sections")
    func sortStartingWithTheKey() throws {
        let container = try StoreKind.inMemory.makeContainer(queryModels)
        let context = ModelContext(container)
        for (title, body) in [("x", "A"), ("y", "B"), ("z", "C")] {
            let made = note(title)
            made.body = body
            context.insert(made)
        }
        try context.save()
        let reversed = LiveQuery(sort: [SortDescriptor(\QueryNote.body, order: .reverse)], sectionBy: \.body,
                                 in: context)
        #expect(reversed.sections.titles == ["C", "B", "A"])
        let filtered = LiveQuery(filter: #Predicate<QueryNote> { $0.body != "B" }, sectionBy: \.folder?.name,
                                 in: context)
        #expect(filtered.sections.titles == [""])
        #expect(filtered.sections[sectionTitle: ""]?.count == 2)
        let plain = LiveQuery<QueryNote>(in: context)
        #expect(plain.sections.isEmpty)
        #expect(plain.results.count == 3)
    }

    @Test("Sections of results whose titles are not contiguous group each title's elements at its first appearance")
    func nonContiguousTitles() throws {
        let container = try StoreKind.inMemory.makeContainer(queryModels)
        let context = ModelContext(container)
        let notes = ["a", "b", "c", "d", "e"].map { note($0) }
        for made in notes { context.insert(made) }
        let titles = ["a": "odd", "b": "even", "c": "odd", "d": "even", "e": "odd"]
        let sections = SectionedResults(notes) { titles[$0.title] ?? "" }
        #expect(sections.titles == ["odd", "even"])
        #expect(sections.map { $0.map(\.title) } == [["a", "c", "e"], ["b", "d"]])
        #expect(sections[sectionTitle: "even"]?.count == 2)
        #expect(SectionedResults<QueryNote, String>().isEmpty)
    }
}

/// A model actor that keeps a live query and a live count of its own, current off the main actor.
private actor NotesBackground: ModelActor {
    nonisolated let modelContainer: ModelContainer
    nonisolated let modelExecutor: any ModelExecutor
    private var pinned: LiveQuery<QueryNote>?
    private var count: LiveAggregate<QueryNote, Int>?
    /// Where each observed change of the live objects was delivered: (on the actor's executor, on the main thread).
    nonisolated let deliveries = Mutex<[(onExecutor: Bool, onMainThread: Bool)]>([])

    init(modelContainer: ModelContainer) {
        self.modelContainer = modelContainer
        modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
    }

    func start() throws {
        pinned = LiveQuery(filter: #Predicate { $0.isPinned }, sort: [SortDescriptor(\.title)], in: modelContext)
        count = try LiveAggregate(FetchDescriptor<QueryNote>(), .count, in: modelContext)
        observe()
    }

    private func observe() {
        let executor = modelExecutor as? DefaultSerialModelExecutor
        withObservationTracking {
            _ = pinned?.results
            _ = count?.value
        } onChange: {
            self.deliveries.withLock { $0.append((executor?.isCurrent ?? false, Thread.isMainThread)) }
            Task { await self.observe() }
        }
    }

    func state() -> (pinned: [String], count: Int) {
        (pinned?.results.map(\.title) ?? [], count?.value ?? -1)
    }
}

@Suite("Live objects on a background actor: a model actor's live query and count stay current off the main actor")
struct LiveBackgroundTests {
    @Test("A ModelActor's live query and count follow saves of other contexts, computed on the actor's executor",
          arguments: StoreKind.allCases)
    func backgroundActor(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let background = NotesBackground(modelContainer: container)
        try await background.start()
        #expect(await background.state() == ([], 0))

        let writer = ModelContext(container)
        writer.insert(note("Pinned B", pinned: true))
        writer.insert(note("Pinned A", pinned: true))
        writer.insert(note("Loose"))
        try writer.save()
        var reached = false
        for _ in 0 ..< 1_500 where !reached {
            reached = await background.state() == (["Pinned A", "Pinned B"], 3)
            if !reached { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(reached, "the actor's live objects caught up with the save")
        let deliveries = background.deliveries.withLock { $0 }
        #expect(!deliveries.isEmpty)
        #expect(deliveries.allSatisfy { $0.onExecutor && !$0.onMainThread },
                "recomputed on the actor's executor, never on the main thread")
    }
}

@Suite("Live aggregates: counts and aggregates kept current without fetching objects")
@MainActor
struct LiveAggregateTests {
    @Test("A live count follows inserts and deletes of matching objects, and ignores other entities",
          arguments: StoreKind.allCases)
    func liveCount(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let writer = ModelContext(container)
        writer.insert(note("one", pinned: true))
        writer.insert(note("two"))
        try writer.save()

        let pinned = try LiveAggregate(FetchDescriptor<QueryNote>(predicate: #Predicate { $0.isPinned }), .count,
                                       in: ModelContext(container))
        #expect(pinned.value == 1)
        writer.insert(note("three", pinned: true))
        #expect(try await fires({ _ = pinned.value }, after: { try writer.save() }))
        #expect(pinned.value == 2)

        let computations = pinned.computations
        writer.insert(QueryFolder("Unrelated"))
        try writer.save()
        try await Task.sleep(for: .milliseconds(300))
        #expect(pinned.computations == computations, "a folder's insert cannot change a count of notes")

        try writer.delete(model: QueryNote.self, where: #Predicate { $0.title == "one" })
        #expect(try await fires({ _ = pinned.value }, after: { try writer.save() }))
        #expect(pinned.value == 1)
    }

    @Test("Several aggregates come as a tuple, typed as their attributes, and follow updates",
          arguments: StoreKind.allCases)
    func liveTuple(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let writer = ModelContext(container)
        let low = note("low", rating: 2)
        writer.insert(low)
        writer.insert(note("high", rating: 9))
        try writer.save()
        let ratings = try LiveAggregate(FetchDescriptor<QueryNote>(), .count, .min(\.rating), .max(\.rating),
                                        .sum(\.rating), in: ModelContext(container))
        #expect(ratings.value == (2, 2, 9, 11))
        low.rating = 12
        #expect(try await fires({ _ = ratings.value }, after: { try writer.save() }))
        #expect(ratings.value == (2, 9, 12, 21))
    }

    @Test("A grouped live count by a folder's name regroups when a folder is renamed, though no note changed",
          arguments: StoreKind.allCases)
    func liveGroups(kind: StoreKind) async throws {
        let container = try kind.makeContainer(queryModels)
        let writer = ModelContext(container)
        let work = QueryFolder("Work")
        writer.insert(work)
        writer.insert(note("a", folder: work))
        writer.insert(note("b", folder: work))
        writer.insert(note("c"))
        try writer.save()
        let perFolder = try LiveAggregate(FetchDescriptor<QueryNote>(), groupedBy: \.folder?.name, .count,
                                          in: ModelContext(container))
        #expect(perFolder.value.map(\.key) == [nil, "Work"])
        #expect(perFolder.value.map(\.values) == [1, 2])

        work.name = "Archive"
        #expect(try await fires({ _ = perFolder.value }, after: { try writer.save() }))
        #expect(perFolder.value.map(\.key) == [nil, "Archive"])

        perFolder.descriptor = FetchDescriptor(predicate: #Predicate { $0.folder != nil })
        #expect(perFolder.value.map(\.key) == ["Archive"], "a new descriptor computes at once")
    }

    @Test("A failed computation keeps the last value and reports the error; the first failure throws")
    func failures() throws {
        let container = try StoreKind.inMemory.makeContainer(queryModels)
        let context = ModelContext(container)
        context.insert(note("a"))
        try context.save()
        #expect(throws: FetchError.self) {
            _ = try LiveAggregate(FetchDescriptor<QueryNote>(), .max(\.ratingTwice), in: context)
        }
        let count = try LiveAggregate(FetchDescriptor<QueryNote>(), .count, in: context)
        try container.close()
        count.recompute()
        #expect(count.fetchError as? ModelContainerError == .closed(store: container.configuration.name))
        #expect(count.value == 1)
    }

    @Test("A live aggregate nobody references is freed, and its subscription with it")
    func freed() throws {
        let container = try StoreKind.inMemory.makeContainer(queryModels)
        weak var released: LiveAggregate<QueryNote, Int>?
        do {
            let count = try LiveAggregate(FetchDescriptor<QueryNote>(), .count, in: ModelContext(container))
            released = count
        }
        #expect(released == nil)
    }
}
