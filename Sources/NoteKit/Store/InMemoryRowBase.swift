#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A ``RowBase`` over rows held in memory: the reference a checkpoint reader is compared against, and the base of
/// tests of ``RowStorage``.
///
/// Its index entries are in an ``IndexTree`` each, so they come in exactly the index's order. It counts its reads
/// and, when asked to, fails one of them, to test what a damaged base does.
package final class InMemoryRowBase: RowBase {
    /// The entity whose rows these are.
    package let entityName: String
    private let rows: [ModelSnapshot]
    private let numbers: [UUID: Int]
    private let indexes: [IndexTree]
    private let uniques: [[[StoredValue]: Int]]
    private let failingAt: Int?
    private let counts = Mutex(Counts())

    private struct Counts {
        var reads = 0
        var rowCalls = 0
        var rowsRead = 0
    }

    /// What a failing read throws.
    package struct InjectedFailure: Error, CustomStringConvertible {
        /// The number of the read that failed (from 1).
        package var read: Int
        package var description: String { "read \(read) of the base failed (injected)" }
    }

    /// A base of `rows`, numbered in their order, for `entity`; read number `failingAt` (counting every method
    /// call from 1) throws ``InjectedFailure``, the others succeed.
    ///
    /// - Complexity: O(n log n): one sort per declared index.
    package init(entity: Schema.Entity, rows: [ModelSnapshot], failingAt: Int? = nil) {
        entityName = entity.name
        self.rows = rows
        self.failingAt = failingAt
        numbers = Dictionary(rows.enumerated().map { ($1.id.primaryKey, $0) }, uniquingKeysWith: { _, last in last })
        indexes = entity.indexes.map { names in
            let slots = names.compactMap(entity.attributeIndex(named:))
            var tree = IndexTree(keyCount: slots.count)
            tree.bulkLoad(rows.lazy.map(Optional.some), slots: slots)
            return tree
        }
        uniques = entity.uniqueConstraints.map { names in
            let slots = names.compactMap(entity.attributeIndex(named:))
            var holders: [[StoredValue]: Int] = [:]
            for (number, row) in rows.enumerated() {
                let key = slots.map { row.attributes[$0] }
                if !key.contains(where: \.isNull) { holders[key] = number }
            }
            return holders
        }
    }

    /// How many rows the base holds.
    package var count: Int { rows.count }

    /// How many calls were made (each method call counts one).
    package var reads: Int { counts.withLock { $0.reads } }
    /// How many calls of ``rows(_:)`` were made.
    package var rowCalls: Int { counts.withLock { $0.rowCalls } }
    /// How many rows ``rows(_:)`` returned in all.
    package var rowsRead: Int { counts.withLock { $0.rowsRead } }

    /// Sets ``rowCalls`` and ``rowsRead`` back to 0 (``reads`` keeps counting, for ``init(entity:rows:failingAt:)``).
    package func resetCounts() {
        counts.withLock {
            $0.rowCalls = 0
            $0.rowsRead = 0
        }
    }

    private func read(rows n: Int = 0) throws {
        let read = counts.withLock { counts in
            counts.reads += 1
            if n > 0 {
                counts.rowCalls += 1
                counts.rowsRead += n
            }
            return counts.reads
        }
        if read == failingAt { throw InjectedFailure(read: read) }
    }

    /// The row number of `primaryKey`, or nil.
    package func rowNumber(of primaryKey: UUID) throws -> Int? {
        try read()
        return numbers[primaryKey]
    }

    /// The rows numbered `numbers`, in that order.
    package func rows(_ numbers: [Int]) throws -> [ModelSnapshot] {
        try read(rows: numbers.count)
        return numbers.map { rows[$0] }
    }

    /// Visits the entries of index `index` between the bounds, in the ``IndexTree``'s order.
    package func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                           _ body: (IndexEntry, Int) throws -> Bool) throws {
        try read()
        var failure: (any Error)?
        indexes[index].scan(from: lower, to: upper, reverse: reverse) { entry in
            do { return try body(entry, numbers[entry.id.primaryKey]!) } catch {
                failure = error
                return false
            }
        }
        if let failure { throw failure }
    }

    /// The row number of the holder of `key`, or nil.
    package func uniqueHolder(_ constraint: Int, key: [StoredValue]) throws -> Int? {
        try read()
        return uniques[constraint][key]
    }
}
