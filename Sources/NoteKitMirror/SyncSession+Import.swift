import Foundation
import NoteKit

/// Applying the other devices' changes, batch by batch, each as one local transaction committed only at the
/// transaction number it was computed at (docs/MIRROR.md, *Import*).
extension SyncSession {
    /// Reads and applies the server's changes after the cursor, batch by batch, moving the cursor after each.
    mutating func importChanges() throws {
        while true {
            var batch = try readBatch()
            guard batch.lastSequence != nil else { return }
            if !batch.rows.isEmpty || !batch.deleted.isEmpty {
                var unsent = try apply(batch)
                // This store holds unique keys, or edits of merged objects, that the server has not seen: they are
                // sent, so the server merges them, and the batch is read again.
                for _ in 0..<2 where !unsent.isEmpty {
                    try export()
                    batch = try readBatch()
                    unsent = try apply(batch)
                }
                // Still not: a save came in again between the export and the import. The batch waits for the next
                // sync (which sends first), rather than be applied in part; the cursor stays where it is.
                if !unsent.isEmpty { return }
            }
            guard let last = batch.lastSequence else { return }
            report.importedChanges += batch.changeCount
            state.importedSequence = last
            try file.save(state)
            try connection.execute("""
                UPDATE \(ns)."devices" SET imported_seq = $3::bigint WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the import")
            if batch.changeRows < Self.importBatch { return }
        }
    }

    /// The local clocks of what local transactions not exported yet changed, by object.
    struct LocalPending {
        var fields: [String: UInt64] = [:]
        var inserted: UInt64?
        var deleted: UInt64?
    }

    /// Applies a batch as one local transaction, committed only if no other transaction came in between (it is
    /// then computed again), so that an import never overwrites a local save it has not weighed.
    /// - Returns: the objects of this store that must be sent before the batch can be applied (nothing was
    ///   applied then): local changes the server has not merged with the batch's unique-key merges.
    private mutating func apply(_ batch: Batch) throws -> [PersistentIdentifier] {
        for attempt in 1...20 {
            let (transactionNumber, log) = try transactionNumberAndHistory()
            try assignClocks(log, through: transactionNumber)
            let pending = Self.pending(log, after: state.exportedThrough, clocks: state.pendingClocks,
                                       schema: container.schema)
            var objects: [ReplicaObject] = []
            var unsent: [PersistentIdentifier] = []
            for row in batch.rows {
                let local = pending[row.id]
                if let deleted = local?.deleted, deleted > UInt64(max(0, row.created)) { continue }
                // A local edit not sent yet of what another device changed: sent first, so that the push hands the
                // conflict to the entity's resolver, before this batch is read again.
                if hasConflict(row, local: local, changedElsewhere: batch.changedElsewhere[row.id]) {
                    unsent.append(row.id)
                }
                var incoming = ReplicaObject(id: row.id)
                for (name, field) in row.attributes where (local?.fields[name] ?? 0) < field.clock {
                    incoming.attributes[name] = field.value
                }
                for (name, field) in row.toOnes where (local?.fields[name] ?? 0) < field.clock {
                    incoming.toOne[name] = field.target
                }
                for (name, targets) in row.links {
                    // A local change of the links not sent yet is sent first: links merge one by one on the server.
                    if local?.fields[name] != nil, local?.inserted == nil { unsent.append(row.id) }
                    incoming.toMany[name] = targets
                }
                objects.append(incoming)
            }
            var deletions: [PersistentIdentifier] = []
            var merging: [PersistentIdentifier: PersistentIdentifier] = [:]
            let mergedInto = Dictionary(batch.deleted.compactMap { row in row.mergedInto.map { (row.id, $0) } },
                                        uniquingKeysWith: { first, _ in first })
            for row in batch.deleted {
                if let inserted = pending[row.id]?.inserted, inserted > UInt64(max(0, row.deleted ?? 0)) { continue }
                guard var survivor = row.mergedInto else {
                    deletions.append(row.id)
                    continue
                }
                // A local edit of a merged object not sent yet would be lost with it: sent first (and carried over).
                if pending[row.id] != nil { unsent.append(row.id) }
                for _ in 0..<8 { if let next = mergedInto[survivor] { survivor = next } }
                merging[row.id] = survivor
            }
            unsent += uniqueKeyConflicts(objects, deleting: Set(deletions).union(merging.keys))
            if !unsent.isEmpty { return unsent }
            let context = ModelContext(container)
            context.author = StoreMirror.author
            context.expectedTransactionNumber = transactionNumber
            let outcome = try context.applyReplicaChanges(objects, deleting: deletions, merging: merging)
            guard context.hasChanges else { return [] }
            do {
                try context.save()
            } catch is TransactionNumberMoved where attempt < 20 {
                continue
            }
            if let token = context.currentHistoryToken() { report.importTransactions.append(token) }
            report.deniedDeletions += outcome.deniedDeletions
            // The import's own transaction is never sent.
            let (after, afterLog) = try transactionNumberAndHistory()
            try assignClocks(afterLog, through: after)
            return []
        }
        return []
    }

    /// The objects of `objects` whose unique key another object holds here, and keeps after this import: one this
    /// store has not sent yet (or changed to that key since), which the server has therefore not merged. Sending
    /// it first lets the server merge the two (docs/MIRROR.md, *Unique keys*).
    private func uniqueKeyConflicts(_ objects: [ReplicaObject], deleting gone: Set<PersistentIdentifier>)
        -> [PersistentIdentifier] {
        let incoming = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var snapshots: [PersistentIdentifier: ModelSnapshot] = [:]
        func snapshot(_ id: PersistentIdentifier) -> ModelSnapshot? {
            if let known = snapshots[id] { return known }
            let found = container.store.rows(for: [id]).first ?? nil
            snapshots[id] = found
            return found
        }
        /// The key an object will have after the import: the incoming value where one is written, else its own.
        func key(_ id: PersistentIdentifier, _ attributes: [MirrorPlan.Attribute]) -> [StoredValue]? {
            var values: [StoredValue] = []
            for attribute in attributes {
                if let value = incoming[id]?.attributes[attribute.name] {
                    values.append(value)
                } else if let local = snapshot(id) {
                    values.append(local.attributes[attribute.slot])
                } else {
                    return nil
                }
            }
            return values
        }
        var conflicts: [PersistentIdentifier] = []
        for object in objects {
            guard let entity = plan.entities[object.id.entityName], !entity.uniqueKeys.isEmpty else { continue }
            for unique in entity.uniqueKeys {
                guard let values = key(object.id, unique.attributes), !values.contains(where: \.isNull),
                      let holder = container.store.identifier(entity: entity.name, uniqueConstraint: unique.number,
                                                              key: values),
                      holder != object.id, !gone.contains(holder), key(holder, unique.attributes) == values
                else { continue }
                conflicts.append(holder)
            }
        }
        return conflicts
    }

    /// What the local transactions not exported yet changed, by object: the clock each field, insert and deletion
    /// was given.
    private static func pending(_ log: HistoryLog, after exported: UInt64, clocks: [MirrorState.Pending],
                                schema: Schema) -> [PersistentIdentifier: LocalPending] {
        let byNumber = Dictionary(clocks.map { ($0.transaction, $0.clock) }, uniquingKeysWith: max)
        var result: [PersistentIdentifier: LocalPending] = [:]
        for record in log.records where record.number > exported {
            guard let clock = byNumber[record.number] else { continue }
            for id in record.inserted {
                result[id, default: .init()].inserted = clock
                if let entity = schema.entity(named: id.entityName) {
                    for name in entity.attributes.map(\.name) + entity.relationships.map(\.name) {
                        result[id, default: .init()].fields[name] = clock
                    }
                }
            }
            for update in record.updated {
                for name in update.properties { result[update.id, default: .init()].fields[name] = clock }
            }
            for deletion in record.deleted { result[deletion.id, default: .init()].deleted = clock }
        }
        return result
    }
}
