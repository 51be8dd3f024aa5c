import Foundation
import NoteKit

/// Sending the local transactions the server does not have: each in order with its clock, or the whole store as
/// a baseline when the history no longer reaches the last export (docs/MIRROR.md, *Export*).
extension SyncSession {
    /// Sends the local transactions not exported yet, in server transactions of about 1,000 changed objects, or
    /// the whole store as a baseline when the history does not reach back to the last export.
    mutating func export() throws {
        let (transactionNumber, log) = try transactionNumberAndHistory()
        let exported = state.exportedThrough
        guard transactionNumber > exported || needsBaseline else { return }
        try assignClocks(log, through: transactionNumber)
        let records = log.records.filter { $0.number > exported && $0.number <= transactionNumber }
        let complete = transactionNumber <= exported
            || records.map(\.number) == Array((exported + 1)...transactionNumber)
        if !complete || needsBaseline {
            try exportBaseline(through: transactionNumber)
            return
        }
        let clocks = Dictionary(state.pendingClocks.map { ($0.transaction, $0.clock) }, uniquingKeysWith: max)
        var batch: [(HistoryRecord, UInt64)] = []
        var objects = 0
        func flush(_ session: inout SyncSession, through last: UInt64) throws {
            try session.push(batch, through: last)
            batch = []
            objects = 0
        }
        for record in records {
            if let clock = clocks[record.number] {
                batch.append((record, clock))
                objects += record.changeCount
            }
            if objects >= 1000 { try flush(&self, through: record.number) }
        }
        if !batch.isEmpty || state.exportedThrough < transactionNumber { try flush(&self, through: transactionNumber) }
    }

    /// Sends `batch` (transactions and their clocks) in one server transaction, then records that everything
    /// through `last` is exported.
    private mutating func push(_ batch: [(HistoryRecord, UInt64)], through last: UInt64) throws {
        let store = container.store
        try connection.transaction(purpose: "send local changes") { () throws(MirrorError) in
            try lockZone()
            for (record, clock) in batch {
                let body = Self.body(of: record)
                let inserted = try connection.execute("""
                    INSERT INTO \(ns)."changes" (zone, device, token, author, body)
                    VALUES ($1, $2::uuid, $3::bigint, $4, $5::jsonb) ON CONFLICT DO NOTHING RETURNING seq
                    """, [zone, state.device.uuidString, String(record.number), record.author, body],
                    purpose: "record a change")
                // Already there: a push whose local record of success was lost. Its objects were merged then.
                guard let seq = inserted.values.first?.first.flatMap({ $0 }).flatMap(Int64.init) else { continue }
                let insertedIDs = record.inserted
                let snapshots = store.rows(for: insertedIDs + record.updated.map(\.id))
                for (id, snapshot) in zip(insertedIDs, snapshots.prefix(insertedIDs.count)) {
                    guard let snapshot, let entity = plan.entities[id.entityName] else { continue }
                    try merge(snapshot, entity: entity, attributes: entity.attributes, toOnes: entity.toOnes,
                              clock: clock, created: true)
                    try pushLinks(snapshot, links: entity.links, clock: clock, seq: seq, created: true)
                }
                for (update, snapshot) in zip(record.updated, snapshots.dropFirst(insertedIDs.count)) {
                    guard let snapshot, let entity = plan.entities[update.id.entityName] else { continue }
                    let names = Set(update.properties)
                    let attributes = entity.attributes.filter { names.contains($0.name) }
                    let toOnes = entity.toOnes.filter { names.contains($0.name) }
                    try pushLinks(snapshot, links: entity.links.filter { names.contains($0.name) }, clock: clock,
                                  seq: seq, created: false)
                    guard !attributes.isEmpty || !toOnes.isEmpty else { continue }
                    try merge(snapshot, entity: entity, attributes: attributes, toOnes: toOnes, clock: clock,
                              created: false)
                    if let resolver = resolvers[entity.name] {
                        try resolveAtPush(snapshot, entity: entity, attributes: attributes, clock: clock,
                                          resolver: resolver)
                    }
                }
                for deletion in record.deleted {
                    guard let entity = plan.entities[deletion.id.entityName] else { continue }
                    try queue(MergeShape(entity: entity, attributes: [], toOnes: [], kind: .deletion),
                              key: Self.key(deletion.id), values: [String(clock)])
                }
            }
            try flushMerges()
            try flushLinks()
            try resolveUniqueKeys()
            if !resolvedFields.isEmpty {
                try recordResolution(survivors: [:], losers: [], referrers: resolvedFields)
                resolvedFields = [:]
            }
            try connection.execute("""
                UPDATE \(ns)."devices" SET exported_token = $3::bigint, seen_at = now()
                WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the export")
        }
        report.exportedTransactions += batch.count
        state.exportedThrough = last
        state.pendingClocks.removeAll { $0.transaction <= last }
        try file.save(state)
        try Self.hold(container, after: last)
    }

    /// Sends every object as it is now, at one new clock: when the history no longer reaches the last export.
    private mutating func exportBaseline(through last: UInt64) throws {
        let clock = state.clock.tick(at: Date())
        try file.save(state)
        for entity in plan.entities.values.sorted(by: { $0.name < $1.name }) {
            let ids: [PersistentIdentifier]
            do {
                ids = try container.store.fetch(StoreFetchRequest(entity: entity.name, resultType: .identifiers))
                    .identifiers
            } catch {
                throw MirrorError.storeFailed(operation: "list \(entity.name) objects", reason: "\(error)")
            }
            for chunk in stride(from: 0, to: ids.count, by: 1000) {
                let part = Array(ids[chunk..<min(chunk + 1000, ids.count)])
                let snapshots = container.store.rows(for: part)
                try connection.transaction(purpose: "send the store's baseline") { () throws(MirrorError) in
                    try lockZone()
                    for snapshot in snapshots.compactMap({ $0 }) {
                        try merge(snapshot, entity: entity, attributes: entity.attributes, toOnes: entity.toOnes,
                                  clock: clock, created: true)
                        try pushLinks(snapshot, links: entity.links, clock: clock, seq: nil, created: true)
                    }
                    try flushMerges()
                    try flushLinks()
                    try resolveUniqueKeys()
                }
            }
        }
        // Recorded once every object is on the server, so that no device reads a baseline half sent: a sync cut
        // off before this sends the whole baseline again, which merges to the same rows.
        try connection.transaction(purpose: "record the store's baseline") { () throws(MirrorError) in
            try lockZone()
            try connection.execute("""
                INSERT INTO \(ns)."changes" (zone, device, token, author, body)
                VALUES ($1, $2::uuid, $3::bigint, NULL, $4::jsonb) ON CONFLICT DO NOTHING
                """, [zone, state.device.uuidString, String(last), #"{"baseline": true}"#],
                purpose: "record the baseline")
            try connection.execute("""
                UPDATE \(ns)."devices" SET exported_token = $3::bigint WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the export")
        }
        report.exportedBaseline = true
        state.exportedThrough = last
        state.pendingClocks.removeAll { $0.transaction <= last }
        try file.save(state)
        try Self.hold(container, after: last)
    }

    /// Pushes are serialized per zone, so that `changes.seq` grows in commit order and a reader that has read
    /// through a number never sees a smaller one appear later.
    private func lockZone() throws(MirrorError) {
        try connection.execute("SELECT pg_advisory_xact_lock(19019, hashtext($1))", [zone],
                               purpose: "lock the zone")
    }

    /// Queues the merge of `attributes` and `toOnes` of `snapshot` into the object's server row at `clock`: each column
    /// takes the value with the later clock (equal clocks: the greater JSON text, so every server decides alike).
    private mutating func merge(_ snapshot: ModelSnapshot, entity: MirrorPlan.Entity,
                                attributes: [MirrorPlan.Attribute], toOnes: [MirrorPlan.ToOne], clock: UInt64,
                                created: Bool) throws(MirrorError) {
        var values: [String?] = [created ? String(clock) : "0"]
        for attribute in attributes {
            values += [try encodedValue(snapshot.attributes[attribute.slot], attribute), String(clock)]
        }
        for toOne in toOnes {
            if case .toOne(let id?) = snapshot.relationships[toOne.slot] {
                values += [Self.key(id), String(clock)]
            } else {
                values += [nil, String(clock)]
            }
        }
        try queue(MergeShape(entity: entity, attributes: attributes, toOnes: toOnes,
                             kind: created ? .insert : .update), key: Self.key(snapshot.id), values: values)
        touched[entity.name, default: []].insert(Self.key(snapshot.id))
    }
}
