#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Observation

/// The storage every persistent model inherits: its identity, its context, its values and its observation
/// registrar. Declare models as `final class X: PersistentModel` (see ``PersistentModel``); this class is never
/// used alone.
///
/// A model object belongs to at most one ``ModelContext`` and is not `Sendable`: pass its
/// ``persistentModelID`` to another actor and look it up there.
///
/// Objects are `Observable`: `withObservationTracking` sees reads of persisted properties and fires when they
/// change, including changes made by inverse maintenance, delete rules, rollback and refresh.
open class ModelObject: Observable, Hashable, CustomStringConvertible {
    // MARK: Storage (internal: subclasses in other modules never see these names)

    final var _$metadata: ModelMetadata!
    /// The object's identifier: given by its initializer, and changed after that only by the lifecycle steps (see
    /// *Lifecycle* below); its setter stays internal for the initializers of other files (``DynamicModel``) and tests.
    final var _$id: PersistentIdentifier
    /// Attribute values in declaration order; shares its buffer with the store's row until first written.
    final var _$attributes: AttributeValues = []
    /// Relationship targets in declaration order; shares the store's row's packing until first written. Reading them
    /// on an object made for a relationship's target and not read yet (a whole-row fault) reads its row first.
    final var _$relationships: RelationshipValues {
        get {
            if let fault = _$fault, !fault.relationshipsLoaded { _$fulfill() }
            return _$relationshipStorage
        }
        set { _$relationshipStorage = newValue }
        _modify {
            if let fault = _$fault, !fault.relationshipsLoaded { _$fulfill() }
            yield &_$relationshipStorage
        }
    }
    /// The storage of ``_$relationships``, which reads it without loading a fault.
    final var _$relationshipStorage: RelationshipValues = []
    /// The values last read from or saved to the store, without the identifier (the object's own): nil for an
    /// object the store has never seen. ``_$committed`` is this as a snapshot.
    final private(set) var _$committedValues: CommittedValues?
    /// The object's context, kept alive by the object so that results outlive the code that fetched them; the
    /// context's registry does not keep its objects (pending ones aside), so there is no cycle once changes are
    /// saved (see ``ObjectRegistry``).
    final private(set) var _$context: ModelContext? {
        didSet {
            // Leaving a context takes the object out of its registry, which does not keep it alive.
            if let oldValue, oldValue !== _$context { oldValue.registry.forget(self) }
        }
    }
    final private(set) var _$state: State = .unmanaged
    /// Whether the object has changes its context has not saved (meaningful for registered objects).
    final private(set) var _$isChanged = false
    /// Which of its context's change lists the object is in.
    final var _$listed: Listing = []
    /// True while the engine loads a row into a fresh object: property writes in a user's `init()` are ignored.
    final var _$isMaterializing = false
    /// Where the object's attribute and relationship values started on the construction stack, modulo 2¹⁶: a
    /// wrapper's slot is its stamp minus this, in wrapping 16-bit arithmetic (``Attribute``). Declared after the
    /// one-byte fields so that the four share one 8-byte word with them (stored properties are laid out in order).
    final var _$attributeFrame: UInt16 = 0
    final var _$relationshipFrame: UInt16 = 0
    /// What few objects need (see ``Extra``), allocated by the first that does.
    private final var _$extra: Extra?
    /// The observation registrar, made by the first read of a persisted property (see ``_$observationRegistrar``).
    private final var _$registrar: ObservationRegistrar?

    /// The state that most objects never have, kept out of every object's own allocation: an object fetched from
    /// a store and read has none of it.
    private final class Extra {
        /// Targets of relationships set while the object had no context, kept until it is inserted.
        var unmanagedTargets: [PersistentIdentifier: ModelObject] = [:]
        /// The relationships set through their properties before the object's first save (see
        /// ``_$assignedRelationships``).
        var assignedRelationships: Set<Int> = []
        /// Whether the object is the prototype a type's metadata is built with.
        var isPrototype = false
        /// The persisted properties the prototype's code read, in order.
        var probeLog: [ProbeRecord] = []
        /// Whether a read of a to-one relationship gives a probe of the destination (``_$probeTarget(at:)``), to
        /// follow a key path through relationships.
        var probesPaths = false
        /// The probes of destinations handed out, in order.
        var probeTargets: [ModelObject] = []

        /// Whether every field holds its initial value, so that dropping this changes nothing.
        var isEmpty: Bool {
            unmanagedTargets.isEmpty && assignedRelationships.isEmpty && !isPrototype && probeLog.isEmpty
                && !probesPaths && probeTargets.isEmpty
        }
    }

    private final var extra: Extra {
        if let _$extra { return _$extra }
        let made = Extra()
        _$extra = made
        return made
    }

    /// Targets of relationships set while this object had no context, kept until it is inserted.
    final var _$unmanagedTargets: [PersistentIdentifier: ModelObject] {
        get { _$extra?.unmanagedTargets ?? [:] }
        set {
            guard _$extra != nil || !newValue.isEmpty else { return }
            extra.unmanagedTargets = newValue
        }
        _modify { yield &extra.unmanagedTargets }
    }

    /// The slots of the relationships set through their properties (in an initializer or after) since the object was
    /// made, recorded until its first save for an object whose entity has a unique constraint: if that save finds its
    /// key taken, these relationships replace the survivor's and the others add to it
    /// (``ModelContext/resolveUniqueInserts()``). Relationships filled as another object's inverse are not in it.
    final var _$assignedRelationships: Set<Int> {
        get { _$extra?.assignedRelationships ?? [] }
        set {
            guard _$extra != nil || !newValue.isEmpty else { return }
            extra.assignedRelationships = newValue
            // Cleared at the first save: a saved object keeps no side allocation it no longer needs.
            if newValue.isEmpty, _$extra?.isEmpty == true { _$extra = nil }
        }
    }

    final var _$isPrototype: Bool {
        get { _$extra?.isPrototype ?? false }
        set {
            guard _$extra != nil || newValue else { return }
            extra.isPrototype = newValue
        }
    }

    /// Whether reading a to-one relationship of this prototype gives a probe of the destination.
    final var _$probesPaths: Bool {
        get { _$extra?.probesPaths ?? false }
        set {
            guard _$extra != nil || newValue else { return }
            extra.probesPaths = newValue
        }
    }

    /// The probes of destinations this prototype handed out, in order.
    final var _$probeTargets: [ModelObject] {
        get { _$extra?.probeTargets ?? [] }
        set {
            guard _$extra != nil || !newValue.isEmpty else { return }
            extra.probeTargets = newValue
        }
    }

    /// While a key path through relationships is probed (``ModelMetadata/propertyPath(for:)``): a new object of
    /// to-one relationship `slot`'s destination, outside any context, that logs what is read of it and holds a
    /// recognizable value (``ModelMetadata/probeValue(at:)``) in each attribute; nil otherwise.
    final func _$probeTarget(at slot: Int) -> ModelObject? {
        guard _$probesPaths, !_$metadata.relationships[slot].isToMany else { return nil }
        let destination = _$metadata.relationships[slot].destinationMetadata
        guard !destination.isDynamic else { return nil }
        let target = destination.type.init()
        target._$isPrototype = true
        target._$probesPaths = true
        for index in destination.attributes.indices {
            if let value = destination.probeValue(at: index) { target._$attributes[index] = value }
        }
        _$probeTargets.append(target)
        return target
    }

    final var _$probeLog: [ProbeRecord] {
        get { _$extra?.probeLog ?? [] }
        set {
            guard _$extra != nil || !newValue.isEmpty else { return }
            extra.probeLog = newValue
        }
        _modify { yield &extra.probeLog }
    }

    /// The object's observation registrar, made on first use: an object whose persisted properties nobody reads
    /// (most of what a large fetch returns) never allocates one.
    final var _$observationRegistrar: ObservationRegistrar {
        if let _$registrar { return _$registrar }
        let made = ObservationRegistrar()
        _$registrar = made
        return made
    }

    /// Whether the object has made its observation registrar, and its side allocation (for tests of what an
    /// object costs).
    final var _$sideAllocations: (registrar: Bool, extra: Bool) { (_$registrar != nil, _$extra != nil) }

    /// Runs `mutation`, telling the observers of `keyPath` about it. An object without a registrar has no
    /// observers (observing starts with a read, which makes the registrar), so nothing is told then.
    final func _$withMutation<Model: ModelObject, Value>(of model: Model, keyPath: KeyPath<Model, Value>,
                                                        _ mutation: () -> Void) {
        guard let _$registrar else { return mutation() }
        _$registrar.withMutation(of: model, keyPath: keyPath, mutation)
    }

    /// The values last read from or saved to the store, as a snapshot of this object; nil for an object the
    /// store has never seen.
    final private(set) var _$committed: ModelSnapshot? {
        get {
            _$committedValues.map {
                ModelSnapshot(id: _$id, attributes: $0.attributes, relationships: $0.relationships,
                              transactionNumber: $0.transactionNumber)
            }
        }
        set { _$committedValues = newValue.map(CommittedValues.init) }
    }

    /// A committed snapshot less its identifier, which is the object's.
    struct CommittedValues {
        var attributes: AttributeValues
        var relationships: RelationshipValues
        var transactionNumber: UInt64

        init(_ snapshot: ModelSnapshot) {
            attributes = snapshot.attributes
            relationships = snapshot.relationships
            transactionNumber = snapshot.transactionNumber
        }
    }

    /// The attributes a partial fetch (``FetchDescriptor/propertiesToFetch``) left unloaded, or, for an object made
    /// for a relationship's target and not read yet, the whole row; nil (nearly always) when everything is loaded.
    /// Any change to the object, the first read of an unloaded attribute and (for a whole-row fault) the first read
    /// of a relationship load it all first, so only reads ever see an object with a fault.
    final var _$fault: PartialFault?

    enum State: Equatable {
        /// Not in any context.
        case unmanaged
        /// Inserted into a context, not yet saved.
        case inserted
        /// Known to the store and registered in a context.
        case registered
        /// Deleted in its context (saved or not).
        case deleted
    }

    /// The change lists of a context.
    struct Listing: OptionSet {
        let rawValue: UInt8
        static let inserted = Listing(rawValue: 1)
        static let changed = Listing(rawValue: 2)
        static let deleted = Listing(rawValue: 4)
    }

    struct ProbeRecord {
        let property: PropertyReference
        let keyPath: AnyKeyPath
    }

    /// The identifier an object has until its initializer gives it its own.
    private static let unassigned = PersistentIdentifier(
        entityName: "", primaryKey: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))

    /// A freed object leaves its context's registry, which holds it unowned.
    deinit {
        _$context?.registry.forget(self)
    }

    // MARK: Construction

    /// Creates an object with every persisted property at its declared default, in no context.
    public required init() {
        let stack = ConstructionStack.current
        let type = Swift.type(of: self)
        _$id = ModelObject.unassigned
        if let recording = stack.recording, recording.type == ObjectIdentifier(type),
           recording.attributeMark <= stack.attributeValues.count {
            finishRecording(stack, recording)
            return
        }
        let metadata = stack.metadata(of: type)
        _$metadata = metadata
        let attributeCount = metadata.attributes.count, relationshipCount = metadata.relationships.count
        let attributeStart = stack.attributeValues.count - attributeCount
        let relationshipStart = stack.relationshipValues.count - relationshipCount
        precondition(attributeStart >= 0 && relationshipStart >= 0,
                     "\(type): property wrappers and ModelObject.init() ran out of step")
        _$attributeFrame = UInt16(truncatingIfNeeded: attributeStart)
        _$relationshipFrame = UInt16(truncatingIfNeeded: relationshipStart)

        if let materialization = stack.materialization, materialization.type == ObjectIdentifier(type),
           materialization.attributeFrame == attributeStart, materialization.relationshipFrame == relationshipStart {
            // The engine fills in the row and the identifier; the defaults were never evaluated.
            stack.materialization = nil
            _$isMaterializing = true
            stack.attributeValues.removeLast(attributeCount)
            stack.relationshipValues.removeLast(relationshipCount)
        } else if stack.isMaterializing {
            // A transient property of the object being loaded constructs this one: its wrappers skipped their
            // defaults, believing they belonged to the loaded object. A twin made with the engine out of the way
            // has the real defaults.
            _$id = .make(entityName: metadata.entityName)
            let materialization = stack.materialization
            stack.materialization = nil
            let twin = type.init()
            stack.materialization = materialization
            _$attributes = twin._$attributes
            _$relationships = twin._$relationships
            _$unmanagedTargets = twin._$unmanagedTargets
            stack.attributeValues.removeLast(attributeCount)
            stack.relationshipValues.removeLast(relationshipCount)
        } else {
            _$id = .make(entityName: metadata.entityName)
            // The wrappers encoded their initial values already: they move over as they are.
            _$attributes = AttributeValues(stack.attributeValues.popLast(attributeCount))
            if !stack.encodingFailures.isEmpty, let failure = stack.takeEncodingFailure(from: attributeStart) {
                let name = metadata.attributes[failure.stamp - attributeStart].name
                preconditionFailure(
                    "\(metadata.entityName).\(name): the initial value cannot be encoded: \(failure.error)")
            }
            var relationships: [RelationshipTargets] = []
            relationships.reserveCapacity(relationshipCount)
            for index in 0..<relationshipCount {
                let initial = stack.relationshipValues[relationshipStart + index]
                for target in initial { _$unmanagedTargets[target._$id] = target }
                relationships.append(metadata.relationshipIsToMany[index]
                    ? .toMany(initial.map(\._$id)) : .toOne(initial.first?._$id))
            }
            _$relationships = RelationshipValues(relationships)
            stack.relationshipValues.removeLast(relationshipCount)
        }
        if stack.recordingDepth > 0 {
            stack.attributeInitials.removeLast(attributeCount)
            stack.attributeDeclarations.removeLast(attributeCount)
            stack.relationshipDeclarations.removeLast(relationshipCount)
        }
    }

    /// The prototype of a type whose metadata is being built: hand the pushed values and declarations over.
    private func finishRecording(_ stack: ConstructionStack, _ recording: ConstructionStack.Recording) {
        let attributeCount = stack.attributeValues.count - recording.attributeMark
        let relationshipCount = stack.relationshipValues.count - recording.relationshipMark
        stack.recorded = .init(
            attributeValues: Array(stack.attributeInitials.suffix(attributeCount)),
            attributeDeclarations: Array(stack.attributeDeclarations.suffix(attributeCount)),
            relationshipDeclarations: Array(stack.relationshipDeclarations.suffix(relationshipCount)),
            attributeFrame: recording.attributeMark, relationshipFrame: recording.relationshipMark)
        _$attributeFrame = UInt16(truncatingIfNeeded: recording.attributeMark)
        _$relationshipFrame = UInt16(truncatingIfNeeded: recording.relationshipMark)
        stack.attributeValues.removeLast(attributeCount)
        stack.relationshipValues.removeLast(relationshipCount)
        // The prototype's values are recorded as given; one that cannot be encoded is the schema's to report.
        _ = stack.takeEncodingFailure(from: recording.attributeMark)
        stack.attributeInitials.removeLast(attributeCount)
        stack.attributeDeclarations.removeLast(attributeCount)
        stack.relationshipDeclarations.removeLast(relationshipCount)
        stack.recording = nil
    }

    // MARK: Public surface

    /// The object's permanent identifier, assigned when it was created.
    public final var persistentModelID: PersistentIdentifier { _$id }

    /// The context the object belongs to, or nil before it is inserted and after it is deleted and saved.
    public final var modelContext: ModelContext? { _$context }

    /// Whether the object has been deleted from its context.
    public final var isDeleted: Bool { _$state == .deleted }

    /// Whether the object has changes its context has not saved yet (always true for an inserted object).
    public final var hasChanges: Bool {
        switch _$state {
        case .inserted: true
        case .registered: _$isChanged
        case .deleted: _$context != nil
        case .unmanaged: false
        }
    }

    /// Two model objects are equal when they are the same instance (as in SwiftData): compare
    /// ``persistentModelID`` to ask whether two objects stand for the same stored object.
    public static func == (lhs: ModelObject, rhs: ModelObject) -> Bool { lhs === rhs }
    /// Hashes the instance's identity, consistently with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The type's name and the object's identifier, as in `Folder(Folder/3F2504E0-…)`; a model may override it.
    open var description: String { "\(Swift.type(of: self))(\(_$id))" }

    // MARK: Attribute storage

    /// Reads attribute `slot` as `Value`. A value that cannot be decoded (a damaged external blob, a promised one
    /// not fetched yet, a `Codable` type that no longer decodes its stored form) reads as the attribute's
    /// default, and the failure is recorded in the context's ``ModelContext/readFailures``; the stored value stays as
    /// it is, and the context refuses to save that default back over it (``SaveError/unreadValueOverwritten(model:property:)``).
    final func _$attributeValue<Value>(at slot: Int, as type: Value.Type) -> Value {
        if _$fault != nil { _$fireFault(reading: slot) }
        let codec = _$metadata.codec(at: slot, as: Value.self)
        do {
            let value = try codec.decode(_$attributes[slot])
            if let context = _$context, context.hasUnreadValues { context._readSucceeded(self, slot: slot) }
            return value
        } catch {
            let attribute = _$metadata.attributes[slot]
            _$context?._readFailed(self, slot: slot, failure: .init(model: _$id, property: attribute.name,
                                                                    reason: "\(error)"))
            return attribute.fallbackValue as! Value
        }
    }

    /// Whether writing `value` to `slot` would change anything (writes are ignored while materializing).
    final func _$attributeNeedsWrite(_ slot: Int, _ value: StoredValue) -> Bool {
        if _$fault != nil { _$fulfill() }
        return !_$isMaterializing && !_$attributes.holds(value, at: slot)
    }

    /// Loads the unloaded attributes when `slot` is one of them.
    @inline(never)
    final func _$fireFault(reading slot: Int) {
        guard let fault = _$fault, !fault.loaded[slot] else { return }
        _$fulfill()
    }

    /// Loads every attribute a partial fetch left out, from the store through the object's context (one row read).
    /// Out of every context there is no store to read: the unloaded attributes take their declared defaults.
    @inline(never)
    final func _$fulfill() {
        guard let fault = _$fault else { return }
        if let context = _$context { return context._fulfill(self) }
        _$fault = nil
        for slot in fault.loaded.indices where !fault.loaded[slot] {
            _$attributes[slot] = _$metadata.attributes[slot].encodedFallback
        }
    }

    final func _$writeAttribute(_ slot: Int, _ value: StoredValue) {
        _$context?._willChange(self)
        _$attributes[slot] = value
    }

    // MARK: Snapshots

    /// The object's current values as a store row.
    final var _$row: ModelSnapshot {
        ModelSnapshot(id: _$id, attributes: _$attributes, relationships: _$relationships)
    }

    /// Replaces the object's values with `snapshot`'s, telling observers about each property that changed.
    final func _$load(_ snapshot: ModelSnapshot, notify: Bool) {
        guard notify else {
            _$attributes = snapshot.attributes
            _$relationshipStorage = snapshot.relationships
            return
        }
        for slot in _$attributes.indices where slot < snapshot.attributes.count
            && !_$attributes.hasSameValue(at: slot, as: snapshot.attributes) {
            _$metadata.attributeNotifiers[slot].withMutation(of: self) { _$attributes[slot] = snapshot.attributes[slot] }
        }
        for slot in _$relationshipStorage.indices where slot < snapshot.relationships.count
            && _$relationshipStorage[slot] != snapshot.relationships[slot] {
            _$metadata.relationshipNotifiers[slot].withMutation(of: self) {
                _$relationshipStorage[slot] = snapshot.relationships[slot]
            }
        }
    }
}

// MARK: - Lifecycle

/// An object's lifecycle: the named steps that move it between its states. They are the only code that writes its
/// state, its saved row and its context (their setters are private to this file), and its identifier once it has
/// one. A ``ModelContext`` takes each step by name; the step sets every field it concerns, so that no object is ever
/// seen half-moved.
///
/// - ``_$insert(into:)``: unmanaged, or deleted and saved elsewhere → inserted.
/// - ``_$attach(to:in:registering:)``: a row the store returned → registered.
/// - ``_$commitInsert(transactionNumber:)``: inserted → registered, when the save is done.
/// - ``_$delete()``: registered → deleted (until the save); inserted → deleted, in no context.
/// - ``_$undelete()``: deleted, not saved → registered, or inserted when never saved.
/// - ``_$leave(deleted:)``: out of the context, unmanaged (rollback, undo) or deleted (a saved delete).
/// - ``_$noteChange()``: registered → changed, before its values first change after a save.
/// - ``_$commitChanges()``: changed → unchanged, when the save is done.
/// - ``_$updateChangedFlag()``: changed or not, as its values compare with the saved row (undo's restore).
/// - ``_$revert()``: changed or deleted → registered, with the saved values (rollback).
/// - ``_$restore(state:isChanged:context:)``: back where a transaction that threw found it.
/// - ``_$adoptIdentity(of:)`` and ``_$mergeAway(into:)``: an inserted object whose unique key was taken (upsert).
/// - ``_$takeSaved(_:)`` and ``_$fillUnloaded(_:)``: a registered object reads its newer saved row, or the values a
///   partial fetch left out.
/// - ``_$becomeStandIn(forDeleted:)``: a new object stands for one deleted before a batched fetch reached it.
///
/// What stays with the context: its registry, its change lists, the undo and transaction records, and telling
/// observers.
extension ModelObject {
    // MARK: Joining and leaving a context

    /// Insert: the object, in no context (or deleted and saved elsewhere), joins `context` as a new object that its
    /// next save inserts. A saved row it had belongs to the store that deleted it, and is forgotten.
    final func _$insert(into context: ModelContext) {
        _$context = context
        _$state = .inserted
        _$committedValues = nil
        _$isChanged = false
    }

    /// Attach: the object takes stored `row`'s identifier and values, as saved, in `context`; `registering` makes it
    /// the context's registered object (otherwise it is a detached copy that reads like the saved object).
    final func _$attach(to row: ModelSnapshot, in context: ModelContext, registering: Bool) {
        _$id = row.id
        _$load(row, notify: false)
        _$committed = row
        _$context = context
        if registering { _$state = .registered }
    }

    /// Leave: the object is in no context any more, and unmanaged (`deleted` false: a rollback or an undo of its
    /// insert, a copy handed on as a new object) or deleted (a saved delete, an unsaved object deleted). Out of a
    /// context no saved row or change of the object counts: inserting it again makes a new object.
    final func _$leave(deleted: Bool) {
        _$context = nil
        _$state = deleted ? .deleted : .unmanaged
        if !deleted { _$committedValues = nil }
        _$isChanged = false
    }

    /// A stand-in for object `id`, deleted and saved before it could be read: deleted, in no context, holding its
    /// declared defaults.
    final func _$becomeStandIn(forDeleted id: PersistentIdentifier) {
        _$id = id
        _$state = .deleted
    }

    // MARK: Deleting

    /// Delete: an inserted object simply leaves its context (nothing was saved); a registered one is deleted by the
    /// context's next save.
    final func _$delete() {
        switch _$state {
        case .inserted: _$leave(deleted: true)
        case .registered: _$state = .deleted
        case .deleted, .unmanaged: break
        }
    }

    /// Undelete: an object deleted and not saved since is back, registered when the store has it, inserted again
    /// otherwise.
    final func _$undelete() {
        _$state = _$committedValues == nil ? .inserted : .registered
    }

    // MARK: Saving and reading back

    /// Save of an insert: the store now holds the object's current values, written at `transactionNumber`.
    final func _$commitInsert(transactionNumber: UInt64) {
        _$state = .registered
        _$isChanged = false
        _$assignedRelationships = []
        _$committed = ModelSnapshot(id: _$id, attributes: _$attributes, relationships: _$relationships,
                                    transactionNumber: transactionNumber)
    }

    /// Save of changes: the store now holds what changed in the object, which is unchanged until its next change.
    final func _$commitChanges() {
        _$isChanged = false
    }

    /// The store's newer (or just saved) row of the object: its values become the object's, observers are told
    /// what changed, and it is the saved row from now on.
    final func _$takeSaved(_ row: ModelSnapshot) {
        _$load(row, notify: true)
        _$committed = row
    }

    /// Gives each attribute a partial fetch left out its value (`value(slot)`: the saved one, read now), in the
    /// object and in its saved row; the object is whole from then on.
    final func _$fillUnloaded(_ value: (Int) -> StoredValue) {
        guard let fault = _$fault else { return }
        _$fault = nil
        var committed = _$committed ?? _$row
        for slot in fault.loaded.indices where !fault.loaded[slot] {
            let filled = value(slot)
            _$attributes[slot] = filled
            committed.attributes[slot] = filled
        }
        _$committed = committed
    }

    // MARK: Changing

    /// Change: the object's values are about to change. A registered object that was unchanged is changed from now
    /// on, and the result is true, so that its context lists it once; any other object is left as it is.
    final func _$noteChange() -> Bool {
        guard _$state == .registered, !_$isChanged else { return false }
        _$isChanged = true
        return true
    }

    /// Undo's restore of values: a saved object is changed exactly when its values differ from its saved row (its
    /// changes were undone, or redone). Returns whether it is changed; an object never saved is left as it is.
    final func _$updateChangedFlag() -> Bool {
        guard let committed = _$committedValues else { return false }
        _$isChanged = _$attributes != committed.attributes || _$relationships != committed.relationships
        return _$isChanged
    }

    /// Revert (a rollback): the object gets its saved values back (observers are told), registered and unchanged.
    final func _$revert() {
        if let committed = _$committed { _$load(committed, notify: true) }
        _$isChanged = false
        _$state = .registered
    }

    /// Restore (a transaction that threw): the object is back in the state, the change flag and the context it had
    /// when the transaction first touched it.
    final func _$restore(state: State, isChanged: Bool, context: ModelContext?) {
        _$state = state
        _$isChanged = isChanged
        _$context = context
    }

    // MARK: Unique keys (upsert)

    /// Adopt an identity: the inserted object becomes saved object `stored`, which its context never loaded: it takes
    /// the identifier and the saved row, and the save updates that object with the inserted values.
    final func _$adoptIdentity(of stored: ModelSnapshot) {
        _$id = stored.id
        _$committed = stored
        _$state = .registered
    }

    /// Merged away: the inserted object's values went to `survivor`, which its context had; it leaves the context
    /// and names the survivor, as every reference to it now does.
    final func _$mergeAway(into survivor: ModelObject) {
        _$leave(deleted: false)
        _$id = survivor._$id
    }
}

/// Which attributes a partial fetch loaded, shared by every object it created; or, for the objects made for a
/// relationship's targets without reading their rows (SwiftData's faults), none, and no relationship either.
final class PartialFault {
    /// Per attribute position, whether the fetch loaded it.
    let loaded: [Bool]
    /// Whether the relationships are loaded (false for a whole-row fault).
    let relationshipsLoaded: Bool

    init(loaded: [Bool], relationshipsLoaded: Bool = true) {
        self.loaded = loaded
        self.relationshipsLoaded = relationshipsLoaded
    }
}

/// A persisted property of a model type: its kind and its position among the type's attributes or relationships.
enum PropertyReference: Hashable, Sendable {
    case attribute(Int)
    case relationship(Int)
}
