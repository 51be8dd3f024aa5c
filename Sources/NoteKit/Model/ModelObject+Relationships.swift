#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reading relationship targets and keeping both sides of every relationship in step.
///
/// Targets are stored as identifiers and resolved through the object's context (which loads an object from
/// the store the first time it is reached). An object that is not in a context yet remembers the objects it
/// was related to, so an unsaved graph can be built and navigated before it is inserted.
extension ModelObject {
    /// The objects relationship `slot` points at, in order. Targets that no longer exist are skipped.
    final func _$relationshipModels(at slot: Int) -> [ModelObject] {
        switch _$relationships[slot] {
        case .toOne(nil): return []
        case .toOne(let id?): return _$resolve(id).map { [$0] } ?? []
        case .toMany(let ids):
            // Targets not registered yet become faults together: one look-up of which the store still has, no row read.
            if _$unmanagedTargets.isEmpty, let context = _$context { return context._targets(ids) }
            return ids.compactMap(_$resolve)
        }
    }

    /// The object with identifier `id` as this object sees it: a remembered unmanaged object, or the context's.
    final func _$resolve(_ id: PersistentIdentifier) -> ModelObject? {
        if !_$unmanagedTargets.isEmpty, let target = _$unmanagedTargets[id] { return target }
        // An object in a context keeps it, so only an object out of every context (never inserted, or deleted and
        // saved) gets here without one: it reaches nothing it did not remember.
        guard let context = _$context else { return nil }
        return context._target(id)
    }

    /// Sets relationship `slot` to `models` and updates the inverse of every target gained or lost.
    final func _$setRelationship(at slot: Int, to models: [ModelObject]) {
        guard !_$isMaterializing else { return }
        let relationship = _$metadata.relationships[slot]
        if !relationship.isToMany {
            // The common case, kept free of sets and arrays: one target replaced by another.
            let target = models.first
            _$adoptContext(of: target.map { [$0] } ?? [])
            guard case .toOne(let old) = _$relationships[slot], old != target?._$id else { return }
            let previous = old.flatMap(_$resolve)
            _$writeRelationship(slot, .toOne(target?._$id))
            guard let inverse = _$metadata.inverse(ofRelationship: slot) else { return }
            previous?._$removeTarget(self._$id, from: inverse.slot)
            target?._$linkInverse(inverse.slot, to: self, forwardSlot: slot)
            return
        }
        var seen = Set<PersistentIdentifier>()
        let targets = models.filter { seen.insert($0._$id).inserted }
        _$adoptContext(of: targets)

        let oldIDs = _$relationships[slot].identifiers
        let newIDs = targets.map(\._$id)
        guard oldIDs != newIDs else { return }
        let previous = Set(oldIDs)
        let removed = oldIDs.filter { !seen.contains($0) }.compactMap(_$resolve)
        let added = targets.filter { !previous.contains($0._$id) }

        _$writeRelationship(slot, .toMany(newIDs))
        guard let inverse = _$metadata.inverse(ofRelationship: slot) else { return }
        for target in removed { target._$removeTarget(self._$id, from: inverse.slot) }
        for target in added { target._$linkInverse(inverse.slot, to: self, forwardSlot: slot) }
    }

    /// Records that relationship `slot` was set through its property, on an object the store has not seen yet
    /// whose entity has a unique constraint (``_$assignedRelationships``): an upsert gives the survivor exactly its
    /// targets. Other objects record nothing, so that setting their relationships costs no allocation.
    final func _$noteRelationshipAssigned(_ slot: Int) {
        guard _$committedValues == nil, !_$isMaterializing, !_$isPrototype,
              !_$metadata.uniqueConstraints.isEmpty else { return }
        _$assignedRelationships.insert(slot)
    }

    /// Makes this object and `targets` share one context: relating an object to one that belongs to a context
    /// inserts it (and what it reaches) into that context; unmanaged objects remember each other.
    private func _$adoptContext(of targets: [ModelObject]) {
        let context = _$context ?? targets.lazy.compactMap(\._$context).first
        guard let context else {
            for target in targets { _$unmanagedTargets[target._$id] = target }
            return
        }
        if _$context == nil { context._insertGraph(self) }
        for target in targets {
            if target._$context == nil { context._insertGraph(target) }
            precondition(target._$context === context,
                         "\(self) and \(target) belong to different contexts; relate objects of one context only")
        }
    }

    /// Records on `self`, the target of a relationship of `owner`, the inverse link back to `owner`.
    private func _$linkInverse(_ inverseSlot: Int, to owner: ModelObject, forwardSlot: Int) {
        if _$context == nil { _$unmanagedTargets[owner._$id] = owner }
        switch _$relationships[inverseSlot] {
        case .toMany(let ids):
            // `owner` gained this object, so by the inverse invariant it is not in this list yet; the check guards
            // short lists only, to keep a notebook of thousands of notes from costing a scan per note.
            guard ids.count > 64 || !ids.contains(owner._$id) else { return }
            _$appendTarget(owner._$id, to: inverseSlot)
        case .toOne(let current):
            guard current != owner._$id else { return }
            // A to-one inverse can point at one owner only: the previous owner loses this object.
            if let current, let previousOwner = _$resolve(current) {
                previousOwner._$removeTarget(_$id, from: forwardSlot)
            }
            _$writeRelationship(inverseSlot, .toOne(owner._$id))
        }
    }

    /// Removes `id` from relationship `slot`, if present.
    ///
    /// A to-many list holds each target once (the inverse invariant), so the one occurrence is removed in place,
    /// searched from the end: deleting the newest of a folder's thousands of notes costs no scan of the rest, and
    /// no deletion copies the list.
    final func _$removeTarget(_ id: PersistentIdentifier, from slot: Int) {
        switch _$relationships[slot] {
        case .toOne(let current) where current == id:
            _$writeRelationship(slot, .toOne(nil))
        case .toMany(let ids):
            guard let index = ids.lastIndex(of: id) else { return }
            _$context?._willChange(self)
            _$metadata.relationshipNotifiers[slot].withMutation(of: self) {
                guard case .toMany(var ids) = _$relationships[slot] else { return }
                _$relationships[slot] = .toOne(nil)
                ids.remove(at: index)
                _$relationships[slot] = .toMany(ids)
            }
        default:
            return
        }
    }

    /// Replaces target `old` by `new` in relationship `slot` (an upsert gave an object another identity).
    final func _$replaceTarget(_ old: PersistentIdentifier, with new: PersistentIdentifier, in slot: Int) {
        switch _$relationships[slot] {
        case .toOne(let current) where current == old:
            _$writeRelationship(slot, .toOne(new))
        case .toMany(let ids) where ids.contains(old):
            var replaced: [PersistentIdentifier] = []
            for id in ids where id != new { replaced.append(id == old ? new : id) }
            _$writeRelationship(slot, .toMany(replaced))
        default:
            return
        }
    }

    /// Appends `id` to the to-many relationship `slot` in place (the list is not copied unless shared).
    final func _$appendTarget(_ id: PersistentIdentifier, to slot: Int) {
        _$context?._willChange(self)
        _$metadata.relationshipNotifiers[slot].withMutation(of: self) {
            guard case .toMany(var ids) = _$relationships[slot] else { return }
            _$relationships[slot] = .toOne(nil)
            ids.append(id)
            _$relationships[slot] = .toMany(ids)
        }
    }

    /// Writes relationship `slot`, announcing it to observers and to the context.
    final func _$writeRelationship(_ slot: Int, _ targets: RelationshipTargets) {
        _$context?._willChange(self)
        _$metadata.relationshipNotifiers[slot].withMutation(of: self) { _$relationships[slot] = targets }
    }

    /// Writes attribute `slot` on behalf of the engine (an upsert), announcing it like a property setter does.
    final func _$writeAttributeNotifying(_ slot: Int, _ value: StoredValue) {
        if _$fault != nil { _$fulfill() }
        guard !_$attributes.holds(value, at: slot) else { return }
        _$metadata.attributeNotifiers[slot].withMutation(of: self) { _$writeAttribute(slot, value) }
    }
}
