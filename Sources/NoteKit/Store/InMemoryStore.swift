#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A store that keeps its rows in memory only: for tests, previews and scratch data.
///
/// Created by ``ModelConfiguration`` with `isStoredInMemoryOnly: true`. Everything a context does (delete rules,
/// uniqueness, indexes, fetches) behaves exactly as on the file store; only durability differs.
public final class InMemoryStore: DataStore, HistoryHolding {
    /// The schema the store was created for.
    public let schema: Schema
    private let storage: Locked<RowStorage>
    private let broadcaster = HistoryBroadcaster()
    /// The last transaction ``deleteHistory(_:)`` may delete (``HistoryHolding``); nil: no hold.
    private let hold = Locked<UInt64?>(nil)

    /// An empty store for `schema`.
    public init(schema: Schema) {
        self.schema = schema
        storage = Locked(RowStorage(schema: schema))
    }

    deinit { broadcaster.finish() }

    /// The saved rows of `ids`, in order; nil for an identifier never saved or deleted.
    ///
    /// - Complexity: O(`ids.count`).
    public func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        // The storage has no base (it is made by `RowStorage(schema:)`), so its reads cannot throw.
        storage.withLock { storage in storage.withoutBase { storage in try ids.map { try storage.snapshot(for: $0) } } }
    }

    /// Aggregates of the saved rows (see ``DataStore/aggregate(_:)``): counts per to-one target from the stored
    /// references, anything else folded over the matching rows.
    ///
    /// - Throws: ``FetchError``.
    public func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult {
        try storage.withLock { try $0.aggregate(request) }
    }

    /// Which of `ids` the store holds, by look-up.
    ///
    /// - Complexity: a hash look-up per identifier.
    public func containedIdentifiers(_ ids: [PersistentIdentifier]) -> [Bool] {
        storage.withLock { storage in storage.withoutBase { storage in try storage.contains(ids) } }
    }

    /// Runs `request` over the saved rows, through the best declared index when one matches the filter or the sort.
    ///
    /// - Throws: ``FetchError/unwrappedNil(entity:model:)`` when a forced unwrap in the filter meets nil.
    /// - Complexity: O(log n + rows examined) through an index, O(n) for a scan; ``StoreFetchResult/plan`` says which.
    public func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        try storage.withLock { try $0.fetch(request) }
    }

    /// The saved object of `entity` whose unique constraint at position `constraint` has `key`, if any.
    ///
    /// - Complexity: one hash look-up.
    public func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        storage.withLock { $0.withoutBase { try $0.identifier(entity: entity, uniqueConstraint: constraint, key: key) } }
    }

    /// The saved objects of `entity` whose relationship at position `relationship` points at `target`.
    ///
    /// - Complexity: O(objects of `entity`).
    public func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier)
        -> [PersistentIdentifier] {
        storage.withLock { $0.withoutBase { try $0.identifiers(entity: entity, relationship: relationship, referencing: target) } }
    }

    /// Validates `changes` against the saved rows, then applies them all and publishes their history record; nothing
    /// is applied when it throws. The result carries the rows of the objects it updated (``SaveResult/updatedRows``).
    ///
    /// - Throws: ``SaveError`` (a unique key another object has, an object that no longer exists, an insert of an
    ///   identifier already saved, a relationship out of its bounds or to a missing object).
    public func save(_ changes: ChangeSet) throws -> SaveResult {
        try storage.withLock { storage in
            try changes.checkExpectedTransactionNumber(storage.transactionNumber)
            try storage.validate(changes)
            let record = storage.apply(changes)
            broadcaster.publish([record])
            // The updated rows are in memory now; the storage has no base, so reading them cannot throw.
            let updated = storage.withoutBase { storage in try changes.updated.map { try storage.snapshot(for: $0.id) } }
            return SaveResult(transactionNumber: record.number, updatedRows: updated)
        }
    }

    /// The number of the last committed transaction (0 before the first save).
    public var transactionNumber: UInt64 { storage.withLock { $0.transactionNumber } }

    /// The history of every save, less what was deleted.
    public func history() throws -> HistoryLog { storage.withLock { $0.history } }

    /// Deletes the transactions numbered in `ranges` from the history; never throws.
    public func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws {
        let hold = hold.withLock { $0 }
        storage.withLock { $0.history.delete(ranges, committedThrough: $0.transactionNumber, holding: hold) }
    }

    /// Every transaction saved from now on, until the store closes.
    public func transactions() -> AsyncStream<HistoryRecord> { broadcaster.subscribe() }

    /// Holds history after `number` (nil releases it): ``deleteHistory(_:)`` deletes nothing later.
    package func holdHistory(after number: UInt64?) throws { hold.withLock { $0 = number } }

    /// Ends the ``transactions()`` streams; the rows stay readable.
    public func close() throws { broadcaster.finish() }
}
