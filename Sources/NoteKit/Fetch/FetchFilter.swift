#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A predicate compiled to a form a store evaluates on stored rows and answers from indexes and the references
/// between rows.
///
/// ``ModelContext`` compiles a Foundation `Predicate` into a `FetchFilter` (see ``FetchDescriptor`` and the article
/// *Fetching models*): comparisons, Boolean logic, key paths through to-one relationships of any depth,
/// conditions over to-many relationships (`contains(where:)`, `allSatisfy`, `filter`, `count`, `isEmpty`), string
/// operations, arithmetic, conditionals, ranges and subscripts all compile; the store evaluates them on the rows it
/// holds, never on model objects. Semantics follow Swift's: `==` on strings is Unicode canonical equivalence,
/// `contains` and `starts(with:)` compare characters, comparisons of numbers of different widths compare values,
/// and optional chaining through a relationship gives `nil` when the relationship is empty.
///
/// Filters are evaluated in *scopes*: scope 0 is the row being fetched; ``any(_:_:)``, ``all(_:_:)`` and
/// ``FetchOperand/countWhere(_:_:)`` evaluate their filter once per target of a to-many relationship, each target
/// in a new scope, and ``anyElement(_:_:)``, ``allElements(_:_:)`` and ``FetchOperand/filteredElements(_:_:)`` once
/// per element of a collection, each element in a new scope. ``FetchOperand/scope(_:_:)`` reads an enclosing scope.
public indirect enum FetchFilter: Sendable, Hashable {
    /// Always true or always false: what a predicate whose value depends only on captured values reduces to.
    case constant(Bool)
    /// Every filter matches (`&&`); an empty list matches every row. Evaluation stops at the first that does not.
    case and([FetchFilter])
    /// At least one filter matches (`||`); an empty list matches no row. Evaluation stops at the first that does.
    case or([FetchFilter])
    /// The filter does not match (`!`).
    case not(FetchFilter)
    /// Compares two operands by ``StoredValue/compare(_:_:)``, Swift's value order (`.null` first, numbers across
    /// widths by value, strings by canonical equivalence).
    case compare(FetchOperand, ComparisonOperator, FetchOperand)
    /// A string operator applied to two operands; a row whose operand is not a string does not match.
    /// ``TextOperator/startsWith`` and ``TextOperator/contains`` also compare arrays element by element.
    case text(FetchOperand, TextOperator, FetchOperand)
    /// The operand's value is one of the listed values (`[a, b].contains($0.x)`).
    case isIn(FetchOperand, [StoredValue])
    /// The operand (an array attribute or a to-many relationship) contains the element.
    case contains(FetchOperand, element: FetchOperand)
    /// At least one target of the to-many relationship at this position matches the filter, which is evaluated on
    /// each target in a new scope (`$0.notes.contains { $0.isPinned }`).
    case any(Int, FetchFilter)
    /// Every target of the to-many relationship at this position matches the filter (`allSatisfy`); true when
    /// there is none.
    case all(Int, FetchFilter)
    /// At least one element of the collection the operand gives matches the filter, which is evaluated on each
    /// element in a new scope (``FetchOperand/element``).
    case anyElement(FetchOperand, FetchFilter)
    /// Every element of the collection the operand gives matches the filter; true when there is none.
    case allElements(FetchOperand, FetchFilter)
    /// The string contains a match of the regular expression written as `pattern` (`$0.title.contains(/…/)`).
    case containsMatch(FetchOperand, pattern: String)

    /// A comparison operator.
    public enum ComparisonOperator: String, Sendable, Hashable {
        /// `==`, `!=`, `<`, `<=`, `>`, `>=`, in ``StoredValue/compare(_:_:)``'s order.
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
    }

    /// A string operator.
    public enum TextOperator: String, Sendable, Hashable {
        /// `String.contains(_:)`: a run of characters.
        case contains
        /// `starts(with:)`.
        case startsWith
        /// Case- and diacritic-insensitive containment, the `localizedStandardContains` substitute.
        case searchContains
    }
}

/// A value a filter reads: a property of the row in scope (or of a row it reaches), a constant, or a value computed
/// from others.
public indirect enum FetchOperand: Sendable, Hashable {
    /// Attribute at this position.
    case attribute(Int)
    /// The target of the to-one relationship at this position, as `.uuid(primary key)`, or `.null`.
    case toOne(Int)
    /// The targets of the to-many relationship at this position, as an array of `.uuid(primary key)`.
    case toMany(Int)
    /// The number of targets of the relationship at this position.
    case relationshipCount(Int)
    /// The row's own identifier, as `.uuid(primary key)`.
    case identifier
    /// A constant.
    case value(StoredValue)
    /// The first operand, or the second when the first is `.null` (`??`).
    case coalesce(FetchOperand, FetchOperand)
    /// The operand, which must not be `.null` (`!`); evaluating it on null throws.
    case unwrap(FetchOperand)
    /// The number of elements of an array or dictionary, characters of a string, or bytes of data.
    case count(FetchOperand)
    /// The operand, read on the target of the to-one relationship at this position instead of the row (`$0.folder?.name`):
    /// `.null` when the relationship has no target, or, when `required`, an error (a forced unwrap, `$0.folder!.name`).
    case related(Int, FetchOperand, required: Bool)
    /// The operand, read in an enclosing scope (0: the fetched row; see ``FetchFilter``): inside a condition on a
    /// to-many relationship's targets, a property of the object that holds them.
    case scope(Int, FetchOperand)
    /// The element of the collection a ``FetchFilter/anyElement(_:_:)``, ``FetchFilter/allElements(_:_:)`` or
    /// ``filteredElements(_:_:)`` is on, in the innermost such scope.
    case element
    /// The number of targets of the to-many relationship at this position that match the filter (`$0.notes.filter {
    /// $0.isPinned }.count`); the filter is evaluated on each target in a new scope.
    case countWhere(Int, FetchFilter)
    /// The elements of a collection that match the filter, in order (`$0.tags.filter { … }`).
    case filteredElements(FetchOperand, FetchFilter)
    /// `+`, `-`, `*`, `/`, `%` on numbers, with Swift's semantics for the kinds involved (integer division
    /// truncates; a division by zero, or an integer overflow, is an error rather than a trap).
    case arithmetic(FetchOperand, ArithmeticOperator, FetchOperand)
    /// The negated number (`-x`).
    case negated(FetchOperand)
    /// The second operand when the filter matches, else the third (`cond ? a : b`).
    case conditional(FetchFilter, FetchOperand, FetchOperand)
    /// The filter's value, as `.bool`: a condition used as a value (`($0.x > 2) == flag`).
    case condition(FetchFilter)
    /// An element of an array by position, or a dictionary's value by key (`.null` for a missing key); a position
    /// out of range is an error, as in Swift.
    case subscripted(FetchOperand, FetchOperand)
    /// A dictionary's value by key, or the default when the key is missing (`$0.counts[k, default: 0]`).
    case subscriptedWithDefault(FetchOperand, key: FetchOperand, default: FetchOperand)
    /// The elements of an array from the second operand's position to the third's (`array[a..<b]`, or `a...b`
    /// when `closed`).
    case slice(FetchOperand, FetchOperand, FetchOperand, closed: Bool)
    /// The smallest element of a collection, or `.null` when it is empty (`min()`).
    case minimum(FetchOperand)
    /// The largest element of a collection, or `.null` when it is empty (`max()`).
    case maximum(FetchOperand)
    /// How two strings compare, as `.int(-1)`, `.int(0)` or `.int(1)` (`ComparisonResult`'s raw values):
    /// `caseInsensitiveCompare` or `localizedCompare`.
    case textComparison(FetchOperand, FetchOperand, TextComparison)

    /// An arithmetic operator.
    public enum ArithmeticOperator: String, Sendable, Hashable {
        /// `+`, `-`, `*`; `/` on floating-point numbers; `/` (truncating) and `%` on integers.
        case add, subtract, multiply, divide, quotient, remainder
    }

    /// A string comparison that gives a `ComparisonResult`.
    public enum TextComparison: String, Sendable, Hashable {
        /// `caseInsensitiveCompare(_:)`.
        case caseInsensitive
        /// `localizedCompare(_:)`, in the current locale.
        case localized
    }
}

/// A fetch that cannot run: its predicate cannot be evaluated, or a batched fetch was misused.
public enum FetchError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A forced unwrap in a predicate met `nil`.
    case unwrappedNil(entity: String, model: PersistentIdentifier)
    /// The descriptor names an entity the container's schema does not have.
    case unknownEntity(String)
    /// Evaluating the predicate threw (for predicates evaluated on model objects).
    case predicateFailed(entity: String, reason: String)
    /// A batched fetch or enumeration was given a batch size below 1.
    case invalidBatchSize(Int)
    /// The fetch refuses to evaluate on model objects (``ObjectEvaluation/refused``), and `parts` of its predicate
    /// or sort cannot run in the store; each says what it is and why. Nothing was fetched.
    case notRunInStore(entity: String, parts: [String])
    /// An aggregation asks for what cannot be aggregated: `reason` says what (a key path that is not a persisted
    /// attribute, a grouping by a to-many relationship, an order naming no aggregate).
    case invalidAggregate(entity: String, reason: String)
    /// ``ModelContext/enumerate(_:batchSize:allowEscapingMutations:block:)`` found, at the end of batch `batch`
    /// (counted from 0), unsaved changes the walk made to `models` while `allowEscapingMutations` was false. The
    /// changes stay pending.
    case mutationsEscaped(entity: String, batch: Int, models: [PersistentIdentifier])

    /// A sentence naming the entity (and the object, for a forced unwrap) concerned.
    public var description: String {
        switch self {
        case let .unwrappedNil(entity, model):
            "a forced unwrap in a predicate on \(entity) met nil (at \(model))"
        case let .unknownEntity(entity): "the container's schema has no entity \(entity)"
        case let .predicateFailed(entity, reason): "evaluating a predicate on \(entity) failed: \(reason)"
        case let .invalidBatchSize(size): "batch size \(size) is not valid: a batch holds at least 1 model"
        case let .invalidAggregate(entity, reason): "an aggregation of \(entity) cannot be computed: \(reason)"
        case let .notRunInStore(entity, parts):
            "the fetch of \(entity) refuses evaluation on objects, and the store cannot run: "
                + parts.joined(separator: "; ")
        case let .mutationsEscaped(entity, batch, models):
            "enumerating \(entity) left \(models.count) unsaved change(s) at the end of batch \(batch) (first: "
                + "\(models.first.map(String.init(describing:)) ?? "none")); save them in the block, or pass "
                + "allowEscapingMutations: true and save after the walk"
        }
    }
}

/// A sort key a store can apply: an operand and a direction.
public struct FetchSortKey: Sendable, Hashable {
    /// What is sorted by.
    public var operand: FetchOperand
    /// Whether smaller values come first.
    public var ascending: Bool
    /// A sort key on `operand`, ascending or descending.
    public init(_ operand: FetchOperand, ascending: Bool) {
        self.operand = operand
        self.ascending = ascending
    }
}

/// A fetch as a store runs it.
public struct StoreFetchRequest: Sendable {
    /// What the caller needs back.
    public enum ResultType: Sendable {
        /// The rows themselves (``StoreFetchResult/rows``), their identifiers only
        /// (``StoreFetchResult/identifiers``), or their number only (``StoreFetchResult/count``).
        case rows, identifiers, count
    }

    /// The entity's name.
    public var entity: String
    /// Which rows to return; nil for every row.
    public var filter: FetchFilter?
    /// The order of the rows, key by key; rows equal on every key follow their identifiers, in the direction of
    /// the last key (the order a scan of an index gives), so that a window never depends on the store.
    public var sort: [FetchSortKey]
    /// How many matching rows to skip, after sorting.
    public var offset: Int
    /// The most rows to return, after the offset; nil for no limit.
    public var limit: Int?
    /// What to return for the matching rows.
    public var resultType: ResultType
    /// Rows to leave out (the caller has newer values for them).
    public var excluding: Set<PersistentIdentifier>
    /// Rows the caller holds newer values of than the store (its unsaved changes), by identifier; nil for one it
    /// deleted. A filter or sort that reads other rows through relationships reads these instead of the store's, so
    /// that a condition on a folder renamed and not saved yet sees the new name. The request's own rows are not
    /// affected: the caller merges its changed rows of the fetched entity itself (see ``excluding``).
    public var overlay: [PersistentIdentifier: ModelSnapshot?] = [:]
    /// The positions of the attributes the caller needs in the returned rows; nil (the default) for every one.
    ///
    /// A store may decode more than these, and must decode at least these and the attributes its filter and sort
    /// read; it says what it decoded in ``StoreFetchResult/loadedAttributes``. Relationships are always whole. What
    /// ``FetchDescriptor/propertiesToFetch`` becomes.
    public var attributes: [Int]?

    /// A request for the rows of `entity` that match `filter`, sorted by `sort`, from `offset`, at most `limit`.
    public init(entity: String, filter: FetchFilter? = nil, sort: [FetchSortKey] = [], offset: Int = 0,
                limit: Int? = nil, resultType: ResultType = .rows, excluding: Set<PersistentIdentifier> = []) {
        self.entity = entity
        self.filter = filter
        self.sort = sort
        self.offset = offset
        self.limit = limit
        self.resultType = resultType
        self.excluding = excluding
    }

    /// The attributes a store decodes for this request, one flag per position of `entity`'s `attributeCount`
    /// attributes: ``attributes``, and what the filter and the sort read; nil for every attribute.
    func decodedAttributes(attributeCount: Int) -> [Bool]? {
        guard let attributes else { return nil }
        var marks = [Bool](repeating: false, count: attributeCount)
        for slot in attributes where slot >= 0 && slot < attributeCount { marks[slot] = true }
        filter?.markAttributes(&marks)
        for key in sort { key.operand.markAttributes(&marks) }
        return marks.allSatisfy { $0 } ? nil : marks
    }

    /// The attributes the filter and the sort read, one flag per position: all a store needs to decode of a row to
    /// decide whether it matches and where it goes; nil when that is every attribute.
    func matchedAttributes(attributeCount: Int) -> [Bool]? {
        var marks = [Bool](repeating: false, count: attributeCount)
        filter?.markAttributes(&marks)
        for key in sort { key.operand.markAttributes(&marks) }
        return marks.allSatisfy { $0 } ? nil : marks
    }
}

extension FetchFilter {
    /// Marks in `marks` the attributes of the fetched row (scope 0) the filter reads: what a store must decode of
    /// each row to evaluate it. What it reads of other rows (through relationships, in conditions on targets) those
    /// rows' own reads decode.
    func markAttributes(_ marks: inout [Bool], scope: Int = 0) {
        switch self {
        case .constant: break
        case .and(let parts), .or(let parts): for part in parts { part.markAttributes(&marks, scope: scope) }
        case .not(let inner): inner.markAttributes(&marks, scope: scope)
        case let .compare(lhs, _, rhs), let .text(lhs, _, rhs), let .contains(lhs, element: rhs):
            lhs.markAttributes(&marks, scope: scope)
            rhs.markAttributes(&marks, scope: scope)
        case .isIn(let operand, _), .containsMatch(let operand, _): operand.markAttributes(&marks, scope: scope)
        case .any(_, let inner), .all(_, let inner): inner.markAttributes(&marks, scope: scope + 1)
        case let .anyElement(collection, inner), let .allElements(collection, inner):
            collection.markAttributes(&marks, scope: scope)
            inner.markAttributes(&marks, scope: scope + 1)
        }
    }
}

extension FetchFilter {
    /// Whether evaluating the filter reads rows other than the one it is evaluated on.
    var readsOtherRows: Bool {
        switch self {
        case .constant: false
        case .and(let parts), .or(let parts): parts.contains(where: \.readsOtherRows)
        case .not(let inner): inner.readsOtherRows
        case let .compare(lhs, _, rhs), let .text(lhs, _, rhs), let .contains(lhs, element: rhs):
            lhs.readsOtherRows || rhs.readsOtherRows
        case .isIn(let operand, _), .containsMatch(let operand, _): operand.readsOtherRows
        case .any, .all: true
        case let .anyElement(collection, inner), let .allElements(collection, inner):
            collection.readsOtherRows || inner.readsOtherRows
        }
    }
}

extension FetchOperand {
    /// Whether evaluating the operand reads rows other than the one it is evaluated on.
    var readsOtherRows: Bool {
        switch self {
        case .attribute, .toOne, .toMany, .relationshipCount, .identifier, .value, .element: false
        case .related, .countWhere: true
        case let .coalesce(a, b), let .arithmetic(a, _, b), let .subscripted(a, b), let .textComparison(a, b, _):
            a.readsOtherRows || b.readsOtherRows
        case .unwrap(let a), .count(let a), .negated(let a), .minimum(let a), .maximum(let a), .scope(_, let a):
            a.readsOtherRows
        case let .filteredElements(a, filter): a.readsOtherRows || filter.readsOtherRows
        case let .conditional(filter, a, b): filter.readsOtherRows || a.readsOtherRows || b.readsOtherRows
        case .condition(let filter): filter.readsOtherRows
        case let .subscriptedWithDefault(a, b, c), let .slice(a, b, c, _):
            a.readsOtherRows || b.readsOtherRows || c.readsOtherRows
        }
    }
}

extension FetchOperand {
    /// Marks in `marks` the attributes of the fetched row the operand reads, evaluated in scope `scope` (0: the
    /// fetched row is the one in scope).
    func markAttributes(_ marks: inout [Bool], scope: Int = 0) {
        switch self {
        case .attribute(let slot): if scope == 0 && slot >= 0 && slot < marks.count { marks[slot] = true }
        case .toOne, .toMany, .relationshipCount, .identifier, .value, .element, .related: break
        case let .coalesce(first, second), let .arithmetic(first, _, second), let .subscripted(first, second),
             let .textComparison(first, second, _):
            first.markAttributes(&marks, scope: scope)
            second.markAttributes(&marks, scope: scope)
        case .unwrap(let inner), .count(let inner), .negated(let inner), .minimum(let inner), .maximum(let inner):
            inner.markAttributes(&marks, scope: scope)
        case let .scope(index, inner): inner.markAttributes(&marks, scope: index)
        case .countWhere(_, let inner): inner.markAttributes(&marks, scope: scope + 1)
        case let .filteredElements(collection, inner):
            collection.markAttributes(&marks, scope: scope)
            inner.markAttributes(&marks, scope: scope + 1)
        case let .conditional(test, whenTrue, whenFalse):
            test.markAttributes(&marks, scope: scope)
            whenTrue.markAttributes(&marks, scope: scope)
            whenFalse.markAttributes(&marks, scope: scope)
        case .condition(let inner): inner.markAttributes(&marks, scope: scope)
        case let .subscriptedWithDefault(collection, key, fallback):
            collection.markAttributes(&marks, scope: scope)
            key.markAttributes(&marks, scope: scope)
            fallback.markAttributes(&marks, scope: scope)
        case let .slice(collection, lower, upper, _):
            collection.markAttributes(&marks, scope: scope)
            lower.markAttributes(&marks, scope: scope)
            upper.markAttributes(&marks, scope: scope)
        }
    }
}

/// What a store fetch returned, and how it found it.
public struct StoreFetchResult: Sendable {
    /// The matching rows, for a request of ``StoreFetchRequest/ResultType/rows``; empty otherwise.
    public var rows: [ModelSnapshot] = []
    /// The matching rows' identifiers, for a request of ``StoreFetchRequest/ResultType/identifiers``; empty
    /// otherwise.
    public var identifiers: [PersistentIdentifier] = []
    /// The number of matching rows (after offset and limit), for a request of ``StoreFetchRequest/ResultType/count``.
    public var count = 0
    /// How the store found the rows (see ``ModelContext/explain(_:)``).
    public var plan: FetchPlan
    /// The positions of the attributes ``rows`` hold, when the store decoded fewer than every one (the
    /// others hold `.null`: read the whole row with ``DataStore/rows(for:)``); nil when every row is whole.
    /// A row may hold more than it lists.
    public var loadedAttributes: [Int]?

    /// An empty result with its plan; the store fills in the field its request's result type asks for.
    public init(plan: FetchPlan) { self.plan = plan }
}

/// How a fetch was answered: which index it used and how many stored records it examined.
///
/// ```swift
/// let plan = try context.explain(descriptor)
/// plan.index               // ["isPinned", "createdAt"]
/// plan.rowsExamined     // 20
/// ```
public struct FetchPlan: Sendable, Hashable, CustomStringConvertible {
    /// The entity fetched.
    public var entity: String
    /// The attributes of the index used, or nil for a scan of every record.
    public var index: [String]?
    /// How many leading index attributes were matched by equality.
    public var indexEqualityPrefix: Int
    /// Whether a range on the next index attribute bounded the scan.
    public var indexRange: Bool
    /// Whether the index delivered the rows in the requested order (no sort was needed).
    public var sortedByIndex: Bool
    /// How many stored rows were read to answer.
    public var rowsExamined: Int
    /// How many rows the fetch returned (before pending changes were merged).
    public var rowsReturned: Int
    /// Whether the predicate or sort could not be compiled whole and was evaluated on model objects (after the store
    /// narrowed the candidates by what did compile); ``objectParts`` says which parts and why.
    public var evaluatedInMemory: Bool
    /// The parts of the predicate or sort evaluated on model objects, each saying what it is and why the store
    /// cannot run it; empty when the store ran everything.
    public var objectParts: [String] = []
    /// How the store used the references between rows to find the candidates, when it did: `Note.folder` narrowed
    /// through `Folder.name == "Work"` and the stored inverse `Folder.notes`, or a to-many condition decided from
    /// the targets' index. Nil when it scanned the entity or used one of its indexes alone.
    public var relationshipPlan: String?

    /// A plan, as a store reports how it answered a request; every count starts at 0.
    public init(entity: String, index: [String]? = nil, indexEqualityPrefix: Int = 0, indexRange: Bool = false,
                sortedByIndex: Bool = false, rowsExamined: Int = 0, rowsReturned: Int = 0,
                evaluatedInMemory: Bool = false) {
        self.entity = entity
        self.index = index
        self.indexEqualityPrefix = indexEqualityPrefix
        self.indexRange = indexRange
        self.sortedByIndex = sortedByIndex
        self.rowsExamined = rowsExamined
        self.rowsReturned = rowsReturned
        self.evaluatedInMemory = evaluatedInMemory
    }

    /// One line: the entity, the index used (and whether in order), a full scan or objects in memory, and the counts,
    /// as in `Note: index (isPinned, createdAt) in order, examined 20, returned 20`.
    public var description: String {
        var access = relationshipPlan.map { "through \($0)" }
            ?? index.map { "index (\($0.joined(separator: ", ")))" + (sortedByIndex ? " in order" : "") }
            ?? "full scan"
        if evaluatedInMemory {
            access += objectParts.isEmpty ? ", then objects in memory"
                : ", then objects in memory for: " + objectParts.joined(separator: "; ")
        }
        return "\(entity): \(access), examined \(rowsExamined), returned \(rowsReturned)"
    }
}
