import Foundation
import NoteKit

/// Two edits of one attribute of one object, made on two devices, neither having seen the other's: what
/// last-writer-wins would settle by dropping one of them, handed to a resolver instead
/// (``StoreMirror/resolveConflicts(of:with:)``).
public struct MirrorConflict: Sendable, Hashable {
    /// The object both devices changed.
    public var object: PersistentIdentifier
    /// The attribute both changed.
    public var property: String
    /// This device's value.
    public var local: StoredValue
    /// The value the server has, written by another device.
    public var server: StoredValue
    /// Whether last-writer-wins would keep this device's value (its edit is the later one).
    public var localIsLater: Bool

    /// What last-writer-wins would keep.
    public var lastWriterWins: StoredValue { localIsLater ? local : server }
}

/// A per-entity resolver: the value both devices get for a conflict, or nil to keep last-writer-wins.
public typealias MirrorConflictResolver = @Sendable (MirrorConflict) -> StoredValue?

extension StoreMirror {
    /// Resolves conflicting edits of `type`'s attributes with `resolver` rather than by last-writer-wins: for
    /// example, a note body edited on two machines offline can keep both texts, or a counter the sum of both
    /// increments. Replaces an earlier resolver of the type; set it before syncing.
    ///
    /// A conflict is two edits of one attribute of one object, each made without having seen the other (the
    /// server's change feed tells: the other device's change came after everything this device had imported when it
    /// sent its own). Exactly one device resolves it, the one whose edit reaches the server second, in the push that
    /// sends it; an edit not sent yet when an import brings the other's is sent first, so the same push resolves
    /// it. The resolved value is written to the server with a clock later than both edits, so every device takes
    /// it; the device that resolved gets it back as an import. Attributes in external storage and relationships keep
    /// last-writer-wins.
    ///
    /// `resolver` runs on the syncing thread, inside the sync, and may be called more than once for one conflict
    /// (a sync that fails is retried): it must be a function of its argument. A value that is not of the attribute's
    /// type is ignored (last-writer-wins applies).
    public func resolveConflicts<Model: PersistentModel>(of type: Model.Type,
                                                         with resolver: @escaping MirrorConflictResolver) {
        resolvers.withLock { $0[Model.entityName] = resolver }
    }
}

extension SyncSession {
    /// The attributes of `id` that changes of other devices after this device's cursor named: those it has not seen.
    func unseenProperties(of entity: MirrorPlan.Entity, key: String) throws(MirrorError) -> Set<String> {
        let probe = (try? JSONSerialization.data(withJSONObject: [["id": key]])).map { String(decoding: $0, as: UTF8.self) }
        let bodies = try connection.execute("""
            SELECT body FROM \(plan.namespace)."changes"
            WHERE zone = $1 AND seq > $2::bigint AND device <> $3::uuid AND body->'objects' @> $4::jsonb
            """, [zone, String(state.importedSequence), state.device.uuidString, probe ?? "[]"],
            purpose: "look for concurrent edits").values
        var names: Set<String> = []
        for row in bodies {
            guard let body = row[0] else { continue }
            for object in Self.parse(body).objects where object.id == key && object.entity == entity.name {
                names.formUnion(object.properties ?? entity.attributes.map(\.name))
            }
        }
        return names
    }

    /// A change body read once: whether it is a baseline's (`{"baseline": true}`: every object of the zone), and the
    /// objects it names, with the properties an update names (nil: every property).
    static func parse(_ body: String) -> (isBaseline: Bool, objects: [(entity: String, id: String, properties: [String]?)]) {
        guard let root = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
            return (false, [])
        }
        let isBaseline = root["baseline"] as? Bool == true
        guard let objects = root["objects"] as? [[String: Any]] else { return (isBaseline, []) }
        return (isBaseline, objects.compactMap { object in
            guard let entity = object["e"] as? String, let id = object["id"] as? String,
                  UUID(uuidString: id) != nil else { return nil }
            let op = object["op"] as? String
            return (entity, id.lowercased(), op == "update" ? object["p"] as? [String] : nil)
        })
    }
}

extension SyncSession {
    /// Hands the attributes this push changes that another device changed unseen (``unseenProperties(of:key:)``) to
    /// the entity's resolver, and queues what it returns at a clock later than both edits.
    mutating func resolveAtPush(_ snapshot: ModelSnapshot, entity: MirrorPlan.Entity,
                                attributes: [MirrorPlan.Attribute], clock: UInt64,
                                resolver: MirrorConflictResolver) throws(MirrorError) {
        let candidates = attributes.filter { !$0.isExternal }
        guard !candidates.isEmpty else { return }
        let key = Self.key(snapshot.id)
        let unseen = try unseenProperties(of: entity, key: key)
        let conflicting = candidates.filter { unseen.contains($0.name) }
        guard !conflicting.isEmpty else { return }
        let select = conflicting.flatMap { [$0.value + "::text", $0.clock] }.joined(separator: ", ")
        guard let row = try connection.execute("SELECT \(select) FROM \(entity.table) WHERE zone = $1 AND id = $2",
                                               [zone, key], purpose: "read values edited concurrently").values.first
        else { return }
        var resolved: [(MirrorPlan.Attribute, StoredValue)] = []
        for (index, attribute) in conflicting.enumerated() {
            guard let text = row[2 * index], let serverClock = row[2 * index + 1].flatMap(UInt64.init),
                  let server = try? coding.decode(text, as: attribute.type) else { continue }
            let local = snapshot.attributes[attribute.slot]
            guard local != server else { continue }
            state.clock.receive(serverClock)
            let conflict = MirrorConflict(object: snapshot.id, property: attribute.name, local: local, server: server,
                                          localIsLater: clock > serverClock)
            guard let value = resolver(conflict), value != conflict.lastWriterWins,
                  MirrorValueCoding.fits(value, attribute.type) else { continue }
            resolved.append((attribute, value))
        }
        guard !resolved.isEmpty else { return }
        let resolvedClock = state.clock.tick(at: Date())
        var values: [String?] = ["0"]
        for (attribute, value) in resolved {
            values += [try encodedValue(value, attribute), String(resolvedClock)]
            resolvedFields[entity.name, default: [:]][attribute.name, default: []].insert(key)
        }
        try queue(MergeShape(entity: entity, attributes: resolved.map(\.0), toOnes: [], kind: .update), key: key,
                  values: values)
    }
}

extension SyncSession {
    /// Whether `row` has an attribute another device changed (by a change in the batch) while a local edit of it
    /// waits to be sent, with a value other than this store's, for an entity with a resolver.
    func hasConflict(_ row: ServerRow, local: LocalPending?, changedElsewhere: Set<String>?) -> Bool {
        guard let local, let changedElsewhere, resolvers[row.id.entityName] != nil,
              let entity = plan.entities[row.id.entityName] else { return false }
        let edited = entity.attributes.filter {
            !$0.isExternal && changedElsewhere.contains($0.name) && local.fields[$0.name] != nil
                && row.attributes[$0.name] != nil
        }
        guard !edited.isEmpty, let snapshot = container.store.rows(for: [row.id]).first ?? nil else { return false }
        return edited.contains { snapshot.attributes[$0.slot] != row.attributes[$0.name]?.value }
    }
}
