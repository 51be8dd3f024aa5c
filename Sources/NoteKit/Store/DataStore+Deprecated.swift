// The names the transaction number had before issue 36 (item 5) gave it one name. Each forwards to the new name, so
// that code written against them still builds, with a warning that names the replacement.

extension DataStore {
    /// The number of the last committed transaction: ``transactionNumber``.
    @available(*, deprecated, renamed: "transactionNumber")
    public var generation: UInt64 { transactionNumber }
}

extension ModelSnapshot {
    /// The number of the transaction that last wrote this row: ``transactionNumber``.
    @available(*, deprecated, renamed: "transactionNumber")
    public var version: UInt64 {
        get { transactionNumber }
        set { transactionNumber = newValue }
    }

    /// A row of object `id`, written by transaction `version`:
    /// `init(id:attributes:relationships:transactionNumber:)`.
    @available(*, deprecated, renamed: "init(id:attributes:relationships:transactionNumber:)")
    public init(id: PersistentIdentifier, attributes: [StoredValue], relationships: [RelationshipTargets],
                version: UInt64) {
        self.init(id: id, attributes: attributes, relationships: relationships, transactionNumber: version)
    }

    /// A row of object `id`, written by transaction `version`: `init(id:attributes:relationships:transactionNumber:)`.
    @available(*, deprecated, renamed: "init(id:attributes:relationships:transactionNumber:)")
    public init(id: PersistentIdentifier, attributes: AttributeValues, relationships: [RelationshipTargets],
                version: UInt64) {
        self.init(id: id, attributes: attributes, relationships: relationships, transactionNumber: version)
    }

    /// A row of object `id`, written by transaction `version`: `init(id:attributes:relationships:transactionNumber:)`.
    @available(*, deprecated, renamed: "init(id:attributes:relationships:transactionNumber:)")
    public init(id: PersistentIdentifier, attributes: AttributeValues, relationships: RelationshipValues,
                version: UInt64) {
        self.init(id: id, attributes: attributes, relationships: relationships, transactionNumber: version)
    }

    /// This row with `update` applied, stamped with transaction `version`: ``applying(_:transactionNumber:)``.
    @available(*, deprecated, renamed: "applying(_:transactionNumber:)")
    public func applying(_ update: ModelUpdate, version: UInt64) -> ModelSnapshot {
        applying(update, transactionNumber: version)
    }
}

extension SaveResult {
    /// The number of the transaction the save committed: ``transactionNumber``.
    @available(*, deprecated, renamed: "transactionNumber")
    public var generation: UInt64 {
        get { transactionNumber }
        set { transactionNumber = newValue }
    }

    /// The result of a save that committed transaction `generation`: ``init(transactionNumber:updatedRows:)``.
    @available(*, deprecated, renamed: "init(transactionNumber:)")
    public init(generation: UInt64) { self.init(transactionNumber: generation) }
}

// The names a row had before issue 36 (item 5) gave it one name: *snapshot* and *record*.

extension DataStore {
    /// The rows of `ids`, in order: ``rows(for:)``.
    @available(*, deprecated, renamed: "rows(for:)")
    public func snapshots(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] { rows(for: ids) }
}

extension StoreFetchRequest.ResultType {
    /// The rows themselves: ``rows``.
    @available(*, deprecated, renamed: "rows")
    public static var snapshots: Self { .rows }
}

extension StoreFetchResult {
    /// The matching rows: ``rows``.
    @available(*, deprecated, renamed: "rows")
    public var snapshots: [ModelSnapshot] {
        get { rows }
        set { rows = newValue }
    }
}

extension FetchPlan {
    /// How many stored rows were read to answer: ``rowsExamined``.
    @available(*, deprecated, renamed: "rowsExamined")
    public var recordsExamined: Int {
        get { rowsExamined }
        set { rowsExamined = newValue }
    }

    /// How many rows the fetch returned: ``rowsReturned``.
    @available(*, deprecated, renamed: "rowsReturned")
    public var recordsReturned: Int {
        get { rowsReturned }
        set { rowsReturned = newValue }
    }

    /// A plan with its counts under their former names:
    /// `init(entity:index:indexEqualityPrefix:indexRange:sortedByIndex:rowsExamined:rowsReturned:evaluatedInMemory:)`.
    @available(*, deprecated, renamed:
        "init(entity:index:indexEqualityPrefix:indexRange:sortedByIndex:rowsExamined:rowsReturned:evaluatedInMemory:)")
    public init(entity: String, index: [String]? = nil, indexEqualityPrefix: Int = 0, indexRange: Bool = false,
                sortedByIndex: Bool = false, recordsExamined: Int, recordsReturned: Int,
                evaluatedInMemory: Bool = false) {
        self.init(entity: entity, index: index, indexEqualityPrefix: indexEqualityPrefix, indexRange: indexRange,
                  sortedByIndex: sortedByIndex, rowsExamined: recordsExamined, rowsReturned: recordsReturned,
                  evaluatedInMemory: evaluatedInMemory)
    }
}
