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
    /// What resolving the unique keys of one server transaction did, for its resolution change row: the survivors,
    /// the losers merged into them, the references moved, and the clock the merges were given (taken at the first).
    struct UniqueKeyResolution {
        var survivors: [String: Set<String>] = [:]
        var losers: [(entity: String, id: String, into: String)] = []
        var referrers: [String: [String: Set<String>]] = [:]
        var clock: UInt64?
        /// The survivors of this round, by entity: checked again in the next.
        var next: [String: Set<String>] = [:]

        /// Records the references a move of links changed.
        mutating func addReferrers(_ moved: [(entity: String, relationship: String, ids: [String])]) {
            for moved in moved {
                referrers[moved.entity, default: [:]][moved.relationship, default: []].formUnion(moved.ids)
            }
        }

        /// Records `survivor` of `entity`: named as updated in the change row, and checked again next round.
        mutating func survive(_ survivor: String, of entity: String) {
            survivors[entity, default: []].insert(survivor)
            next[entity, default: []].insert(survivor)
        }
    }

    /// Resolves the unique-key collisions the objects merged in this server transaction made, and carries writes to
    /// merged objects over to their survivors. Run under the zone's lock, before the transaction commits.
    mutating func resolveUniqueKeys() throws(MirrorError) {
        var pending = touched
        touched = [:]
        guard plan.entities.values.contains(where: { !$0.uniqueKeys.isEmpty }) else { return }
        var resolution = UniqueKeyResolution()
        // A merge can give a survivor another object's values of a second unique key: checked again, a few rounds.
        for _ in 0..<8 where !pending.isEmpty {
            resolution.next = [:]
            for (name, keys) in pending.sorted(by: { $0.key < $1.key }) {
                guard let entity = plan.entities[name] else { continue }
                let ids = Self.arrayLiteral(keys.sorted())
                try redirectToOnes(of: entity, ids: ids, into: &resolution)
                try redirectLinks(of: entity, keys: keys, ids: ids, into: &resolution)
                guard !entity.uniqueKeys.isEmpty else { continue }
                try carryOverStaleWrites(to: entity, ids: ids, into: &resolution)
                let (groups, created) = try objectsSharingKeys(of: entity, ids: ids)
                for group in groups {
                    try mergeGroup(group, of: entity, created: created, into: &resolution)
                }
            }
            pending = resolution.next
        }
        guard !resolution.survivors.isEmpty || !resolution.referrers.isEmpty else { return }
        if resolution.clock != nil { try file.save(state) }
        try recordResolution(survivors: resolution.survivors, losers: resolution.losers,
                             referrers: resolution.referrers)
    }

    /// Points the to-one references this push wrote (`ids`, an array literal of `entity`'s keys) at objects merged
    /// away to their survivors.
    private func redirectToOnes(of entity: MirrorPlan.Entity, ids: String,
                                into resolution: inout UniqueKeyResolution) throws(MirrorError) {
        for toOne in entity.toOnes {
            guard let destination = plan.entities[toOne.destination], !destination.uniqueKeys.isEmpty
            else { continue }
            let moved = try connection.execute("""
                UPDATE \(entity.table) AS t SET \(toOne.target) = m."merged_into"
                FROM \(destination.table) AS m
                WHERE t.zone = $1 AND t.id = ANY($2::text[]) AND m.zone = $1 AND m.id = t.\(toOne.target)
                  AND m."merged_into" IS NOT NULL
                RETURNING t.id
                """, [zone, ids], purpose: "point \(entity.name).\(toOne.name) at merged objects' survivors")
            for row in moved.values {
                guard let id = row[0] else { continue }
                resolution.referrers[entity.name, default: [:]][toOne.name, default: []].insert(id)
            }
        }
    }

    /// Moves the links this push made (from `keys`, `ids` as an array literal) to objects merged away to their
    /// survivors, with the merged objects' other links.
    private mutating func redirectLinks(of entity: MirrorPlan.Entity, keys: Set<String>, ids: String,
                                        into resolution: inout UniqueKeyResolution) throws(MirrorError) {
        for link in entity.links {
            guard let destination = plan.entities[link.destination], !destination.uniqueKeys.isEmpty
            else { continue }
            let merged = try connection.execute("""
                SELECT DISTINCT m.id, m."merged_into" FROM \(link.table) AS l JOIN \(destination.table) AS m
                  ON m.zone = l.zone AND m.id = l.\(link.targetColumn) AND m."merged_into" IS NOT NULL
                WHERE l.zone = $1 AND l.\(link.selfColumn) = ANY($2::text[])
                """, [zone, ids], purpose: "find \(entity.name).\(link.name) links to merged objects").values
            for row in merged {
                guard let loser = row[0], let survivor = row[1] else { continue }
                resolution.addReferrers(try moveLinks(destination, loser: loser, into: survivor))
                resolution.referrers[entity.name, default: [:]][link.name, default: []].formUnion(keys)
            }
        }
    }

    /// Carries writes to objects of `entity` merged away (by a device that had not heard of the merge) over to
    /// their survivors.
    private mutating func carryOverStaleWrites(to entity: MirrorPlan.Entity, ids: String,
                                               into resolution: inout UniqueKeyResolution) throws(MirrorError) {
        let stale = try connection.execute("""
            SELECT id, "merged_into" FROM \(entity.table)
            WHERE zone = $1 AND id = ANY($2::text[]) AND "merged_into" IS NOT NULL
            """, [zone, ids], purpose: "find writes to merged \(entity.name) objects").values
        for row in stale {
            guard let loser = row[0], let survivor = row[1] else { continue }
            try fold(entity, loser: loser, into: survivor)
            resolution.addReferrers(try moveLinks(entity, loser: loser, into: survivor))
            resolution.survive(survivor, of: entity.name)
            // Named again, for a device that kept the loser to send the edit first.
            resolution.losers.append((entity.name, loser, survivor))
        }
    }

    /// The live objects of `entity` among `ids` that share a unique key with another live one, grouped
    /// transitively, and the creation clock of each.
    private func objectsSharingKeys(of entity: MirrorPlan.Entity, ids: String) throws(MirrorError)
        -> (groups: [[String]], created: [String: Int64]) {
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
                """, [zone, ids, Self.nullJSON], purpose: "find \(entity.name) objects sharing a unique key").values
            for pair in pairs {
                guard let a = pair[0], let b = pair[2], let ca = pair[1].flatMap(Int64.init),
                      let cb = pair[3].flatMap(Int64.init) else { continue }
                created[a] = ca
                created[b] = cb
                groups.union(a, b)
            }
        }
        return (groups.groups(), created)
    }

    /// Merges the objects of `group` into the one created first, as the saved one survives a local upsert: each
    /// loser's later fields folded into the survivor, the loser tombstoned with `merged_into`, and every reference
    /// and link to it moved to the survivor.
    private mutating func mergeGroup(_ group: [String], of entity: MirrorPlan.Entity, created: [String: Int64],
                                     into resolution: inout UniqueKeyResolution) throws(MirrorError) {
        let ordered = group.sorted { (created[$0] ?? 0, $0) < (created[$1] ?? 0, $1) }
        guard let survivor = ordered.first else { return }
        if resolution.clock == nil {
            resolution.clock = state.clock.tick(at: Date())
        }
        let name = entity.name
        for loser in ordered.dropFirst() {
            try fold(entity, loser: loser, into: survivor)
            try connection.execute("""
                UPDATE \(entity.table) SET deleted_clock = GREATEST(deleted_clock, created_clock, $3::bigint),
                  "merged_into" = $4 WHERE zone = $1 AND id = $2
                """, [zone, loser, String(resolution.clock ?? 0), survivor], purpose: "merge a \(name) object")
            try connection.execute("""
                UPDATE \(entity.table) SET "merged_into" = $3 WHERE zone = $1 AND "merged_into" = $2
                """, [zone, loser, survivor], purpose: "merge a \(name) object")
            resolution.addReferrers(try moveLinks(entity, loser: loser, into: survivor))
            try pointReferrers(of: entity, from: loser, to: survivor, into: &resolution)
            resolution.losers.append((name, loser, survivor))
        }
        resolution.survive(survivor, of: name)
    }

    /// Points every to-one reference to `loser` (of `entity`) at `survivor`.
    private func pointReferrers(of entity: MirrorPlan.Entity, from loser: String, to survivor: String,
                                into resolution: inout UniqueKeyResolution) throws(MirrorError) {
        for referrer in entity.referrers {
            guard let table = plan.entities[referrer.entity]?.table else { continue }
            let moved = try connection.execute("""
                UPDATE \(table) SET \(referrer.toOne.target) = $3
                WHERE zone = $1 AND \(referrer.toOne.target) = $2 RETURNING id
                """, [zone, loser, survivor],
                purpose: "point \(referrer.entity).\(referrer.toOne.name) at a merged object's survivor")
            for row in moved.values {
                if let id = row[0] {
                    resolution.referrers[referrer.entity, default: [:]][referrer.toOne.name, default: []].insert(id)
                }
            }
        }
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
    private mutating func columns(of entity: MirrorPlan.Entity) throws(MirrorError)
        -> [(value: String, clock: String)] {
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
            for (relationship, ids) in byRelationship {
                for id in ids { properties[id, default: []].insert(relationship) }
            }
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
