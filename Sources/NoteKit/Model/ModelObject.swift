import FoundationEssentials
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

    final var _metadata: ModelMetadata!
    final var _id: PersistentIdentifier
    /// Attribute values in declaration order; shares its buffer with the store's row until first written.
    final var _attributes: [StoredValue] = []
    final var _relationships: [RelationshipTargets] = []
    /// The values last read from or saved to the store; nil for an object the store has never seen.
    final var _committed: ModelSnapshot?
    final var _attributeFrame: Int32 = 0
    final var _relationshipFrame: Int32 = 0
    final weak var _context: ModelContext?
    final var _state: State = .unmanaged
    /// Whether the object has changes its context has not saved (meaningful for registered objects).
    final var _isChanged = false
    /// Targets of relationships set while this object had no context, kept until it is inserted.
    final var _unmanagedTargets: [PersistentIdentifier: ModelObject] = [:]
    final var _isPrototype = false
    final var _probeLog: [ProbeRecord] = []
    /// True while the engine loads a row into a fresh object: property writes in a user's `init()` are ignored.
    final var _isMaterializing = false
    final let _observationRegistrar = ObservationRegistrar()

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

    struct ProbeRecord {
        let property: PropertyReference
        let keyPath: AnyKeyPath
    }

    // MARK: Construction

    /// Creates an object with every persisted property at its declared default, in no context.
    public required init() {
        let stack = ConstructionStack.current
        let type = Swift.type(of: self)
        _id = PersistentIdentifier(entityName: "", primaryKey: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        if let recording = stack.recording, recording.type == ObjectIdentifier(type),
           recording.attributeMark <= stack.attributeValues.count {
            finishRecording(stack, recording)
            return
        }
        guard let modelType = type as? any PersistentModel.Type else {
            preconditionFailure("\(type) inherits ModelObject but does not conform to PersistentModelProtocol; "
                                + "declare it as `final class \(type): PersistentModel`")
        }
        let metadata = ModelMetadata.of(modelType)
        _metadata = metadata
        _id = .make(entityName: metadata.entityName)
        let attributeCount = metadata.attributes.count, relationshipCount = metadata.relationships.count
        let attributeStart = stack.attributeValues.count - attributeCount
        let relationshipStart = stack.relationshipValues.count - relationshipCount
        precondition(attributeStart >= 0 && relationshipStart >= 0,
                     "\(type): property wrappers and ModelObject.init() ran out of step")
        _attributeFrame = Int32(truncatingIfNeeded: attributeStart)
        _relationshipFrame = Int32(truncatingIfNeeded: relationshipStart)

        if let materialization = stack.materialization, materialization.type == ObjectIdentifier(type),
           materialization.attributeFrame == attributeStart, materialization.relationshipFrame == relationshipStart {
            // The engine fills in the row; the defaults were never evaluated.
            stack.materialization = nil
            _isMaterializing = true
        } else {
            _attributes.reserveCapacity(attributeCount)
            for (index, attribute) in metadata.attributes.enumerated() {
                let initial = stack.attributeValues[attributeStart + index]
                _attributes.append(attribute.initialStoredValue(from: initial, entity: metadata.entityName))
            }
            _relationships.reserveCapacity(relationshipCount)
            for (index, relationship) in metadata.relationships.enumerated() {
                let initial = stack.relationshipValues[relationshipStart + index] as? [ModelObject] ?? []
                for target in initial { _unmanagedTargets[target._id] = target }
                _relationships.append(relationship.isToMany ? .toMany(initial.map(\._id)) : .toOne(initial.first?._id))
            }
        }
        stack.attributeValues.removeLast(attributeCount)
        stack.relationshipValues.removeLast(relationshipCount)
        if stack.recordingDepth > 0 {
            stack.attributeDeclarations.removeLast(attributeCount)
            stack.relationshipDeclarations.removeLast(relationshipCount)
        }
    }

    /// The prototype of a type whose metadata is being built: hand the pushed values and declarations over.
    private func finishRecording(_ stack: ConstructionStack, _ recording: ConstructionStack.Recording) {
        let attributeCount = stack.attributeValues.count - recording.attributeMark
        let relationshipCount = stack.relationshipValues.count - recording.relationshipMark
        stack.recorded = .init(
            attributeValues: Array(stack.attributeValues.suffix(attributeCount)),
            attributeDeclarations: Array(stack.attributeDeclarations.suffix(attributeCount)),
            relationshipDeclarations: Array(stack.relationshipDeclarations.suffix(relationshipCount)),
            attributeFrame: recording.attributeMark, relationshipFrame: recording.relationshipMark)
        _attributeFrame = Int32(truncatingIfNeeded: recording.attributeMark)
        _relationshipFrame = Int32(truncatingIfNeeded: recording.relationshipMark)
        stack.attributeValues.removeLast(attributeCount)
        stack.relationshipValues.removeLast(relationshipCount)
        stack.attributeDeclarations.removeLast(attributeCount)
        stack.relationshipDeclarations.removeLast(relationshipCount)
        stack.recording = nil
    }

    // MARK: Public surface

    /// The object's permanent identifier, assigned when it was created.
    public final var persistentModelID: PersistentIdentifier { _id }

    /// The context the object belongs to, or nil before it is inserted and after it is deleted and saved.
    public final var modelContext: ModelContext? { _context }

    /// Whether the object has been deleted from its context.
    public final var isDeleted: Bool { _state == .deleted }

    /// Whether the object has changes its context has not saved yet (always true for an inserted object).
    public final var hasChanges: Bool {
        switch _state {
        case .inserted: true
        case .registered: _isChanged
        case .deleted: _context != nil
        case .unmanaged: false
        }
    }

    public static func == (lhs: ModelObject, rhs: ModelObject) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    open var description: String { "\(Swift.type(of: self))(\(_id))" }

    // MARK: Attribute storage

    /// Reads attribute `slot` as `Value`. A value that cannot be decoded (a damaged external blob, a `Codable` type
    /// that no longer decodes its stored form) reads as the attribute's default, and the failure is recorded in the
    /// context's ``ModelContext/readFailures``.
    final func _attributeValue<Value>(at slot: Int, as type: Value.Type) -> Value {
        let codec = _metadata.codec(at: slot, as: Value.self)
        do {
            return try codec.decode(_attributes[slot])
        } catch {
            let attribute = _metadata.attributes[slot]
            _context?._recordReadFailure(.init(model: _id, property: attribute.name, reason: "\(error)"))
            return attribute.fallbackValue as! Value
        }
    }

    /// Whether writing `value` to `slot` would change anything (writes are ignored while materializing).
    final func _attributeNeedsWrite(_ slot: Int, _ value: StoredValue) -> Bool {
        !_isMaterializing && _attributes[slot] != value
    }

    final func _writeAttribute(_ slot: Int, _ value: StoredValue) {
        _context?._willChange(self)
        _attributes[slot] = value
    }

    // MARK: Snapshots

    /// The object's current values as a store row.
    final var _snapshot: ModelSnapshot {
        ModelSnapshot(id: _id, attributes: _attributes, relationships: _relationships)
    }

    /// Replaces the object's values with `snapshot`'s, telling observers about each property that changed.
    final func _load(_ snapshot: ModelSnapshot, notify: Bool) {
        guard notify else {
            _attributes = snapshot.attributes
            _relationships = snapshot.relationships
            return
        }
        for slot in _attributes.indices where slot < snapshot.attributes.count
            && _attributes[slot] != snapshot.attributes[slot] {
            _metadata.attributeNotifiers[slot].withMutation(of: self) { _attributes[slot] = snapshot.attributes[slot] }
        }
        for slot in _relationships.indices where slot < snapshot.relationships.count
            && _relationships[slot] != snapshot.relationships[slot] {
            _metadata.relationshipNotifiers[slot].withMutation(of: self) {
                _relationships[slot] = snapshot.relationships[slot]
            }
        }
    }
}

/// A persisted property of a model type: its kind and its position among the type's attributes or relationships.
enum PropertyReference: Hashable, Sendable {
    case attribute(Int)
    case relationship(Int)
}
