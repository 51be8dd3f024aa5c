// SortDescriptor is in Foundation proper on Linux.
import Foundation

/// What to fetch: a predicate, a sort order, and a window (SwiftData's `FetchDescriptor`).
///
/// ```swift
/// var descriptor = FetchDescriptor<NoteRecord>(
///     predicate: #Predicate { $0.isPinned },
///     sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
/// descriptor.fetchLimit = 20
/// let newest = try context.fetch(descriptor)
/// ```
///
/// Predicates are Foundation's own `Predicate` (`#Predicate` works on Linux). A predicate made of comparisons,
/// `&&`, `||`, `!`, `??`, forced unwraps, `contains`, `starts(with:)` and `localizedStandardContains` (see
/// ``TextSearch``) over persisted attributes, to-one relationships and `persistentModelID` (`$0.folder == nil`,
/// `$0.folder?.persistentModelID == workID`) is evaluated by the store on saved values, and uses an index when one
/// fits. (A model object itself cannot be captured: `#Predicate` requires captured values to be `Codable` and
/// `Sendable`; capture its identifier.) Any other predicate still works: it is evaluated on the model objects,
/// which loads every object of the entity. Sorts work the same way. ``ModelContext/explain(_:)`` tells which
/// happened.
///
/// The descriptor remembers how its predicate and sort were compiled, so fetching with it again skips that work.
public struct FetchDescriptor<T: PersistentModel> {
    /// Which objects to return; nil returns all of them.
    public var predicate: Predicate<T>? { didSet { compilation = FetchCompilation() } }
    /// The order of the results, first descriptor first; ties go in identifier order.
    public var sortBy: [SortDescriptor<T>] { didSet { compilation = FetchCompilation() } }
    /// The most objects to return; nil, zero or less for no limit (zero means no limit in Core Data too).
    public var fetchLimit: Int?
    /// How many matching objects to skip first.
    public var fetchOffset: Int?
    /// Whether unsaved inserts, changes and deletes of the context count (default true).
    public var includePendingChanges = true
    /// The attributes to load with each result; the others are loaded when one of them is first read
    /// (SwiftData's `propertiesToFetch`). Empty (the default) loads every attribute, not none.
    ///
    /// ```swift
    /// var titles = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
    /// titles.propertiesToFetch = [\.title]
    /// for note in try context.fetch(titles) { print(note.title) }   // decodes titles, not bodies
    /// ```
    ///
    /// On the file store, the rows a fetch reads from its checkpoint (a compacted store opened again) are decoded
    /// for the listed attributes only, and for those the predicate, the sort and the index scanned read. The first
    /// read of any other attribute of a result reads that object's row again (one row read, through the same lookup
    /// as ``ModelContext/model(for:)``) and loads every attribute left out at once. Rows the store holds in memory
    /// (saved since the checkpoint was written, or a store replayed from its log), and every row of the in-memory
    /// store, are whole already: there the list costs nothing and changes nothing.
    ///
    /// A result is otherwise an ordinary object: reading a property gives its stored value, listed or not; a change
    /// to any property loads the rest first, so saving, ``ModelContext/hasChanges``, ``ModelContext/rollback()``,
    /// undo, refresh and observation work as for an object loaded whole. An object the context has already loaded
    /// whole stays whole (a partial fetch never unloads anything), and a later fetch without the list fills in a
    /// partial one. Unsaved objects the fetch returns are returned as they are. If another context deletes the
    /// object's row before an attribute left out is first read, each such attribute reads as its declared default,
    /// and the loss is recorded in ``ModelContext/readFailures`` (SwiftData fails to fulfil the fault there).
    ///
    /// Relationships are always loaded (inverse maintenance and delete rules need them), and so is the identifier.
    /// A key path that is not a persisted attribute of `T` is accepted and adds nothing: a relationship (Core Data,
    /// under SwiftData, accepts to-one relationships in this list; NoteKit loads every relationship anyway), a
    /// `@Transient` or computed property, or a nested path. A predicate or sort that is evaluated on objects (see
    /// ``ModelContext/explain(_:)``) loads every attribute of every object anyway, and so do the batched
    /// ``ModelContext/enumerate(_:batchSize:allowEscapingMutations:block:)`` and ``ModelContext/fetch(_:batchSize:)``.
    public var propertiesToFetch: [PartialKeyPath<T>] = [] { didSet { compilation = FetchCompilation() } }
    /// The relationships whose targets are read together with the results, to avoid one read per result (SwiftData's
    /// `relationshipKeyPathsForPrefetching`).
    ///
    /// ```swift
    /// var pinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned })
    /// pinned.relationshipKeyPathsForPrefetching = [\.notebook]
    /// let notes = try context.fetch(pinned)   // reads the notebooks too, in one pass
    /// ```
    ///
    /// After the fetch, the targets of the named relationships (to-one and to-many) of every result that the
    /// context does not have yet are read in one store call and loaded: on the file store, one batched read of the
    /// checkpoint's rows in the order they are stored, so following `note.notebook` for each result reads nothing
    /// more. The context keeps no unchanged object alive by itself (see ``ModelContext``): a target nothing holds
    /// is created again when next reached, from the row the file store keeps, without reading. On the in-memory
    /// store every row is in memory and the list saves nothing.
    ///
    /// Name direct relationships of `T` (`\.notebook`, `\.tags`), as SwiftData does; a nested path
    /// (`\.notebook?.owner`), an attribute or a transient property is accepted and prefetches nothing. The batched
    /// ``ModelContext/enumerate(_:batchSize:allowEscapingMutations:block:)`` and ``ModelContext/fetch(_:batchSize:)``
    /// prefetch nothing.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = [] {
        didSet { compilation = FetchCompilation() }
    }

    var compilation = FetchCompilation()

    /// A descriptor with an optional predicate and sort order.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// The compiled form of a descriptor's predicate, sort and loading lists, shared by copies of the descriptor until
/// one of them changes one of those.
final class FetchCompilation {
    var compiled: CompiledFetch?
    var loading: FetchLoading?
}

/// What ``FetchDescriptor/propertiesToFetch`` and ``FetchDescriptor/relationshipKeyPathsForPrefetching`` come to
/// for an entity: positions, worked out once.
struct FetchLoading {
    /// The attributes to load (sorted); nil for every one.
    var attributes: [Int]?
    /// The relationships whose targets to prefetch.
    var prefetched: [Int]
}

/// A predicate and sort compiled for the store, or the reason they could not be.
struct CompiledFetch {
    /// The compiled filter, when there is a predicate and it compiled.
    var filter: FetchFilter?
    /// Why the predicate did not compile (it is then evaluated on objects).
    var filterFailure: String?
    /// The compiled sort keys, when every sort descriptor compiled.
    var sort: [FetchSortKey]?

    var isStoreEvaluable: Bool { filterFailure == nil && sort != nil }
}

extension FetchDescriptor {
    /// Works out (once) the attributes ``propertiesToFetch`` lists and the relationships
    /// ``relationshipKeyPathsForPrefetching`` names, for `metadata`. Key paths that are not attributes (for the
    /// first list: relationships, which are always loaded; transient or computed properties; nested paths) or not
    /// relationships (for the second: attributes, nested paths) add nothing.
    func loading(for metadata: ModelMetadata) -> FetchLoading {
        if let loading = compilation.loading { return loading }
        var attributes: [Int] = []
        for keyPath in propertiesToFetch {
            if let slot = metadata.attributeSlot(for: keyPath), !attributes.contains(slot) { attributes.append(slot) }
        }
        var prefetched: [Int] = []
        for keyPath in relationshipKeyPathsForPrefetching {
            if case .relationship(let slot)? = metadata.property(for: keyPath), !prefetched.contains(slot) {
                prefetched.append(slot)
            }
        }
        let all = propertiesToFetch.isEmpty || attributes.count == metadata.attributes.count
        let loading = FetchLoading(attributes: all ? nil : attributes.sorted(), prefetched: prefetched)
        compilation.loading = loading
        return loading
    }

    /// Compiles (once) the predicate and sort for `metadata`.
    func compiled(for metadata: ModelMetadata) -> CompiledFetch {
        if let compiled = compilation.compiled { return compiled }
        var result = CompiledFetch()
        if let predicate {
            do {
                result.filter = try PredicateTranslator(metadata: metadata, variable: predicate.variable.key)
                    .filter(predicate.expression)
            } catch let failure as PredicateTranslator.Untranslatable {
                result.filterFailure = failure.reason
            } catch {
                result.filterFailure = "\(error)"
            }
        }
        result.sort = sortBy.map { descriptor -> FetchSortKey? in
            guard let keyPath = descriptor.keyPath, let operand = PredicateTranslator.operand(for: keyPath, in: metadata)
            else { return nil }
            return FetchSortKey(operand, ascending: descriptor.order == .forward)
        }.reduce([FetchSortKey]?.some([])) { keys, key in
            guard let keys, let key else { return nil }
            return keys + [key]
        }
        compilation.compiled = result
        return result
    }
}
