#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A Swift type that converts to and from a ``StoredValue`` without going through `Codable`: the standard scalar
/// types, and optionals, arrays and string-keyed dictionaries of them.
///
/// NoteKit's own (`package`): it adds no public member to the standard types. An attribute of any other type is
/// stored through its `RawRepresentable` raw value or its `Codable` encoding (see ``Attribute``).
package protocol PersistentValue {
    /// How the schema describes this type.
    static var attributeType: Schema.AttributeType { get }
    /// The stored form of this value.
    var storedValue: StoredValue { get }
    /// Restores a value from its stored form.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` when `storedValue` is of another kind.
    init(storedValue: StoredValue) throws
}

/// A stored value that does not fit the Swift type asked of it.
public enum StoredValueError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The value is of kind `found`; the attribute's type expects `expected`.
    case typeMismatch(expected: String, found: String)
    /// An integer does not fit the attribute's width.
    case integerOverflow(value: String, type: String)
    /// A string is not a valid URL.
    case invalidURL(String)
    /// External data could not be read.
    case externalDataUnreadable(name: String, reason: String)

    /// A sentence naming the kinds, the value or the blob concerned (`expected a stored date, found a string`).
    public var description: String {
        switch self {
        case let .typeMismatch(expected, found): "expected a stored \(expected), found a \(found)"
        case let .integerOverflow(value, type): "the integer \(value) does not fit in \(type)"
        case let .invalidURL(string): "\(String(reflecting: string)) is not a valid URL"
        case let .externalDataUnreadable(name, reason): "external data \(name) cannot be read: \(reason)"
        }
    }
}

extension StoredValue {
    @usableFromInline func mismatch(_ expected: String) -> StoredValueError {
        .typeMismatch(expected: expected, found: kindName)
    }
}

extension Bool: PersistentValue {
    /// A `Bool` attribute is ``Schema/AttributeType/bool``.
    package static var attributeType: Schema.AttributeType { .bool }
    /// A ``StoredValue/bool(_:)``.
    package var storedValue: StoredValue { .bool(self) }
    /// Reads a ``StoredValue/bool(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        guard case .bool(let v) = storedValue else { throw storedValue.mismatch("bool") }
        self = v
    }
}

extension String: PersistentValue {
    /// A `String` attribute is ``Schema/AttributeType/string``.
    package static var attributeType: Schema.AttributeType { .string }
    /// A ``StoredValue/string(_:)``.
    package var storedValue: StoredValue { .string(self) }
    /// Reads a ``StoredValue/string(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        guard case .string(let v) = storedValue else { throw storedValue.mismatch("string") }
        self = v
    }
}

extension Double: PersistentValue {
    /// A `Double` attribute is ``Schema/AttributeType/double``.
    package static var attributeType: Schema.AttributeType { .double }
    /// A ``StoredValue/double(_:)``.
    package var storedValue: StoredValue { .double(self) }
    /// Reads a ``StoredValue/double(_:)``, or an integer converted to the nearest `Double` (a migration that widened
    /// the attribute leaves integers in the store).
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        switch storedValue {
        case .double(let v): self = v
        case .int(let v): self = Double(v)
        case .uint(let v): self = Double(v)
        default: throw storedValue.mismatch("double")
        }
    }
}

extension Float: PersistentValue {
    /// A `Float` attribute is ``Schema/AttributeType/float``.
    package static var attributeType: Schema.AttributeType { .float }
    /// A ``StoredValue/double(_:)``, widened exactly.
    package var storedValue: StoredValue { .double(Double(self)) }
    /// Reads what `Double(storedValue:)` reads, rounded to the nearest `Float`.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not a number.
    package init(storedValue: StoredValue) throws { self = Float(try Double(storedValue: storedValue)) }
}

extension Date: PersistentValue {
    /// A `Date` attribute is ``Schema/AttributeType/date``.
    package static var attributeType: Schema.AttributeType { .date }
    /// A ``StoredValue/date(_:)``.
    package var storedValue: StoredValue { .date(self) }
    /// Reads a ``StoredValue/date(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        guard case .date(let v) = storedValue else { throw storedValue.mismatch("date") }
        self = v
    }
}

extension Data: PersistentValue {
    /// A `Data` attribute is ``Schema/AttributeType/data``.
    package static var attributeType: Schema.AttributeType { .data }
    /// A ``StoredValue/data(_:)``, inline; a store moves an `.externalStorage` attribute's bytes out itself.
    package var storedValue: StoredValue { .data(self) }
    /// Reads ``StoredValue/data(_:)``, or loads ``StoredValue/external(_:)`` bytes from the store.
    ///
    /// - Throws: ``StoredValueError/externalDataUnreadable(name:reason:)`` when external bytes cannot be read,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    /// - Complexity: reading external data reads its file, once per value.
    package init(storedValue: StoredValue) throws {
        switch storedValue {
        case .data(let v): self = v
        case .external(let blob):
            do { self = try blob.load() } catch let error as StoredValueError {
                throw error   // the store's loader already named the blob
            } catch {
                throw StoredValueError.externalDataUnreadable(name: blob.name, reason: "\(error)")
            }
        default: throw storedValue.mismatch("data")
        }
    }
}

extension UUID: PersistentValue {
    /// A `UUID` attribute is ``Schema/AttributeType/uuid``.
    package static var attributeType: Schema.AttributeType { .uuid }
    /// A ``StoredValue/uuid(_:)``.
    package var storedValue: StoredValue { .uuid(self) }
    /// Reads a ``StoredValue/uuid(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        guard case .uuid(let v) = storedValue else { throw storedValue.mismatch("uuid") }
        self = v
    }
}

extension URL: PersistentValue {
    /// A `URL` attribute is ``Schema/AttributeType/url``.
    package static var attributeType: Schema.AttributeType { .url }
    /// A ``StoredValue/string(_:)`` holding the URL's `absoluteString`.
    package var storedValue: StoredValue { .string(absoluteString) }
    /// Reads a URL from a ``StoredValue/string(_:)``.
    ///
    /// - Throws: ``StoredValueError/invalidURL(_:)`` when the string is not a URL,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        guard case .string(let v) = storedValue else { throw storedValue.mismatch("string (URL)") }
        guard let url = URL(string: v) else { throw StoredValueError.invalidURL(v) }
        self = url
    }
}

extension Decimal: PersistentValue {
    /// A `Decimal` attribute is ``Schema/AttributeType/decimal``.
    package static var attributeType: Schema.AttributeType { .decimal }
    /// A ``StoredValue/decimal(_:)``, exact.
    package var storedValue: StoredValue { .decimal(self) }
    /// Reads a ``StoredValue/decimal(_:)``, or an integer converted exactly.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` for any other kind.
    package init(storedValue: StoredValue) throws {
        switch storedValue {
        case .decimal(let v): self = v
        case .int(let v): self = Decimal(v)
        case .uint(let v): self = Decimal(v)
        default: throw storedValue.mismatch("decimal")
        }
    }
}

extension FixedWidthInteger {
    /// Integers up to 64 bits wide are stored as `.int`, but `UInt` and `UInt64` as `.uint` (their values above
    /// `Int64.max` do not fit in `.int`).
    var integerStoredValue: StoredValue {
        Self.isSigned || Self.bitWidth < 64 ? .int(Int64(self)) : .uint(UInt64(self))
    }

    /// The integer `storedValue` holds, from either `.int` or `.uint`.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when it does not fit in `Self`;
    ///   ``StoredValueError/typeMismatch(expected:found:)`` when it holds no integer.
    init(integerStoredValue storedValue: StoredValue) throws {
        switch storedValue {
        case .int(let v):
            guard let x = Self(exactly: v) else {
                throw StoredValueError.integerOverflow(value: String(v), type: String(describing: Self.self))
            }
            self = x
        case .uint(let v):
            guard let x = Self(exactly: v) else {
                throw StoredValueError.integerOverflow(value: String(v), type: String(describing: Self.self))
            }
            self = x
        default: throw storedValue.mismatch("int")
        }
    }
}

extension Int: PersistentValue {
    /// An `Int` attribute is ``Schema/AttributeType/int``.
    package static var attributeType: Schema.AttributeType { .int }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `Int` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int8: PersistentValue {
    /// An `Int8` attribute is ``Schema/AttributeType/int8``.
    package static var attributeType: Schema.AttributeType { .int8 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `Int8` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int16: PersistentValue {
    /// An `Int16` attribute is ``Schema/AttributeType/int16``.
    package static var attributeType: Schema.AttributeType { .int16 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `Int16` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int32: PersistentValue {
    /// An `Int32` attribute is ``Schema/AttributeType/int32``.
    package static var attributeType: Schema.AttributeType { .int32 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `Int32` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int64: PersistentValue {
    /// An `Int64` attribute is ``Schema/AttributeType/int64``.
    package static var attributeType: Schema.AttributeType { .int64 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `Int64` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt: PersistentValue {
    /// A `UInt` attribute is ``Schema/AttributeType/uint``.
    package static var attributeType: Schema.AttributeType { .uint }
    /// A ``StoredValue/uint(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `UInt` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt8: PersistentValue {
    /// A `UInt8` attribute is ``Schema/AttributeType/uint8``.
    package static var attributeType: Schema.AttributeType { .uint8 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `UInt8` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt16: PersistentValue {
    /// A `UInt16` attribute is ``Schema/AttributeType/uint16``.
    package static var attributeType: Schema.AttributeType { .uint16 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `UInt16` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt32: PersistentValue {
    /// A `UInt32` attribute is ``Schema/AttributeType/uint32``.
    package static var attributeType: Schema.AttributeType { .uint32 }
    /// A ``StoredValue/int(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `UInt32` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt64: PersistentValue {
    /// A `UInt64` attribute is ``Schema/AttributeType/uint64``.
    package static var attributeType: Schema.AttributeType { .uint64 }
    /// A ``StoredValue/uint(_:)``.
    package var storedValue: StoredValue { integerStoredValue }
    /// Reads a ``StoredValue/int(_:)`` or ``StoredValue/uint(_:)`` that fits `UInt64` exactly.
    ///
    /// - Throws: ``StoredValueError/integerOverflow(value:type:)`` when the value does not fit,
    ///   ``StoredValueError/typeMismatch(expected:found:)`` for a kind that is not an integer.
    package init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}

extension Optional: PersistentValue where Wrapped: PersistentValue {
    /// An optional attribute is ``Schema/AttributeType/optional(_:)`` of the wrapped type.
    package static var attributeType: Schema.AttributeType { .optional(Wrapped.attributeType) }
    /// The wrapped value's stored form, or ``StoredValue/null`` for `nil`.
    package var storedValue: StoredValue { self?.storedValue ?? .null }
    /// `nil` from ``StoredValue/null``, otherwise the wrapped type read from the value.
    ///
    /// - Throws: what the wrapped type's `init(storedValue:)` throws.
    package init(storedValue: StoredValue) throws {
        if case .null = storedValue { self = nil } else { self = try Wrapped(storedValue: storedValue) }
    }
}

extension Array: PersistentValue where Element: PersistentValue {
    /// An array attribute is ``Schema/AttributeType/array(_:)`` of the element type.
    package static var attributeType: Schema.AttributeType { .array(Element.attributeType) }
    /// A ``StoredValue/array(_:)`` of the elements' stored forms, in order.
    package var storedValue: StoredValue {
        // A closure, not `map(\.storedValue)`: in this generic context a key path would be instantiated, its generic
        // arguments resolved by demangling, on every call.
        .array(map { $0.storedValue })
    }
    /// Reads every element of a ``StoredValue/array(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` when the value is not an array, or what reading
    ///   an element throws.
    /// - Complexity: O(elements).
    package init(storedValue: StoredValue) throws {
        guard case .array(let items) = storedValue else { throw storedValue.mismatch("array") }
        self = try items.map(Element.init(storedValue:))
    }
}

extension Dictionary: PersistentValue where Key == String, Value: PersistentValue {
    /// A dictionary attribute is ``Schema/AttributeType/dictionary(_:)`` of the value type.
    package static var attributeType: Schema.AttributeType { .dictionary(Value.attributeType) }
    /// A ``StoredValue/dictionary(_:)`` of the values' stored forms, by key.
    package var storedValue: StoredValue { .dictionary(mapValues { $0.storedValue }) } // a closure: see Array's
    /// Reads every value of a ``StoredValue/dictionary(_:)``.
    ///
    /// - Throws: ``StoredValueError/typeMismatch(expected:found:)`` when the value is not a dictionary, or what
    ///   reading a value throws.
    /// - Complexity: O(entries).
    package init(storedValue: StoredValue) throws {
        guard case .dictionary(let items) = storedValue else { throw storedValue.mismatch("dictionary") }
        self = try items.mapValues(Value.init(storedValue:))
    }
}
