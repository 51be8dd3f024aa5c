/// The context's side of undo: what a group remembers of an object, and how undo and redo put it back.
///
/// Every change reaches `record(_:)` before it is made (the same hook the transaction journal
/// uses), which hands the object to the undo manager the first time the open group touches it.
extension ModelContext {
    /// Closes the open undo group, so that the changes made since the last one are undone as one step.
    ///
    /// Core Data's and SwiftData's name. Their run loop calls it at the end of each event; Linux has none, so call
    /// it where an action of your app ends (``save()`` and ``ModelUndoManager/undo()`` call it too). Inside an
    /// explicit group (``ModelUndoManager/beginUndoGrouping()``) it does nothing; without an ``undoManager``
    /// it does nothing.
    ///
    /// - Complexity: O(objects the group touched × their properties).
    public func processPendingChanges() {
        undoManager?.closeImplicitGroup()
    }

    /// Binds a newly assigned manager to this context; a removed one stops recording, keeping its actions.
    func _undoManagerDidChange(from old: ModelUndoManager?) {
        guard old !== undoManager else { return }
        // What happens while the manager is away must not slip into the open group's after-state.
        old?.freezeOpenChanges()
        guard let manager = undoManager else { return }
        precondition(manager.context == nil || manager.context === self,
                     "this ModelUndoManager belongs to another ModelContext; give each context its own")
        manager.context = self
    }

    /// What undo remembers of `object` now.
    func _undoImage(of object: ModelObject) -> UndoGroup.Image {
        UndoGroup.Image(isInContext: object._$context === self
                            && (object._$state == .inserted || object._$state == .registered),
                        isDeleted: object._$state == .deleted,
                        attributes: object._$attributes, relationships: object._$relationships)
    }

    /// Puts back what `group` changed: its before-states when `undoing`, its after-states otherwise.
    ///
    /// Only what the group changed is restored: changes made with registration disabled, and values refreshed
    /// from other contexts' saves, survive unless the group changed the same property. Flags come from the
    /// object's saved state now: the object may have been saved (or its delete saved) since the group was
    /// recorded.
    func _restore(_ group: UndoGroup, undoing: Bool) {
        // Each object once, in the order the group first touched it (re-inserted objects keep their order).
        var objects: [ModelObject] = []
        var seen = Set<ObjectIdentifier>()
        for change in group.changes where seen.insert(ObjectIdentifier(change.object)).inserted {
            let object = change.object
            precondition(object._$context == nil || object._$context === self,
                         "\(object) was moved to another context; it cannot be undone or redone here")
            // A transaction open now puts back what the undo changes if its block throws.
            record(object)
            objects.append(object)
        }
        // Values, change by change (last change first when undoing); and the membership each object ends with,
        // for objects whose membership the group changed.
        var membership: [ObjectIdentifier: UndoGroup.Image] = [:]
        for change in undoing ? Array(group.changes.reversed()) : group.changes {
            let (from, to) = undoing ? (change.after!, change.before) : (change.before, change.after!)
            restoreValues(of: change.object, from: from, to: to)
            if from.isInContext != to.isInContext || from.isDeleted != to.isDeleted {
                membership[ObjectIdentifier(change.object)] = to
            }
        }
        // Objects that leave every context remember their related objects first, while the registry has them.
        var remembered: [ObjectIdentifier: [PersistentIdentifier: ModelObject]] = [:]
        for object in objects {
            guard let image = membership[ObjectIdentifier(object)], !image.isInContext, !image.isDeleted,
                  !isStored(object) else { continue }
            var targets: [PersistentIdentifier: ModelObject] = [:]
            for id in object._$relationships.flatMap(\.identifiers) { targets[id] = registry[id] }
            remembered[ObjectIdentifier(object)] = targets
        }
        for object in objects {
            if let image = membership[ObjectIdentifier(object)] {
                restoreMembership(of: object, to: image, remembering: remembered[ObjectIdentifier(object)] ?? [:])
            } else if object._$state == .registered && object._$context === self {
                updateChangedFlag(of: object)
            }
        }
    }

    /// Sets the values that differ between `from` and `to` to `to`'s, telling observers.
    private func restoreValues(of object: ModelObject, from: UndoGroup.Image, to: UndoGroup.Image) {
        var snapshot = object._$row
        var differs = false
        for slot in to.attributes.indices where !from.attributes.hasSameValue(at: slot, as: to.attributes) {
            snapshot.attributes[slot] = to.attributes[slot]
            differs = true
        }
        for slot in to.relationships.indices where from.relationships[slot] != to.relationships[slot] {
            snapshot.relationships[slot] = to.relationships[slot]
            differs = true
        }
        if differs { object._$load(snapshot, notify: true) }
    }

    /// Whether the store has `object` as far as this context knows: saved and not deleted by a save since.
    private func isStored(_ object: ModelObject) -> Bool {
        // A saved object stays registered, or deleted and still in this context until the delete is saved.
        (object._$state == .registered || object._$state == .deleted) && object._$context === self
            && object._$committed != nil
    }

    /// Brings `object` into the context or takes it out, as `image` says, in the way its saved state allows.
    private func restoreMembership(of object: ModelObject, to image: UndoGroup.Image,
                                   remembering targets: [PersistentIdentifier: ModelObject]) {
        let stored = isStored(object)
        switch (image.isInContext, stored) {
        case (true, true):
            // Deleted and not saved yet: the delete is withdrawn.
            object._$undelete()
            registry[object._$id] = object
            updateChangedFlag(of: object)
        case (true, false):
            // Never saved, or its delete was saved: it is inserted again, with the same identifier.
            object._$insert(into: self)
            object._$unmanagedTargets = [:]
            registry[object._$id] = object
            list(object, in: .inserted)
        case (false, true):
            // Saved: the next save deletes it.
            object._$delete()
            registry[object._$id] = object
            list(object, in: .deleted)
        case (false, false):
            // Never saved: it leaves the context, as a rollback would take it out.
            if registry[object._$id] === object { registry[object._$id] = nil }
            object._$leave(deleted: image.isDeleted)
            if !image.isDeleted { object._$unmanagedTargets = targets }
        }
    }

    /// Lists a registered object as changed exactly when its values differ from the saved ones.
    private func updateChangedFlag(of object: ModelObject) {
        if object._$updateChangedFlag() { list(object, in: .changed) }
    }
}
