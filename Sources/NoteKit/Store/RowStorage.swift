#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The rows of a store in memory, with their indexes and unique constraints: the part every store shares.
///
/// ``InMemoryStore`` is this and nothing else; the file store keeps one and appends each change set to its log
/// before applying it here. Not thread-safe: a store guards it with a lock.
///
/// Saves are split in two so a store can persist between them: ``validate(_:)`` throws and changes nothing;
/// ``apply(_:)`` cannot fail.
package final class RowStorage {
    /// The schema the rows follow.
    package let schema: Schema
    private var tables: [String: EntityTable]
    /// Increases by one with each applied change set.
    package private(set) var generation: UInt64 = 0
    /// A record of every change set applied, less what was deleted from history.
    package var history = HistoryLog()

    /// What a `.noAction` delete leaves behind, dropped when the delete is applied.
    private let noActionReferences: NoActionReferences

    /// Empty storage for `schema`.
    package init(schema: Schema) {
        self.schema = schema
        tables = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, EntityTable(entity: $0)) })
        noActionReferences = NoActionReferences(schema: schema)
    }

    // MARK: Reading

    /// The row of `id`, if stored.
    package func snapshot(for id: PersistentIdentifier) -> ModelSnapshot? {
        tables[id.entityName]?.row(id)
    }

    /// How many rows `entity` has.
    package func count(of entity: String) -> Int { tables[entity]?.count ?? 0 }

    /// Every row of `entity`, in insertion order.
    package func snapshots(of entity: String) -> [ModelSnapshot] {
        tables[entity]?.rows.compactMap { $0 } ?? []
    }

    /// The entries of `entity`'s declared index `index` (its position in `Schema.Entity.indexes`), in the index's
    /// order: what a checkpoint lists, without sorting again.
    ///
    /// - Complexity: O(rows of the entity).
    package func indexEntries(of entity: String, index: Int) -> [IndexEntry] {
        guard let table = tables[entity], index < table.indexes.count else { return [] }
        return table.indexes[index].entries
    }

    /// The holder of a unique key, if any.
    package func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        guard let table = tables[entity], constraint < table.uniques.count else { return nil }
        return table.uniques[constraint][key]
    }

    /// Rows of `entity` whose relationship `relationship` targets `target`.
    package func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier)
        -> [PersistentIdentifier] {
        guard let table = tables[entity] else { return [] }
        return table.rows.compactMap { row in
            guard let row, row.relationships[relationship].contains(target) else { return nil }
            return row.id
        }
    }

    // MARK: Saving

    /// Checks that `changes` can be applied: inserted objects are new, updated and deleted ones exist, and no
    /// unique constraint would hold two objects with the same key.
    ///
    /// - Throws: ``SaveError``; nothing is changed either way.
    package func validate(_ changes: ChangeSet) throws {
        var touched = Set<String>()
        for row in changes.inserted {
            guard let table = tables[row.id.entityName] else { throw SaveError.objectNotFound(row.id) }
            if table.positions[row.id] != nil { throw SaveError.duplicateIdentifier(row.id) }
            touched.insert(row.id.entityName)
        }
        for update in changes.updated {
            guard tables[update.id.entityName]?.positions[update.id] != nil else {
                throw SaveError.objectNotFound(update.id)
            }
            touched.insert(update.id.entityName)
        }
        for deletion in changes.deleted where tables[deletion.id.entityName]?.positions[deletion.id] == nil {
            throw SaveError.objectNotFound(deletion.id)
        }
        for name in touched where !(tables[name]!.uniqueSlots.isEmpty) {
            try tables[name]!.validateUniqueness(changes)
        }
    }

    /// Applies a validated change set, stamping the rows it writes with the next generation, and records it in
    /// ``history`` as committed at `timestamp`.
    ///
    /// - Precondition: ``validate(_:)`` accepted `changes` and nothing changed since.
    /// - Returns: the history record of the transaction.
    @discardableResult
    package func apply(_ changes: ChangeSet, timestamp: Date = Date()) -> HistoryRecord {
        applyRows(changes)
        let record = HistoryRecord(number: generation, timestamp: timestamp, changes: changes, schema: schema)
        history.append(record)
        return record
    }

    /// Applies a validated change set without recording history (the record was read from a log).
    ///
    /// A deleted object's `.noAction` relationships change nothing in the context, but their targets' inverse
    /// would still name the deleted object here: those references are dropped, so that a predicate on the
    /// inverse (`$0.folder == nil`) agrees with reading it (nil), now and after a reopen replays the delete.
    package func applyRows(_ changes: ChangeSet) {
        generation += 1
        for update in noActionReferences.updates(deleting: changes.deleted, row: snapshot(for:)) {
            tables[update.id.entityName]?.update(update, version: generation)
        }
        for deletion in changes.deleted { tables[deletion.id.entityName]?.remove(deletion.id) }
        for update in changes.updated { tables[update.id.entityName]?.update(update, version: generation) }
        var inserted: [String: [ModelSnapshot]] = [:]
        for var row in changes.inserted {
            row.version = generation
            inserted[row.id.entityName, default: []].append(row)
        }
        for (entity, rows) in inserted { tables[entity]?.insert(rows) }
    }

    /// Replaces every row at once (a store's initial load): indexes are built once, not row by row.
    ///
    /// - Parameter rows: the rows of every entity, each entity's in insertion order.
    package func load(_ rows: [ModelSnapshot], generation: UInt64) {
        var byEntity: [String: [ModelSnapshot]] = [:]
        for row in rows { byEntity[row.id.entityName, default: []].append(row) }
        for (name, entityRows) in byEntity { tables[name]?.load(entityRows) }
        self.generation = generation
    }

    // MARK: Fetching

    /// Runs a fetch over the rows.
    ///
    /// - Throws: ``FetchError/unknownEntity(_:)``, ``FetchError/unwrappedNil(entity:model:)``.
    package func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        guard let table = tables[request.entity] else { throw FetchError.unknownEntity(request.entity) }
        return try table.fetch(request)
    }
}

/// One entity's rows in insertion order, with a position map, its indexes and its unique keys.
struct EntityTable {
    let entity: Schema.Entity
    var positions: [PersistentIdentifier: Int] = [:]
    var rows: ContiguousArray<ModelSnapshot?> = []
    var holes = 0
    let indexSlots: [[Int]]
    var indexes: [IndexTree]
    let uniqueSlots: [[Int]]
    var uniques: [[[StoredValue]: PersistentIdentifier]]

    init(entity: Schema.Entity) {
        self.entity = entity
        // Schema validation guarantees every name resolves.
        indexSlots = entity.indexes.map { $0.compactMap(entity.attributeIndex(named:)) }
        indexes = indexSlots.map { IndexTree(keyCount: $0.count) }
        uniqueSlots = entity.uniqueConstraints.map { $0.compactMap(entity.attributeIndex(named:)) }
        uniques = uniqueSlots.map { _ in [:] }
    }

    var count: Int { positions.count }

    func row(_ id: PersistentIdentifier) -> ModelSnapshot? {
        positions[id].flatMap { rows[$0] }
    }

    static func key(_ row: ModelSnapshot, _ slots: [Int]) -> [StoredValue] { slots.map { row.attributes[$0] } }

    /// A unique key constrains nothing when any of its values is null, as in SQL.
    static func isConstraining(_ key: [StoredValue]) -> Bool { !key.contains { $0.isNull } }

    // MARK: Changes

    mutating func insert(_ row: ModelSnapshot) {
        positions[row.id] = rows.count
        rows.append(row)
        addKeys(row)
    }

    /// Inserts a batch. A batch that is large next to the table rebuilds each index in one sort instead of
    /// inserting entry by entry (100,000 entries: one sort of about 25 ms instead of 140 ms of insertions).
    mutating func insert(_ batch: [ModelSnapshot]) {
        guard batch.count >= 1024, batch.count * 4 >= count, !indexSlots.isEmpty else {
            for row in batch { insert(row) }
            return
        }
        positions.reserveCapacity(count + batch.count)
        for row in batch {
            positions[row.id] = rows.count
            rows.append(row)
            for (number, slots) in uniqueSlots.enumerated() {
                let key = Self.key(row, slots)
                if Self.isConstraining(key) { uniques[number][key] = row.id }
            }
        }
        let live = rows.compactMap { $0 }
        for (number, slots) in indexSlots.enumerated() {
            indexes[number].bulkLoad(live.map { IndexEntry(key: Self.key($0, slots), id: $0.id) })
        }
    }

    mutating func remove(_ id: PersistentIdentifier) {
        guard let position = positions.removeValue(forKey: id), let row = rows[position] else { return }
        removeKeys(row)
        rows[position] = nil
        holes += 1
        if holes > 64 && holes > rows.count / 2 { compactHoles() }
    }

    mutating func update(_ update: ModelUpdate, version: UInt64) {
        guard let position = positions[update.id], let before = rows[position] else { return }
        let row = before.applying(update, version: version)
        if !update.attributes.isEmpty {
            removeKeys(before, onlyChanged: row)
            addKeys(row, onlyChanged: before)
        }
        rows[position] = row
    }

    mutating func load(_ loaded: [ModelSnapshot]) {
        positions.removeAll(keepingCapacity: true)
        rows = ContiguousArray(loaded.map(Optional.some))
        holes = 0
        positions.reserveCapacity(loaded.count)
        for (position, row) in loaded.enumerated() { positions[row.id] = position }
        for (number, slots) in indexSlots.enumerated() {
            indexes[number].bulkLoad(loaded.map { IndexEntry(key: Self.key($0, slots), id: $0.id) })
        }
        for (number, slots) in uniqueSlots.enumerated() {
            uniques[number] = [:]
            for row in loaded {
                let key = Self.key(row, slots)
                if Self.isConstraining(key) { uniques[number][key] = row.id }
            }
        }
    }

    private mutating func compactHoles() {
        rows = ContiguousArray(rows.filter { $0 != nil })
        for (position, row) in rows.enumerated() { positions[row!.id] = position }
        holes = 0
    }

    /// Adds `row`'s index entries and unique keys (those that differ from `other`'s, when given).
    private mutating func addKeys(_ row: ModelSnapshot, onlyChanged other: ModelSnapshot? = nil) {
        for (number, slots) in indexSlots.enumerated() {
            let key = Self.key(row, slots)
            if let other, Self.key(other, slots) == key { continue }
            indexes[number].insert(key: key, id: row.id)
        }
        for (number, slots) in uniqueSlots.enumerated() {
            let key = Self.key(row, slots)
            if let other, Self.key(other, slots) == key { continue }
            if Self.isConstraining(key) { uniques[number][key] = row.id }
        }
    }

    private mutating func removeKeys(_ row: ModelSnapshot, onlyChanged other: ModelSnapshot? = nil) {
        for (number, slots) in indexSlots.enumerated() {
            let key = Self.key(row, slots)
            if let other, Self.key(other, slots) == key { continue }
            indexes[number].remove(key: key, id: row.id)
        }
        for (number, slots) in uniqueSlots.enumerated() {
            let key = Self.key(row, slots)
            if let other, Self.key(other, slots) == key { continue }
            if uniques[number][key] == row.id { uniques[number][key] = nil }
        }
    }

    /// Throws when, after `changes`, two rows of this entity would share a unique key.
    func validateUniqueness(_ changes: ChangeSet) throws {
        let name = entity.name
        let deleted = Set(changes.deleted.lazy.map(\.id).filter { $0.entityName == name })
        // The rows this save writes, in their new state.
        var written: [ModelSnapshot] = changes.inserted.filter { $0.id.entityName == name }
        var updatedKeys: [PersistentIdentifier: ModelSnapshot] = [:]
        for update in changes.updated where update.id.entityName == name {
            guard var row = row(update.id) else { continue }
            for change in update.attributes { row.attributes[change.index] = change.value }
            written.append(row)
            updatedKeys[row.id] = row
        }
        for (number, slots) in uniqueSlots.enumerated() {
            var claimed: [[StoredValue]: PersistentIdentifier] = [:]
            for row in written {
                let key = Self.key(row, slots)
                guard Self.isConstraining(key) else { continue }
                if let other = claimed[key] {
                    throw SaveError.uniqueConstraintViolation(
                        entity: name, properties: slots.map { entity.attributes[$0].name }, values: key, existing: other)
                }
                claimed[key] = row.id
                if let holder = uniques[number][key], holder != row.id, !deleted.contains(holder) {
                    // The holder may be giving the key up in this same save.
                    if let newHolderRow = updatedKeys[holder], Self.key(newHolderRow, slots) != key { continue }
                    throw SaveError.uniqueConstraintViolation(
                        entity: name, properties: slots.map { entity.attributes[$0].name }, values: key, existing: holder)
                }
            }
        }
    }
}
