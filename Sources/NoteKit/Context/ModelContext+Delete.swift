#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A delete that a `.deny` rule refused; nothing was changed.
public enum DeleteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `model`'s relationship `relationship` (on `entity`) still has `targetCount` targets and its rule is `.deny`.
    case denied(entity: String, relationship: String, model: PersistentIdentifier, targetCount: Int)

    /// A sentence naming the object, the relationship with the `.deny` rule and how many targets it still has.
    public var description: String {
        switch self {
        case let .denied(entity, relationship, model, count):
            "cannot delete \(model): \(entity).\(relationship) has delete rule .deny and still has \(count) "
                + "target\(count == 1 ? "" : "s")"
        }
    }
}

extension ModelContext {
    /// Deletes `model` and applies its relationships' delete rules at once, visibly before any save.
    ///
    /// - `.nullify`: each target stays and no longer points back (a deleted folder's notes become unfiled).
    /// - `.cascade`: each target is deleted too, with its own rules, through any number of levels; a cycle of
    ///   cascades ends when it reaches an object already being deleted.
    /// - `.deny`: if the relationship has a target that is not itself being deleted, the whole delete is refused.
    /// - `.noAction`: the targets are left as they are (not changed, nothing recorded for them); their inverse
    ///   reads nil (or leaves the deleted object out), in a property and in a predicate alike, once the delete is
    ///   saved (see ``Schema/Relationship/DeleteRule/noAction``).
    ///
    /// Unlike SwiftData, which reports a denied delete only when saving, this throws at once.
    ///
    /// - Throws: ``DeleteError/denied(entity:relationship:model:targetCount:)``; then nothing has changed.
    /// - Complexity: O(objects deleted + their targets); a relationship without an inverse costs a scan of the
    ///   entities that have one.
    public func delete<T: PersistentModel>(_ model: T) throws {
        try _delete([model])
    }

    /// Deletes every object of `model` that matches `predicate` (all of them when it is nil), with delete rules.
    ///
    /// - Throws: what ``fetch(_:)`` throws, or ``DeleteError``; a denied delete changes nothing.
    public func delete<T: PersistentModel>(model: T.Type, where predicate: Predicate<T>? = nil) throws {
        let models: [T] = try fetch(FetchDescriptor<T>(predicate: predicate))
        try _delete(models)
    }

    func _delete(_ roots: [ModelObject]) throws {
        // 1. Everything the delete reaches through cascades, each object once (cycles end here).
        var doomed: [ModelObject] = []
        var isDoomed = Set<ObjectIdentifier>()
        var pending = roots.filter { $0._$state != .deleted && $0._$state != .unmanaged }
        for root in pending { precondition(root._$context === self, "\(root) belongs to another context") }
        while let object = pending.popLast() {
            guard isDoomed.insert(ObjectIdentifier(object)).inserted else { continue }
            doomed.append(object)
            for (slot, relationship) in object._$metadata.relationships.enumerated() where relationship.deleteRule == .cascade {
                pending.append(contentsOf: object._$relationshipModels(at: slot).filter { $0._$state != .deleted })
            }
        }
        // 2. A deny rule with a surviving target refuses the whole delete before anything changes.
        for object in doomed {
            for (slot, relationship) in object._$metadata.relationships.enumerated() where relationship.deleteRule == .deny {
                let surviving = object._$relationshipModels(at: slot).filter { !isDoomed.contains(ObjectIdentifier($0)) }
                if !surviving.isEmpty {
                    throw DeleteError.denied(entity: object._$metadata.entityName, relationship: relationship.name,
                                             model: object._$id, targetCount: surviving.count)
                }
            }
        }
        // 3. Unlink the survivors, then mark the doomed deleted.
        for object in doomed {
            for (slot, relationship) in object._$metadata.relationships.enumerated() where relationship.deleteRule != .noAction {
                guard let inverse = object._$metadata.inverse(ofRelationship: slot) else { continue }
                for target in object._$relationshipModels(at: slot) where !isDoomed.contains(ObjectIdentifier(target)) {
                    target._$removeTarget(object._$id, from: inverse.slot)
                }
            }
            unlinkOneWayReferences(to: object, sparing: isDoomed)
        }
        for object in doomed {
            switch object._$state {
            case .inserted:
                // Never saved: the object simply leaves the context.
                record(object)
                registry[object._$id] = nil
                object._$delete()
            case .registered:
                _willChange(object)
                object._$delete()
                list(object, in: .deleted)
            case .deleted, .unmanaged:
                break
            }
        }
    }

    /// Relationships without an inverse are not undone by any rule; clear the ones that point at `object` so
    /// the store never keeps a reference to nothing.
    private func unlinkOneWayReferences(to object: ModelObject, sparing doomed: Set<ObjectIdentifier>) {
        for source in runtime.metadata {
            for (slot, relationship) in source.relationships.enumerated()
            where relationship.points(at: object._$metadata) && source.inverse(ofRelationship: slot) == nil {
                var holders = Set(store.identifiers(entity: source.entityName, relationship: slot,
                                                    referencing: object._$id))
                for (id, registered) in registry where id.entityName == source.entityName
                    && registered._$relationships[slot].contains(object._$id) {
                    holders.insert(id)
                }
                for id in holders.sorted() {
                    guard let holder = _object(for: id), !doomed.contains(ObjectIdentifier(holder)) else { continue }
                    holder._$removeTarget(object._$id, from: slot)
                }
            }
        }
    }
}
