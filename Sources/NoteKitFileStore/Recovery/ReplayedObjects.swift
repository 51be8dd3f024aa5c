#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The objects a log describes, rebuilt record by record: the one place where replay and salvage apply
/// snapshots, rows and transactions.
struct ReplayedObjects {
    /// The objects in the order they were first inserted; nil where one was deleted.
    private var slots: [ModelSnapshot?] = []
    /// Where each live object is in `slots`.
    private var index: [PersistentIdentifier: Int] = [:]
    /// The number of the last transaction applied (or the snapshot's).
    private(set) var lastTransaction: UInt64 = 0
    /// The `.noAction` links of the schema in force.
    private var noAction: NoActionReferences?

    /// Makes `schema` the one later transactions follow (a schema or migration record was read).
    mutating func schemaInForce(_ schema: Schema) {
        noAction = NoActionReferences(schema: schema)
    }

    /// The live objects in the order they were first inserted. O(objects inserted since the last snapshot).
    var rows: [ModelSnapshot] { slots.compactMap { $0 } }

    var count: Int { index.count }

    /// Starts over from a snapshot of the state after transaction `last`.
    mutating func beginSnapshot(after last: UInt64) {
        slots.removeAll(keepingCapacity: true)
        index.removeAll(keepingCapacity: true)
        lastTransaction = last
    }

    /// Adds a snapshot's rows; returns why one cannot be added.
    mutating func addSnapshotRows(_ rows: [ModelSnapshot]) -> String? {
        reserve(rows.count)
        for var row in rows {
            guard index[row.id] == nil else { return "\(row.id) appears twice in the snapshot" }
            row.version = lastTransaction
            insert(row)
        }
        return nil
    }

    /// Applies `transaction` whole, or returns why it does not apply (and changes nothing).
    ///
    /// References that a `.noAction` delete leaves behind are dropped, as every store drops them (see
    /// ``NoActionReferences``), by the rules of the schema last given to ``schemaInForce(_:)``.
    ///
    /// - Parameter consecutive: whether its number must be the next one (replay), or merely a later one (salvage,
    ///   which keeps what still applies after a gap).
    mutating func apply(_ transaction: Transaction, consecutive: Bool = true) -> String? {
        guard consecutive ? transaction.number == lastTransaction + 1 : transaction.number > lastTransaction else {
            return "transaction \(transaction.number) follows transaction \(lastTransaction)"
        }
        let changes = transaction.changes
        var deleted = Set<PersistentIdentifier>()
        for deletion in changes.deleted {
            guard index[deletion.id] != nil, deleted.insert(deletion.id).inserted else {
                return "transaction \(transaction.number) deletes \(deletion.id), which does not exist"
            }
        }
        for update in changes.updated where index[update.id] == nil || deleted.contains(update.id) {
            return "transaction \(transaction.number) updates \(update.id), which does not exist"
        }
        var inserted = Set<PersistentIdentifier>()
        for row in changes.inserted where (index[row.id] != nil && !deleted.contains(row.id))
            || !inserted.insert(row.id).inserted {
            return "transaction \(transaction.number) inserts \(row.id), which already exists"
        }
        if let noAction, !noAction.isEmpty {
            let row = { (id: PersistentIdentifier) in self.index[id].flatMap { self.slots[$0] } }
            for update in noAction.updates(deleting: changes.deleted, row: row) {
                let position = index[update.id]!
                slots[position] = slots[position]!.applying(update, version: transaction.number)
            }
        }
        for deletion in changes.deleted {
            if let position = index.removeValue(forKey: deletion.id) { slots[position] = nil }
        }
        for update in changes.updated {
            let position = index[update.id]!
            slots[position] = slots[position]!.applying(update, version: transaction.number)
        }
        // Room for the inserts up front: growing by doubling would hold the old and the new buffers at once, at the
        // replay's peak (a bulk insert's record decoded, its bytes still read).
        reserve(changes.inserted.count)
        for var row in changes.inserted {
            row.version = transaction.number
            insert(row)
        }
        lastTransaction = transaction.number
        return nil
    }

    /// Whether object `id` exists.
    func contains(_ id: PersistentIdentifier) -> Bool { index[id] != nil }

    /// The first relationship `changes` would set to an object that does not exist once they are applied: a
    /// salvage that keeps transactions after a lost one leaves such a transaction out, so that no relationship of
    /// its result points at nothing.
    func danglingTarget(in changes: ChangeSet) -> (source: PersistentIdentifier, target: PersistentIdentifier)? {
        let deleted = Set(changes.deleted.map(\.id)), inserted = Set(changes.inserted.map(\.id))
        func exists(_ id: PersistentIdentifier) -> Bool {
            inserted.contains(id) || (index[id] != nil && !deleted.contains(id))
        }
        for row in changes.inserted {
            for target in row.relationships.flatMap(\.identifiers) where !exists(target) { return (row.id, target) }
        }
        for update in changes.updated {
            for change in update.relationships {
                switch change.kind {
                case .toOne(let target?) where !exists(target): return (update.id, target)
                case .toMany(let added, _):
                    if let target = added.first(where: { !exists($0) }) { return (update.id, target) }
                default: break
                }
            }
        }
        return nil
    }

    /// Converts every object from `previous` to the migration's schema and applies the values it recorded, as one
    /// transaction; returns why it does not apply (and changes nothing).
    mutating func migrate(from previous: Schema, by migration: MigrationRecord, consecutive: Bool = true) -> String? {
        let converted: [ModelSnapshot]
        do {
            converted = try LightweightMigration(replaying: previous, to: migration.schema).convert(rows)
        } catch {
            return "the recorded migration no longer applies: \(error)"
        }
        var next = ReplayedObjects()
        next.lastTransaction = lastTransaction
        next.noAction = noAction
        for row in converted { next.insert(row) }
        let transaction = Transaction(number: migration.number, time: migration.time,
                                      changes: ChangeSet(updated: migration.fills))
        if let reason = next.apply(transaction, consecutive: consecutive) { return reason }
        self = next
        return nil
    }

    /// `rows` with `updates` applied, in the same order.
    static func applying(_ updates: [ModelUpdate], to rows: [ModelSnapshot], version: UInt64) -> [ModelSnapshot] {
        guard !updates.isEmpty else { return rows }
        var byID: [PersistentIdentifier: ModelUpdate] = [:]
        for update in updates { byID[update.id] = update }
        return rows.map { row in byID[row.id].map { row.applying($0, version: version) } ?? row }
    }

    /// Makes room for `count` more objects when they would not fit, growing at least twofold (so that many small
    /// reservations stay linear), in one step for a large batch.
    private mutating func reserve(_ count: Int) {
        let needed = slots.count + count
        guard needed > slots.capacity else { return }
        let capacity = max(needed, 2 * slots.capacity)
        slots.reserveCapacity(capacity)
        index.reserveCapacity(capacity)
    }

    private mutating func insert(_ row: ModelSnapshot) {
        index[row.id] = slots.count
        slots.append(row)
    }
}
