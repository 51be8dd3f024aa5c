#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Declares a relationship of a ``PersistentModel``: an optional model (to-one) or an array of models (to-many).
///
/// ```swift
/// @Relationship(deleteRule: .cascade, inverse: \NoteRevision.note) var revisions: [NoteRevision] = []
/// @Relationship var folder: Folder?
/// @Relationship(minimumModelCount: 1) var owners: [Person] = []
/// ```
///
/// Setting one side updates the inverse at once, before any save: `note.folder = work` puts the note in
/// `work.notes` and removes it from its previous folder's. The inverse is the key path given as `inverse`, or
/// the one relationship of the destination that declares this one as its inverse, or, when exactly one
/// relationship on each side points at the other, that one (otherwise the schema reports the ambiguity).
///
/// Declare `inverse:` on one side of a pair only (the compiler rejects key paths that refer to each other's
/// declarations circularly, as with SwiftData's macro); the other side finds it.
///
/// To-many relationships keep the order in which targets were added. Relating a model to one that belongs to a
/// context inserts it into that context, with everything it reaches.
///
/// A property of any other type is refused at compile time with a message that says what to write (`@Attribute`
/// for a value, an optional for a to-one relationship).
@propertyWrapper
public struct Relationship<Value> {
    /// Where this wrapper's initial targets were pushed, modulo 2¹⁶ (as ``Attribute``'s stamp).
    @usableFromInline let stamp: UInt16

    /// Declares a relationship whose initial targets are `wrappedValue` (usually `[]`).
    ///
    /// - Parameters:
    ///   - wrappedValue: the initial targets, a default like an attribute's (`[]` or `nil`).
    ///   - deleteRule: what deleting this object does to its targets (default `.nullify`).
    ///   - minimumModelCount: the fewest targets a saved object may have.
    ///   - maximumModelCount: the most targets a saved object may have.
    ///   - originalName: the relationship's name in an earlier schema, when it was renamed.
    ///   - inverse: the destination's property that mirrors this one.
    public init(wrappedValue: @autoclosure () -> Value, deleteRule: DeleteRule = .nullify,
                minimumModelCount: Int? = nil, maximumModelCount: Int? = nil, originalName: String? = nil,
                inverse: PartialKeyPath<Value.Destination>? = nil) where Value: RelationshipValue {
        stamp = Self.push(wrappedValue, deleteRule: deleteRule, minimumModelCount: minimumModelCount,
                          maximumModelCount: maximumModelCount, originalName: originalName, inverse: inverse)
    }

    /// Declares a relationship that starts with no targets.
    public init(deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = nil, maximumModelCount: Int? = nil,
                originalName: String? = nil, inverse: PartialKeyPath<Value.Destination>? = nil)
        where Value: RelationshipValue {
        stamp = Self.push({ Self.value(holding: []) }, deleteRule: deleteRule, minimumModelCount: minimumModelCount,
                          maximumModelCount: maximumModelCount, originalName: originalName, inverse: inverse)
    }

    private static func push(_ initial: () -> Value, deleteRule: DeleteRule, minimumModelCount: Int?,
                             maximumModelCount: Int?, originalName: String?,
                             inverse: PartialKeyPath<Value.Destination>?) -> UInt16 where Value: RelationshipValue {
        let stack = ConstructionStack.current
        let stamp = UInt16(truncatingIfNeeded: stack.relationshipValues.count)
        stack.relationshipValues.append(stack.isMaterializing ? [] : targetModels(of: initial()))
        if stack.recordingDepth > 0 {
            stack.relationshipDeclarations.append(RelationshipDeclaration(
                wrapperType: Self.self, destination: Value.Destination.self, isToMany: isToMany,
                deleteRule: deleteRule, minimumModelCount: minimumModelCount, maximumModelCount: maximumModelCount,
                originalName: originalName, inverse: inverse))
        }
        return stamp
    }

    /// Refused at compile time: a relationship holds an optional model or an array of models.
    @available(*, unavailable, message: "@Relationship holds an optional model (`@Relationship var folder: Folder?`) or an array of models (`@Relationship var notes: [Note] = []`); declare a property of any other type with @Attribute")
    public init(wrappedValue: Value, deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = nil,
                maximumModelCount: Int? = nil, originalName: String? = nil, inverse: AnyKeyPath? = nil) {
        fatalError("unavailable")
    }

    /// Refused at compile time: a relationship holds an optional model or an array of models.
    @available(*, unavailable, message: "@Relationship holds an optional model (`@Relationship var folder: Folder?`) or an array of models (`@Relationship var notes: [Note] = []`); declare a property of any other type with @Attribute")
    public init(deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = nil, maximumModelCount: Int? = nil,
                originalName: String? = nil, inverse: AnyKeyPath? = nil) {
        fatalError("unavailable")
    }

    @available(*, unavailable, message: "@Relationship is only available on PersistentModel classes")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") } // swiftlint:disable:this unused_setter_value
    }

    /// The targets, resolved through the object's context, with Observation and inverse maintenance.
    ///
    /// Inlinable so that the wrapper's stamp is read from the model directly, not through the key path runtime.
    @inlinable
    public static subscript<Model: ModelObject>(
        _enclosingInstance model: Model,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Model, Self>
    ) -> Value where Value: RelationshipValue {
        get { _$read(model, stamp: model[keyPath: storageKeyPath].stamp, wrappedKeyPath) }
        set { _$write(model, stamp: model[keyPath: storageKeyPath].stamp, newValue, wrappedKeyPath) }
    }

    /// Reads the targets of the relationship whose wrapper has `stamp`.
    @usableFromInline
    static func _$read<Model: ModelObject>(_ model: Model, stamp: UInt16,
                                           _ wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>) -> Value
        where Value: RelationshipValue {
        let slot = Int(stamp &- model._$relationshipFrame)
        model._$observationRegistrar.access(model, keyPath: wrappedKeyPath)
        model._$metadata.relationshipNotifiers[slot].register(wrappedKeyPath)
        if model._$isPrototype {
            model._$probeLog.append(.init(property: .relationship(slot), keyPath: wrappedKeyPath))
            if let target = model._$probeTarget(at: slot) {
                return value(holding: [target])
            }
        }
        return value(holding: model._$relationshipModels(at: slot))
    }

    /// Sets the targets of the relationship whose wrapper has `stamp`.
    @usableFromInline
    static func _$write<Model: ModelObject>(_ model: Model, stamp: UInt16, _ newValue: Value,
                                            _ wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>)
        where Value: RelationshipValue {
        let slot = Int(stamp &- model._$relationshipFrame)
        model._$metadata.relationshipNotifiers[slot].register(wrappedKeyPath)
        model._$noteRelationshipAssigned(slot)
        model._$setRelationship(at: slot, to: targetModels(of: newValue))
    }
}

extension Relationship where Value: RelationshipValue {
    /// Whether the wrapper holds an array of models (to-many) rather than an optional one (to-one): `Optional` and
    /// `Array` are the only conformances, and neither adds a member for the wrapper to ask. A comparison of two
    /// metatypes, no conformance look-up.
    static var isToMany: Bool { Value.self == [Value.Destination].self }

    /// A value holding `models`, each of the destination type (the first one, for a to-one). The casts are from a
    /// type to itself, which the runtime answers by identity.
    static func value(holding models: [ModelObject]) -> Value {
        if isToMany {
            return models.map { unsafeDowncast($0, to: Value.Destination.self) } as! Value
        }
        return models.first.map { unsafeDowncast($0, to: Value.Destination.self) } as! Value
    }

    /// The targets `value` holds, in order.
    static func targetModels(of value: Value) -> [ModelObject] {
        if isToMany { return value as! [Value.Destination] }
        return (value as! Value.Destination?).map { [$0] } ?? []
    }
}
