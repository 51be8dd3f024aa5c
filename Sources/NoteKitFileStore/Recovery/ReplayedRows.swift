#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The rows a log describes, rebuilt record by record: the one place where replay and salvage apply snapshot
/// records, rows and transactions.
struct ReplayedRows {
    /// Each entity's rows in the order they were first inserted, in the order the entities first appeared:
    /// what the store adopts as its tables (``takeTables()``).
    private var tables: [OrderedRows] = []
    private var entityNames: [String] = []
    private var numbers: [String: Int] = [:]
    /// The table of the entity last looked up, by its interned name's identity: consecutive rows mostly share one.
    private var lastEntity: (identity: ObjectIdentifier, table: Int)?
    /// The number of the last transaction applied (or the snapshot's).
    private(set) var lastTransactionNumber: UInt64 = 0
    /// The `.noAction` links of the schema in force.
    private var noAction: NoActionReferences?

    /// Makes `schema` the one later transactions follow (a schema or migration record was read).
    mutating func schemaInForce(_ schema: Schema) {
        noAction = NoActionReferences(schema: schema)
    }

    /// The live objects, each entity's in the order they were first inserted. O(objects).
    var rows: [ModelSnapshot] { tables.flatMap(\.rows) }

    var count: Int { tables.reduce(0) { $0 + $1.count } }

    /// Hands over every entity's objects, by entity name, and keeps none: the tables a store adopts without
    /// copying (``RowStorage/init(schema:adopting:transactionNumber:)``).
    mutating func takeTables() -> [String: OrderedRows] {
        var taken: [String: OrderedRows] = [:]
        for (number, name) in entityNames.enumerated() { taken[name] = tables[number] }
        tables = []
        entityNames = []
        numbers = [:]
        lastEntity = nil
        return taken
    }

    /// The number of the table of `id`'s entity, made when `make` and the entity has none yet.
    private mutating func table(of id: PersistentIdentifier, make: Bool) -> Int? {
        let identity = id.entityIdentity
        if let lastEntity, lastEntity.identity == identity { return lastEntity.table }
        let name = id.entityName
        let number: Int
        if let found = numbers[name] {
            number = found
        } else {
            guard make else { return nil }
            number = tables.count
            tables.append(OrderedRows())
            entityNames.append(name)
            numbers[name] = number
        }
        lastEntity = (identity, number)
        return number
    }

    private func table(of id: PersistentIdentifier) -> Int? {
        if let lastEntity, lastEntity.identity == id.entityIdentity { return lastEntity.table }
        return numbers[id.entityName]
    }

    /// Starts over from a snapshot of the state after transaction `last`.
    mutating func beginSnapshot(after last: UInt64) {
        tables = []
        entityNames = []
        numbers = [:]
        lastEntity = nil
        lastTransactionNumber = last
    }

    /// Adds a snapshot's rows whole, or returns why they cannot be added (and adds none).
    mutating func addSnapshotRows(_ rows: [ModelSnapshot]) -> String? {
        var seen = Set<PersistentIdentifier>(minimumCapacity: rows.count)
        for index in rows.indices {
            let id = rows[index].id
            if contains(id) || !seen.insert(id).inserted { return "\(id) appears twice in the snapshot" }
        }
        append(rows, transactionNumber: lastTransactionNumber)
        return nil
    }

    /// Appends `rows` (none of which is here) to their entities' tables, stamped with `transactionNumber`. Each table
    /// makes room for its own rows of the batch up front: growing by doubling would hold the old and the new buffers at
    /// once, at the replay's peak (a bulk insert's record decoded, its bytes still read).
    private mutating func append(_ rows: [ModelSnapshot], transactionNumber: UInt64) {
        // By index, and reading `id` in place: a `for row in rows` copies every snapshot (a retain and a release of
        // each of its buffers) only to read its identifier.
        var numbers: [Int] = []
        numbers.reserveCapacity(rows.count)
        var counts: [Int] = []
        for index in rows.indices {
            let number = table(of: rows[index].id, make: true)!
            if number >= counts.count { counts += repeatElement(0, count: number + 1 - counts.count) }
            counts[number] += 1
            numbers.append(number)
        }
        for (number, count) in counts.enumerated() where count > 0 { tables[number].reserve(count) }
        for index in rows.indices {
            var row = rows[index]
            row.transactionNumber = transactionNumber
            tables[numbers[index]].append(row)
        }
    }

    /// Applies `transaction` whole through the applier every store shares (``ChangeSet/conflict(with:)``,
    /// ``ChangeSet/apply(to:transactionNumber:noAction:)``), or returns why it does not apply (and changes nothing).
    ///
    /// References that a `.noAction` delete leaves behind are dropped, as every store drops them (see
    /// ``NoActionReferences``), by the rules of the schema last given to ``schemaInForce(_:)``.
    ///
    /// - Parameter consecutive: whether its number must be the next one (replay), or merely a later one (salvage,
    ///   which keeps what still applies after a gap).
    mutating func apply(_ transaction: Transaction, consecutive: Bool = true) -> TransactionConflict? {
        let number = transaction.number
        guard consecutive ? number == lastTransactionNumber + 1 : number > lastTransactionNumber else {
            return .outOfSequence(number: number, last: lastTransactionNumber)
        }
        if let conflict = transaction.changes.conflict(with: self) { return .changes(number: number, conflict) }
        let noAction = noAction
        transaction.changes.apply(to: &self, transactionNumber: number, noAction: noAction)
        lastTransactionNumber = number
        return nil
    }

    /// The first relationship `changes` would set to an object that does not exist once they are applied
    /// (``ChangeSet/missingTarget(with:)``), as the conflict of transaction `number`.
    func missingTarget(in changes: ChangeSet, number: UInt64) -> TransactionConflict? {
        changes.missingTarget(with: self).map { .changes(number: number, $0) }
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
        var next = ReplayedRows()
        next.lastTransactionNumber = lastTransactionNumber
        next.noAction = noAction
        for row in converted { next.tables[next.table(of: row.id, make: true)!].append(row) }
        let transaction = Transaction(number: migration.number, time: migration.time,
                                      changes: ChangeSet(updated: migration.fills))
        if let conflict = next.apply(transaction, consecutive: consecutive) { return conflict.description }
        self = next
        return nil
    }

    /// `rows` with `updates` applied, in the same order.
    static func applying(_ updates: [ModelUpdate], to rows: [ModelSnapshot],
                         transactionNumber: UInt64) -> [ModelSnapshot] {
        guard !updates.isEmpty else { return rows }
        var byID: [PersistentIdentifier: ModelUpdate] = [:]
        for update in updates { byID[update.id] = update }
        return rows.map { row in byID[row.id].map { row.applying($0, transactionNumber: transactionNumber) } ?? row }
    }
}

/// The objects as the applier of change sets sees them: all in memory, so no read fails; a table is made for an
/// entity when its first row is inserted (a replay decodes every row against the schema in force, so each names a
/// known entity).
extension ReplayedRows: ChangeableRows {
    typealias ReadFailure = Never

    func hasEntity(of id: PersistentIdentifier) -> Bool { true }

    /// Whether object `id` exists.
    func contains(_ id: PersistentIdentifier) -> Bool { table(of: id).map { tables[$0].contains(id) } ?? false }

    func row(_ id: PersistentIdentifier) -> ModelSnapshot? { table(of: id).flatMap { tables[$0].row(id) } }

    mutating func remove(_ id: PersistentIdentifier) { tables[table(of: id)!].remove(id) }

    mutating func update(_ update: ModelUpdate, transactionNumber: UInt64) {
        tables[table(of: update.id)!].modify(update.id) { $0.applying(update, transactionNumber: transactionNumber) }
    }

    mutating func insert(_ rows: [ModelSnapshot], transactionNumber: UInt64) {
        append(rows, transactionNumber: transactionNumber)
    }
}
