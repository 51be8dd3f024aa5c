import Foundation
import Observation
import Synchronization

/// The results of a ``FetchDescriptor`` on a context, kept up to date: an `Observable` object that fetches again
/// whenever a save that can change the results lands (SwiftData's `@Query`, and the `ResultsObserver` behind it,
/// for code without SwiftUI).
///
/// Seed 003's `NotesView` lists every note, newest first, and updates by itself when notes are inserted, changed
/// or deleted anywhere in the app:
///
/// ```swift
/// @MainActor final class NotesView {
///     let notes: LiveQuery<Note>
///     init(container: ModelContainer) {
///         // SwiftData: @Query(sort: \Note.createdAt, order: .reverse) private var notes: [Note]
///         notes = LiveQuery(sort: \Note.createdAt, order: .reverse, in: container.mainContext)
///     }
///     func render() {
///         withObservationTracking {
///             for note in notes.results { print(note.title) }
///         } onChange: {
///             Task { @MainActor in self.render() }     // the list changed: draw it again
///         }
///     }
/// }
/// ```
///
/// Seed 003's `NoteList(search:)` builds its query from the search text, as a SwiftUI view does in its
/// initializer:
///
/// ```swift
/// init(search: String, context: ModelContext) {
///     let filter: Predicate<Note>? = search.isEmpty
///         ? nil
///         : #Predicate { $0.title.localizedStandardContains(search) }
///     notes = LiveQuery(filter: filter,
///                       sort: [SortDescriptor(\Note.isPinned, order: .reverse),
///                              SortDescriptor(\Note.createdAt, order: .reverse)],
///                       in: context)
/// }
/// ```
///
/// Why a new name rather than `Query`: SwiftData's `@Query` is a SwiftUI property wrapper that finds its context in
/// the environment; this is a plain object given its context, used through ``results``. A same-named type that
/// behaved differently would mislead; `LiveQuery` says what it is: a query whose results stay current.
///
/// **What triggers a fetch.** Every transaction committed to the store: by any context of any container on it, and
/// by another process once the file store has picked it up (its `refresh()`, or a read with
/// `automaticRefreshInterval` set). A transaction fetches again only when it inserts, updates or deletes an object
/// of the descriptor's entity or, when the predicate or the sort reads through relationships (or is evaluated on
/// objects, ``ModelContext/explain(_:)`` says `evaluatedInMemory`, which may), of an entity reachable from it through
/// relationships. One fetch covers every transaction committed before it, so a burst of saves costs one fetch. The
/// context's own unsaved changes count once saved (the main context autosaves shortly after a change).
///
/// **Sections.** Give `sectionBy` a key path to a `String` (or a `String?`, nil meaning the section titled "") and
/// ``sections`` groups the results by its value, as SwiftData's `@Query(sort:sectionBy:)` and `ResultsObserver` do.
/// The key path is prepended to the sort (unless the sort already starts with it), so each section's results are
/// contiguous; sections come in the order of that sort, and within a section the descriptor's own sort holds:
///
/// ```swift
/// // Notes listed under their folder's name, newest first within a folder.
/// let byFolder = LiveQuery(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)]),
///                          sectionBy: \.folder?.name, in: container.mainContext)
/// for section in byFolder.sections { print(section.title.isEmpty ? "Unfiled" : section.title, section.count) }
/// ```
///
/// The sort by a path through a to-one relationship runs in the store (see *Fetching models*).
///
/// **Actor and cost.** A live query belongs to the actor it is made on (the `isolation` parameter, which defaults to
/// the caller's actor): the main actor for ``ModelContainer/mainContext``, or a ``ModelActor`` (or any other actor)
/// that owns the context, whose live queries then keep their results current off the main actor. Use it, and its
/// context, only on that actor; the compiler checks it, and refuses to make one outside any actor. Each relevant
/// transaction costs one ``ModelContext/fetch(_:)`` of the descriptor on that actor (what ``ModelContext/explain(_:)``
/// shows, plus one object per result not loaded yet); an irrelevant one costs a look-up per changed object. Objects
/// already in the results are refreshed in place, so observers of their properties fire too. The subscription ends
/// when the live query is released. For a live count or aggregate, see ``LiveAggregate``.
///
/// ## Topics
/// - ``init(_:in:isolation:)``
/// - ``init(filter:sort:in:isolation:)``
/// - ``init(sort:order:in:isolation:)``
/// - ``init(_:sectionBy:in:isolation:)-(_,KeyPath<Model,String>Sendable,_,_)``
/// - ``init(_:sectionBy:in:isolation:)-(_,KeyPath<Model,String?>Sendable,_,_)``
/// - ``init(filter:sort:sectionBy:in:isolation:)-(_,_,KeyPath<Model,String>Sendable,_,_)``
/// - ``init(filter:sort:sectionBy:in:isolation:)-(_,_,KeyPath<Model,String?>Sendable,_,_)``
/// - ``results``
/// - ``sections``
/// - ``fetchError``
/// - ``descriptor``
/// - ``refetch()``
public final class LiveQuery<Model: PersistentModel>: Observable, LiveFollowing {
    /// The context the query fetches with.
    public let context: ModelContext

    /// What the query fetches. Changing it fetches again at once. With `sectionBy`, the fetch sorts by the section
    /// key path first, then by this descriptor's sort.
    public var descriptor: FetchDescriptor<Model> {
        didSet {
            relevantEntities = Self.relevantEntities(descriptor, section: section, context: context)
            refetch()
        }
    }

    /// The objects that match ``descriptor``, in its order (after the section key path's, with `sectionBy`), as of
    /// the last fetch. Reading it inside `withObservationTracking` makes the observer fire when a fetch replaces the
    /// results.
    public var results: [Model] {
        registrar.access(self, keyPath: \.results)
        return storedResults
    }

    /// ``results`` grouped by the `sectionBy` key path's value, in the order the titles first appear; empty for a
    /// live query made without `sectionBy` (as SwiftData's `Query.sections`). Observable like ``results``: a fetch
    /// replaces both.
    ///
    /// - Complexity: O(1); the sections are grouped once per fetch, O(*n*) for *n* results.
    public var sections: SectionedResults<Model, String> {
        registrar.access(self, keyPath: \.results)
        return storedSections
    }

    /// Why the last fetch failed (the container was closed, a predicate evaluated on objects threw), or nil when it
    /// succeeded; ``results`` then keep what the last successful fetch returned. Observable like ``results``.
    public var fetchError: (any Error)? {
        registrar.access(self, keyPath: \.fetchError)
        return storedFetchError
    }

    /// The section key path: the sort that goes first and how an object's title is read.
    private struct Section {
        var keyPath: PartialKeyPath<Model>
        /// One descriptor. An array: a `SortDescriptor` held inline makes an optimized build name the layout of a
        /// type Linux's Foundation does not export (`SortDescriptor.AllowedComparison`), and fail to link.
        var sort: [SortDescriptor<Model>]
        var title: (Model) -> String
    }

    private var storedResults: [Model] = []
    private var storedSections = SectionedResults<Model, String>()
    private var storedFetchError: (any Error)?
    private let registrar = ObservationRegistrar()
    private let section: Section?
    /// The entities whose changes can change the results.
    private(set) var relevantEntities: Set<String>
    /// The transaction number the last fetch saw: transactions up to it are in the results already.
    private(set) var computedTransactionNumber: UInt64 = 0
    private let subscription = Mutex<Task<Void, Never>?>(nil)
    /// How many fetches the query made (for tests that check a transaction did not cause one).
    private(set) var fetches = 0

    private init(_ descriptor: FetchDescriptor<Model>, section: Section?, in context: ModelContext,
                 isolation: isolated any Actor) {
        // Subscribed before the first fetch, so that nothing committed in between is missed.
        let transactions = context.store.transactions()
        self.context = context
        self.descriptor = descriptor
        self.section = section
        relevantEntities = Self.relevantEntities(descriptor, section: section, context: context)
        refetch()
        let task = followTransactions(self, transactions, isolation: isolation)
        subscription.withLock { $0 = task }
    }

    /// A live query for `descriptor` on `context`, belonging to `isolation` (the caller's actor); fetches at once.
    ///
    /// - Complexity: one fetch now, then one per relevant transaction (see the type's documentation).
    public convenience init(_ descriptor: FetchDescriptor<Model>, in context: ModelContext,
                            isolation: isolated any Actor = #isolation) {
        self.init(descriptor, section: nil, in: context, isolation: isolation)
    }

    /// A live query with SwiftData `Query(filter:sort:)`'s parameters.
    public convenience init(filter: Predicate<Model>? = nil, sort: [SortDescriptor<Model>] = [],
                            in context: ModelContext, isolation: isolated any Actor = #isolation) {
        self.init(FetchDescriptor(predicate: filter, sortBy: sort), section: nil, in: context, isolation: isolation)
    }

    /// A live query sorted by one key path, as SwiftData's `Query(sort:order:)`.
    public convenience init<Value: Comparable>(sort keyPath: KeyPath<Model, Value> & Sendable,
                                               order: SortOrder = .forward, in context: ModelContext,
                                               isolation: isolated any Actor = #isolation) {
        self.init(FetchDescriptor(sortBy: [SortDescriptor(keyPath, order: order)]), section: nil, in: context,
                  isolation: isolation)
    }

    /// A live query whose ``sections`` group the results by `sectionBy`, a `String` attribute or one reached through
    /// to-one relationships (SwiftData's `@Query(sort:sectionBy:)`); fetches at once.
    ///
    /// - Complexity: one fetch now, then one per relevant transaction; the grouping is O(*n*) per fetch.
    public convenience init(_ descriptor: FetchDescriptor<Model>, sectionBy: KeyPath<Model, String> & Sendable,
                            in context: ModelContext, isolation: isolated any Actor = #isolation) {
        let section = Section(keyPath: sectionBy, sort: [SortDescriptor(sectionBy)], title: { $0[keyPath: sectionBy] })
        self.init(descriptor, section: section, in: context, isolation: isolation)
    }

    /// A live query whose ``sections`` group the results by an optional `String`, nil titled "" (as SwiftData's
    /// `@Query(sectionBy:)` does); `\.folder?.name` sections notes by their folder's name, the unfiled ones first.
    ///
    /// - Complexity: as ``init(_:sectionBy:in:isolation:)-(_,KeyPath<Model,String>Sendable,_,_)``.
    public convenience init(_ descriptor: FetchDescriptor<Model>, sectionBy: KeyPath<Model, String?> & Sendable,
                            in context: ModelContext, isolation: isolated any Actor = #isolation) {
        let section = Section(keyPath: sectionBy, sort: [SortDescriptor(sectionBy)],
                              title: { $0[keyPath: sectionBy] ?? "" })
        self.init(descriptor, section: section, in: context, isolation: isolation)
    }

    /// A sectioned live query with SwiftData `Query(filter:sort:sectionBy:)`'s parameters.
    public convenience init(filter: Predicate<Model>? = nil, sort: [SortDescriptor<Model>] = [],
                            sectionBy: KeyPath<Model, String> & Sendable, in context: ModelContext,
                            isolation: isolated any Actor = #isolation) {
        self.init(FetchDescriptor(predicate: filter, sortBy: sort), sectionBy: sectionBy, in: context,
                  isolation: isolation)
    }

    /// A sectioned live query with SwiftData `Query(filter:sort:sectionBy:)`'s parameters, by an optional `String`
    /// (nil titled "").
    public convenience init(filter: Predicate<Model>? = nil, sort: [SortDescriptor<Model>] = [],
                            sectionBy: KeyPath<Model, String?> & Sendable, in context: ModelContext,
                            isolation: isolated any Actor = #isolation) {
        self.init(FetchDescriptor(predicate: filter, sortBy: sort), sectionBy: sectionBy, in: context,
                  isolation: isolation)
    }

    deinit {
        subscription.withLock { $0?.cancel() }
    }

    /// Fetches again now, whatever was committed.
    public func refetch() {
        recompute()
    }

    func recompute() {
        fetches += 1
        computedTransactionNumber = context.store.transactionNumber
        do {
            let fetched = try context.fetch(Self.sectioned(descriptor, section))
            registrar.withMutation(of: self, keyPath: \.results) {
                storedResults = fetched
                if let section { storedSections = SectionedResults(fetched, title: section.title) }
            }
            if storedFetchError != nil {
                registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = nil }
            }
        } catch {
            registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = error }
        }
    }

    /// `descriptor` sorted by the section key path first, unless its sort already starts with it.
    private static func sectioned(_ descriptor: FetchDescriptor<Model>, _ section: Section?) -> FetchDescriptor<Model> {
        guard let section, descriptor.sortBy.first?.keyPath != section.keyPath else { return descriptor }
        var sorted = descriptor
        sorted.sortBy.insert(contentsOf: section.sort, at: 0)
        return sorted
    }

    private static func relevantEntities(_ descriptor: FetchDescriptor<Model>, section: Section?,
                                         context: ModelContext) -> Set<String> {
        var entities = LiveRelevance.entities(read: descriptor, context: context)
        if let section {
            entities.formUnion(LiveRelevance.entities(read: [section.keyPath], of: Model.self, context: context))
        }
        return entities
    }
}

