#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// One committed transaction as a store keeps it in its history: its number, when and by whom it was made, and
/// which objects it inserted, updated and deleted. Contexts turn records into ``DefaultHistoryTransaction``s.
///
/// Records name entities and properties by name, so they stay readable after a migration renames or removes them.
public struct HistoryRecord: Sendable, Hashable {
    /// The transaction's number: 1 for a store's first transaction, then one more per transaction.
    public var number: UInt64
    /// When the transaction was committed.
    public var timestamp: Date
    /// The saving context's ``ModelContext/author``.
    public var author: String?
    /// The objects inserted, in the order they were saved.
    public var inserted: [PersistentIdentifier]
    /// The objects updated, each with the names of the attributes and relationships that changed.
    public var updated: [Update]
    /// The objects deleted, each with its tombstone (the values of attributes marked
    /// ``Schema/Attribute/Option/preserveValueOnDeletion``, by name).
    public var deleted: [ModelDeletion]

    /// One updated object.
    public struct Update: Sendable, Hashable {
        /// The updated object's identifier.
        public var id: PersistentIdentifier
        /// The names of the changed attributes, then of the changed relationships, in declaration order.
        public var properties: [String]

        /// An update of object `id` that changed the properties named `properties`.
        public init(id: PersistentIdentifier, properties: [String]) {
            self.id = id
            self.properties = properties
        }
    }

    /// The author NoteKit records for the transaction of a lightweight migration.
    public static let migrationAuthor = "NoteKit.migration"

    /// A record from its parts, as a store reads one back from disk.
    public init(number: UInt64, timestamp: Date, author: String?, inserted: [PersistentIdentifier],
                updated: [Update], deleted: [ModelDeletion]) {
        self.number = number
        self.timestamp = timestamp
        self.author = author
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }

    /// The record of `changes`, committed as transaction `number` of a store whose schema is `schema`.
    ///
    /// - Complexity: O(changed objects + changed properties).
    public init(number: UInt64, timestamp: Date, changes: ChangeSet, schema: Schema) {
        self.init(number: number, timestamp: timestamp, author: changes.author,
                  inserted: changes.inserted.map(\.id),
                  updated: changes.updated.map { update in
                      let entity = schema.entity(named: update.id.entityName)
                      let names = update.attributes.compactMap { change in
                          entity.flatMap { change.index < $0.attributes.count ? $0.attributes[change.index].name : nil }
                      } + update.relationships.compactMap { change in
                          entity.flatMap { change.index < $0.relationships.count ? $0.relationships[change.index].name : nil }
                      }
                      return Update(id: update.id, properties: names)
                  },
                  deleted: changes.deleted)
    }

    /// How many objects the transaction changed.
    public var changeCount: Int { inserted.count + updated.count + deleted.count }
}

/// A store's retained history: the records kept, oldest first, and the transactions deleted from it.
///
/// Every store that keeps history holds one, appends to it as it commits change sets, and returns it from
/// ``DataStore/history()``.
public struct HistoryLog: Sendable, Hashable {
    /// The records kept, in transaction order.
    public private(set) var records: [HistoryRecord] = []
    /// The numbers of the deleted transactions, as sorted, disjoint, non-adjacent ranges.
    public private(set) var deleted: [ClosedRange<UInt64>] = []

    /// An empty log: no transaction recorded, none deleted.
    public init() {}

    /// A log holding `records` (in transaction order) with the transactions in `deleted` gone.
    public init(records: [HistoryRecord], deleted: [ClosedRange<UInt64>]) {
        self.records = records
        self.deleted = Self.normalized(deleted)
        let log = self
        if !deleted.isEmpty { self.records.removeAll { log.isDeleted($0.number) } }
    }

    /// Appends a committed transaction's record.
    public mutating func append(_ record: HistoryRecord) { records.append(record) }

    /// The number of the oldest transaction kept, if any.
    public var oldestRetained: UInt64? { records.first?.number }

    /// Whether transaction `number` was deleted from history.
    ///
    /// - Complexity: O(log ranges).
    public func isDeleted(_ number: UInt64) -> Bool {
        var low = 0, high = deleted.count
        while low < high {
            let middle = (low + high) / 2
            if deleted[middle].upperBound < number { low = middle + 1 } else { high = middle }
        }
        return low < deleted.count && deleted[low].contains(number)
    }

    /// Deletes the transactions numbered in `ranges` (numbers never committed or already deleted are ignored).
    ///
    /// - Complexity: O(records + ranges).
    public mutating func delete(_ ranges: [ClosedRange<UInt64>]) {
        guard !ranges.isEmpty else { return }
        deleted = Self.normalized(deleted + ranges)
        let log = self
        records.removeAll { log.isDeleted($0.number) }
    }

    /// Deletes the transactions numbered in `ranges` that were committed: up to `last`, the last committed one.
    /// Numbers above it stay deletable later.
    /// With `hold`, only transactions up to it are deleted: those after it are held (``HistoryHolding``: a client
    /// reading history as a queue has not consumed them yet).
    package mutating func delete(_ ranges: [ClosedRange<UInt64>], committedThrough last: UInt64,
                                 holding hold: UInt64? = nil) {
        let limit = min(last, hold ?? last)
        delete(ranges.compactMap { range in
            guard limit >= 1, range.lowerBound <= limit else { return nil }
            return max(1, range.lowerBound)...min(range.upperBound, limit)
        })
    }

    /// Deletes all but the latest `count` records once more than `count + slack` are kept, so that keeping a
    /// bounded history costs O(1) per transaction, amortized.
    ///
    /// `hold`, asked only when something would be deleted, gives the last transaction that may be deleted: those
    /// after it are kept whatever `count` says (``HistoryHolding``: not consumed yet).
    package mutating func keepLatest(_ count: Int, slack: Int, holding hold: () -> UInt64? = { nil }) {
        guard records.count > max(0, count) + max(0, slack) else { return }
        var newestDeleted = records[records.count - max(0, count) - 1].number
        if let hold = hold() { newestDeleted = min(newestDeleted, hold) }
        guard newestDeleted >= 1, let oldest = records.first?.number, oldest <= newestDeleted else { return }
        delete([1...newestDeleted])
    }

    /// `ranges` sorted, with overlapping and adjacent ranges merged.
    static func normalized(_ ranges: [ClosedRange<UInt64>]) -> [ClosedRange<UInt64>] {
        var merged: [ClosedRange<UInt64>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, last.upperBound == .max || range.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// `numbers` as sorted ranges of consecutive numbers.
    package static func ranges(of numbers: [UInt64]) -> [ClosedRange<UInt64>] {
        normalized(numbers.map { $0...$0 })
    }
}

/// Hands every committed transaction to the streams subscribed to a store (``DataStore/transactions()``).
///
/// Publishing never blocks: each subscriber's stream buffers what it has not consumed yet.
package final class HistoryBroadcaster: Sendable {
    private let subscribers = Mutex<[UInt64: AsyncStream<HistoryRecord>.Continuation]>([:])
    private let nextKey = Atomic<UInt64>(0)

    package init() {}

    /// A stream of every record published from now on, until the stream's consumer stops.
    package func subscribe() -> AsyncStream<HistoryRecord> {
        let key = nextKey.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream<HistoryRecord>.makeStream(bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: key) }
        }
        subscribers.withLock { $0[key] = continuation }
        return stream
    }

    /// Whether any stream is subscribed (publishing costs nothing otherwise).
    package var hasSubscribers: Bool { subscribers.withLock { !$0.isEmpty } }

    /// Hands `records` to every subscriber, in order.
    package func publish(_ records: [HistoryRecord]) {
        guard !records.isEmpty else { return }
        let continuations = subscribers.withLock { Array($0.values) }
        for continuation in continuations {
            for record in records { continuation.yield(record) }
        }
    }

    /// Ends every subscriber's stream (the store closed).
    package func finish() {
        let continuations = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
