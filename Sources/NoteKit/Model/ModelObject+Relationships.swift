import FoundationEssentials

/// Reading relationship targets and keeping both sides of every relationship in step.
///
/// Targets are stored as identifiers and resolved through the object's context (which loads an object from
/// the store the first time it is reached). An object that is not in a context yet remembers the objects it
/// was related to, so an unsaved graph can be built and navigated before it is inserted.
extension ModelObject {
    /// The objects relationship `slot` points at, in order. Targets that no longer exist are skipped.
    final func _relationshipModels(at slot: Int) -> [ModelObject] {
        switch _relationships[slot] {
        case .toOne(nil): return []
        case .toOne(let id?): return _resolve(id).map { [$0] } ?? []
        case .toMany(let ids): return ids.compactMap(_resolve)
        }
    }

    /// The object with identifier `id` as this object sees it: a remembered unmanaged object, or the context's.
    final func _resolve(_ id: PersistentIdentifier) -> ModelObject? {
        if !_unmanagedTargets.isEmpty, let target = _unmanagedTargets[id] { return target }
        guard let context = _context else {
            // A context holds its objects, not the other way round (as in SwiftData): an object whose context is
            // gone cannot reach the objects it relates to. Failing loudly beats returning an empty relationship.
            precondition(_state == .unmanaged || _state == .deleted,
                         "\(self) belongs to a ModelContext that no longer exists; keep the context while you use "
                         + "its objects")
            return nil
        }
        return context._object(for: id)
    }

    /// Sets relationship `slot` to `models` and updates the inverse of every target gained or lost.
    final func _setRelationship(at slot: Int, to models: [ModelObject]) {
        guard !_isMaterializing else { return }
        let relationship = _metadata.relationships[slot]
        var seen = Set<PersistentIdentifier>()
        let targets = relationship.isToMany ? models.filter { seen.insert($0._id).inserted } : Array(models.prefix(1))
        _adoptContext(of: targets)

        let oldIDs = _relationships[slot].identifiers
        let newIDs = targets.map(\._id)
        guard oldIDs != newIDs else { return }
        let kept = Set(newIDs), previous = Set(oldIDs)
        let removed = oldIDs.filter { !kept.contains($0) }.compactMap(_resolve)
        let added = targets.filter { !previous.contains($0._id) }

        _writeRelationship(slot, relationship.isToMany ? .toMany(newIDs) : .toOne(newIDs.first))
        guard let inverse = _metadata.inverse(ofRelationship: slot) else { return }
        for target in removed { target._removeTarget(self._id, from: inverse.slot) }
        for target in added { target._linkInverse(inverse.slot, to: self, forwardSlot: slot) }
    }

    /// Makes this object and `targets` share one context: relating an object to one that belongs to a context
    /// inserts it (and what it reaches) into that context; unmanaged objects remember each other.
    private func _adoptContext(of targets: [ModelObject]) {
        let context = _context ?? targets.lazy.compactMap(\._context).first
        guard let context else {
            for target in targets { _unmanagedTargets[target._id] = target }
            return
        }
        if _context == nil { context._insertGraph(self) }
        for target in targets {
            if target._context == nil { context._insertGraph(target) }
            precondition(target._context === context,
                         "\(self) and \(target) belong to different contexts; relate objects of one context only")
        }
    }

    /// Records on `self`, the target of a relationship of `owner`, the inverse link back to `owner`.
    private func _linkInverse(_ inverseSlot: Int, to owner: ModelObject, forwardSlot: Int) {
        if _context == nil { _unmanagedTargets[owner._id] = owner }
        switch _relationships[inverseSlot] {
        case .toMany(let ids):
            guard !ids.contains(owner._id) else { return }
            _writeRelationship(inverseSlot, .toMany(ids + [owner._id]))
        case .toOne(let current):
            guard current != owner._id else { return }
            // A to-one inverse can point at one owner only: the previous owner loses this object.
            if let current, let previousOwner = _resolve(current) {
                previousOwner._removeTarget(_id, from: forwardSlot)
            }
            _writeRelationship(inverseSlot, .toOne(owner._id))
        }
    }

    /// Removes `id` from relationship `slot`, if present.
    final func _removeTarget(_ id: PersistentIdentifier, from slot: Int) {
        switch _relationships[slot] {
        case .toOne(let current) where current == id:
            _writeRelationship(slot, .toOne(nil))
        case .toMany(let ids) where ids.contains(id):
            _writeRelationship(slot, .toMany(ids.filter { $0 != id }))
        default:
            return
        }
    }

    /// Replaces target `old` by `new` in relationship `slot` (an upsert gave an object another identity).
    final func _replaceTarget(_ old: PersistentIdentifier, with new: PersistentIdentifier, in slot: Int) {
        switch _relationships[slot] {
        case .toOne(let current) where current == old:
            _writeRelationship(slot, .toOne(new))
        case .toMany(let ids) where ids.contains(old):
            var replaced: [PersistentIdentifier] = []
            for id in ids where id != new { replaced.append(id == old ? new : id) }
            _writeRelationship(slot, .toMany(replaced))
        default:
            return
        }
    }

    /// Writes relationship `slot`, announcing it to observers and to the context.
    final func _writeRelationship(_ slot: Int, _ targets: RelationshipTargets) {
        _context?._willChange(self)
        _metadata.relationshipNotifiers[slot].withMutation(of: self) { _relationships[slot] = targets }
    }

    /// Writes attribute `slot` on behalf of the engine (an upsert), announcing it like a property setter does.
    final func _writeAttributeNotifying(_ slot: Int, _ value: StoredValue) {
        guard _attributes[slot] != value else { return }
        _metadata.attributeNotifiers[slot].withMutation(of: self) { _writeAttribute(slot, value) }
    }
}
