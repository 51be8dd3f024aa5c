/// Rows a change set is checked against and applied to: a store's tables (``RowStorage``), or the objects a file
/// store's replay rebuilds from its log. Each keeps its rows in its own way; ``ChangeSet/conflict(with:)`` and
/// ``ChangeSet/apply(to:transactionNumber:noAction:)`` decide, for all of them, when a change set applies and in what
/// order it changes the rows.
package protocol ChangeableRows {
    /// What a read of the rows may throw (`Never` for rows all in memory).
    associatedtype ReadFailure: Error

    /// Whether the rows have a table for `id`'s entity.
    func hasEntity(of id: PersistentIdentifier) -> Bool
    /// Whether the row of `id` exists.
    func contains(_ id: PersistentIdentifier) throws(ReadFailure) -> Bool
    /// The row of `id`, if it exists. Called while applying, so it must not need a read that can fail.
    func row(_ id: PersistentIdentifier) -> ModelSnapshot?

    /// Removes the row of `id`, which exists.
    mutating func remove(_ id: PersistentIdentifier)
    /// Applies `update` to the row it names, which exists, stamping it with `transactionNumber`.
    mutating func update(_ update: ModelUpdate, transactionNumber: UInt64)
    /// Adds `rows`, none of which exists, stamped with `transactionNumber`, after every other row of their entities.
    mutating func insert(_ rows: [ModelSnapshot], transactionNumber: UInt64)
}

extension ChangeSet {
    /// The first reason the change set does not apply to `rows`, or nil when it applies: the one rule of every
    /// store, for a save and for each transaction of a log replayed, refreshed, verified or salvaged.
    ///
    /// A change set applies when each delete names a distinct row that exists, each update a row that exists and
    /// that the change set does not delete, and each insert a row of a known entity that does not exist and that the
    /// change set does not insert twice. They are checked in the order they are applied: deletes, updates, inserts.
    /// A save's checks of types and unique keys, which a log's records passed when they were saved, are the store's
    /// (``RowStorage/conflict(in:)``).
    ///
    /// - Throws: what reading `rows` throws; nothing is changed.
    /// - Complexity: O(changes): a look-up in `rows` per change.
    package func conflict<Rows: ChangeableRows>(with rows: Rows) throws(Rows.ReadFailure) -> ChangeConflict? {
        var deletedIDs = Set<PersistentIdentifier>(minimumCapacity: deleted.count)
        for index in deleted.indices {
            let id = deleted[index].id
            guard try rows.contains(id), deletedIDs.insert(id).inserted else { return .deletedRowMissing(id) }
        }
        for index in updated.indices {
            let id = updated[index].id
            guard try rows.contains(id), deletedIDs.isEmpty || !deletedIDs.contains(id) else {
                return .updatedRowMissing(id)
            }
        }
        // By index, reading `id` in place: a `for row in inserted` copies every snapshot only to read its identifier.
        // The identifiers seen are kept as positions in `inserted` (10 bytes an insert, not a set's 24 or more).
        var seen = RowPositions()
        if inserted.count > 1 { seen.reserveCapacity(inserted.count) }
        for index in inserted.indices {
            let id = inserted[index].id
            guard rows.hasEntity(of: id) else { return .unknownEntity(id) }
            if try rows.contains(id) { return .insertedRowExists(id) }
            if inserted.count > 1 {
                let hashBits = RowPositions.hashBits(id)
                if seen.find(hashBits: hashBits, matches: { inserted[$0].id == id }) != nil {
                    return .insertedRowExists(id)
                }
                seen.insert(hashBits: hashBits, at: index)
            }
        }
        return nil
    }

    /// The first relationship the change set sets to a row that does not exist once it is applied, as a
    /// ``ChangeConflict/missingTarget(source:relationship:target:)``: inserted rows' targets first, then the targets
    /// updates add.
    ///
    /// No store needs it to save (a context refuses a target it deleted before sending the change set,
    /// ``SaveError/relationshipToMissingModel(model:property:target:)``); a salvage that keeps transactions after a
    /// lost one leaves out one that fails it, so that no relationship of its result points at nothing.
    ///
    /// - Throws: what reading `rows` throws.
    package func missingTarget<Rows: ChangeableRows>(with rows: Rows) throws(Rows.ReadFailure) -> ChangeConflict? {
        let deletedIDs = Set(deleted.map(\.id)), insertedIDs = Set(inserted.map(\.id))
        func exists(_ id: PersistentIdentifier) throws(Rows.ReadFailure) -> Bool {
            if insertedIDs.contains(id) { return true }
            return try rows.contains(id) && !deletedIDs.contains(id)
        }
        for row in inserted {
            for slot in row.relationships.indices {
                for target in row.relationships[slot].identifiers {
                    if try !exists(target) { return .missingTarget(source: row.id, relationship: slot, target: target) }
                }
            }
        }
        for update in updated {
            for change in update.relationships {
                let added: [PersistentIdentifier]
                switch change.kind {
                case .toOne(let target?): added = [target]
                case .toMany(let targets, _): added = targets
                case .toOne(nil): added = []
                }
                for target in added {
                    if try !exists(target) {
                        return .missingTarget(source: update.id, relationship: change.index, target: target)
                    }
                }
            }
        }
        return nil
    }

    /// Applies the change set to `rows`, stamping the rows it writes with `transactionNumber`: first what `noAction`
    /// drops (the references to each deleted row its `.noAction` relationships leave behind, see
    /// ``NoActionReferences``), then the deletes, the updates and the inserts.
    ///
    /// - Precondition: ``conflict(with:)`` found none in `rows`, and nothing changed since.
    /// - Complexity: O(changes), plus what `rows` spends inserting a batch.
    package func apply<Rows: ChangeableRows>(to rows: inout Rows, transactionNumber: UInt64,
                                             noAction: NoActionReferences?) {
        if let noAction, !noAction.isEmpty, !deleted.isEmpty {
            for update in noAction.updates(deleting: deleted, row: { rows.row($0) }) {
                rows.update(update, transactionNumber: transactionNumber)
            }
        }
        for deletion in deleted { rows.remove(deletion.id) }
        for update in updated { rows.update(update, transactionNumber: transactionNumber) }
        if !inserted.isEmpty { rows.insert(inserted, transactionNumber: transactionNumber) }
    }
}
