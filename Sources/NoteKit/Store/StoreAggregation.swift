#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An aggregation as a store runs it: aggregates of the rows of one entity that match a filter, over all of them or
/// per group (``ModelContext/aggregate(_:_:)``, ``ModelContext/aggregate(_:groupedBy:order:limit:_:)``).
public struct StoreAggregateRequest: Sendable {
    /// One aggregate: what it computes, and of which value.
    public struct Operation: Sendable, Hashable {
        /// What an aggregate computes.
        public enum Kind: String, Sendable, Hashable {
            /// The number of rows.
            case count
            /// The sum of the operand's values (nulls skipped; null for none, which the typed API gives as zero).
            case sum
            /// The smallest value (nulls skipped; null for none).
            case minimum
            /// The largest value (nulls skipped; null for none).
            case maximum
            /// The mean of the values, as a `.double` (nulls skipped; null for none).
            case average
        }

        /// What it computes.
        public var kind: Kind
        /// The value it aggregates (nil for a count).
        public var operand: FetchOperand?

        /// An aggregate of `kind` over `operand`.
        public init(_ kind: Kind, _ operand: FetchOperand? = nil) {
            self.kind = kind
            self.operand = operand
        }
    }

    /// How groups are ordered.
    public enum GroupOrder: Sendable, Hashable {
        /// By the group's key.
        case key(ascending: Bool)
        /// By the value of the aggregate at this position (ties by key, ascending).
        case aggregate(Int, ascending: Bool)
    }

    /// The entity's name.
    public var entity: String
    /// Which rows count; nil for every row.
    public var filter: FetchFilter?
    /// What groups the rows (an attribute, a to-one relationship's target identifier, a path through one); nil for
    /// one group of every row.
    public var groupBy: FetchOperand?
    /// The aggregates, in order.
    public var operations: [Operation]
    /// The groups' order.
    public var order: GroupOrder
    /// The most groups to return; nil for every group.
    public var limit: Int?
    /// Rows to leave out (the caller counts newer values for them, in ``additionalRows``).
    public var excluding: Set<PersistentIdentifier> = []
    /// Rows of the entity the caller holds and the store does not, or not as they are now (its unsaved inserts and
    /// changes): they count as the store's rows do.
    public var additionalRows: [ModelSnapshot] = []
    /// A caller's unsaved changes, for a filter or key that reads through relationships (see
    /// ``StoreFetchRequest/overlay``).
    public var overlay: [PersistentIdentifier: ModelSnapshot?] = [:]

    /// A request for `operations` over the rows of `entity` that match `filter`, grouped by `groupBy`.
    public init(entity: String, filter: FetchFilter? = nil, groupBy: FetchOperand? = nil, operations: [Operation],
                order: GroupOrder = .key(ascending: true), limit: Int? = nil) {
        self.entity = entity
        self.filter = filter
        self.groupBy = groupBy
        self.operations = operations
        self.order = order
        self.limit = limit
    }
}

/// What a store's aggregation returned.
public struct StoreAggregateResult: Sendable {
    /// One group: its key (`.null` when the request has no grouping) and its aggregates' values, in order.
    public struct Group: Sendable, Hashable {
        /// The group's key.
        public var key: StoredValue
        /// Each aggregate's value.
        public var values: [StoredValue]

        /// A group of `key` with `values`.
        public init(key: StoredValue, values: [StoredValue]) {
            self.key = key
            self.values = values
        }
    }

    /// The groups, ordered and limited as asked; one group without grouping (also when no row matches).
    public var groups: [Group]
    /// How the store found the rows (as for a fetch).
    public var plan: FetchPlan

    /// The groups and the plan.
    public init(groups: [Group], plan: FetchPlan) {
        self.groups = groups
        self.plan = plan
    }
}

/// The running state of one aggregate over the rows of one group.
struct AggregateAccumulator {
    let kind: StoreAggregateRequest.Operation.Kind
    private var count: Int64 = 0
    private var total: StoredValue?
    private var extreme: StoredValue?
    private var mean = 0.0

    init(_ kind: StoreAggregateRequest.Operation.Kind) { self.kind = kind }

    /// Counts a row, with the operand's value on it.
    mutating func add(_ value: StoredValue) throws {
        switch kind {
        case .count:
            count += 1
        case .sum:
            guard !value.isNull else { return }
            total = try total.map { try Arithmetic.apply($0, .add, value) } ?? value
        case .minimum:
            guard !value.isNull else { return }
            if extreme.map({ StoredValue.compare(value, $0) < 0 }) ?? true { extreme = value }
        case .maximum:
            guard !value.isNull else { return }
            if extreme.map({ StoredValue.compare(value, $0) > 0 }) ?? true { extreme = value }
        case .average:
            guard let number = value.doubleValue else { return }
            count += 1
            mean += (number - mean) / Double(count)
        }
    }

    /// Counts `rows` rows at once (a count read from the references).
    mutating func add(count rows: Int) { count += Int64(rows) }

    /// The aggregate's value.
    var value: StoredValue {
        switch kind {
        case .count: .int(count)
        case .sum: total ?? .null
        case .minimum, .maximum: extreme ?? .null
        case .average: count == 0 ? .null : .double(mean)
        }
    }
}

/// Folding rows into groups of aggregates, and ordering the groups: what every store's aggregation does once it has
/// the rows (the default ``DataStore/aggregate(_:)`` and ``RowStorage``'s general path).
struct AggregateFolding {
    let request: StoreAggregateRequest
    private let key: PreparedOperand?
    private let operands: [PreparedOperand?]
    private let lookup: RowLookup
    private(set) var groups: [StoredValue: [AggregateAccumulator]] = [:]
    /// The keys in the order first met (kept for a stable order of equal keys).
    private var keys: [StoredValue] = []

    init(_ request: StoreAggregateRequest, lookup: RowLookup) throws {
        self.request = request
        self.lookup = lookup
        key = try request.groupBy.map(PreparedOperand.init)
        operands = try request.operations.map { try $0.operand.map(PreparedOperand.init) }
        if request.groupBy == nil { start(.null) }
    }

    private mutating func start(_ key: StoredValue) {
        keys.append(key)
        groups[key] = request.operations.map { AggregateAccumulator($0.kind) }
    }

    /// Counts `row`.
    mutating func add(_ row: ModelSnapshot) throws {
        let group = try key?.evaluate(row, lookup: lookup) ?? .null
        if groups[group] == nil { start(group) }
        for index in operands.indices {
            let value = try operands[index]?.evaluate(row, lookup: lookup) ?? .null
            try groups[group]![index].add(value)
        }
    }

    /// Counts `rows` rows of group `key` at once, for a request whose aggregates are all counts.
    mutating func add(count rows: Int, to key: StoredValue) {
        guard rows > 0 else { return }
        if groups[key] == nil { start(key) }
        for index in operands.indices { groups[key]![index].add(count: rows) }
    }

    /// The groups, ordered and limited as the request asks.
    func result() -> [StoreAggregateResult.Group] {
        var result = keys.map { StoreAggregateResult.Group(key: $0, values: groups[$0]!.map(\.value)) }
        switch request.order {
        case .key(let ascending):
            result.sort { ascending ? StoredValue.compare($0.key, $1.key) < 0 : StoredValue.compare($0.key, $1.key) > 0 }
        case let .aggregate(position, ascending):
            guard request.operations.indices.contains(position) else { break }
            result.sort { a, b in
                let order = StoredValue.compare(a.values[position], b.values[position])
                if order != 0 { return ascending ? order < 0 : order > 0 }
                return StoredValue.compare(a.key, b.key) < 0
            }
        }
        if let limit = request.limit { result = Array(result.prefix(max(0, limit))) }
        return result
    }
}

extension DataStore {
    /// The default aggregation: the matching rows fetched (``fetch(_:)``) and folded. NoteKit's stores answer from
    /// indexes and stored references where they can.
    ///
    /// - Throws: what ``fetch(_:)`` throws, or ``FetchError/predicateFailed(entity:reason:)`` when a value cannot be
    ///   summed.
    public func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult {
        var fetch = StoreFetchRequest(entity: request.entity, filter: request.filter, excluding: request.excluding)
        fetch.overlay = request.overlay
        let found = try self.fetch(fetch)
        let lookup = RowLookup { [self] id in request.overlay[id] ?? (rows(for: [id]).first ?? nil) }
        var folding = try AggregateFolding(request, lookup: lookup)
        let filter = try request.filter.map(PreparedFilter.init)
        do {
            for row in found.rows { try folding.add(row) }
            for row in request.additionalRows where try filter?.matches(row, lookup: lookup) ?? true {
                try folding.add(row)
            }
        } catch let failure as EvaluationFailure {
            throw FetchError.predicateFailed(entity: request.entity, reason: failure.reason)
        }
        return StoreAggregateResult(groups: folding.result(), plan: found.plan)
    }
}
