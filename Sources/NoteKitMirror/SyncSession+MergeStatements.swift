import Foundation
import NoteKit

/// The merges an export queues, sent in batches as one `INSERT … ON CONFLICT` statement a shape, so that each
/// column keeps the value with the later clock.
extension SyncSession {
    /// The form of one merge statement: which table and columns, and whether it inserts (a creation clock),
    /// updates, or records a deletion.
    struct MergeShape: Hashable {
        enum Kind: Hashable { case insert, update, deletion }
        let table: String
        let name: String
        let columns: [(value: String, clock: String, cast: String)]
        let kind: Kind

        init(entity: MirrorPlan.Entity, attributes: [MirrorPlan.Attribute], toOnes: [MirrorPlan.ToOne], kind: Kind) {
            table = entity.table
            name = entity.name
            columns = attributes.map { ($0.value, $0.clock, "jsonb") } + toOnes.map { ($0.target, $0.clock, "text") }
            self.kind = kind
        }

        static func == (lhs: MergeShape, rhs: MergeShape) -> Bool {
            lhs.table == rhs.table && lhs.kind == rhs.kind && lhs.columns.map(\.value) == rhs.columns.map(\.value)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(table)
            hasher.combine(kind)
            hasher.combine(columns.map(\.value))
        }
    }

    /// Merges waiting to be sent, by shape: each shape goes as one statement over arrays (`INSERT … SELECT FROM
    /// unnest(…)`) of up to 1,000 objects. Merges commute (a column keeps its latest clock, a deletion its latest),
    /// so their order does not matter; an object twice in one statement would, so it sends the first one before.
    struct MergeGroup {
        var keys: [String] = []
        var seen: Set<String> = []
        var values: [[String?]] = []
    }

    mutating func queue(_ shape: MergeShape, key: String, values: [String?]) throws(MirrorError) {
        if merges[shape]?.seen.contains(key) == true || (merges[shape]?.keys.count ?? 0) >= 1000 {
            try send(shape)
        }
        merges[shape, default: MergeGroup()].keys.append(key)
        merges[shape, default: MergeGroup()].seen.insert(key)
        merges[shape, default: MergeGroup()].values.append(values)
    }

    /// Sends every queued merge.
    mutating func flushMerges() throws(MirrorError) {
        for shape in Array(merges.keys) { try send(shape) }
    }

    private mutating func send(_ shape: MergeShape) throws(MirrorError) {
        guard let group = merges.removeValue(forKey: shape), !group.keys.isEmpty else { return }
        var columns = ["zone", "id"]
        var casts = ["text"]
        var updates: [String] = []
        switch shape.kind {
        case .deletion:
            columns += ["created_clock", "deleted_clock"]
            casts.append("bigint")
            updates.append("deleted_clock = GREATEST(t.deleted_clock, EXCLUDED.deleted_clock)")
        case .insert, .update:
            columns.append("created_clock")
            if shape.kind == .insert {
                updates.append("created_clock = GREATEST(t.created_clock, EXCLUDED.created_clock)")
            }
            casts.append("bigint")
        }
        for column in shape.columns {
            columns += [column.value, column.clock]
            casts += [column.cast, "bigint"]
            let (value, clock) = (column.value, column.clock)
            let wins = "t.\(clock) IS NULL OR EXCLUDED.\(clock) > t.\(clock) OR "
                + "(EXCLUDED.\(clock) = t.\(clock) AND EXCLUDED.\(value)::text > t.\(value)::text)"
            updates.append("\(value) = CASE WHEN \(wins) THEN EXCLUDED.\(value) ELSE t.\(value) END")
            updates.append("\(clock) = GREATEST(t.\(clock), EXCLUDED.\(clock))")
        }
        // One array parameter a column: the keys, then each column's values in order.
        var parameters: [String?] = [zone, Self.arrayLiteral(group.keys)]
        let width = group.values.first?.count ?? 0
        for position in 0..<width {
            parameters.append(Self.arrayLiteral(group.values.map { $0[position] }))
        }
        let arrays = casts.enumerated().map { "$\($0.offset + 2)::\($0.element)[]" }
        let selected = shape.kind == .deletion ? "$1::text, u.c1, 0, u.c2" : "$1::text, u.*"
        let names = (1...casts.count).map { "c\($0)" }.joined(separator: ", ")
        let conflict = updates.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + updates.joined(separator: ", ")
        try connection.execute("""
            INSERT INTO \(shape.table) AS t (\(columns.joined(separator: ", ")))
            SELECT \(selected) FROM unnest(\(arrays.joined(separator: ", "))) AS u(\(names))
            ON CONFLICT (zone, id) \(conflict)
            """, parameters,
            purpose: shape.kind == .deletion ? "record \(shape.name) deletions" : "merge \(shape.name) objects")
    }
}
