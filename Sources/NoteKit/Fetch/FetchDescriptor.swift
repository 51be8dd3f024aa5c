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
    /// The properties SwiftData loads with each result; the others are faulted in when first read.
    ///
    /// Today this is deliberately a no-op in NoteKit, with the same results as SwiftData: a store opens with
    /// every row in memory, so each result already has every property at hand, and reading a property that is not
    /// listed returns its stored value, just as SwiftData's fault would. There is nothing left to save by loading
    /// fewer properties. (An `.externalStorage` attribute is still read from its file only when the property is
    /// read, listed or not.) The list is kept, so code written for SwiftData compiles and behaves the same; it is
    /// not validated. When the file store reads rows lazily, this list will say which properties to decode first.
    public var propertiesToFetch: [PartialKeyPath<T>] = []
    /// The relationships whose targets SwiftData loads together with the results, to avoid one fault per result.
    ///
    /// Today this is deliberately a no-op in NoteKit, with the same results as SwiftData: a relationship's targets
    /// resolve from rows already in memory, so following `note.folder` for every result costs no extra read (the
    /// "N+1" that prefetching avoids does not arise). The list is kept, so code written for SwiftData compiles and
    /// behaves the same; it is not validated. When the file store reads rows lazily, the named relationships'
    /// targets will be read in one pass.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = []

    var compilation = FetchCompilation()

    /// A descriptor with an optional predicate and sort order.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// The compiled form of a descriptor's predicate and sort, shared by copies of the descriptor until one of them
/// changes its predicate or sort.
final class FetchCompilation {
    var compiled: CompiledFetch?
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
