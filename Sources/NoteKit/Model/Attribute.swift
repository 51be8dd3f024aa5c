#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Declares a persisted attribute of a ``PersistentModel``, with SwiftData's options.
///
/// ```swift
/// @Attribute(.unique) var slug = ""
/// @Attribute(.externalStorage) var data = Data()
/// @Attribute(.preserveValueOnDeletion) var id = UUID()
/// @Attribute(originalName: "body") var content = ""
/// @Attribute var eventDate: Date?
/// ```
///
/// Supported types: `Bool`, `Int` and the fixed-width integers, `Double`, `Float`, `String`, `Date`, `Data`,
/// `UUID`, `URL`, `Decimal`; optionals of these; arrays and string-keyed dictionaries of these; `RawRepresentable`
/// types whose raw value is one of these (stored as the raw value, so they can be indexed and compared); and any
/// other `Codable` value type (stored through its encoding). Any other type is refused when the schema is built
/// (``SchemaError/unsupportedAttributeType(entity:property:type:)``).
///
/// The initial value is the attribute's default: a migration that adds the attribute gives it to existing
/// objects. It is an autoclosure, so objects loaded from a store never evaluate it. A non-optional attribute
/// without one (`@Attribute var title: String`) does not compile, and the compiler says to give it a default or
/// make it optional.
///
/// A property whose type is a model, an optional model or an array of models is a relationship: declare it with
/// ``Relationship``. `@Attribute` on it draws a warning that says so, and building the schema refuses it
/// (``SchemaError/attributeHoldsModels(entity:property:type:)``).
@propertyWrapper
public struct Attribute<Value> {
    /// Where this wrapper's initial value was pushed, modulo 2¹⁶; its slot is `stamp - object's attribute frame`,
    /// in wrapping 16-bit arithmetic, which is exact for any slot below 2¹⁶ however deep the stack was. Two bytes a
    /// wrapper rather than four: 24 of a twelve-property model's bytes (``ModelObject``).
    @usableFromInline let stamp: UInt16

    /// Declares an attribute whose default is `wrappedValue`.
    ///
    /// - Parameters:
    ///   - wrappedValue: the default value.
    ///   - options: ``Schema/Attribute/Option/unique``, ``Schema/Attribute/Option/externalStorage``,
    ///     ``Schema/Attribute/Option/preserveValueOnDeletion``.
    ///   - originalName: the attribute's name in an earlier schema, when it was renamed.
    public init(wrappedValue: @autoclosure () -> Value, _ options: Schema.Attribute.Option...,
                originalName: String? = nil) {
        stamp = Self.push(wrappedValue, options: options, originalName: originalName)
    }

    /// Declares an optional attribute without options, whose default is `nil` (`@Attribute var eventDate: Date?`).
    public init() where Value: ExpressibleByNilLiteral {
        stamp = Self.push({ nil }, options: [], originalName: nil)
    }

    /// Declares an optional attribute whose default is `nil`.
    public init(_ options: Schema.Attribute.Option..., originalName: String? = nil) where Value: ExpressibleByNilLiteral {
        stamp = Self.push({ nil }, options: options, originalName: originalName)
    }

    /// Refused at compile time: a persisted property needs a default value or an optional type, the rule that
    /// lets a migration add the attribute to objects stored before it existed.
    @available(*, unavailable, message: "give the attribute a default value (`@Attribute var title = \"\"`) or make it optional (`@Attribute var title: String?`)")
    public init() { fatalError("unavailable") }

    /// Refused at compile time: a persisted property needs a default value or an optional type.
    @available(*, unavailable, message: "give the attribute a default value (`@Attribute var title = \"\"`) or make it optional (`@Attribute var title: String?`)")
    public init(_ options: Schema.Attribute.Option..., originalName: String? = nil) { fatalError("unavailable") }

    private static func push(_ initial: () -> Value, options: [Schema.Attribute.Option], originalName: String?) -> UInt16 {
        let stack = ConstructionStack.current
        let position = stack.attributeValues.count
        if stack.isMaterializing {
            // The engine fills in the row: the default is never evaluated, and no codec is needed.
            stack.attributeValues.append(.null)
            if stack.recordingDepth > 0 { stack.attributeInitials.append(MaterializationPlaceholder()) }
        } else {
            let value = initial()
            var stored = StoredValue.null
            if let codec = stack.codec(for: Value.self) {
                do { stored = try codec.encode(value) } catch {
                    // Reported by the object's base init, which knows the entity and the property's name.
                    stack.encodingFailures.append((stamp: position, error: error))
                }
            }
            stack.attributeValues.append(stored)
            if stack.recordingDepth > 0 { stack.attributeInitials.append(value) }
        }
        if stack.recordingDepth > 0 {
            stack.attributeDeclarations.append(AttributeDeclaration(
                wrapperType: Self.self, valueType: Value.self, codec: stack.codec(for: Value.self), options: options,
                originalName: originalName))
        }
        return UInt16(truncatingIfNeeded: position)
    }

    @available(*, unavailable, message: "@Attribute is only available on PersistentModel classes")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") } // swiftlint:disable:this unused_setter_value
    }

    /// The property's value, read from and written to the object's storage, with Observation and change tracking.
    ///
    /// Inlinable so that the wrapper's stamp is read from the model directly, not through the key path runtime.
    @inlinable
    public static subscript<Model: ModelObject>(
        _enclosingInstance model: Model,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Model, Self>
    ) -> Value {
        get { _$read(model, stamp: model[keyPath: storageKeyPath].stamp, wrappedKeyPath) }
        set { _$write(model, stamp: model[keyPath: storageKeyPath].stamp, newValue, wrappedKeyPath) }
    }

    /// Reads the attribute whose wrapper has `stamp`.
    @usableFromInline
    static func _$read<Model: ModelObject>(_ model: Model, stamp: UInt16,
                                           _ wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>) -> Value {
        let slot = Int(stamp &- model._$attributeFrame)
        model._$observationRegistrar.access(model, keyPath: wrappedKeyPath)
        model._$metadata.attributeNotifiers[slot].register(wrappedKeyPath)
        if model._$isPrototype { model._$probeLog.append(.init(property: .attribute(slot), keyPath: wrappedKeyPath)) }
        return model._$attributeValue(at: slot, as: Value.self)
    }

    /// Writes the attribute whose wrapper has `stamp`.
    @usableFromInline
    static func _$write<Model: ModelObject>(_ model: Model, stamp: UInt16, _ newValue: Value,
                                            _ wrappedKeyPath: ReferenceWritableKeyPath<Model, Value>) {
        let slot = Int(stamp &- model._$attributeFrame)
        let codec = model._$metadata.codec(at: slot, as: Value.self)
        let stored: StoredValue
        do { stored = try codec.encode(newValue) } catch {
            // Encoding a value held in memory fails only when a Codable type's own encode(to:) throws.
            preconditionFailure("\(Model.self).\(model._$metadata.attributes[slot].name) cannot be encoded: \(error)")
        }
        guard model._$attributeNeedsWrite(slot, stored) else { return }
        model._$withMutation(of: model, keyPath: wrappedKeyPath) {
            model._$writeAttribute(slot, stored)
        }
    }
}

// A property whose type is a model is a relationship. Swift lets an available initializer win over an unavailable
// one, so these cannot refuse the declaration at compile time: they are deprecated, which makes the compiler say
// what to write, and building the schema refuses the attribute
// (``SchemaError/attributeHoldsModels(entity:property:type:)``).

extension Attribute where Value: RelationshipValue & ExpressibleByNilLiteral {
    /// Not an attribute: an optional model is a to-one relationship (`@Relationship var folder: Folder?`).
    @available(*, deprecated, message: "a property whose type is a model, an optional model or an array of models is a relationship: declare it with @Relationship (`@Relationship var folder: Folder?`)")
    public init() {
        stamp = Self.push({ nil }, options: [], originalName: nil)
    }

    /// Not an attribute: an optional model is a to-one relationship (`@Relationship var folder: Folder?`).
    @available(*, deprecated, message: "a property whose type is a model, an optional model or an array of models is a relationship: declare it with @Relationship (`@Relationship var folder: Folder?`)")
    public init(_ options: Schema.Attribute.Option..., originalName: String? = nil) {
        stamp = Self.push({ nil }, options: options, originalName: originalName)
    }
}

extension Attribute where Value: RelationshipValue {
    /// Not an attribute: an array or optional of models is a relationship (`@Relationship var notes: [Note] = []`).
    @available(*, deprecated, message: "a property whose type is a model, an optional model or an array of models is a relationship: declare it with @Relationship (`@Relationship var notes: [Note] = []`)")
    public init(wrappedValue: @autoclosure () -> Value, _ options: Schema.Attribute.Option...,
                originalName: String? = nil) {
        stamp = Self.push(wrappedValue, options: options, originalName: originalName)
    }
}

extension Attribute where Value: PersistentModel {
    /// Not an attribute: a model is the target of a to-one relationship (`@Relationship var folder: Folder?`).
    @available(*, deprecated, message: "a property whose type is a model, an optional model or an array of models is a relationship: declare it with @Relationship (`@Relationship var folder: Folder?`)")
    public init(wrappedValue: @autoclosure () -> Value, _ options: Schema.Attribute.Option...,
                originalName: String? = nil) {
        stamp = Self.push(wrappedValue, options: options, originalName: originalName)
    }
}

/// Marks a stored property of a model as never persisted (SwiftData's `@Transient`).
///
/// ```swift
/// @Transient var isExpanded = false      // UI state, never persisted
/// ```
///
/// Every stored property of a model is either persisted (``Attribute``, ``Relationship``) or declared transient
/// with this wrapper: building a schema refuses a stored property with neither
/// (``SchemaError/storedPropertyWithoutWrapper(entity:property:)``), because SwiftData would persist it. A
/// transient value lives in the object only: it is not saved, changing it is not a change of the object, and it
/// starts at its initial value whenever the object is loaded anew. Computed properties and `lazy` properties are
/// derived state and need no wrapper.
@propertyWrapper
public struct Transient<Value> {
    /// The property's value, held by the object alone.
    public var wrappedValue: Value

    /// Declares a transient property whose initial value is `wrappedValue`, evaluated each time an object is
    /// created, including when one is loaded from a store.
    public init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
}

/// What a wrapper pushes instead of its default while the engine materializes a stored row.
struct MaterializationPlaceholder {}
