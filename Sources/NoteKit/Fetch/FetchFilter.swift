#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A predicate compiled to a form a store evaluates on snapshots and answers from indexes.
///
/// ``ModelContext`` compiles a Foundation `Predicate` into a `FetchFilter` when every part of it maps to a
/// stored property or a constant (see ``FetchDescriptor``); a predicate that does not compile is evaluated on the
/// model objects instead. Semantics follow Swift's: `==` on strings is Unicode canonical equivalence, `contains`
/// and `starts(with:)` compare characters, comparisons of numbers of different widths compare values.
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
    case text(FetchOperand, TextOperator, FetchOperand)
    /// The operand's value is one of the listed values (`[a, b].contains($0.x)`).
    case isIn(FetchOperand, [StoredValue])
    /// The operand (an array attribute or a to-many relationship) contains the element.
    case contains(FetchOperand, element: FetchOperand)

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

/// A value a filter reads: a property of the row, the row's identifier, or a constant.
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
    /// The number of elements of an array attribute or characters of a string.
    case count(FetchOperand)
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
        case let .mutationsEscaped(entity, batch, models):
            "enumerating \(entity) left \(models.count) unsaved change(s) at the end of batch \(batch) (first: "
                + "\(models.first.map(String.init(describing:)) ?? "none")); save them in the block, or pass "
                + "allowEscapingMutations: true and save after the walk"
        }
    }
}

/// Signals a forced unwrap of null while evaluating; the caller knows which row.
struct UnwrappedNil: Error {}

extension FetchFilter {
    /// Whether `row` satisfies the filter.
    ///
    /// - Throws: ``UnwrappedNil`` when a forced unwrap meets null.
    func matches(_ row: ModelSnapshot) throws -> Bool {
        switch self {
        case .constant(let value):
            return value
        case .and(let parts):
            for part in parts where try !part.matches(row) { return false }
            return true
        case .or(let parts):
            for part in parts where try part.matches(row) { return true }
            return false
        case .not(let inner):
            return try !inner.matches(row)
        case let .compare(lhs, op, rhs):
            return Self.compare(try lhs.evaluate(row), op, try rhs.evaluate(row))
        case let .text(lhs, op, rhs):
            guard case .string(let text) = try lhs.evaluate(row), case .string(let other) = try rhs.evaluate(row) else {
                return false
            }
            switch op {
            case .contains: return Self.containsCharacters(text, other)
            case .startsWith: return text.starts(with: other)
            case .searchContains: return TextSearch.contains(text, other)
            }
        case let .isIn(operand, values):
            let value = try operand.evaluate(row)
            return values.contains { Self.compare(value, .equal, $0) }
        case let .contains(collection, element):
            let value = try element.evaluate(row)
            switch try collection.evaluate(row) {
            case .array(let items): return items.contains { Self.compare($0, .equal, value) }
            case .string(let text):
                if case .string(let other) = value { return Self.containsCharacters(text, other) }
                return false
            default: return false
            }
        }
    }

    /// `String.contains(_:)` as a predicate evaluates it: a run of whole characters (Foundation's `contains` on
    /// strings compares Unicode scalars instead, and would find "e" in "é"). An empty string is contained in any.
    static func containsCharacters<C: Collection>(_ text: C, _ other: C) -> Bool where C.Element: Equatable {
        text.contains(other)
    }

    /// Swift's semantics for `==`, `!=`, `<`… on stored values. Ordering comparisons with null are false (Swift
    /// cannot even express them without an unwrap); NaN equals nothing.
    static func compare(_ lhs: StoredValue, _ op: ComparisonOperator, _ rhs: StoredValue) -> Bool {
        if case .double(let x) = lhs, x.isNaN { return op == .notEqual }
        if case .double(let y) = rhs, y.isNaN { return op == .notEqual }
        switch op {
        case .equal: return StoredValue.compare(lhs, rhs) == 0
        case .notEqual: return StoredValue.compare(lhs, rhs) != 0
        default:
            if lhs.isNull || rhs.isNull { return false }
            let order = StoredValue.compare(lhs, rhs)
            switch op {
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            default: return order >= 0
            }
        }
    }

    /// The conjuncts of a filter (itself when it is not an `and`), flattened.
    var conjuncts: [FetchFilter] {
        if case .and(let parts) = self { return parts.flatMap(\.conjuncts) }
        return [self]
    }
}

extension FetchOperand {
    /// The operand's value on `row`.
    func evaluate(_ row: ModelSnapshot) throws -> StoredValue {
        switch self {
        case .attribute(let index):
            return row.attributes[index]
        case .toOne(let index):
            if case .toOne(let id?) = row.relationships[index] { return .uuid(id.primaryKey) }
            return .null
        case .toMany(let index):
            return .array(row.relationships[index].identifiers.map { .uuid($0.primaryKey) })
        case .relationshipCount(let index):
            return .int(Int64(row.relationships[index].count))
        case .identifier:
            return .uuid(row.id.primaryKey)
        case .value(let value):
            return value
        case let .coalesce(first, second):
            let value = try first.evaluate(row)
            return value.isNull ? try second.evaluate(row) : value
        case .unwrap(let inner):
            let value = try inner.evaluate(row)
            if value.isNull { throw UnwrappedNil() }
            return value
        case .count(let inner):
            switch try inner.evaluate(row) {
            case .array(let items): return .int(Int64(items.count))
            case .string(let text): return .int(Int64(text.count))
            case .dictionary(let items): return .int(Int64(items.count))
            case .data(let data): return .int(Int64(data.count))
            default: return .null
            }
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
        /// The rows' snapshots (``StoreFetchResult/snapshots``), their identifiers only
        /// (``StoreFetchResult/identifiers``), or their number only (``StoreFetchResult/count``).
        case snapshots, identifiers, count
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
    /// The positions of the attributes the caller needs in the returned rows; nil (the default) for every one.
    ///
    /// A store may decode more than these, and must decode at least these and the attributes its filter and sort
    /// read; it says what it decoded in ``StoreFetchResult/loadedAttributes``. Relationships are always whole. What
    /// ``FetchDescriptor/propertiesToFetch`` becomes.
    public var attributes: [Int]?

    /// A request for the rows of `entity` that match `filter`, sorted by `sort`, from `offset`, at most `limit`.
    public init(entity: String, filter: FetchFilter? = nil, sort: [FetchSortKey] = [], offset: Int = 0,
                limit: Int? = nil, resultType: ResultType = .snapshots, excluding: Set<PersistentIdentifier> = []) {
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
}

extension FetchFilter {
    /// Marks in `marks` the attributes the filter reads.
    func markAttributes(_ marks: inout [Bool]) {
        switch self {
        case .constant: break
        case .and(let parts), .or(let parts): for part in parts { part.markAttributes(&marks) }
        case .not(let inner): inner.markAttributes(&marks)
        case let .compare(lhs, _, rhs), let .text(lhs, _, rhs), let .contains(lhs, element: rhs):
            lhs.markAttributes(&marks)
            rhs.markAttributes(&marks)
        case .isIn(let operand, _): operand.markAttributes(&marks)
        }
    }
}

extension FetchOperand {
    /// Marks in `marks` the attributes the operand reads.
    func markAttributes(_ marks: inout [Bool]) {
        switch self {
        case .attribute(let slot): if slot >= 0 && slot < marks.count { marks[slot] = true }
        case .toOne, .toMany, .relationshipCount, .identifier, .value: break
        case let .coalesce(first, second):
            first.markAttributes(&marks)
            second.markAttributes(&marks)
        case .unwrap(let inner), .count(let inner): inner.markAttributes(&marks)
        }
    }
}

/// What a store fetch returned, and how it found it.
public struct StoreFetchResult: Sendable {
    /// The matching rows, for a request of ``StoreFetchRequest/ResultType/snapshots``; empty otherwise.
    public var snapshots: [ModelSnapshot] = []
    /// The matching rows' identifiers, for a request of ``StoreFetchRequest/ResultType/identifiers``; empty
    /// otherwise.
    public var identifiers: [PersistentIdentifier] = []
    /// The number of matching rows (after offset and limit), for a request of ``StoreFetchRequest/ResultType/count``.
    public var count = 0
    /// How the store found the rows (see ``ModelContext/explain(_:)``).
    public var plan: FetchPlan
    /// The positions of the attributes ``snapshots`` hold, when the store decoded fewer than every one (the
    /// others hold `.null`: read the whole row with ``DataStore/snapshots(for:)``); nil when every row is whole.
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
/// plan.recordsExamined     // 20
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
    /// Whether the index delivered the records in the requested order (no sort was needed).
    public var sortedByIndex: Bool
    /// How many stored records were read to answer.
    public var recordsExamined: Int
    /// How many records the fetch returned (before pending changes were merged).
    public var recordsReturned: Int
    /// Whether the predicate or sort could not be compiled and was evaluated on model objects instead.
    public var evaluatedInMemory: Bool

    /// A plan, as a store reports how it answered a request; every count starts at 0.
    public init(entity: String, index: [String]? = nil, indexEqualityPrefix: Int = 0, indexRange: Bool = false,
                sortedByIndex: Bool = false, recordsExamined: Int = 0, recordsReturned: Int = 0,
                evaluatedInMemory: Bool = false) {
        self.entity = entity
        self.index = index
        self.indexEqualityPrefix = indexEqualityPrefix
        self.indexRange = indexRange
        self.sortedByIndex = sortedByIndex
        self.recordsExamined = recordsExamined
        self.recordsReturned = recordsReturned
        self.evaluatedInMemory = evaluatedInMemory
    }

    /// One line: the entity, the index used (and whether in order), a full scan or objects in memory, and the counts,
    /// as in `Note: index (isPinned, createdAt) in order, examined 20, returned 20`.
    public var description: String {
        let access = index.map { "index (\($0.joined(separator: ", ")))" + (sortedByIndex ? " in order" : "") }
            ?? (evaluatedInMemory ? "objects in memory" : "full scan")
        return "\(entity): \(access), examined \(recordsExamined), returned \(recordsReturned)"
    }
}
