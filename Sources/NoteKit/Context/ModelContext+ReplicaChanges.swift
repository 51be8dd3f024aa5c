#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An object as another replica of the store has it, by entity and property name: what an import of another
/// replica's changes writes (NoteKitMirror's import is one such client). Only the properties named are written; the
/// others keep their values (or, for an object this store lacks, their declared defaults).
package struct ReplicaObject: Sendable, Hashable {
    /// The object's identifier, the same on every replica.
    package var id: PersistentIdentifier
    /// Attribute values to write, by attribute name.
    package var attributes: [String: StoredValue]
    /// To-one relationship targets to write, by relationship name (nil: no target).
    package var toOne: [String: PersistentIdentifier?]
    /// To-many relationships to set, by name: the targets this store has become the relationship's whole content
    /// (targets it lacks are left out).
    package var toMany: [String: [PersistentIdentifier]]

    package init(id: PersistentIdentifier, attributes: [String: StoredValue] = [:],
                 toOne: [String: PersistentIdentifier?] = [:], toMany: [String: [PersistentIdentifier]] = [:]) {
        self.id = id
        self.attributes = attributes
        self.toOne = toOne
        self.toMany = toMany
    }
}

/// What ``ModelContext/applyReplicaChanges(_:deleting:merging:)`` could not apply as asked, for the caller to
/// report.
package struct ReplicaChangesOutcome: Sendable, Hashable {
    /// Deletions a `.deny` delete rule refused here (the object still has targets on this replica).
    package var deniedDeletions: [PersistentIdentifier] = []
    /// Objects deleted because a to-one target they were given is not in this store and the target's inverse
    /// relationship cascades.
    package var cascadedForMissingTarget: [PersistentIdentifier] = []
}

extension ModelContext {
    /// Applies what another replica changed, as pending changes of this context: creates the objects this store
    /// lacks (with their identifiers and declared defaults), writes the attributes and to-one relationships given
    /// (keeping every inverse in step, as a property setter does), then deletes `deletions` with their delete rules.
    ///
    /// A to-one target this store does not have (deleted here, or deleted elsewhere while the object was pointed at
    /// it) is treated as deleted, so every replica decides alike: when the target's inverse relationship cascades,
    /// the object is deleted; otherwise it is left without a target. Objects and properties the container's schema
    /// does not know are skipped.
    ///
    /// `merges` are objects another replica found to share a unique key with another (loser → survivor): every
    /// object a loser's to-many relationships hold is pointed at its survivor instead, the loser's to-one links are
    /// dropped, and the loser is then deleted, so nothing cascades from a merged object. A survivor this store does
    /// not have leaves the loser deleted as a plain deletion would.
    ///
    /// Nothing here commits: the caller saves the context, typically with ``expectedTransactionNumber`` set to the
    /// transaction number it computed the changes at, so that they never overwrite a save they did not weigh.
    ///
    /// - Throws: only what reading the store throws; a deletion a `.deny` rule refuses is reported, not thrown.
    /// - Complexity: O(objects × properties given), plus the delete rules' cost.
    package func applyReplicaChanges(_ objects: [ReplicaObject], deleting deletions: [PersistentIdentifier],
                               merging merges: [PersistentIdentifier: PersistentIdentifier] = [:]) throws
        -> ReplicaChangesOutcome {
        try core.checkOpen()
        var outcome = ReplicaChangesOutcome()
        let present = objects.compactMap(writeReplicaAttributes)
        // Relationships once every object of the batch exists, so a target created by the same batch is found.
        var orphans: [ModelObject] = []
        for (object, metadata, incoming) in present {
            orphans += writeReplicaRelationships(of: object, metadata, incoming)
        }
        for (loser, survivor) in merges.sorted(by: { $0.key < $1.key }) {
            guard let object = _object(for: loser), object._$state != .deleted,
                  let target = _object(for: survivor), target._$state != .deleted, target !== object else { continue }
            redirectReferrers(of: object, to: target)
        }
        for id in merges.keys.sorted() + deletions {
            guard let object = _object(for: id), object._$state != .deleted else { continue }
            do { try _delete([object]) } catch is DeleteError { outcome.deniedDeletions.append(id) }
        }
        for object in orphans where object._$state != .deleted {
            do {
                try _delete([object])
                outcome.cascadedForMissingTarget.append(object._$id)
            } catch is DeleteError {
                outcome.deniedDeletions.append(object._$id)
            }
        }
        return outcome
    }

    /// The object `incoming` names, its attributes written: the registered one, or a new one inserted with the
    /// declared defaults under the values given; nil for an entity the schema does not know.
    private func writeReplicaAttributes(_ incoming: ReplicaObject) -> (ModelObject, ModelMetadata, ReplicaObject)? {
        guard let metadata = runtime.metadataByName[incoming.id.entityName] else { return nil }
        if let existing = _object(for: incoming.id, refresh: true), existing._$state != .deleted {
            for (name, value) in incoming.attributes {
                guard let slot = metadata.attributes.firstIndex(where: { $0.name == name }) else { continue }
                existing._$writeAttributeNotifying(slot, value)
            }
            return (existing, metadata, incoming)
        }
        var attributes = metadata.attributes.map(\.encodedFallback)
        for (name, value) in incoming.attributes {
            guard let slot = metadata.attributes.firstIndex(where: { $0.name == name }) else { continue }
            attributes[slot] = value
        }
        let relationships = metadata.relationships.map { $0.isToMany ? RelationshipTargets.toMany([]) : .toOne(nil) }
        let object = _materialize(ModelSnapshot(id: incoming.id, attributes: attributes, relationships: relationships),
                                  registering: false)
        // A new object with the incoming values: the copy is handed on out of any context.
        object._$leave(deleted: false)
        _insertGraph(object)
        return (object, metadata, incoming)
    }

    /// Writes `incoming`'s to-many and to-one relationships on `object`; returns `object` when a to-one target this
    /// store lacks cascades to it (it is to be deleted), else nothing.
    private func writeReplicaRelationships(of object: ModelObject, _ metadata: ModelMetadata,
                                           _ incoming: ReplicaObject) -> [ModelObject] {
        var orphans: [ModelObject] = []
        for (name, targets) in incoming.toMany {
            guard let slot = metadata.relationships.firstIndex(where: { $0.name == name && $0.isToMany })
            else { continue }
            let models = targets.compactMap { id -> ModelObject? in
                guard let model = _object(for: id), model._$state != .deleted else { return nil }
                return model
            }
            let current = Set(object._$relationshipModels(at: slot).map { ObjectIdentifier($0) })
            if current != Set(models.map { ObjectIdentifier($0) }) {
                object._$setRelationship(at: slot, to: models)
            }
        }
        for (name, target) in incoming.toOne {
            guard let slot = metadata.relationships.firstIndex(where: { $0.name == name && !$0.isToMany })
            else { continue }
            guard let target else {
                object._$setRelationship(at: slot, to: [])
                continue
            }
            if let model = _object(for: target), model._$state != .deleted {
                object._$setRelationship(at: slot, to: [model])
            } else if metadata.inverse(ofRelationship: slot)?.relationship.deleteRule == .cascade {
                orphans.append(object)
            } else {
                object._$setRelationship(at: slot, to: [])
            }
        }
        return orphans
    }

    /// A merge: every object `loser`'s to-many relationships hold points at `survivor` instead, and `loser`'s own
    /// to-one links are dropped, so that deleting it cascades nothing.
    private func redirectReferrers(of loser: ModelObject, to survivor: ModelObject) {
        for (slot, relationship) in loser._$metadata.relationships.enumerated() {
            // The loser's own to-one targets are the survivor's business (its values won or lost already):
            // the link is dropped, so no delete rule runs through it.
            guard relationship.isToMany else {
                loser._$setRelationship(at: slot, to: [])
                continue
            }
            guard let inverse = loser._$metadata.inverse(ofRelationship: slot) else { continue }
            for referrer in loser._$relationshipModels(at: slot) where referrer !== survivor {
                if referrer._$metadata.relationships[inverse.slot].isToMany {
                    referrer._$setRelationship(at: inverse.slot, to: referrer._$relationshipModels(at: inverse.slot)
                        .filter { $0 !== loser && $0 !== survivor } + [survivor])
                } else {
                    referrer._$setRelationship(at: inverse.slot, to: [survivor])
                }
            }
        }
    }
}
