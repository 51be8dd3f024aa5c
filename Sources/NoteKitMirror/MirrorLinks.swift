import Foundation
import NoteKit

// To-many relationships kept in link tables (docs/MIRROR.md, *Relationships*): many-to-many ones, and to-many ones
// without an inverse. Each link, (id, target), is present or removed at a clock, and merges on its own: the later
// write wins, so two devices' additions and removals of different links all hold. A push sends the links an object
// has now, and changes only what it has seen (written by itself, or by a change it has imported): it adds a link
// the server does not have or had removed in a change it saw, and removes a link it saw and no longer has. So a link
// another device added unseen is not removed by it, and one another device removed unseen is not brought back by
// this one's stale copy (it could only have been added before both edits).

/// Link writes waiting to be sent, by table, side and transaction: each group goes as one statement of additions and
/// one of removals over arrays.
struct LinkGroupKey: Hashable {
    let table: String
    let selfColumn: String
    let targetColumn: String
    let name: String
    let clock: UInt64
    let seq: Int64?
}

struct LinkGroup {
    /// Links to add, as (id, target) in the table's own order, each once.
    var additions: [(id: String, target: String)] = []
    var added: Set<[String]> = []
    /// Objects whose links not among `kept` are removed, and the (object, target) pairs they keep.
    var removing: [String] = []
    var kept: [(object: String, target: String)] = []
    var size: Int { additions.count + kept.count + removing.count }
}

extension SyncSession {
    /// Queues the links of `snapshot`'s relationships `links` as they are now, at `clock`; `seq` is the change that
    /// carries them (nil for a baseline, which adds and never removes). A new object has nothing to remove.
    mutating func pushLinks(_ snapshot: ModelSnapshot, links: [MirrorPlan.Link], clock: UInt64, seq: Int64?,
                            created: Bool) throws(MirrorError) {
        let me = Self.key(snapshot.id)
        if !links.isEmpty { touched[snapshot.id.entityName, default: []].insert(me) }
        for link in links {
            guard case .toMany(let ids) = snapshot.relationships[link.slot] else { continue }
            let key = LinkGroupKey(table: link.table, selfColumn: link.selfColumn, targetColumn: link.targetColumn,
                                   name: link.name, clock: clock, seq: seq)
            var group = linkWrites.removeValue(forKey: key) ?? LinkGroup()
            for target in ids.map(Self.key) {
                let pair = link.isOwner ? [me, target] : [target, me]
                if group.added.insert(pair).inserted { group.additions.append((pair[0], pair[1])) }
                if seq != nil && !created { group.kept.append((me, target)) }
            }
            if seq != nil && !created { group.removing.append(me) }
            linkWrites[key] = group
            if group.size >= 5000 { try sendLinks(key) }
        }
    }

    /// Sends every queued link write; before the push's unique-key checks, which look at links.
    mutating func flushLinks() throws(MirrorError) {
        for key in linkWrites.keys.sorted(by: { ($0.table, $0.clock) < ($1.table, $1.clock) }) { try sendLinks(key) }
    }

    private mutating func sendLinks(_ key: LinkGroupKey) throws(MirrorError) {
        guard let group = linkWrites.removeValue(forKey: key) else { return }
        let device = state.device.uuidString
        let cursor = String(state.importedSequence)
        if !group.additions.isEmpty {
            try connection.execute("""
                INSERT INTO \(key.table) AS t (zone, id, target, clock, present, written_seq, written_by)
                SELECT $1, u.id, u.target, $4::bigint, true, $5::bigint, $6::uuid
                FROM unnest($2::text[], $3::text[]) AS u(id, target)
                ON CONFLICT (zone, id, target) DO UPDATE SET
                  present = true, clock = EXCLUDED.clock, written_seq = EXCLUDED.written_seq,
                  written_by = EXCLUDED.written_by
                WHERE NOT t.present AND EXCLUDED.clock > t.clock
                  AND (t.written_by = $6::uuid OR t.written_seq <= $7::bigint)
                """, [zone, Self.arrayLiteral(group.additions.map(\.id)), Self.arrayLiteral(group.additions.map(\.target)),
                      String(key.clock), String(key.seq ?? 0), device, cursor], purpose: "add \(key.name) links")
        }
        guard let seq = key.seq, !group.removing.isEmpty else { return }
        let (me, other) = (key.selfColumn, key.targetColumn)
        try connection.execute("""
            UPDATE \(key.table) AS l SET present = false, clock = $3::bigint, written_seq = $4::bigint,
              written_by = $5::uuid
            WHERE l.zone = $1 AND l.\(me) = ANY($2::text[]) AND l.present AND l.clock < $3::bigint
              AND (l.written_by = $5::uuid OR l.written_seq <= $6::bigint)
              AND NOT EXISTS (SELECT 1 FROM unnest($7::text[], $8::text[]) AS k(object, target)
                              WHERE k.object = l.\(me) AND k.target = l.\(other))
            """, [zone, Self.arrayLiteral(group.removing), String(key.clock), String(seq), device, cursor,
                  Self.arrayLiteral(group.kept.map(\.object)), Self.arrayLiteral(group.kept.map(\.target))],
            purpose: "remove \(key.name) links")
    }

    /// The present links of `ids` (objects of `entity`) in each of its link relationships, by object and name.
    func readLinks(_ entity: MirrorPlan.Entity, ids: [String]) throws(MirrorError)
        -> [String: [String: [PersistentIdentifier]]] {
        var result: [String: [String: [PersistentIdentifier]]] = [:]
        guard !ids.isEmpty else { return result }
        for link in entity.links {
            let rows = try connection.execute("""
                SELECT \(link.selfColumn), \(link.targetColumn) FROM \(link.table)
                WHERE zone = $1 AND \(link.selfColumn) = ANY($2::text[]) AND present
                ORDER BY \(link.selfColumn), \(link.targetColumn)
                """, [zone, Self.arrayLiteral(ids)], purpose: "read \(entity.name).\(link.name) links").values
            for ids in ids { result[ids, default: [:]][link.name] = [] }
            for row in rows {
                guard let owner = row[0], let target = row[1], let uuid = UUID(uuidString: target) else { continue }
                result[owner, default: [:]][link.name, default: []]
                    .append(PersistentIdentifier(entityName: link.destination, primaryKey: uuid))
            }
        }
        return result
    }

    /// Moves the links of a merged object to its survivor (a link both had keeps its later write), in every link
    /// table that holds objects of `entity`; returns the objects on the other side of links that moved, by entity
    /// and relationship, for the resolution's change row.
    mutating func moveLinks(_ entity: MirrorPlan.Entity, loser: String, into survivor: String) throws(MirrorError)
        -> [(entity: String, relationship: String, ids: [String])] {
        var moved: [(entity: String, relationship: String, ids: [String])] = []
        // `named`: the objects on the other side hold a relationship without an inverse, which the stores' own merge
        // of the two objects cannot see; the resolution names them, so each store reads their links again.
        var tables: [(table: String, column: String, other: String, entity: String, relationship: String,
                      named: Bool)] = []
        for link in entity.links {
            tables.append((link.table, link.selfColumn, link.targetColumn, entity.name, link.name, false))
        }
        // Relationships of other entities (and without an inverse) whose targets are of this entity.
        for other in plan.entities.values.sorted(by: { $0.name < $1.name }) {
            for link in other.links where link.destination == entity.name && link.isOwner
                && !tables.contains(where: { $0.table == link.table && $0.column == link.targetColumn }) {
                tables.append((link.table, link.targetColumn, link.selfColumn, other.name, link.name, true))
            }
        }
        for table in tables {
            let (column, other) = (table.column, table.other)
            try connection.execute("""
                INSERT INTO \(table.table) AS t (zone, \(column), \(other), clock, present, written_seq, written_by)
                SELECT zone, $3, \(other), clock, present, written_seq, written_by FROM \(table.table)
                WHERE zone = $1 AND \(column) = $2
                ON CONFLICT (zone, id, target) DO UPDATE SET
                  present = CASE WHEN EXCLUDED.clock > t.clock THEN EXCLUDED.present ELSE t.present END,
                  written_seq = CASE WHEN EXCLUDED.clock > t.clock THEN EXCLUDED.written_seq ELSE t.written_seq END,
                  written_by = CASE WHEN EXCLUDED.clock > t.clock THEN EXCLUDED.written_by ELSE t.written_by END,
                  clock = GREATEST(t.clock, EXCLUDED.clock)
                """, [zone, loser, survivor], purpose: "move a merged object's links")
            let gone = try connection.execute("""
                DELETE FROM \(table.table) WHERE zone = $1 AND \(column) = $2 RETURNING \(other)
                """, [zone, loser], purpose: "move a merged object's links").values.compactMap { $0[0] }
            if table.named { moved.append((table.entity, table.relationship, gone)) }
        }
        return moved
    }
}
