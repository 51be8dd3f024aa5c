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

    /// The rows numbered `numbers`, in that order, each with its transaction number. Every number is below `count`.
    func rows(_ numbers: [Int]) throws -> [ModelSnapshot]

    /// Visits the entries of the entity's declared index `index` (its position in `Schema.Entity.indexes`)
    /// between `lower` and `upper` (nil: unbounded), in the order an ``IndexTree`` gives them (key, then
    /// identifier; reversed when `reverse`), each with its row number. `body` returns false to stop.
    func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                   _ body: (IndexEntry, Int) throws -> Bool) throws

    /// The row number of the row holding `key` for the entity's unique constraint `constraint` (its position in
    /// `Schema.Entity.uniqueConstraints`), or nil. `key` holds no null.
    func uniqueHolder(_ constraint: Int, key: [StoredValue]) throws -> Int?

    /// The rows numbered `numbers`, in that order, each with its transaction number, decoding at least the attributes
    /// `attributes` marks true (one flag per attribute position); the others may hold `.null`. What a fetch with
    /// ``FetchDescriptor/propertiesToFetch`` reads. Relationships are always whole. The default reads whole rows.
    func rows(_ numbers: [Int], decoding attributes: [Bool]) throws -> [ModelSnapshot]

    /// As ``scanIndex(_:from:to:reverse:_:)``, handing `body` each entry's row too, decoded as
    /// ``rows(_:decoding:)`` decodes it (the index's own attributes are always decoded). The default reads each
    /// entry's whole row.
    func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                   decoding attributes: [Bool], _ body: (IndexEntry, Int, ModelSnapshot) throws -> Bool) throws

    /// Visits the row numbers of the entries of the entity's declared index `index` between `lower` and `upper`
    /// (nil: unbounded), in the index's order (reversed when `reverse`), reading no row but those the bounds' binary
    /// searches probe: what a walk of the index needs when it only asks whether each row is one of a few it knows by
    /// number (an ordered read of a relationship's rows), or counts the entries of a range. `body` returns false to
    /// stop. The order of the keys is not checked here: a caller checks the rows it reads. The default reads the
    /// entries through ``scanIndex(_:from:to:reverse:_:)``.
    ///
    /// - Complexity: O(log `count`) rows read for the bounds, then O(entries visited), one page read per page of row
    ///   numbers.
    func indexRowNumbers(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                         _ body: (Int) throws -> Bool) throws

    /// The row numbers of the objects whose primary keys are `primaryKeys`, in that order (nil for one the base
    /// does not hold). The default asks ``rowNumber(of:)`` for each.
    func rowNumbers(of primaryKeys: [UUID]) throws -> [Int?]

    /// How many whole rows the base keeps once read, to answer later reads without decoding them again (0, the
    /// default: none). A fetch that needs only some attributes of the rows it examines decodes only those when the
    /// entity has more rows than this: its rows would not stay kept anyway. An entity that fits is read whole, so
    /// that the next query finds its rows decoded.
    var keptRows: Int { get }
}

extension RowBase {
    package func rows(_ numbers: [Int], decoding attributes: [Bool]) throws -> [ModelSnapshot] { try rows(numbers) }

    package var keptRows: Int { 0 }

    package func indexRowNumbers(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                                 _ body: (Int) throws -> Bool) throws {
        try scanIndex(index, from: lower, to: upper, reverse: reverse) { _, number in try body(number) }
    }

    package func rowNumbers(of primaryKeys: [UUID]) throws -> [Int?] { try primaryKeys.map { try rowNumber(of: $0) } }

    package func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                           decoding attributes: [Bool],
                           _ body: (IndexEntry, Int, ModelSnapshot) throws -> Bool) throws {
        try scanIndex(index, from: lower, to: upper, reverse: reverse) { entry, number in
            try body(entry, number, try rows([number])[0])
        }
    }
}
