import Foundation
import NoteKit

// Unique keys across machines (docs/MIRROR.md, *Unique keys*). Two devices that each insert an object with the same
// unique key have two objects on the server; locally the upsert rule keeps one. The server keeps the same rule: at
// most one live row a key in a zone, checked by every push under the zone's lock, so whichever push brings the second
// object resolves the collision, whatever the order of arrival:
//
// - the survivor is the object created first (the smaller `created_clock`, then the smaller key), as the saved object
//   survives a local upsert; it takes each field from whichever of the two wrote it last (field-wise, by clock, as any
//   merge), so the later insert's values win where they are later, as a local upsert's do;
// - the loser is tombstoned with `merged_into` naming the survivor, every reference to it on the server is pointed at
//   the survivor, and a later push that still writes to the loser or points at it is carried over to the survivor;
// - one `changes` row (`"resolution": true`, with a negative token) names the three kinds of object, and every
//   device imports it, the pushing one too, so each store merges the two objects alike
//   (ModelContext.applyReplicaChanges's `merging`).

extension SyncSession {
    /// Resolves the unique-key collisions the objects merged in this server transaction made, and carries writes to
    /// merged objects over to their survivors. Run under the zone's lock, before the transaction commits.
    mutating func resolveUniqueKeys() throws(MirrorError) {
        var pending = touched
        touched = [:]
        guard plan.entities.values.contains(where: { !$0.uniqueKeys.isEmpty }) else { return }
        var survivors: [String: Set<String>] = [:]
        var losers: [(entity: String, id: String, into: String)] = []
        var referrers: [String: [String: Set<String>]] = [:]
        var clock: UInt64?
        // A merge can give a survivor another object's values of a second unique key: checked again, a few rounds.
        for _ in 0..<8 where !pending.isEmpty {
            var next: [String: Set<String>] = [:]
            for (name, keys) in pending.sorted(by: { $0.key < $1.key }) {
                guard let entity = plan.entities[name] else { continue }
                let ids = Self.arrayLiteral(keys.sorted())
                // References this push wrote to objects merged away go to their survivors.
                for toOne in entity.toOnes {
                    guard let destination = plan.entities[toOne.destination], !destination.uniqueKeys.isEmpty
                    else { continue }
                    let moved = try connection.execute("""
                        UPDATE \(entity.table) AS t SET \(toOne.target) = m."merged_into"
                        FROM \(destination.table) AS m
                        WHERE t.zone = $1 AND t.id = ANY($2::text[]) AND m.zone = $1 AND m.id = t.\(toOne.target)
                          AND m."merged_into" IS NOT NULL
                        RETURNING t.id
                        """, [zone, ids], purpose: "point \(name).\(toOne.name) at merged objects' survivors")
                    for row in moved.values { if let id = row[0] { referrers[name, default: [:]][toOne.name, default: []].insert(id) } }
                }
                // Links this push made to objects merged away go to their survivors, with the merged objects' others.
                for link in entity.links {
                    guard let destination = plan.entities[link.destination], !destination.uniqueKeys.isEmpty
                    else { continue }
                    let merged = try connection.execute("""
                        SELECT DISTINCT m.id, m."merged_into" FROM \(link.table) AS l JOIN \(destination.table) AS m
                          ON m.zone = l.zone AND m.id = l.\(link.targetColumn) AND m."merged_into" IS NOT NULL
                        WHERE l.zone = $1 AND l.\(link.selfColumn) = ANY($2::text[])
                        """, [zone, ids], purpose: "find \(name).\(link.name) links to merged objects").values
                    for row in merged {
                        guard let loser = row[0], let survivor = row[1] else { continue }
                        for moved in try moveLinks(destination, loser: loser, into: survivor) {
                            referrers[moved.entity, default: [:]][moved.relationship, default: []].formUnion(moved.ids)
                        }
                        referrers[name, default: [:]][link.name, default: []].formUnion(keys)
                    }
                }
                guard !entity.uniqueKeys.isEmpty else { continue }
                // Writes to an object merged away (by a device that had not heard of the merge) reach its survivor.
                let stale = try connection.execute("""
                    SELECT id, "merged_into" FROM \(entity.table)
                    WHERE zone = $1 AND id = ANY($2::text[]) AND "merged_into" IS NOT NULL
                    """, [zone, ids], purpose: "find writes to merged \(name) objects").values
                for row in stale {
                    guard let loser = row[0], let survivor = row[1] else { continue }
                    try fold(entity, loser: loser, into: survivor)
                    for moved in try moveLinks(entity, loser: loser, into: survivor) {
                        referrers[moved.entity, default: [:]][moved.relationship, default: []].formUnion(moved.ids)
                    }
                    survivors[name, default: []].insert(survivor)
                    next[name, default: []].insert(survivor)
                    // Named again, for a device that kept the loser to send the edit first.
                    losers.append((name, loser, survivor))
                }
                // Live objects that share a unique key with another live one.
                var groups = UnionFind()
                var created: [String: Int64] = [:]
                for key in entity.uniqueKeys {
                    let same = key.attributes.map { "o.\($0.value) = t.\($0.value)" }.joined(separator: " AND ")
                    let constraining = key.attributes.map { "t.\($0.value) IS NOT NULL AND t.\($0.value) <> $3::jsonb" }
                        .joined(separator: " AND ")
                    let pairs = try connection.execute("""
                        SELECT t.id, t.created_clock, o.id, o.created_clock
                        FROM \(entity.table) AS t JOIN \(entity.table) AS o
                          ON o.zone = t.zone AND o.id <> t.id AND \(same) AND o."merged_into" IS NULL
                         AND (o.deleted_clock IS NULL OR o.created_clock > o.deleted_clock)
                        WHERE t.zone = $1 AND t.id = ANY($2::text[]) AND t."merged_into" IS NULL
                          AND (t.deleted_clock IS NULL OR t.created_clock > t.deleted_clock) AND \(constraining)
                        """, [zone, ids, Self.nullJSON], purpose: "find \(name) objects sharing a unique key").values
                    for pair in pairs {
                        guard let a = pair[0], let b = pair[2], let ca = pair[1].flatMap(Int64.init),
                              let cb = pair[3].flatMap(Int64.init) else { continue }
                        created[a] = ca
                        created[b] = cb
                        groups.union(a, b)
                    }
                }
                for group in groups.groups() {
                    // The object created first survives, as the saved one does in a local upsert.
                    let ordered = group.sorted { (created[$0] ?? 0, $0) < (created[$1] ?? 0, $1) }
                    guard let survivor = ordered.first else { continue }
                    if clock == nil {
                        clock = state.clock.tick(at: Date())
                    }
                    for loser in ordered.dropFirst() {
                        try fold(entity, loser: loser, into: survivor)
                        try connection.execute("""
                            UPDATE \(entity.table) SET deleted_clock = GREATEST(deleted_clock, created_clock, $3::bigint),
                              "merged_into" = $4 WHERE zone = $1 AND id = $2
                            """, [zone, loser, String(clock ?? 0), survivor], purpose: "merge a \(name) object")
                        try connection.execute("""
                            UPDATE \(entity.table) SET "merged_into" = $3 WHERE zone = $1 AND "merged_into" = $2
                            """, [zone, loser, survivor], purpose: "merge a \(name) object")
                        for moved in try moveLinks(entity, loser: loser, into: survivor) {
                            referrers[moved.entity, default: [:]][moved.relationship, default: []].formUnion(moved.ids)
                        }
                        for referrer in entity.referrers {
                            guard let table = plan.entities[referrer.entity]?.table else { continue }
                            let moved = try connection.execute("""
                                UPDATE \(table) SET \(referrer.toOne.target) = $3
                                WHERE zone = $1 AND \(referrer.toOne.target) = $2 RETURNING id
                                """, [zone, loser, survivor],
                                purpose: "point \(referrer.entity).\(referrer.toOne.name) at a merged object's survivor")
                            for row in moved.values {
                                if let id = row[0] {
                                    referrers[referrer.entity, default: [:]][referrer.toOne.name, default: []].insert(id)
                                }
                            }
                        }
                        losers.append((name, loser, survivor))
                    }
                    survivors[name, default: []].insert(survivor)
                    next[name, default: []].insert(survivor)
                }
            }
            pending = next
        }
        guard !survivors.isEmpty || !referrers.isEmpty else { return }
        if clock != nil { try file.save(state) }
        try recordResolution(survivors: survivors, losers: losers, referrers: referrers)
    }

    /// Gives `survivor` each field of `loser` that `loser` wrote later, by the rule of every merge (the later clock;
    /// equal clocks, the greater JSON text), over every value column the server's table has, those of newer schemas
    /// included, so a device on an older schema loses nothing it does not know.
    private mutating func fold(_ entity: MirrorPlan.Entity, loser: String, into survivor: String) throws(MirrorError) {
        guard loser != survivor else { return }
        var sets: [String] = []
        for column in try columns(of: entity) {
            let (value, clock) = (column.value, column.clock)
            let wins = "l.\(clock) IS NOT NULL AND (s.\(clock) IS NULL OR l.\(clock) > s.\(clock) OR "
                + "(l.\(clock) = s.\(clock) AND l.\(value)::text > s.\(value)::text))"
            sets.append("\(value) = CASE WHEN \(wins) THEN l.\(value) ELSE s.\(value) END")
            sets.append("\(clock) = GREATEST(s.\(clock), l.\(clock))")
        }
        guard !sets.isEmpty else { return }
        try connection.execute("""
            UPDATE \(entity.table) AS s SET \(sets.joined(separator: ", ")) FROM \(entity.table) AS l
            WHERE s.zone = $1 AND s.id = $2 AND l.zone = $1 AND l.id = $3
            """, [zone, survivor, loser], purpose: "merge a \(entity.name) object into its survivor")
    }

    /// The value and clock column pairs of `entity`'s table on the server: `a_x`/`ac_x` and `r_x`/`rc_x`, names
    /// checked as NoteKit makes them before they are quoted into a statement.
    private mutating func columns(of entity: MirrorPlan.Entity) throws(MirrorError) -> [(value: String, clock: String)] {
        if let known = serverColumns[entity.name] { return known }
        let names = Set(try connection.execute("""
            SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2
            """, [plan.namespaceName, entity.tableName], purpose: "read \(entity.name)'s columns").values
            .compactMap { $0[0] })
        var pairs: [(value: String, clock: String)] = []
        for name in names.sorted() {
            for (valuePrefix, clockPrefix) in [("a_", "ac_"), ("r_", "rc_")] where name.hasPrefix(clockPrefix) {
                let property = String(name.dropFirst(clockPrefix.count))
                guard names.contains(valuePrefix + property),
                      let clock = try? ServerTables.identifier(property, kind: "property", prefix: clockPrefix),
                      let value = try? ServerTables.identifier(property, kind: "property", prefix: valuePrefix)
                else { continue }
                pairs.append((value.quoted, clock.quoted))
            }
        }
        serverColumns[entity.name] = pairs
        return pairs
    }

    /// The `changes` row of a resolution: which objects survived (all their fields may have changed), which were
    /// merged into which, and which references moved. Read by every device, the one that pushed it too.
    func recordResolution(survivors: [String: Set<String>], losers: [(entity: String, id: String, into: String)],
                                  referrers: [String: [String: Set<String>]]) throws(MirrorError) {
        var objects: [[String: Any]] = []
        for (entity, ids) in survivors.sorted(by: { $0.key < $1.key }) {
            for id in ids.sorted() { objects.append(["e": entity, "id": id, "op": "update"]) }
        }
        for loser in losers { objects.append(["e": loser.entity, "id": loser.id, "op": "merge", "into": loser.into]) }
        for (entity, byRelationship) in referrers.sorted(by: { $0.key < $1.key }) {
            var properties: [String: Set<String>] = [:]
            for (relationship, ids) in byRelationship { for id in ids { properties[id, default: []].insert(relationship) } }
            for (id, names) in properties.sorted(by: { $0.key < $1.key }) {
                objects.append(["e": entity, "id": id, "op": "update", "p": names.sorted()])
            }
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["resolution": true, "objects": objects],
                                                options: [.sortedKeys])) ?? Data()
        // A token of its own, below every exported one: the rows' sequence numbers only grow under the zone's lock.
        try connection.execute("""
            INSERT INTO \(plan.namespace)."changes" (zone, device, token, author, body)
            VALUES ($1, $2::uuid, -(SELECT coalesce(max(seq), 0) + 1 FROM \(plan.namespace)."changes"), $3, $4::jsonb)
            """, [zone, state.device.uuidString, StoreMirror.author, String(decoding: data, as: UTF8.self)],
            purpose: "record a unique-key merge")
    }

    /// The JSON a null value has in a value column: a key holding it constrains nothing, as locally.
    static let nullJSON = (try? MirrorValueCoding().encode(.null)) ?? "null"
}

/// Disjoint sets of keys: the objects that share a unique key, transitively.
struct UnionFind {
    private var parent: [String: String] = [:]

    mutating func find(_ key: String) -> String {
        var root = parent[key] ?? key
        while let up = parent[root], up != root { root = up }
        var node = key
        while let up = parent[node], up != root {
            parent[node] = root
            node = up
        }
        if parent[key] == nil { parent[key] = key }
        return root
    }

    mutating func union(_ a: String, _ b: String) {
        let (ra, rb) = (find(a), find(b))
        if ra != rb { parent[max(ra, rb)] = min(ra, rb) }
    }

    /// The sets with more than one key.
    mutating func groups() -> [[String]] {
        var result: [String: [String]] = [:]
        for key in Array(parent.keys) { result[find(key), default: []].append(key) }
        return result.values.filter { $0.count > 1 }.map { $0.sorted() }.sorted { $0[0] < $1[0] }
    }
}
