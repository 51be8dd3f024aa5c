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

    /// Whether this fetch may evaluate on model objects what its store cannot run; nil (the default) takes the
    /// container's ``ModelContainer/objectEvaluation``. With `.refused`, such a fetch throws
    /// ``FetchError/notRunInStore(entity:parts:)`` naming each part instead of running: pin a descriptor with it in a
    /// test, and a later change that makes it slow fails the test.
    public var objectEvaluation: ObjectEvaluation?

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
    /// What the store runs of the predicate: all of it, or the conjuncts that compiled when some did not.
    var filter: FetchFilter?
    /// The conjuncts of the predicate that did not compile, each as why: the store runs ``filter`` and the whole
    /// predicate is evaluated on the objects it leaves.
    var residual: [String] = []
    /// The compiled sort keys, when every sort descriptor compiled.
    var sort: [FetchSortKey]?
    /// Why a sort descriptor did not compile (the sort then runs on objects).
    var sortFailure: String?

    /// Whether the store answers the whole fetch.
    var isStoreEvaluable: Bool { residual.isEmpty && sort != nil }

    /// What is evaluated on objects and why, for ``FetchPlan/objectParts`` and the strict mode's error.
    var objectParts: [String] { residual + (sortFailure.map { [$0] } ?? []) }

    /// Whether the filter or the sort reads rows other than the fetched one (through relationships), so that a
    /// context's unsaved changes to other objects matter.
    var readsOtherRows: Bool {
        (filter?.readsOtherRows ?? false) || (sort ?? []).contains { $0.operand.readsOtherRows }
    }
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
    ///
    /// A predicate that does not compile whole is split at its top-level `&&`: the conjuncts that compile run in the
    /// store, and the whole predicate runs on the objects they leave.
    func compiled(for metadata: ModelMetadata) -> CompiledFetch {
        if let compiled = compilation.compiled { return compiled }
        var result = CompiledFetch()
        if let predicate {
            let translator = PredicateTranslator(metadata: metadata, variable: predicate.variable.key)
            do {
                result.filter = try translator.filter(predicate.expression)
            } catch {
                var compiled: [FetchFilter] = []
                for conjunct in Self.conjuncts(of: predicate.expression) {
                    do {
                        compiled += try translator.filter(conjunct).conjuncts
                    } catch {
                        result.residual.append("\(error)")
                    }
                }
                result.filter = compiled.isEmpty ? nil : (compiled.count == 1 ? compiled[0] : .and(compiled))
            }
        }
        var keys: [FetchSortKey] = []
        for descriptor in sortBy {
            if let keyPath = descriptor.keyPath, let operand = PredicateTranslator.operand(for: keyPath, in: metadata) {
                keys.append(FetchSortKey(operand, ascending: descriptor.order == .forward))
                continue
            }
            guard let keyPath = descriptor.keyPath, let path = metadata.propertyPath(for: keyPath) else {
                result.sortFailure = "a sort by \(descriptor.keyPath.map { "\($0)" } ?? "a comparator") that is not a "
                    + "persisted property, nor one reached through to-one relationships"
                break
            }
            var operand: FetchOperand
            switch path.leaf {
            case .attribute(let slot): operand = .attribute(slot)
            case .relationship(let slot):
                let holder = path.hops.reduce(metadata) { $0.relationships[$1].destinationMetadata }
                operand = holder.relationships[slot].isToMany ? .toMany(slot) : .toOne(slot)
            }
            for hop in path.hops.reversed() { operand = .related(hop, operand, required: false) }
            keys.append(FetchSortKey(operand, ascending: descriptor.order == .forward))
        }
        result.sort = result.sortFailure == nil ? keys : nil
        compilation.compiled = result
        return result
    }

    /// The operands of a predicate's top-level `&&`s, in order (the predicate itself when it is not one).
    private static func conjuncts(of expression: any PredicateExpression) -> [any PredicateExpression] {
        guard let conjunction = expression as? any ConjunctionParts else { return [expression] }
        return conjunction.parts.flatMap(conjuncts(of:))
    }
}

/// A conjunction's two sides, through an existential.
private protocol ConjunctionParts {
    var parts: [any PredicateExpression] { get }
}

extension PredicateExpressions.Conjunction: ConjunctionParts {
    var parts: [any PredicateExpression] { [lhs, rhs] }
}

/// Whether a fetch may evaluate on model objects the parts of its predicate or sort that its store cannot run.
///
/// Every form `#Predicate` builds over persisted properties runs in the store (see *Fetching models*). What reads a
/// computed or `@Transient` property, evaluates an `#Expression` inside the predicate or casts to another type
/// cannot: with `.allowed` the store narrows the candidates by what it can run and the rest is evaluated on their
/// objects; with `.refused` the fetch throws ``FetchError/notRunInStore(entity:parts:)`` instead.
public enum ObjectEvaluation: Sendable, Hashable {
    /// Evaluate on objects what the store cannot run (the default).
    case allowed
    /// Throw rather than evaluate anything on objects: a strict mode for tests.
    case refused
}
