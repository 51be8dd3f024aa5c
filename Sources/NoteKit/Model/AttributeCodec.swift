#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Converts one attribute's Swift values to and from ``StoredValue``.
///
/// One codec exists per attribute of a model type, chosen once when the type's metadata is built: a direct
/// conversion for ``PersistentValue`` types, a raw-value conversion for `RawRepresentable` types, and the
/// `Codable` encoding for other value types. The typed class lets a property getter convert with one
/// indirect call and no dynamic cast.
protocol AnyAttributeCodec: AnyObject, Sendable {
    /// How the schema describes the attribute's type.
    var type: Schema.AttributeType { get }
    func encodeAny(_ value: Any) throws -> StoredValue
    func decodeAny(_ stored: StoredValue) throws -> Any
}

/// The codec of an attribute whose Swift type is `Value`.
///
/// `@unchecked Sendable`: the two closures are pure conversions that capture only metatypes and other codecs.
final class AttributeCodec<Value>: AnyAttributeCodec, @unchecked Sendable {
    let type: Schema.AttributeType
    let encode: (Value) throws -> StoredValue
    let decode: (StoredValue) throws -> Value

    init(type: Schema.AttributeType,
         encode: @escaping (Value) throws -> StoredValue,
         decode: @escaping (StoredValue) throws -> Value) {
        self.type = type
        self.encode = encode
        self.decode = decode
    }

    func encodeAny(_ value: Any) throws -> StoredValue {
        guard let typed = value as? Value else {
            throw StoredValueError.typeMismatch(expected: String(describing: Value.self),
                                                found: String(describing: Swift.type(of: value)))
        }
        return try encode(typed)
    }

    func decodeAny(_ stored: StoredValue) throws -> Any { try decode(stored) }
}

/// A `RawRepresentable` value whose raw value does not name a case.
struct InvalidRawValueError: Error, CustomStringConvertible {
    let typeName: String
    let rawValue: StoredValue
    var description: String { "\(rawValue) is not a valid raw value of \(typeName)" }
}

enum AttributeCodecFactory {
    /// The codec for `Value`, or nil when NoteKit cannot store that type.
    static func make<Value>(_ type: Value.Type) -> AttributeCodec<Value>? {
        if let common = common(type) { return common as? AttributeCodec<Value> }
        return madeByCasting(type)
    }

    /// The codec of one of the value types most attributes have, told by identity. Finding that a type conforms to
    /// `PersistentValue` takes a cast, and the first cast of each type scans every protocol conformance record of the
    /// process (most of the codecs' share of building a schema at start-up); these are known to conform. The codec
    /// is the one ``madeByCasting(_:)`` makes for the type.
    static func common<Value>(_ type: Value.Type) -> AnyAttributeCodec? {
        switch ObjectIdentifier(type) {
        case ObjectIdentifier(String.self): direct(String.self)
        case ObjectIdentifier(Int.self): direct(Int.self)
        case ObjectIdentifier(Bool.self): direct(Bool.self)
        case ObjectIdentifier(Double.self): direct(Double.self)
        case ObjectIdentifier(Date.self): direct(Date.self)
        case ObjectIdentifier(Data.self): direct(Data.self)
        case ObjectIdentifier(UUID.self): direct(UUID.self)
        case ObjectIdentifier(URL.self): direct(URL.self)
        case ObjectIdentifier(String?.self): direct(String?.self)
        case ObjectIdentifier(Int?.self): direct(Int?.self)
        case ObjectIdentifier(Bool?.self): direct(Bool?.self)
        case ObjectIdentifier(Double?.self): direct(Double?.self)
        case ObjectIdentifier(Date?.self): direct(Date?.self)
        case ObjectIdentifier(Data?.self): direct(Data?.self)
        case ObjectIdentifier(UUID?.self): direct(UUID?.self)
        case ObjectIdentifier(URL?.self): direct(URL?.self)
        case ObjectIdentifier([String].self): direct([String].self)
        default: nil
        }
    }

    /// The codec for `Value` found by casting it to the protocols that make a type storable, or nil.
    static func madeByCasting<Value>(_ type: Value.Type) -> AttributeCodec<Value>? {
        if let persistent = Value.self as? any PersistentValue.Type {
            guard !isNestedOptional(persistent.attributeType) else { return nil }
            return direct(persistent) as? AttributeCodec<Value>
        }
        if let container = Value.self as? any ContainerAttributeValue.Type {
            return container.makeCodec() as? AttributeCodec<Value>
        }
        if let raw = Value.self as? any RawRepresentable.Type, let codec = rawRepresentable(raw) {
            return codec as? AttributeCodec<Value>
        }
        if let codable = Value.self as? any Codable.Type {
            return coded(codable) as? AttributeCodec<Value>
        }
        return nil
    }

    private static func isNestedOptional(_ type: Schema.AttributeType) -> Bool {
        switch type {
        case .optional(let wrapped): wrapped.isOptional || isNestedOptional(wrapped)
        case .array(let element): isNestedOptional(element)
        case .dictionary(let value): isNestedOptional(value)
        default: false
        }
    }

    private static func direct<P: PersistentValue>(_ type: P.Type) -> AnyAttributeCodec {
        AttributeCodec<P>(type: P.attributeType, encode: { $0.storedValue }, decode: { try P(storedValue: $0) })
    }

    private static func rawRepresentable<R: RawRepresentable>(_ type: R.Type) -> AnyAttributeCodec? {
        guard let rawType = R.RawValue.self as? any PersistentValue.Type else { return nil }
        let typeName = typeName(R.self)
        return AttributeCodec<R>(
            type: .rawRepresentable(typeName: typeName, rawType: rawType.attributeType),
            encode: { value in
                // The raw type is known to conform; the cast only recovers the conformance statically lost.
                guard let raw = value.rawValue as? any PersistentValue else {
                    throw StoredValueError.typeMismatch(expected: "PersistentValue", found: "\(R.RawValue.self)")
                }
                return raw.storedValue
            },
            decode: { stored in
                guard let raw = try rawType.init(storedValue: stored) as? R.RawValue,
                      let value = R(rawValue: raw) else {
                    throw InvalidRawValueError(typeName: typeName, rawValue: stored)
                }
                return value
            })
    }

    private static func coded<C: Codable>(_ type: C.Type) -> AnyAttributeCodec {
        AttributeCodec<C>(
            type: .codable(typeName: typeName(C.self)),
            encode: { try StoredValueEncoder().encode($0) },
            decode: { try StoredValueDecoder().decode(C.self, from: $0) })
    }
}

/// Optionals, arrays and string-keyed dictionaries of storable types that are not ``PersistentValue`` themselves
/// (an optional enum, an array of `Codable` structs): their codec wraps the element's codec.
protocol ContainerAttributeValue {
    static func makeCodec() -> AnyAttributeCodec?
    /// The type of the values it contains.
    static var elementType: Any.Type { get }
}

extension Optional: ContainerAttributeValue {
    static var elementType: Any.Type { Wrapped.self }

    static func makeCodec() -> AnyAttributeCodec? {
        guard !(Wrapped.self is any OptionalMarker.Type), let inner = AttributeCodecFactory.make(Wrapped.self) else {
            return nil
        }
        return AttributeCodec<Wrapped?>(
            type: .optional(inner.type),
            encode: { value in try value.map(inner.encode) ?? .null },
            decode: { stored in stored.isNull ? nil : try inner.decode(stored) })
    }
}

extension Array: ContainerAttributeValue {
    static var elementType: Any.Type { Element.self }

    static func makeCodec() -> AnyAttributeCodec? {
        guard let inner = AttributeCodecFactory.make(Element.self) else { return nil }
        return AttributeCodec<[Element]>(
            type: .array(inner.type),
            encode: { .array(try $0.map(inner.encode)) },
            decode: { stored in
                guard case .array(let items) = stored else { throw stored.mismatch("array") }
                return try items.map(inner.decode)
            })
    }
}

extension Dictionary: ContainerAttributeValue where Key == String {
    static var elementType: Any.Type { Value.self }

    static func makeCodec() -> AnyAttributeCodec? {
        guard let inner = AttributeCodecFactory.make(Value.self) else { return nil }
        return AttributeCodec<[String: Value]>(
            type: .dictionary(inner.type),
            encode: { .dictionary(try $0.mapValues(inner.encode)) },
            decode: { stored in
                guard case .dictionary(let items) = stored else { throw stored.mismatch("dictionary") }
                return try items.mapValues(inner.decode)
            })
    }
}

/// Recognises optionals through an existential: `Optional<Optional<…>>` (which has no unambiguous stored form)
/// and `nil` constants in predicates.
protocol OptionalMarker {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalMarker {
    var wrappedAny: Any? { self.map { $0 as Any } }
}
