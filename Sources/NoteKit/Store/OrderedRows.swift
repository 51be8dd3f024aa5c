/// The rows of one entity in the order they were inserted, each found by its identifier: the in-memory form of
/// an entity's table. A file store's replay builds one per entity as it applies the log, and the store's
/// ``RowStorage`` adopts them as its tables (``RowStorage/init(schema:adopting:transactionNumber:)``) without copying a
/// row or hashing an identifier again.
///
/// A removed row leaves a hole (nil) so that later rows keep their positions; holes are squeezed out once they
/// are more than half of the slots, as a table does.
package struct OrderedRows {
    /// The rows by position; nil where one was removed.
    package private(set) var slots: ContiguousArray<ModelSnapshot?> = []
    /// The position of each row in `slots`.
    package private(set) var positions = RowPositions()
    /// The number of nil slots.
    package private(set) var holes = 0

    package init() {}

    /// The number of rows.
    package var count: Int { positions.count }

    /// Whether a row of `id` is here. One hash look-up.
    package func contains(_ id: PersistentIdentifier) -> Bool { position(of: id) != nil }

    /// The row of `id`, if here. One hash look-up.
    package func row(_ id: PersistentIdentifier) -> ModelSnapshot? { position(of: id).flatMap { slots[$0] } }

    /// The position in `slots` of the row of `id`, if here. One hash look-up.
    package func position(of id: PersistentIdentifier) -> Int? { held(id)?.position }

    /// Where `positions` holds `id`, confirmed against the identifier of the row it points at.
    private func held(_ id: PersistentIdentifier) -> RowPositions.Found? {
        // `positions` points only at rows that are here.
        positions.find(id) { slots[$0]!.id }
    }

    /// The rows in insertion order.
    package var rows: [ModelSnapshot] {
        var rows: [ModelSnapshot] = []
        rows.reserveCapacity(count)
        for case let row? in slots { rows.append(row) }
        return rows
    }

    /// Makes room for `count` more rows when they would not fit, growing at least twofold (so that many small
    /// reservations stay linear), in one step for a large batch: growing by doubling would hold the old and the
    /// new buffers at once.
    package mutating func reserve(_ count: Int) {
        let needed = slots.count + count
        guard needed > slots.capacity else { return }
        let capacity = max(needed, 2 * slots.capacity)
        slots.reserveCapacity(capacity)
        positions.reserveCapacity(capacity)
    }

    /// Adds `row` after every other.
    ///
    /// - Precondition: no row of `row.id` is here (the caller checked; a replay refuses a record that inserts an
    ///   existing object before applying any of it).
    package mutating func append(_ row: ModelSnapshot) {
        positions.insert(row.id, at: slots.count)
        slots.append(row)
    }

    /// Removes the row of `id`; returns whether it was here.
    @discardableResult
    package mutating func remove(_ id: PersistentIdentifier) -> Bool {
        guard let found = held(id) else { return false }
        positions.remove(found)
        slots[found.position] = nil
        holes += 1
        if Self.isWorthSqueezing(holes: holes, slots: slots.count) { squeeze() }
        return true
    }

    /// Whether `holes` of `slots` are worth squeezing out: past 64, and more than half. The one rule of a replay's
    /// tables and of the store's.
    package static func isWorthSqueezing(holes: Int, slots: Int) -> Bool { holes > 64 && holes > slots / 2 }

    /// Replaces the row of `id` with what `change` makes of it; returns whether it was here.
    @discardableResult
    package mutating func modify(_ id: PersistentIdentifier, _ change: (ModelSnapshot) -> ModelSnapshot) -> Bool {
        guard let position = position(of: id), let row = slots[position] else { return false }
        slots[position] = change(row)
        return true
    }

    /// Takes the holes out, renumbering the rows after them.
    private mutating func squeeze() {
        var kept = ContiguousArray<ModelSnapshot?>()
        kept.reserveCapacity(slots.count - holes)
        positions.removeAll(keepingCapacity: true)
        for case let row? in slots {
            positions.insert(row.id, at: kept.count)
            kept.append(row)
        }
        slots = kept
        holes = 0
    }
}
