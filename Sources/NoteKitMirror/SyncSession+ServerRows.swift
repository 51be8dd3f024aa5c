import Foundation
import NoteKit

/// Reading a batch of changes from the server: the changes after the cursor and the merged rows of the objects
/// they name, decoded as values of this schema.
extension SyncSession {
    /// One server object as a sync read it: its clocks and the values of this schema's columns.
    struct ServerRow {
        var id: PersistentIdentifier
        var created: Int64
        var deleted: Int64?
        var attributes: [String: (value: StoredValue, clock: UInt64)] = [:]
        var toOnes: [String: (target: PersistentIdentifier?, clock: UInt64)] = [:]
        /// The object a unique-key collision merged this one into (then it is not alive).
        var mergedInto: PersistentIdentifier?
        /// The present targets of each to-many relationship kept in a link table, by name.
        var links: [String: [PersistentIdentifier]] = [:]
        var isAlive: Bool { mergedInto == nil && (deleted.map { created > $0 } ?? true) }
    }

    struct Batch {
        var lastSequence: Int64?
        var changeRows = 0
        var changeCount = 0
        var rows: [ServerRow] = []
        var deleted: [ServerRow] = []
        /// The attributes other devices' changes in the batch named, by object (for entities with a resolver).
        var changedElsewhere: [PersistentIdentifier: Set<String>] = [:]
    }

    /// The next changes after the cursor and, for those of other devices, the merged rows of the objects they name,
    /// read in one snapshot of the server.
    mutating func readBatch() throws -> Batch {
        var batch = Batch()
        try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", purpose: "read changes")
        defer { _ = try? connection.execute("COMMIT", purpose: "read changes") }
        let changes = try connection.execute("""
            SELECT seq, device::text, CASE WHEN device = $3::uuid AND token >= 0 THEN NULL ELSE body END
            FROM \(ns)."changes" WHERE zone = $1 AND seq > $2::bigint
            ORDER BY seq LIMIT \(Self.importBatch)
            """, [zone, String(state.importedSequence), state.device.uuidString], purpose: "read changes").values
        batch.changeRows = changes.count
        var keys: [String: Set<String>] = [:]
        let me = state.device.uuidString.lowercased()
        for row in changes {
            guard let sequence = row[0].flatMap(Int64.init) else { continue }
            batch.lastSequence = sequence
            // A device skips its own changes (the server does not even send their bodies), except the merges and
            // resolutions its pushes made, recorded with negative tokens, which every store applies alike.
            guard let body = row[2] else { continue }
            batch.changeCount += 1
            let parsed = Self.parse(body)
            if parsed.isBaseline {
                // Another device sent everything: read every object of the zone.
                for entity in plan.entities.keys { keys[entity] = nil }
                for entity in plan.entities.values {
                    let ids = try connection.execute("SELECT id FROM \(entity.table) WHERE zone = $1", [zone],
                                                     purpose: "read a baseline").values.compactMap { $0[0] }
                    keys[entity.name, default: []].formUnion(ids)
                }
                continue
            }
            let fromOther = row[1]?.lowercased() != me
            for object in parsed.objects {
                guard let entity = plan.entities[object.entity], let uuid = UUID(uuidString: object.id)
                else { continue }
                keys[object.entity, default: []].insert(object.id)
                // What another device changed, unseen by any local edit not sent yet: a conflict for a resolver.
                if fromOther, resolvers[object.entity] != nil {
                    batch.changedElsewhere[PersistentIdentifier(entityName: object.entity, primaryKey: uuid),
                                           default: []].formUnion(object.properties ?? entity.attributes.map(\.name))
                }
            }
        }
        // The rows are the objects' state now, which may point at objects whose own changes come after this batch:
        // those targets are read too (and theirs, a few levels deep), so that a target missing here means one the
        // server has deleted, not one this device has not heard of yet.
        var read: Set<PersistentIdentifier> = []
        for _ in 0..<8 where !keys.isEmpty {
            var pointedAt: Set<PersistentIdentifier> = []
            var survivors: Set<PersistentIdentifier> = []
            for (name, ids) in keys.sorted(by: { $0.key < $1.key }) {
                guard let entity = plan.entities[name] else { continue }
                let sorted = ids.sorted()
                for start in stride(from: 0, to: sorted.count, by: 1000) {
                    let part = sorted[start..<min(start + 1000, sorted.count)]
                    for row in try readRows(entity, ids: Array(part)) where read.insert(row.id).inserted {
                        if row.isAlive { batch.rows.append(row) } else { batch.deleted.append(row) }
                        // The survivor of a merge is read with its loser, whatever this store has of it.
                        if let survivor = row.mergedInto { survivors.insert(survivor) }
                        guard row.isAlive else { continue }
                        for (_, field) in row.toOnes { if let target = field.target { pointedAt.insert(target) } }
                        for (_, targets) in row.links { pointedAt.formUnion(targets) }
                        // So is the object that holds the row's unique key here, if it is another: the server's
                        // state of it says whether the two can both be applied.
                        for holder in localHolders(of: row, entity: entity) { survivors.insert(holder) }
                    }
                }
            }
            // One look-up in the store for all of them, not one a relationship of a row.
            let unread = pointedAt.subtracting(read).sorted()
            var targets: [String: Set<String>] = [:]
            for (target, snapshot) in zip(unread, container.store.rows(for: unread)) where snapshot == nil {
                targets[target.entityName, default: []].insert(Self.key(target))
            }
            for survivor in survivors.subtracting(read) {
                targets[survivor.entityName, default: []].insert(Self.key(survivor))
            }
            keys = targets
        }
        return batch
    }

    private mutating func readRows(_ entity: MirrorPlan.Entity, ids: [String]) throws -> [ServerRow] {
        var select = ["id", "created_clock", "deleted_clock", "\"merged_into\""]
        for attribute in entity.attributes { select += [attribute.value + "::text", attribute.clock] }
        for toOne in entity.toOnes { select += [toOne.target, toOne.clock] }
        let rows = try connection.execute("""
            SELECT \(select.joined(separator: ", ")) FROM \(entity.table) WHERE zone = $1 AND id = ANY($2::text[])
            """, [zone, Self.arrayLiteral(ids)], purpose: "read \(entity.name) objects").values
        var result: [ServerRow] = []
        for row in rows {
            let key = row[0] ?? ""
            do {
                result.append(try decode(row, entity: entity))
            } catch {
                report.skippedRows.append(MirrorSkippedRow(zone: zone, entity: entity.name, id: key,
                                                           reason: "\(error)"))
            }
        }
        if !entity.links.isEmpty {
            let links = try readLinks(entity, ids: result.filter(\.isAlive).map { Self.key($0.id) })
            for index in result.indices { result[index].links = links[Self.key(result[index].id)] ?? [:] }
        }
        return result
    }

    /// A server row as values of this schema, or why it cannot be applied.
    private mutating func decode(_ row: [String?], entity: MirrorPlan.Entity) throws -> ServerRow {
        guard let key = row[0], let uuid = UUID(uuidString: key) else {
            throw MirrorRowProblem("the key \(row[0] ?? "NULL") is not a UUID")
        }
        guard let created = row[1].flatMap(Int64.init) else { throw MirrorRowProblem("created_clock is missing") }
        let deleted = row[2].flatMap(Int64.init)
        var result = ServerRow(id: PersistentIdentifier(entityName: entity.name, primaryKey: uuid), created: created,
                               deleted: deleted)
        if let survivor = row[3] {
            guard let uuid = UUID(uuidString: survivor) else {
                throw MirrorRowProblem("merged_into \(survivor) is not a UUID")
            }
            result.mergedInto = PersistentIdentifier(entityName: entity.name, primaryKey: uuid)
        }
        state.clock.receive(UInt64(max(0, max(created, deleted ?? 0))))
        var column = 4
        for attribute in entity.attributes {
            defer { column += 2 }
            guard let text = row[column], let clock = row[column + 1].flatMap(UInt64.init) else { continue }
            state.clock.receive(clock)
            let value: StoredValue
            if attribute.isExternal, let name = MirrorValueCoding.blobName(text) {
                value = try remoteBlob(name)
            } else {
                value = try coding.decode(text, as: attribute.type)
            }
            result.attributes[attribute.name] = (value, clock)
        }
        for toOne in entity.toOnes {
            defer { column += 2 }
            guard let clock = row[column + 1].flatMap(UInt64.init) else { continue }
            state.clock.receive(clock)
            var target: PersistentIdentifier?
            if let text = row[column] {
                guard let uuid = UUID(uuidString: text) else {
                    throw MirrorRowProblem("\(toOne.name) points at \(text), which is not a UUID")
                }
                target = PersistentIdentifier(entityName: toOne.destination, primaryKey: uuid)
            }
            result.toOnes[toOne.name] = (target, clock)
        }
        return result
    }

    /// A reference to blob `name` on the server, whose bytes are read the first time the store reads the value
    /// (the store checks them against the size and the name then): the import reads only its length.
    private func remoteBlob(_ name: String) throws -> StoredValue {
        guard let size = try MirrorBlobFetcher.size(of: name, zone: zone, namespace: ns, on: connection) else {
            throw MirrorRowProblem("its blob \(name) is not on the server")
        }
        let fetcher = blobFetcher
        return .external(ExternalData(remoteName: name, size: size) {
            let bytes = try fetcher.fetchBlob(named: name, size: size)
            guard bytes.count == size, SHA256Digest.hexString(bytes) == name else {
                throw StoredValueError.externalDataUnreadable(
                    name: name, reason: "the mirror's server gave bytes that are not the blob's")
            }
            return bytes
        })
    }

    /// The objects this store holds with the unique key of `row` (another device's object), when they are others.
    private func localHolders(of row: ServerRow, entity: MirrorPlan.Entity) -> [PersistentIdentifier] {
        var holders: [PersistentIdentifier] = []
        for unique in entity.uniqueKeys {
            let values = unique.attributes.compactMap { row.attributes[$0.name]?.value }
            guard values.count == unique.attributes.count, !values.contains(where: \.isNull),
                  let holder = container.store.identifier(entity: entity.name, uniqueConstraint: unique.number,
                                                          key: values), holder != row.id else { continue }
            holders.append(holder)
        }
        return holders
    }
}
