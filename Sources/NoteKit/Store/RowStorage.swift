#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The rows of a store, with their indexes and unique constraints: the part every store shares.
///
/// ``InMemoryStore`` is this and nothing else; the file store keeps one and appends each change set to its log
/// before applying it here. Not thread-safe: a store guards it with a lock.
///
/// Each entity's rows are either all in memory (``init(schema:)`` and ``load(_:transactionNumber:)``), or start as a
/// ``RowBase`` (``init(schema:bases:transactionNumber:)``, the file store's checkpoint) with every later change laid
/// over it in memory: base rows changed or deleted since, by row number, and rows inserted since, with in-memory index
/// entries and unique keys for those rows only. Both answer every read identically.
///
/// Saves are split in two so a store can persist between them: ``validate(_:)`` throws and changes nothing;
/// ``apply(_:timestamp:)`` cannot fail. Over a base, `validate` (through ``prepare(_:)``) reads every base row
/// that `apply` will touch, so `apply` reads nothing from the base. A change set applied without `validate` (a
/// record replayed or caught up from a log) must be prepared first: ``prepare(_:)``, then ``applyRows(_:)``.
///
/// A read of a base that throws surfaces as ``RowBaseFailure``, and changes nothing: the store may drop the base
/// and replay its log instead. Without bases no method throws it.
package final class RowStorage {
    /// The schema the rows follow.
    package let schema: Schema
    /// The tables in the schema's entity order; `numbers` finds them by entity name. An array, not a dictionary
    /// of tables, so that reading a table (`tables[n].fetch(…)`) does not copy it.
    var tables: [EntityTable]
    let numbers: [String: Int]
    /// Increases by one with each applied change set.
    package private(set) var transactionNumber: UInt64 = 0
    /// A record of every change set applied, less what was deleted from history.
    package var history = HistoryLog()

    /// What a `.noAction` delete leaves behind, dropped when the delete is applied.
    private let noActionReferences: NoActionReferences

    /// Empty storage for `schema`.
    package init(schema: Schema) {
        self.schema = schema
        tables = schema.entities.map { EntityTable(entity: $0) }
        numbers = Dictionary(schema.entities.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })
        hasBase = false
        noActionReferences = NoActionReferences(schema: schema)
    }

    /// Storage whose rows are the saved rows of `bases`, read on demand, at transaction number `transactionNumber`.
    ///
    /// - Parameter bases: per entity name, the base holding its rows; an entity without one starts empty, a base
    ///   of a name the schema does not have is ignored. A base's rows keep the versions it gives them.
    /// - Complexity: O(entities); no base is read.
    package init(schema: Schema, bases: [String: any RowBase], transactionNumber: UInt64) {
        self.schema = schema
        tables = schema.entities.map { EntityTable(entity: $0, base: bases[$0.name]) }
        numbers = Dictionary(schema.entities.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })
        hasBase = tables.contains { $0.base != nil }
        noActionReferences = NoActionReferences(schema: schema)
        self.transactionNumber = transactionNumber
    }

    /// Whether some entity's rows start from a base (then reads may throw ``RowBaseFailure``).
    package private(set) var hasBase: Bool

    /// Runs `read`, a read of storage that has no base (an in-memory store, a store loaded by replaying its log),
    /// which therefore cannot throw: for the callers that have no error to report.
    ///
    /// - Precondition: ``hasBase`` is false. NoteKit never gives such a caller storage with a base; no input can.
    package func withoutBase<Result>(_ read: (RowStorage) throws -> Result) -> Result {
        do { return try read(self) } catch {
            preconditionFailure("storage without a base threw \(error), which only a base read can")
        }
    }

    // MARK: Reading

    /// The row of `id`, if stored.
    ///
    /// - Throws: ``RowBaseFailure``.
    /// - Complexity: one hash look-up; over a base, one ``RowBase/rowNumber(of:)`` and one ``RowBase/rows(_:)``
    ///   for a row not changed since.
    package func snapshot(for id: PersistentIdentifier) throws -> ModelSnapshot? {
        guard let number = numbers[id.entityName] else { return nil }
        return try tables[number].row(id)
    }

    /// The rows of `ids`, in order; nil for one not stored. The base rows of each entity are read in one
    /// ``RowBase/rows(_:)`` call (which reads them in the order they are stored): how a context prefetches.
    ///
    /// - Throws: ``RowBaseFailure``.
    /// - Complexity: a hash look-up per identifier; over a base, one ``RowBase/rowNumber(of:)`` per row not
    ///   changed since, and one ``RowBase/rows(_:)`` per entity.
    package func rows(for ids: [PersistentIdentifier]) throws -> [ModelSnapshot?] {
        if ids.count == 1 { return [try snapshot(for: ids[0])] }
        var found = [ModelSnapshot?](repeating: nil, count: ids.count)
        // Per table, the positions in `ids` of the identifiers only its base can answer.
        var unknown: [Int: [Int]] = [:]
        for (index, id) in ids.enumerated() {
            guard let table = numbers[id.entityName] else { continue }
            if let known = tables[table].known(id) {
                found[index] = known?.row
            } else {
                unknown[table, default: []].append(index)
            }
        }
        for (table, indices) in unknown {
            for (index, located) in zip(indices, try tables[table].readBase(indices.map { ids[$0] })) {
                found[index] = located?.row
            }
        }
        return found
    }

    /// Whether the storage holds each of `ids`, without reading a row.
    ///
    /// - Throws: ``RowBaseFailure``.
    package func contains(_ ids: [PersistentIdentifier]) throws -> [Bool] {
        try ids.map { id in try numbers[id.entityName].map { try tables[$0].contains(id) } ?? false }
    }

    /// The base `entity`'s rows start from, if any (for tests that count what it reads).
    package func base(of entity: String) -> (any RowBase)? { numbers[entity].flatMap { tables[$0].base } }

    /// How many rows `entity` has. Never reads a base.
    package func count(of entity: String) -> Int { numbers[entity].map { tables[$0].count } ?? 0 }

    /// Every row of `entity`, in insertion order (a base's rows, each in its place even when changed since, then
    /// the rows inserted since).
    ///
    /// - Throws: ``RowBaseFailure``.
    /// - Complexity: O(rows); a base is read a few hundred rows per call.
    package func rows(of entity: String) throws -> [ModelSnapshot] {
        guard let number = numbers[entity] else { return [] }
        var rows: [ModelSnapshot] = []
        rows.reserveCapacity(tables[number].count)
        try tables[number].forEachRow { row, _ in
            rows.append(row)
            return true
        }
        return rows
    }

    /// Per index of `entity`, the positions of the attributes it is keyed by (empty for an entity the schema does
    /// not have): with ``indexEntries(_:slots:)``, an index's entries made from rows read before.
    package func indexSlots(of entity: String) -> [[Int]] {
        numbers[entity].map { tables[$0].indexSlots } ?? []
    }

    /// The entries of the index keyed by `slots` over `rows` (all of an entity's rows), in index order: what
    /// ``indexEntries(of:index:)`` answers for them, made without the storage (a compaction writing its checkpoint
    /// without the store's lock).
    ///
    /// - Complexity: O(n log n) for n rows.
    package static func indexEntries(_ rows: [ModelSnapshot], slots: [Int]) -> [IndexEntry] {
        var entries = rows.map { IndexEntry(key: EntityTable.key($0, slots), id: $0.id) }
        entries.sort { IndexEntry.compare($0, $1) < 0 }
        return entries
    }

    /// Index `index` of `entity` as it is now, when its rows are all in memory (its tree holds every row), nil over
    /// a base (see ``indexEntries(_:slots:)``). O(1): the tree is shared until the storage changes it.
    package func inMemoryIndex(of entity: String, index: Int) -> IndexSnapshot? {
        guard let number = numbers[entity], index < tables[number].indexes.count, tables[number].base == nil else {
            return nil
        }
        return IndexSnapshot(tree: tables[number].indexes[index])
    }

    /// The entries of `entity`'s declared index `index` (its position in `Schema.Entity.indexes`), in the index's
    /// order: what a checkpoint lists, without sorting again.
    ///
    /// - Throws: ``RowBaseFailure``.
    /// - Complexity: O(rows of the entity); over a base, O(n log n) and every row read.
    package func indexEntries(of entity: String, index: Int) throws -> [IndexEntry] {
        guard let number = numbers[entity], index < tables[number].indexes.count else { return [] }
        let table = tables[number]
        guard table.base != nil else { return table.indexes[index].entries }
        // Over a base the in-memory tree holds only the rows changed since: every row is read and sorted instead.
        return Self.indexEntries(try rows(of: entity), slots: table.indexSlots[index])
    }

    /// The holder of a unique key, if any.
    ///
    /// - Throws: ``RowBaseFailure``.
    package func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) throws
        -> PersistentIdentifier? {
        guard let number = numbers[entity], constraint < tables[number].uniques.count else { return nil }
        return try tables[number].uniqueHolder(constraint, key: key)
    }

    /// Rows of `entity` whose relationship `relationship` targets `target`, in insertion order.
    ///
    /// - Throws: ``RowBaseFailure``.
    /// - Complexity: O(rows of `entity`).
    package func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) throws
        -> [PersistentIdentifier] {
        guard let number = numbers[entity] else { return [] }
        var ids: [PersistentIdentifier] = []
        try tables[number].forEachRow { row, _ in
            if row.relationships[relationship].contains(target) { ids.append(row.id) }
            return true
        }
        return ids
    }

    // MARK: Saving

    /// Reads from the bases every row that applying `changes` will touch (updated and deleted rows, and the
    /// targets of deleted rows' `.noAction` relationships), so that ``applyRows(_:)`` reads nothing from them.
    ///
    /// Storage without bases has nothing to read. What was read is kept until the next change set is applied.
    ///
    /// - Throws: ``RowBaseFailure``; nothing is changed then.
    package func prepare(_ changes: ChangeSet) throws {
        guard hasBase else { return }
        var read: [String: [PersistentIdentifier: EntityTable.Located?]] = [:]
        func locate(_ id: PersistentIdentifier) throws -> ModelSnapshot? {
            guard let number = numbers[id.entityName] else { return nil }
            if let known = tables[number].known(id) { return known?.row }
            if let earlier = read[id.entityName]?[id] { return earlier?.row }
            let found = try tables[number].readBase(id)
            read[id.entityName, default: [:]][id] = .some(found)
            return found?.row
        }
        for update in changes.updated { _ = try locate(update.id) }
        for deletion in changes.deleted {
            guard let row = try locate(deletion.id) else { continue }
            for target in noActionReferences.targets(of: row) { _ = try locate(target) }
        }
        for (entity, rows) in read { tables[numbers[entity]!].prepared.merge(rows) { $1 } }
    }

    /// Checks that `changes` can be applied (``conflict(in:)``); over a base, first ``prepare(_:)``s them.
    ///
    /// - Throws: the ``SaveError`` of the first conflict (``SaveError/init(_:in:)``), or ``RowBaseFailure``; nothing
    ///   is changed either way.
    package func validate(_ changes: ChangeSet) throws {
        if let conflict = try conflict(in: changes) { throw SaveError(conflict, in: schema) }
    }

    /// The first reason `changes` cannot be applied, or nil: a value its attribute's type does not admit
    /// (``typeConflict(in:)``), then what the rule of every store finds (``ChangeSet/conflict(with:)``), then a
    /// unique key two rows would share. Over a base, ``prepare(_:)``s them first.
    ///
    /// - Throws: ``RowBaseFailure``; nothing is changed.
    package func conflict(in changes: ChangeSet) throws -> ChangeConflict? {
        if let conflict = typeConflict(in: changes) { return conflict }
        try prepare(changes)
        if let conflict = try changes.conflict(with: self) { return conflict }
        for number in tables.indices where !tables[number].uniqueSlots.isEmpty {
            let name = tables[number].entity.name
            guard changes.inserted.contains(where: { $0.id.entityName == name })
                || changes.updated.contains(where: { $0.id.entityName == name }) else { continue }
            if let conflict = try tables[number].uniqueConflict(changes) { return conflict }
        }
        return nil
    }

    /// Applies a validated change set, stamping the rows it writes with the next transaction number, and records it in
    /// ``history`` as committed at `timestamp`.
    ///
    /// - Precondition: ``validate(_:)`` accepted `changes` and nothing changed since.
    /// - Returns: the history record of the transaction.
    @discardableResult
    package func apply(_ changes: ChangeSet, timestamp: Date = Date()) -> HistoryRecord {
        applyRows(changes)
        let record = HistoryRecord(number: transactionNumber, timestamp: timestamp, changes: changes, schema: schema)
        history.append(record)
        return record
    }

    /// Applies a validated change set without recording history (the record was read from a log), through the
    /// applier every store shares (``ChangeSet/apply(to:transactionNumber:noAction:)``).
    ///
    /// A deleted object's `.noAction` relationships change nothing in the context, but their targets' inverse
    /// would still name the deleted object here: those references are dropped, so that a predicate on the
    /// inverse (`$0.folder == nil`) agrees with reading it (nil), now and after a reopen replays the delete.
    ///
    /// - Precondition: over a base, ``prepare(_:)`` (or ``validate(_:)``) read `changes`' rows and nothing
    ///   changed since. Reads nothing from a base, so it cannot fail.
    package func applyRows(_ changes: ChangeSet) {
        transactionNumber += 1
        var rows = self
        changes.apply(to: &rows, transactionNumber: transactionNumber, noAction: noActionReferences)
        if hasBase {
            for number in tables.indices where !tables[number].prepared.isEmpty { tables[number].prepared = [:] }
        }
    }

    /// Storage whose tables are `tables`, per entity name, taken as they are (no row copied, no identifier hashed
    /// again; each index and unique key built once), at transaction number `transactionNumber`: how a file store's open
    /// takes over the rows its replay built.
    ///
    /// - Parameter tables: per entity name, its rows in insertion order; an entity without one starts empty, a
    ///   name the schema does not have is ignored.
    /// - Complexity: O(n log n) for n rows, for the indexes.
    package convenience init(schema: Schema, adopting tables: [String: OrderedRows], transactionNumber: UInt64) {
        self.init(schema: schema)
        for (name, rows) in tables {
            if let number = numbers[name] { self.tables[number].adopt(rows) }
        }
        self.transactionNumber = transactionNumber
    }

    /// Replaces every row at once (a store's initial load): indexes are built once, not row by row. An entity
    /// that had a base no longer has it.
    ///
    /// - Parameter rows: the rows of every entity, each entity's in insertion order.
    package func load(_ rows: [ModelSnapshot], transactionNumber: UInt64) {
        var byEntity: [String: [ModelSnapshot]] = [:]
        for row in rows { byEntity[row.id.entityName, default: []].append(row) }
        if hasBase {
            for number in tables.indices where tables[number].base != nil {
                tables[number] = EntityTable(entity: tables[number].entity)
            }
            hasBase = false
        }
        for (name, entityRows) in byEntity {
            if let number = numbers[name] { tables[number].load(entityRows) }
        }
        self.transactionNumber = transactionNumber
    }

    // MARK: Fetching

    /// Runs a fetch over the rows.
    ///
    /// - Throws: ``FetchError/unknownEntity(_:)``, ``FetchError/unwrappedNil(entity:model:)``,
    ///   ``RowBaseFailure``.
    package func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        guard let number = numbers[request.entity] else { throw FetchError.unknownEntity(request.entity) }
        let lookup = lookup(over: request.overlay)
        // A plan through relationships reads the other entities as the store holds them: not with a caller's unsaved
        // changes laid over them.
        if let sorted = try fetchSortedThroughRelationship(request) { return sorted }
        if let counted = try countThroughToOne(request) { return counted }
        if request.overlay.isEmpty, let narrowed = try relationshipCandidates(request) {
            return try tables[number].fetch(request, candidates: narrowed, lookup: lookup)
        }
        return try tables[number].fetch(request, lookup: lookup)
    }

    /// Reads rows as a request's caller sees them: its unsaved rows in `overlay`, these otherwise.
    func lookup(over overlay: [PersistentIdentifier: ModelSnapshot?]) -> RowLookup {
        guard !overlay.isEmpty else { return lookup }
        return RowLookup { [unowned self] id in
            if let pending = overlay[id] { return pending }
            return try self.snapshot(for: id)
        }
    }

    /// Reads rows of any entity by identifier, for a filter or sort that follows relationships.
    package var lookup: RowLookup { RowLookup { [unowned self] id in try self.snapshot(for: id) } }
}

/// The store's tables as the applier of change sets sees them (``ChangeSet/conflict(with:)``,
/// ``ChangeSet/apply(to:transactionNumber:noAction:)``). Over a base, the rows a change set touches are read before it
/// is applied (``RowStorage/prepare(_:)``), so applying it reads nothing from the base.
extension RowStorage: ChangeableRows {
    package typealias ReadFailure = any Error

    package func hasEntity(of id: PersistentIdentifier) -> Bool { numbers[id.entityName] != nil }

    /// - Throws: ``RowBaseFailure``.
    package func contains(_ id: PersistentIdentifier) throws -> Bool {
        guard let number = numbers[id.entityName] else { return false }
        return try tables[number].contains(id)
    }

    package func row(_ id: PersistentIdentifier) -> ModelSnapshot? {
        guard let number = numbers[id.entityName] else { return nil }
        return tables[number].resolved(id)?.row
    }

    package func remove(_ id: PersistentIdentifier) {
        if let number = numbers[id.entityName] { tables[number].remove(id) }
    }

    package func update(_ update: ModelUpdate, transactionNumber: UInt64) {
        if let number = numbers[update.id.entityName] {
            tables[number].update(update, transactionNumber: transactionNumber)
        }
    }

    /// Inserts each entity's rows as one batch (``EntityTable/insert(_:)``: a large one builds the indexes in one
    /// sort).
    package func insert(_ rows: [ModelSnapshot], transactionNumber: UInt64) {
        var byEntity: [String: [ModelSnapshot]] = [:]
        for var row in rows {
            row.transactionNumber = transactionNumber
            byEntity[row.id.entityName, default: []].append(row)
        }
        for (entity, rows) in byEntity {
            if let number = numbers[entity] { tables[number].insert(rows) }
        }
    }
}

/// A read of an entity's ``RowBase`` that threw, or answered what was not asked: the storage changed nothing, and
/// the store may stop using the base.
package struct RowBaseFailure: Error, CustomStringConvertible {
    /// The entity whose base failed.
    package var entity: String
    /// What the base threw, or what was wrong with its answer.
    package var error: any Error

    package var description: String { "the saved rows of \(entity) could not be read: \(error)" }
}

/// A base's answer that contradicts the question (so the base is damaged, or not what it claims to be).
struct RowBaseMismatch: Error, CustomStringConvertible {
    var description: String
}

/// One entity's rows in insertion order, with a position map, its indexes and its unique keys.
///
/// Over a base, rows `0..<baseCount` are the base's, numbered as it numbers them, and `rows` holds the rows
/// inserted since, at positions `baseCount...` (position `baseCount + i` is `rows[i]`). A base row changed since is
/// in `changed` under its number, and in `positions`; a deleted one is in `deleted`. `positions`, `indexes` and
/// `uniques` cover the rows in memory only (changed and inserted); a scan skips a base entry whose row is in memory
/// or deleted. Without a base, `baseCount` is 0 and the table is all rows in memory.
struct EntityTable {
    let entity: Schema.Entity
    /// The saved rows the table starts from, or nil.
    let base: (any RowBase)?
    /// The base's row count (0 without a base).
    let baseCount: Int
    var positions = RowPositions()
    var rows: ContiguousArray<ModelSnapshot?> = []
    var holes = 0
    /// Base rows changed since, by row number.
    var changed: [Int: ModelSnapshot] = [:]
    /// Base rows deleted since: their identifiers, and their row numbers.
    var deletedIDs: [PersistentIdentifier: Int] = [:]
    var deleted = Set<Int>()
    /// Base rows read by ``RowStorage/prepare(_:)`` for the next change set applied (nil: the base does not hold
    /// the identifier). A base never changes, so these never go stale; a row in memory takes precedence.
    var prepared: [PersistentIdentifier: Located?] = [:]
    let indexSlots: [[Int]]
    var indexes: [IndexTree]
    let uniqueSlots: [[Int]]
    var uniques: [[[StoredValue]: PersistentIdentifier]]

    /// A row and its position in insertion order (over a base, a base row's number).
    struct Located {
        var position: Int
        var row: ModelSnapshot
    }

    init(entity: Schema.Entity, base: (any RowBase)? = nil) {
        self.entity = entity
        self.base = base
        baseCount = base?.count ?? 0
        // Schema validation guarantees every name resolves.
        indexSlots = entity.indexes.map { $0.compactMap(entity.attributeIndex(named:)) }
        indexes = indexSlots.map { IndexTree(keyCount: $0.count) }
        uniqueSlots = entity.uniqueConstraints.map { $0.compactMap(entity.attributeIndex(named:)) }
        uniques = uniqueSlots.map { _ in [:] }
    }

    var count: Int { baseCount - deleted.count + positions.count - changed.count }

    /// The rows in memory: inserted ones, and base rows changed since.
    private var memoryCount: Int { positions.count }

    /// The position of the row of `id` when it is in memory. One hash look-up.
    func memoryPosition(_ id: PersistentIdentifier) -> Int? { held(id)?.position }

    /// Where `positions` holds `id`, confirmed against the identifier of the row in memory it points at.
    private func held(_ id: PersistentIdentifier) -> RowPositions.Found? {
        positions.find(id) { memoryRow($0).id }
    }

    /// The row in memory at `position` (which `positions` gave).
    func memoryRow(_ position: Int) -> ModelSnapshot {
        // `positions` only holds positions of rows in memory.
        position < baseCount ? changed[position]! : rows[position - baseCount]!
    }

    func row(_ id: PersistentIdentifier) throws -> ModelSnapshot? {
        if let position = memoryPosition(id) { return memoryRow(position) }
        guard base != nil, deletedIDs[id] == nil else { return nil }
        if let found = prepared[id] { return found?.row }
        return try readBase(id)?.row
    }

    /// The row of `id` as far as memory knows it: a row in memory, or one ``RowStorage/prepare(_:)`` read.
    func resolved(_ id: PersistentIdentifier) -> Located? {
        if let found = known(id) { return found }
        assertionFailure("\(id) was not prepared")
        return nil
    }

    /// The row of `id` when memory knows it (.some(nil): it is known not to be here), nil when only the base does.
    func known(_ id: PersistentIdentifier) -> Located?? {
        if let position = memoryPosition(id) { return Located(position: position, row: memoryRow(position)) }
        guard base != nil, deletedIDs[id] == nil else { return .some(nil) }
        return prepared[id]
    }

    /// Whether the table holds `id`.
    func contains(_ id: PersistentIdentifier) throws -> Bool {
        if memoryPosition(id) != nil { return true }
        guard let base, deletedIDs[id] == nil else { return false }
        if let found = prepared[id] { return found != nil }
        return try reading { try base.rowNumber(of: id.primaryKey) } != nil
    }

    /// Reads the base row of `id`, which is not in memory nor deleted.
    func readBase(_ id: PersistentIdentifier) throws -> Located? {
        guard let base else { return nil }
        guard let number = try reading({ try base.rowNumber(of: id.primaryKey) }) else { return nil }
        return try located(id, number: number, row: baseRows([number])[0])
    }

    /// Reads the base rows of `ids`, none in memory nor deleted, in one ``RowBase/rows(_:)`` call; nil for one the
    /// base does not hold.
    func readBase(_ ids: [PersistentIdentifier]) throws -> [Located?] {
        guard let base else { return ids.map { _ in nil } }
        let numbers = try ids.map { id in try reading { try base.rowNumber(of: id.primaryKey) } }
        var rows = try baseRows(numbers.compactMap { $0 }).makeIterator()
        return try zip(ids, numbers).map { id, number in
            // `baseRows` gave one row per number.
            guard let number, let row = rows.next() else { return nil }
            return try located(id, number: number, row: row)
        }
    }

    /// `row`, base row `number`, which ``RowBase/rowNumber(of:)`` gave for `id`, checked to be `id`'s.
    private func located(_ id: PersistentIdentifier, number: Int, row: ModelSnapshot) throws -> Located {
        guard row.id == id else {
            throw RowBaseFailure(entity: entity.name, error: RowBaseMismatch(
                description: "row \(number), which rowNumber(of:) gives for \(id), is \(row.id)"))
        }
        return Located(position: number, row: row)
    }

    /// Runs a read of the base, naming the entity in what it throws.
    func reading<T>(_ read: () throws -> T) throws -> T {
        do { return try read() } catch let failure as RowBaseFailure { throw failure } catch {
            throw RowBaseFailure(entity: entity.name, error: error)
        }
    }

    /// The base rows numbered `numbers`, checked to be as many as asked, decoding the attributes `decoding` marks
    /// (nil: every one).
    func baseRows(_ numbers: [Int], decoding: [Bool]? = nil) throws -> [ModelSnapshot] {
        guard let base, !numbers.isEmpty else { return [] }
        let found = try reading { try decoding.map { try base.rows(numbers, decoding: $0) } ?? base.rows(numbers) }
        guard found.count == numbers.count else {
            throw RowBaseFailure(entity: entity.name, error: RowBaseMismatch(
                description: "rows(_:) gave \(found.count) rows for \(numbers.count) row numbers"))
        }
        return found
    }

    /// Whether base row `number` is in memory or deleted (then the base's copy and its keys are stale).
    @inline(__always)
    func isOverridden(_ number: Int) -> Bool {
        // Most bases have no change over them: skip the hashing then.
        (!changed.isEmpty && changed[number] != nil) || (!deleted.isEmpty && deleted.contains(number))
    }

    /// The holder of `key` for unique constraint `constraint`.
    func uniqueHolder(_ constraint: Int, key: [StoredValue]) throws -> PersistentIdentifier? {
        if let holder = uniques[constraint][key] { return holder }
        guard let base, Self.isConstraining(key) else { return nil }
        guard let number = try reading({ try base.uniqueHolder(constraint, key: key) }), !isOverridden(number) else {
            return nil
        }
        return try baseRows([number])[0].id
    }

    /// The number of rows a batched read of a base asks for at once.
    static let batchSize = 256

    /// Visits every row in insertion order with its position, reading a base `batchSize` rows at a time, until
    /// `body` returns false.
    ///
    /// - Parameters:
    ///   - batch: the number of base rows to read next (at most `batchSize`), asked before each read.
    ///   - decoding: the attributes to decode of the base's rows (nil: every one).
    func forEachRow(batch: () -> Int = { EntityTable.batchSize }, decoding: [Bool]? = nil,
                    _ body: (ModelSnapshot, Int) throws -> Bool) throws {
        var number = 0
        while number < baseCount {
            let end = min(baseCount, number + max(1, min(Self.batchSize, batch())))
            let pristine = changed.isEmpty && deleted.isEmpty
            let wanted = pristine ? Array(number..<end) : (number..<end).filter { !isOverridden($0) }
            let read = try baseRows(wanted, decoding: decoding)
            var next = 0
            for position in number..<end {
                let row: ModelSnapshot
                if pristine || !isOverridden(position) {
                    row = read[next]
                    next += 1
                } else if let current = changed[position] {
                    row = current
                } else { continue }
                if try !body(row, position) { return }
            }
            number = end
        }
        for (offset, row) in rows.enumerated() {
            guard let row else { continue }
            if try !body(row, baseCount + offset) { return }
        }
    }

    static func key(_ row: ModelSnapshot, _ slots: [Int]) -> [StoredValue] { slots.map { row.attributes[$0] } }

    /// A unique key constrains nothing when any of its values is null, as in SQL.
    static func isConstraining(_ key: [StoredValue]) -> Bool { !key.contains { $0.isNull } }

    // MARK: Changes

    mutating func insert(_ row: ModelSnapshot) {
        positions.insert(row.id, at: baseCount + rows.count)
        rows.append(row)
        addKeys(row)
    }

    /// Inserts a batch. A batch that is large next to the table rebuilds each index in one sort instead of
    /// inserting entry by entry (100,000 entries: one sort of about 25 ms instead of 140 ms of insertions).
    mutating func insert(_ batch: [ModelSnapshot]) {
        guard batch.count >= 1024, batch.count * 4 >= memoryCount, !indexSlots.isEmpty else {
            for row in batch { insert(row) }
            return
        }
        positions.reserveCapacity(memoryCount + batch.count)
        for row in batch {
            positions.insert(row.id, at: baseCount + rows.count)
            rows.append(row)
            for (number, slots) in uniqueSlots.enumerated() {
                let key = Self.key(row, slots)
                if Self.isConstraining(key) { uniques[number][key] = row.id }
            }
        }
        // The indexes in memory cover the base rows changed since as well.
        let changedRows = changed.values.map(Optional.some)
        for (number, slots) in indexSlots.enumerated() {
            if changedRows.isEmpty { indexes[number].bulkLoad(rows, slots: slots) }
            else { indexes[number].bulkLoad(changedRows + rows, slots: slots) }
        }
    }

    mutating func remove(_ id: PersistentIdentifier) {
        guard let found = resolved(id) else { return }
        if found.position < baseCount {
            if let word = held(id) {
                positions.remove(word)
                changed[found.position] = nil
                removeKeys(found.row)
            }
            deleted.insert(found.position)
            deletedIDs[id] = found.position
            return
        }
        if let word = held(id) { positions.remove(word) }
        removeKeys(found.row)
        rows[found.position - baseCount] = nil
        holes += 1
        if OrderedRows.isWorthSqueezing(holes: holes, slots: rows.count) { compactHoles() }
    }

    mutating func update(_ update: ModelUpdate, transactionNumber: UInt64) {
        guard let found = resolved(update.id) else { return }
        let before = found.row, row = before.applying(update, transactionNumber: transactionNumber)
        if found.position < baseCount && changed[found.position] == nil {
            // A base row's first change: its base keys are stale from now on, all of its keys go in memory.
            positions.insert(update.id, at: found.position)
            addKeys(row)
        } else if !update.attributes.isEmpty {
            removeKeys(before, onlyChanged: row)
            addKeys(row, onlyChanged: before)
        }
        if found.position < baseCount { changed[found.position] = row } else { rows[found.position - baseCount] = row }
    }

    mutating func load(_ loaded: [ModelSnapshot]) {
        positions.removeAll(keepingCapacity: true)
        rows = ContiguousArray(loaded.map(Optional.some))
        holes = 0
        positions.reserveCapacity(loaded.count)
        for (position, row) in loaded.enumerated() { positions.insert(row.id, at: position) }
        buildKeys()
    }

    /// Takes `adopted`'s rows and positions as the table's own (no row is copied, no identifier hashed), then
    /// builds the indexes and unique keys once.
    mutating func adopt(_ adopted: OrderedRows) {
        rows = adopted.slots
        positions = adopted.positions
        holes = adopted.holes
        buildKeys()
    }

    /// Builds every index and unique key of the table's rows (a table without a base) in one pass each.
    private mutating func buildKeys() {
        for (number, slots) in indexSlots.enumerated() {
            indexes[number].bulkLoad(rows, slots: slots)
        }
        for (number, slots) in uniqueSlots.enumerated() {
            uniques[number] = [:]
            for case let row? in rows {
                let key = Self.key(row, slots)
                if Self.isConstraining(key) { uniques[number][key] = row.id }
            }
        }
    }

    private mutating func compactHoles() {
        rows = ContiguousArray(rows.filter { $0 != nil })
        // Base rows changed since keep their numbers; the rows inserted since are renumbered.
        positions.removeAll(keepingCapacity: true)
        for (position, row) in changed { positions.insert(row.id, at: position) }
        for (offset, row) in rows.enumerated() { positions.insert(row!.id, at: baseCount + offset) }
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

    /// The first unique key two rows of this entity would share after `changes`, if any.
    ///
    /// - Throws: ``RowBaseFailure``.
    func uniqueConflict(_ changes: ChangeSet) throws -> ChangeConflict? {
        let name = entity.name
        let deletedNow = Set(changes.deleted.lazy.map(\.id).filter { $0.entityName == name })
        // The rows this save writes, in their new state.
        var written: [ModelSnapshot] = changes.inserted.filter { $0.id.entityName == name }
        var updatedKeys: [PersistentIdentifier: ModelSnapshot] = [:]
        for update in changes.updated where update.id.entityName == name {
            guard var row = resolved(update.id)?.row else { continue }
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
                    return .uniqueKeyTaken(entity: name, properties: slots.map { entity.attributes[$0].name },
                                           values: key, existing: other)
                }
                claimed[key] = row.id
                if let holder = try uniqueHolder(number, key: key), holder != row.id, !deletedNow.contains(holder) {
                    // The holder may be giving the key up in this same save.
                    if let newHolderRow = updatedKeys[holder], Self.key(newHolderRow, slots) != key { continue }
                    return .uniqueKeyTaken(entity: name, properties: slots.map { entity.attributes[$0].name },
                                           values: key, existing: holder)
                }
            }
        }
        return nil
    }
}

/// An index of rows held in memory, as it was when taken (``RowStorage/inMemoryIndex(of:index:)``): a copy of its
/// tree that shares the tree's storage, readable on any thread while the storage goes on changing its own.
package struct IndexSnapshot: Sendable {
    fileprivate let tree: IndexTree

    /// Every entry, in index order.
    ///
    /// - Complexity: O(n).
    package var entries: [IndexEntry] { tree.entries }
}
