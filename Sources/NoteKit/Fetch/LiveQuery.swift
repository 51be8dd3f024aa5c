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
/// **Actor and cost.** A live query runs on the main actor: use it with ``ModelContainer/mainContext`` (or a context
/// used only on the main actor). Each relevant transaction costs one ``ModelContext/fetch(_:)`` of the descriptor
/// on the main actor (what ``ModelContext/explain(_:)`` shows, plus one object per result not loaded yet); an
/// irrelevant one costs a look-up per changed object. Objects already in the results are refreshed in place, so
/// observers of their properties fire too. The subscription ends when the live query is released.
///
/// ## Topics
/// - ``init(_:in:)``
/// - ``init(filter:sort:in:)``
/// - ``init(sort:order:in:)``
/// - ``results``
/// - ``fetchError``
/// - ``descriptor``
/// - ``refetch()``
@MainActor
public final class LiveQuery<Model: PersistentModel>: Observable {
    /// The context the query fetches with.
    public let context: ModelContext

    /// What the query fetches. Changing it fetches again at once.
    public var descriptor: FetchDescriptor<Model> {
        didSet {
            relevantEntities = Self.entities(read: descriptor, context: context)
            refetch()
        }
    }

    /// The objects that match ``descriptor``, in its order, as of the last fetch. Reading it inside
    /// `withObservationTracking` makes the observer fire when a fetch replaces the results.
    public var results: [Model] {
        registrar.access(self, keyPath: \.results)
        return storedResults
    }

    /// Why the last fetch failed (the container was closed, a predicate evaluated on objects threw), or nil when it
    /// succeeded; ``results`` then keep what the last successful fetch returned. Observable like ``results``.
    public var fetchError: (any Error)? {
        registrar.access(self, keyPath: \.fetchError)
        return storedFetchError
    }

    private var storedResults: [Model] = []
    private var storedFetchError: (any Error)?
    private let registrar = ObservationRegistrar()
    /// The entities whose changes can change the results.
    private var relevantEntities: Set<String>
    /// The store generation the last fetch saw: transactions up to it are in the results already.
    private var fetchedGeneration: UInt64 = 0
    private let subscription = Mutex<Task<Void, Never>?>(nil)
    /// How many fetches the query made (for tests that check a transaction did not cause one).
    private(set) var fetches = 0

    /// A live query for `descriptor` on `context`; fetches at once.
    ///
    /// - Complexity: one fetch now, then one per relevant transaction (see the type's documentation).
    public init(_ descriptor: FetchDescriptor<Model>, in context: ModelContext) {
        // Subscribed before the first fetch, so that nothing committed in between is missed.
        let transactions = context.store.transactions()
        self.context = context
        self.descriptor = descriptor
        relevantEntities = Self.entities(read: descriptor, context: context)
        refetch()
        let task = Task { @MainActor [weak self] in
            for await record in transactions {
                guard let self else { return }
                self.receive(record)
            }
        }
        subscription.withLock { $0 = task }
    }

    /// A live query with SwiftData `Query(filter:sort:)`'s parameters.
    public convenience init(filter: Predicate<Model>? = nil, sort: [SortDescriptor<Model>] = [],
                            in context: ModelContext) {
        self.init(FetchDescriptor(predicate: filter, sortBy: sort), in: context)
    }

    /// A live query sorted by one key path, as SwiftData's `Query(sort:order:)`.
    public convenience init<Value: Comparable>(sort keyPath: KeyPath<Model, Value> & Sendable,
                                               order: SortOrder = .forward, in context: ModelContext) {
        self.init(FetchDescriptor(sortBy: [SortDescriptor(keyPath, order: order)]), in: context)
    }

    deinit {
        subscription.withLock { $0?.cancel() }
    }

    /// Fetches again now, whatever was committed.
    public func refetch() {
        fetches += 1
        fetchedGeneration = context.store.generation
        do {
            let fetched = try context.fetch(descriptor)
            registrar.withMutation(of: self, keyPath: \.results) { storedResults = fetched }
            if storedFetchError != nil {
                registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = nil }
            }
        } catch {
            registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = error }
        }
    }

    private func receive(_ record: HistoryRecord) {
        guard record.number > fetchedGeneration else { return }
        let touches = record.inserted.contains { relevantEntities.contains($0.entityName) }
            || record.updated.contains { relevantEntities.contains($0.id.entityName) }
            || record.deleted.contains { relevantEntities.contains($0.id.entityName) }
        if touches { refetch() }
    }

    /// The descriptor's entity and, when its predicate or sort reads through relationships or is evaluated on
    /// objects (which may), every entity reachable from it.
    private static func entities(read descriptor: FetchDescriptor<Model>, context: ModelContext) -> Set<String> {
        guard let metadata = context.runtime.metadataByName[Model.entityName] else { return [Model.entityName] }
        var entities: Set<String> = [metadata.entityName]
        let compiled = descriptor.compiled(for: metadata)
        guard !compiled.isStoreEvaluable || compiled.readsOtherRows else { return entities }
        var pending = [metadata]
        while let next = pending.popLast() {
            for relationship in next.relationships {
                let destination = relationship.destinationMetadata
                if entities.insert(destination.entityName).inserted { pending.append(destination) }
            }
        }
        return entities
    }
}
