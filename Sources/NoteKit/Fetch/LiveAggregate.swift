import Observation
import Synchronization

/// A count or aggregate of a ``FetchDescriptor``'s matches, kept up to date: an `Observable` object that computes
/// ``value`` again (in the store, without making objects: ``ModelContext/aggregate(_:_:)``) whenever a save that can
/// change it lands. SwiftData has no such type; it is ``LiveQuery``'s counterpart for numbers, for a badge, a
/// sidebar's counts or a chart that must not fetch every object to stay current.
///
/// ```swift
/// @MainActor final class Sidebar {
///     let pinned: LiveAggregate<Note, Int>
///     let perFolder: LiveAggregate<Note, [AggregateGroup<String?, Int>]>
///     init(container: ModelContainer) throws {
///         pinned = try LiveAggregate(FetchDescriptor(predicate: #Predicate<Note> { $0.isPinned }), .count,
///                                    in: container.mainContext)
///         perFolder = try LiveAggregate(FetchDescriptor<Note>(), groupedBy: \.folder?.name, .count,
///                                       in: container.mainContext)
///     }
///     func render() {
///         withObservationTracking {
///             print("Pinned", pinned.value)
///             for group in perFolder.value { print(group.key ?? "Unfiled", group.values) }
///         } onChange: {
///             Task { @MainActor in self.render() }
///         }
///     }
/// }
/// ```
///
/// **What triggers a computation**, and on which actor it runs, are as for ``LiveQuery``: a committed transaction
/// that inserts, updates or deletes an object of the descriptor's entity, or of an entity the predicate, the
/// aggregated key paths or the grouping key read through relationships; one computation covers every transaction
/// committed before it. The object belongs to the actor it is made on (`isolation`, the caller's by default), and
/// its context too.
///
/// ## Topics
/// - ``init(_:_:in:isolation:)``
/// - ``init(_:groupedBy:order:limit:_:in:isolation:)``
/// - ``value``
/// - ``fetchError``
/// - ``descriptor``
/// - ``recompute()``
public final class LiveAggregate<Model: PersistentModel, Value>: Observable, LiveFollowing {
    /// The context the aggregate is computed with.
    public let context: ModelContext

    /// Which objects are aggregated (its sort, limit and offset do not apply). Changing it computes again at once.
    public var descriptor: FetchDescriptor<Model> {
        didSet {
            relevantEntities = LiveRelevance.entities(read: descriptor, context: context).union(keyPathEntities)
            recompute()
        }
    }

    /// The aggregate as of the last computation: a tuple of the aggregates asked for (the value itself for one), or
    /// the groups. Reading it inside `withObservationTracking` makes the observer fire when a computation replaces it.
    public var value: Value {
        registrar.access(self, keyPath: \.value)
        return storedValue
    }

    /// Why the last computation failed (the container was closed, for one), or nil when it succeeded; ``value`` then
    /// keeps what the last successful one returned. Observable like ``value``.
    public var fetchError: (any Error)? {
        registrar.access(self, keyPath: \.fetchError)
        return storedFetchError
    }

    private var storedValue: Value
    private var storedFetchError: (any Error)?
    private let registrar = ObservationRegistrar()
    private let compute: (ModelContext, FetchDescriptor<Model>) throws -> Value
    /// The entities the aggregated key paths and the grouping key read.
    private let keyPathEntities: Set<String>
    private(set) var relevantEntities: Set<String>
    private(set) var computedTransactionNumber: UInt64
    private let subscription = Mutex<Task<Void, Never>?>(nil)
    /// How many computations were made (for tests that check a transaction did not cause one).
    private(set) var computations = 1

    private init(_ descriptor: FetchDescriptor<Model>, keyPaths: [AnyKeyPath], in context: ModelContext,
                 isolation: isolated any Actor,
                 compute: @escaping (ModelContext, FetchDescriptor<Model>) throws -> Value) throws {
        // Subscribed before the first computation, so that nothing committed in between is missed.
        let transactions = context.store.transactions()
        self.context = context
        self.descriptor = descriptor
        self.compute = compute
        keyPathEntities = LiveRelevance.entities(read: keyPaths, of: Model.self, context: context)
        relevantEntities = LiveRelevance.entities(read: descriptor, context: context).union(keyPathEntities)
        computedTransactionNumber = context.store.transactionNumber
        storedValue = try compute(context, descriptor)
        let task = followTransactions(self, transactions, isolation: isolation)
        subscription.withLock { $0 = task }
    }

    /// A live count or aggregate of what `descriptor` matches, as ``ModelContext/aggregate(_:_:)`` computes it:
    /// `.count` alone gives an `Int`; several aggregates give a tuple.
    ///
    /// ```swift
    /// let notes = try LiveAggregate(FetchDescriptor<Note>(), .count, .max(\.updatedAt), in: context)
    /// let (count, lastEdit) = notes.value
    /// ```
    ///
    /// - Throws: what the first computation throws (see ``ModelContext/aggregate(_:_:)``); later failures are
    ///   reported in ``fetchError``.
    /// - Complexity: one aggregate now, then one per relevant transaction.
    public convenience init<each V>(_ descriptor: FetchDescriptor<Model>, _ aggregates: repeat Aggregate<Model, each V>,
                                    in context: ModelContext, isolation: isolated any Actor = #isolation) throws
        where Value == (repeat each V) {
        var keyPaths: [AnyKeyPath] = []
        for aggregate in repeat each aggregates { if let keyPath = aggregate.keyPath { keyPaths.append(keyPath) } }
        try self.init(descriptor, keyPaths: keyPaths, in: context, isolation: isolation) { context, descriptor in
            try context.aggregate(descriptor, repeat each aggregates)
        }
    }

    /// A live grouped aggregate of what `descriptor` matches, as
    /// ``ModelContext/aggregate(_:groupedBy:order:limit:_:)`` computes it.
    ///
    /// - Throws: what the first computation throws; later failures are reported in ``fetchError``.
    /// - Complexity: one grouped aggregate now, then one per relevant transaction.
    public convenience init<Key, each V>(_ descriptor: FetchDescriptor<Model>, groupedBy key: KeyPath<Model, Key>,
                                         order: AggregateOrder = .key(.forward), limit: Int? = nil,
                                         _ aggregates: repeat Aggregate<Model, each V>, in context: ModelContext,
                                         isolation: isolated any Actor = #isolation) throws
        where Value == [AggregateGroup<Key, repeat each V>] {
        var keyPaths: [AnyKeyPath] = [key]
        for aggregate in repeat each aggregates { if let keyPath = aggregate.keyPath { keyPaths.append(keyPath) } }
        try self.init(descriptor, keyPaths: keyPaths, in: context, isolation: isolation) { context, descriptor in
            try context.aggregate(descriptor, groupedBy: key, order: order, limit: limit, repeat each aggregates)
        }
    }

    deinit {
        subscription.withLock { $0?.cancel() }
    }

    /// Computes the aggregate again now, whatever was committed.
    public func recompute() {
        computations += 1
        computedTransactionNumber = context.store.transactionNumber
        do {
            let computed = try compute(context, descriptor)
            registrar.withMutation(of: self, keyPath: \.value) { storedValue = computed }
            if storedFetchError != nil {
                registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = nil }
            }
        } catch {
            registrar.withMutation(of: self, keyPath: \.fetchError) { storedFetchError = error }
        }
    }
}
