import Foundation
import NoteKitFileStore
import NoteKitTestSupport
import Observation
import Synchronization
import Testing
@testable import NoteKit

/// Seed 003's `NotesView`: every note, newest first (`@Query(sort: \Note.createdAt, order: .reverse)`).
@MainActor
private final class NotesView {
    let notes: LiveQuery<TutorialNote>
    init(context: ModelContext) {
        notes = LiveQuery(sort: \TutorialNote.createdAt, order: .reverse, in: context)
    }
    var titles: [String] { notes.results.map(\.title) }
}

/// Seed 003's `NoteList(search:)`: the query is built from the search text, pinned notes first, then newest.
@MainActor
private final class NoteList {
    let notes: LiveQuery<TutorialNote>
    init(search: String, context: ModelContext) {
        let filter: Predicate<TutorialNote>? = search.isEmpty
            ? nil
            : #Predicate { $0.title.localizedStandardContains(search) }
        notes = LiveQuery(filter: filter,
                          sort: [SortDescriptor(\TutorialNote.isPinned, order: .reverse),
                                 SortDescriptor(\TutorialNote.createdAt, order: .reverse)],
                          in: context)
    }
    var titles: [String] { notes.results.map(\.title) }
}

@Suite("Live query: results that fetch again when a save that can change them lands")
@MainActor
struct LiveQueryTests {
    private let day = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// Whether the observation of `read` fires within the deadline after `change`.
    private func fires(_ read: @escaping () -> Void, after change: () throws -> Void) async rethrows -> Bool {
        let fired = Mutex(false)
        withObservationTracking(read) { fired.withLock { $0 = true } }
        try change()
        return await eventually { fired.withLock { $0 } }
    }

    @Test("NotesView: inserts, changes and deletes saved by another context update the results, newest first",
          arguments: StoreKind.allCases)
    func notesView(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let view = NotesView(context: container.mainContext)
        #expect(view.titles.isEmpty)

        let other = ModelContext(container)
        let first = TutorialNote(title: "First", createdAt: day)
        other.insert(first)
        other.insert(TutorialNote(title: "Second", createdAt: day + 60))
        #expect(try await fires({ _ = view.notes.results }, after: { try other.save() }), "an insert fires")
        #expect(view.titles == ["Second", "First"])

        first.title = "First, edited"
        #expect(try await fires({ _ = view.notes.results }, after: { try other.save() }), "a change fires")
        #expect(view.titles == ["Second", "First, edited"])

        try other.delete(first)
        #expect(try await fires({ _ = view.notes.results }, after: { try other.save() }), "a delete fires")
        #expect(view.titles == ["Second"])
    }

    @Test("NoteList(search:): only matching notes, and a change that makes a note match brings it in",
          arguments: StoreKind.allCases)
    func noteListSearch(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let other = ModelContext(container)
        let groceries = TutorialNote(title: "Groceries", createdAt: day)
        other.insert(groceries)
        other.insert(TutorialNote(title: "Crème brûlée recipe", createdAt: day + 60))
        try other.save()

        let list = NoteList(search: "creme", context: container.mainContext)
        let everything = NoteList(search: "", context: container.mainContext)
        #expect(list.titles == ["Crème brûlée recipe"])
        #expect(everything.titles == ["Crème brûlée recipe", "Groceries"])

        groceries.title = "Groceries: crème fraîche"
        #expect(try await fires({ _ = list.notes.results }, after: { try other.save() }))
        #expect(list.titles == ["Crème brûlée recipe", "Groceries: crème fraîche"])
        #expect(await eventually { everything.titles == ["Crème brûlée recipe", "Groceries: crème fraîche"] })

        // Pinning the older note brings it first: the seed's sort, pinned then newest, in the store.
        groceries.isPinned = true
        #expect(try await fires({ _ = list.notes.results }, after: { try other.save() }))
        #expect(list.titles == ["Groceries: crème fraîche", "Crème brûlée recipe"])
        #expect(!(try container.mainContext.explain(list.notes.descriptor).evaluatedInMemory))
    }

    @Test("The main context's own autosaved insert reaches its live query", arguments: StoreKind.allCases)
    func ownAutosave(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let view = NotesView(context: container.mainContext)
        #expect(await fires({ _ = view.notes.results }, after: {
            container.mainContext.insert(TutorialNote(title: "New note"))
        }))
        #expect(view.titles == ["New note"])
    }

    @Test("A save of another entity does not fetch again; one whose predicate reads through a relationship does",
          arguments: StoreKind.allCases)
    func onlyRelevantSaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let other = ModelContext(container)
        let work = TutorialFolder(name: "Work")
        other.insert(work)
        other.insert(TutorialNote(title: "Agenda", folder: work))
        try other.save()

        let view = NotesView(context: container.mainContext)
        let fetches = view.notes.fetches
        let unrelated = ModelContext(container)
        unrelated.insert(TutorialFolder(name: "Home"))
        try unrelated.save()
        try await Task.sleep(for: .milliseconds(500))
        #expect(view.notes.fetches == fetches, "a folder's insert cannot change a list of notes")
        unrelated.insert(TutorialNote(title: "Marker", createdAt: .distantPast))
        #expect(try await fires({ _ = view.notes.results }, after: { try unrelated.save() }))
        #expect(view.titles.last == "Marker")
        #expect(view.notes.fetches == fetches + 1)

        // A predicate that reads through a relationship (the folder's name, in the store) fetches again when a folder
        // changes.
        let inWork = LiveQuery(filter: #Predicate<TutorialNote> { $0.folder?.name == "Work" }, in: container.mainContext)
        #expect(try !container.mainContext.explain(inWork.descriptor).evaluatedInMemory)
        #expect(inWork.results.map(\.title) == ["Agenda"])
        work.name = "Archive"
        #expect(try await fires({ _ = inWork.results }, after: { try other.save() }))
        #expect(inWork.results.isEmpty)
    }

    @Test("A commit of another process reaches the live query once the file store picks it up")
    func otherProcess() async throws {
        let url = TemporaryStores.newURL()
        let writer = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                        configurations: FileStoreConfiguration(url: url))
        var readOnly = FileStoreConfiguration(url: url, mode: .readOnly)
        readOnly.automaticRefreshInterval = nil
        let reader = try ModelContainer(for: TutorialNote.self, TutorialFolder.self, configurations: readOnly)
        let view = NotesView(context: ModelContext(reader))

        let context = ModelContext(writer)
        context.insert(TutorialNote(title: "From elsewhere"))
        try context.save()
        #expect(view.titles.isEmpty, "not picked up yet")
        #expect(try await fires({ _ = view.notes.results }, after: {
            try #require(reader.store as? FileStore).refresh()
        }))
        #expect(view.titles == ["From elsewhere"])
    }

    @Test("Changing the descriptor fetches at once; a closed container is reported in fetchError")
    func descriptorAndErrors() throws {
        let container = try StoreKind.inMemory.makeContainer([TutorialNote.self, TutorialFolder.self])
        let context = ModelContext(container)
        context.insert(TutorialNote(title: "A"))
        context.insert(TutorialNote(title: "B"))
        try context.save()
        let query = LiveQuery<TutorialNote>(in: context)
        #expect(query.results.count == 2)
        query.descriptor = FetchDescriptor(predicate: #Predicate { $0.title == "B" })
        #expect(query.results.map(\.title) == ["B"])
        #expect(query.fetchError == nil)

        try container.close()
        query.refetch()
        #expect(query.fetchError as? ModelContainerError == .closed(store: container.configuration.name))
        #expect(query.results.map(\.title) == ["B"], "the last results stay")
    }

    @Test("A live query nobody references is freed, and its subscription with it")
    func freed() throws {
        let container = try StoreKind.inMemory.makeContainer([TutorialNote.self, TutorialFolder.self])
        weak var released: LiveQuery<TutorialNote>?
        do {
            let query = LiveQuery<TutorialNote>(in: ModelContext(container))
            released = query
        }
        #expect(released == nil)
    }
}
