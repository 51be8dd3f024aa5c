#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ModelContext {
    /// Saves every pending insert, change and delete as one transaction of the store.
    ///
    /// Before anything is sent, inserted objects are checked against unique constraints: by default a duplicate
    /// key updates the existing object (SwiftData's upsert), or, with ``UniquenessPolicy/reject``, the save throws.
    /// Relationship count bounds are checked too. Only the properties that changed are sent, so another context's
    /// save of other properties of the same object is kept.
    ///
    /// Closes the open undo group first (see ``processPendingChanges()``), so that undo and redo work the same
    /// before and after the save. An insert that the upsert policy turns into an update of an existing object
    /// removes every undo action (see ``ModelUndoManager``).
    ///
    /// - Throws: ``SaveError``, ``ModelContainerError/closed(store:)`` once the container is closed, or the store's
    ///   own errors. When `save()` throws, the store is unchanged and every change stays pending in the context,
    ///   so the save can be retried.
    /// - Complexity: O(changed objects × their properties), plus the store's cost of making the transaction durable.
    public func save() throws {
        try core.checkOpen()
        processPendingChanges()
        guard hasChanges else { return }
        postWillSave()
        for object in insertedObjects {
            guard let known = runtime.metadataByName[object._$metadata.entityName],
                  known.describes(object._$metadata) else {
                throw SaveError.modelNotInSchema(model: object._$id, type: "\(type(of: object))")
            }
        }
        try resolveUniqueInserts()
        let inserted = insertedObjects, changed = changedObjects, deleted = deletedObjects
        var changes = ChangeSet(author: author)
        changes.expectedTransactionNumber = expectedTransactionNumber
        changes.inserted.reserveCapacity(inserted.count)
        for object in inserted {
            try checkRelationships(of: object, added: nil)
            changes.inserted.append(object._$row)
        }
        var updatedObjects: [ModelObject] = []
        for object in changed {
            guard let update = try update(for: object) else { continue }
            changes.updated.append(update)
            updatedObjects.append(object)
        }
        for object in deleted {
            var tombstone: [String: StoredValue] = [:]
            for (slot, attribute) in object._$metadata.attributes.enumerated() where attribute.preservesValueOnDeletion {
                tombstone[attribute.name] = object._$committed?.attributes[slot] ?? object._$attributes[slot]
            }
            changes.deleted.append(ModelDeletion(id: object._$id, tombstone: tombstone))
        }

        let result = changes.isEmpty ? nil : try store.save(changes)
        let transactionNumber = result?.transactionNumber ?? store.transactionNumber

        for object in inserted { object._$commitInsert(transactionNumber: transactionNumber) }
        for object in changed { object._$commitChanges() }
        // The store merged only what changed; take what it now holds for the objects it updated from the save's
        // result, or, from a store that does not report it, read it back.
        let stored = if let reported = result?.updatedRows, reported.count == updatedObjects.count {
            reported
        } else {
            updatedObjects.isEmpty ? [] : store.rows(for: updatedObjects.map(\._$id))
        }
        for (object, snapshot) in zip(updatedObjects, stored) {
            guard let snapshot else { continue }
            object._$takeSaved(snapshot)
        }
        for object in changed where object._$committed != nil && !updatedObjects.contains(where: { $0 === object }) {
            object._$load(object._$committed!, notify: false)
        }
        for object in deleted {
            registry[object._$id] = nil
            object._$leave(deleted: true)
        }
        clearLists()
        if !changes.isEmpty { postDidSave(changes, transaction: transactionNumber) }
    }

    /// The changed properties of `object` since it was last read or saved; nil when nothing differs.
    private func update(for object: ModelObject) throws -> ModelUpdate? {
        guard let committed = object._$committed else { return nil }
        var attributes: [AttributeChange] = []
        let unread = unreadValues[object._$id]
        for slot in object._$attributes.indices where !object._$attributes.hasSameValue(at: slot, as: committed.attributes) {
            let value = object._$attributes[slot]
            // The default a failed read returned, written back over the value that read could not reach.
            if let unreadValue = unread?[slot], unreadValue == committed.attributes[slot],
               value == object._$metadata.attributes[slot].encodedFallback {
                throw SaveError.unreadValueOverwritten(model: object._$id,
                                                       property: object._$metadata.attributes[slot].name)
            }
            attributes.append(AttributeChange(index: slot, value: value))
        }
        var relationships: [RelationshipChange] = []
        var added: [PersistentIdentifier] = []
        for slot in object._$relationships.indices where object._$relationships[slot] != committed.relationships[slot] {
            switch (object._$relationships[slot], committed.relationships[slot]) {
            case let (.toMany(now), .toMany(before)):
                let nowSet = Set(now), beforeSet = Set(before)
                let gained = now.filter { !beforeSet.contains($0) }
                let lost = before.filter { !nowSet.contains($0) }
                added += gained
                if gained.isEmpty && lost.isEmpty {
                    // Only the order changed: send the whole list so the store keeps the new order.
                    relationships.append(RelationshipChange(index: slot, kind: .toMany(added: now, removed: before)))
                } else {
                    relationships.append(RelationshipChange(index: slot, kind: .toMany(added: gained, removed: lost)))
                }
            case let (.toOne(now), _):
                if let now { added.append(now) }
                relationships.append(RelationshipChange(index: slot, kind: .toOne(now)))
            default:
                relationships.append(RelationshipChange(index: slot, kind: object._$relationships[slot] == .toOne(nil)
                                                        ? .toOne(nil) : .toMany(added: [], removed: [])))
            }
        }
        try checkRelationships(of: object, added: Set(added))
        if attributes.isEmpty && relationships.isEmpty { return nil }
        return ModelUpdate(id: object._$id, attributes: attributes, relationships: relationships)
    }

    /// Count bounds hold, and no relationship gained a target that was deleted.
    ///
    /// - Parameter added: the targets gained since the last save (nil: every target, for a new object).
    private func checkRelationships(of object: ModelObject, added: Set<PersistentIdentifier>?) throws {
        for (slot, relationship) in object._$metadata.relationships.enumerated() {
            let targets = object._$relationships[slot]
            let count = targets.count
            let minimum = relationship.minimumModelCount ?? 0
            if count < minimum || relationship.maximumModelCount.map({ count > $0 }) == true {
                throw SaveError.relationshipCountOutOfRange(model: object._$id, property: relationship.name,
                                                            count: count, minimum: minimum,
                                                            maximum: relationship.maximumModelCount)
            }
            for target in targets.identifiers where added?.contains(target) ?? true {
                if registry[target]?._$state == .deleted || (registry[target] == nil && store.rows(for: [target]).first! == nil) {
                    throw SaveError.relationshipToMissingModel(model: object._$id, property: relationship.name,
                                                               target: target)
                }
            }
        }
    }
}

// MARK: - Uniqueness

/// What a save does when an inserted object has the same unique key as another object.
public enum UniquenessPolicy: Sendable, Hashable {
    /// SwiftData's behaviour: the inserted object's values update the existing object, which keeps its identity.
    /// If the context had not loaded the existing object, the inserted object takes over its identity and stays
    /// usable; otherwise the inserted object's values and relationships are merged into the loaded one and the
    /// inserted object leaves the context. Every reference to the inserted object then points at the survivor.
    ///
    /// What the survivor ends with:
    /// - **Attributes**: every attribute of the inserted object, `nil` included.
    /// - **A relationship set on the inserted object** through its property (in an initializer or after, to-one or
    ///   to-many, empty or `nil` included) replaces the survivor's: the survivor's targets become exactly the
    ///   inserted object's. A target it drops no longer points back at the survivor (a to-one inverse reads `nil`,
    ///   a to-many inverse leaves it out), and stays in the store: no delete rule runs on it, as none runs when you
    ///   remove a target from a relationship yourself.
    /// - **A relationship not set on the inserted object** keeps the survivor's targets. If other objects'
    ///   relationships filled it as their inverse (`note.tags = [Tag(name: "swift")]` fills the new tag's `notes`),
    ///   the survivor gains those objects (a to-one takes the new target): a second note with a duplicate tag does
    ///   not take the tag from the first note.
    case upsert
    /// The save throws ``SaveError/uniqueConstraintViolation(entity:properties:values:existing:)``.
    case reject
}

extension ModelContext {
    /// Who holds a unique key an inserted object wants.
    private enum KeyHolder {
        /// An object this context has (loaded, changed, or inserted earlier in this save).
        case object(ModelObject)
        /// A saved object this context has not loaded.
        case stored(ModelSnapshot)

        var id: PersistentIdentifier {
            switch self {
            case .object(let object): object._$id
            case .stored(let snapshot): snapshot.id
            }
        }
    }

    /// Applies the uniqueness policy to inserted objects whose unique key another object already has.
    func resolveUniqueInserts() throws {
        var claimed: [String: [[StoredValue]: ModelObject]] = [:]
        for object in insertedObjects {
            let metadata = object._$metadata!
            for (number, names) in metadata.uniqueConstraints.enumerated() {
                let slots = names.compactMap { metadata.attributeIndexByName[$0] }
                let key = slots.map { object._$attributes[$0] }
                guard EntityTable.isConstraining(key) else { continue }
                let claimKey = "\(metadata.entityName)#\(number)"
                let holder = claimed[claimKey]?[key].map(KeyHolder.object)
                    ?? existingHolder(of: key, constraint: number, slots: slots, excluding: object)
                guard let holder else {
                    claimed[claimKey, default: [:]][key] = object
                    continue
                }
                guard core.uniquenessPolicy == .upsert else {
                    throw SaveError.uniqueConstraintViolation(entity: metadata.entityName, properties: names,
                                                              values: key, existing: holder.id)
                }
                let duplicateID = object._$id
                switch holder {
                case .object(let existing):
                    merge(object, into: existing)
                    claimed[claimKey, default: [:]][key] = existing
                case .stored(let snapshot):
                    adopt(snapshot, by: object)
                    claimed[claimKey, default: [:]][key] = object
                }
                redirectReferences(to: duplicateID, toward: holder.id, entity: type(of: object))
                // An undo group cannot express an object that changed identity or was merged away: forget them all.
                undoManager?.removeAllActions()
                // The object has a new identity or left the context; its other constraints were checked with it.
                break
            }
        }
    }

    /// The object that holds `key` now: one changed in this context, or a saved one (unless deleted here or
    /// changed here to another key).
    private func existingHolder(of key: [StoredValue], constraint: Int, slots: [Int],
                                excluding object: ModelObject) -> KeyHolder? {
        let entity = object._$metadata.entityName
        for candidate in changedObjects where candidate._$metadata.entityName == entity && candidate !== object
            && slots.map({ candidate._$attributes[$0] }) == key {
            return .object(candidate)
        }
        guard let id = store.identifier(entity: entity, uniqueConstraint: constraint, key: key), id != object._$id else {
            return nil
        }
        if let registered = registry[id] {
            if registered._$fault != nil { _fulfill(registered) }
            guard registered._$state == .registered, slots.map({ registered._$attributes[$0] }) == key else { return nil }
            return .object(registered)
        }
        return store.rows(for: [id]).first?.map(KeyHolder.stored)
    }

    /// Points every reference to `duplicate` (an inserted object an upsert merged away or renamed) at `survivor`,
    /// in every relationship of every pending object, with or without an inverse, to-one or to-many (where a list
    /// held both, it keeps one).
    ///
    /// Only pending objects can refer to `duplicate`: it was never saved, so a reference to it is itself an unsaved
    /// change of the referring object, which is therefore inserted or changed in this context.
    ///
    /// - Complexity: O(pending objects × their relationships to `entity`).
    private func redirectReferences(to duplicate: PersistentIdentifier, toward survivor: PersistentIdentifier,
                                    entity: ModelObject.Type) {
        let destination = ObjectIdentifier(entity)
        for referrer in insertedObjects + changedObjects {
            for (slot, relationship) in referrer._$metadata.relationships.enumerated()
            where ObjectIdentifier(relationship.destination) == destination {
                referrer._$replaceTarget(duplicate, with: survivor, in: slot)
            }
        }
    }

    /// Merges inserted `object` into `holder`, which this context already has: the holder gets the inserted values
    /// and relationships (see ``UniquenessPolicy/upsert``), and the inserted object leaves the context, keeping the
    /// holder's identifier. Inverse maintenance unlinks the targets the holder loses.
    private func merge(_ object: ModelObject, into holder: ModelObject) {
        for slot in object._$attributes.indices { holder._$writeAttributeNotifying(slot, object._$attributes[slot]) }
        let assigned = object._$assignedRelationships
        for (slot, relationship) in object._$metadata.relationships.enumerated() {
            let targets = object._$relationshipModels(at: slot)
            let replaces = assigned.contains(slot)
            guard replaces || !targets.isEmpty else { continue }
            object._$setRelationship(at: slot, to: [])
            holder._$setRelationship(at: slot, to: relationship.isToMany && !replaces
                                    ? holder._$relationshipModels(at: slot) + targets : targets)
        }
        registry[object._$id] = nil
        object._$mergeAway(into: holder)
    }

    /// Gives inserted `object` the identity of the saved object `stored` (which this context never loaded), so
    /// the save updates that object and the caller's reference stays the live one. Its relationships combine with
    /// the stored ones as ``UniquenessPolicy/upsert`` says; a stored target it drops no longer points back at it.
    private func adopt(_ stored: ModelSnapshot, by object: ModelObject) {
        let oldID = object._$id, newID = stored.id
        let assigned = object._$assignedRelationships
        for slot in object._$metadata.relationships.indices {
            let inverse = object._$metadata.inverse(ofRelationship: slot)
            // Targets the inserted object brought point back at its old identifier: rename it there.
            if let inverse {
                for target in object._$relationshipModels(at: slot) {
                    target._$replaceTarget(oldID, with: newID, in: inverse.slot)
                }
            }
            // A stored target the inserted object does not keep loses the object it pointed back at.
            func unlink(_ dropped: [PersistentIdentifier]) {
                guard let inverse else { return }
                for id in dropped { _object(for: id)?._$removeTarget(newID, from: inverse.slot) }
            }
            let replaces = assigned.contains(slot)
            switch (object._$relationships[slot], stored.relationships[slot]) {
            case let (.toMany(mine), .toMany(theirs)):
                let mineSet = Set(mine)
                let others = theirs.filter { !mineSet.contains($0) }
                if replaces { unlink(others) } else { object._$relationships[slot] = .toMany(others + mine) }
            case (.toOne(nil), .toOne(let theirs)) where !replaces:
                object._$relationships[slot] = .toOne(theirs)
            case let (.toOne(mine), .toOne(theirs?)) where mine != theirs:
                unlink([theirs])
            default:
                break
            }
        }
        registry[oldID] = nil
        object._$adoptIdentity(of: stored)
        registry[newID] = object
        _willChange(object)
    }
}
