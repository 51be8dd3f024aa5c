#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One entity's saved rows held outside memory (the file store's checkpoint, docs/FORMAT.md *Version 2*), read on
/// demand: the base that ``RowStorage`` lays the changes made since over.
///
/// A base is immutable. Row numbers run from 0 to `count - 1` in the order the rows were first inserted. Every
/// method may be called from any thread. A method throws when what it reads is unreadable, or is not what the base
/// describes (a page or row that fails its checksum, keys out of order): the store then stops using the base.
package protocol RowBase: AnyObject, Sendable {
    /// The entity whose rows these are.
    var entityName: String { get }

    /// How many rows the base holds.
    var count: Int { get }

    /// The row number of the object whose primary key is `primaryKey`, or nil when the base does not hold it.
    ///
    /// - Complexity: O(log `count`) page reads, none for a page read before.
    func rowNumber(of primaryKey: UUID) throws -> Int?

    /// The rows numbered `numbers`, in that order, each with its version. Every number is below `count`.
    func rows(_ numbers: [Int]) throws -> [ModelSnapshot]

    /// Visits the entries of the entity's declared index `index` (its position in `Schema.Entity.indexes`)
    /// between `lower` and `upper` (nil: unbounded), in the order an ``IndexTree`` gives them (key, then
    /// identifier; reversed when `reverse`), each with its row number. `body` returns false to stop.
    func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                   _ body: (IndexEntry, Int) throws -> Bool) throws

    /// The row number of the row holding `key` for the entity's unique constraint `constraint` (its position in
    /// `Schema.Entity.uniqueConstraints`), or nil. `key` holds no null.
    func uniqueHolder(_ constraint: Int, key: [StoredValue]) throws -> Int?
}
