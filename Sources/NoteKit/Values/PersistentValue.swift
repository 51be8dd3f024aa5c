#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A Swift type that converts to and from a ``StoredValue`` without going through `Codable`.
///
/// The standard scalar types conform, and so do optionals, arrays and string-keyed dictionaries of conforming
/// types. An attribute of any other type is stored through its `RawRepresentable` raw value or its `Codable`
/// encoding (see ``Attribute``); conform a type of your own only when you want it stored as one of these
/// scalar kinds.
public protocol PersistentValue {
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
    public static var attributeType: Schema.AttributeType { .bool }
    public var storedValue: StoredValue { .bool(self) }
    public init(storedValue: StoredValue) throws {
        guard case .bool(let v) = storedValue else { throw storedValue.mismatch("bool") }
        self = v
    }
}

extension String: PersistentValue {
    public static var attributeType: Schema.AttributeType { .string }
    public var storedValue: StoredValue { .string(self) }
    public init(storedValue: StoredValue) throws {
        guard case .string(let v) = storedValue else { throw storedValue.mismatch("string") }
        self = v
    }
}

extension Double: PersistentValue {
    public static var attributeType: Schema.AttributeType { .double }
    public var storedValue: StoredValue { .double(self) }
    public init(storedValue: StoredValue) throws {
        switch storedValue {
        case .double(let v): self = v
        case .int(let v): self = Double(v)
        case .uint(let v): self = Double(v)
        default: throw storedValue.mismatch("double")
        }
    }
}

extension Float: PersistentValue {
    public static var attributeType: Schema.AttributeType { .float }
    public var storedValue: StoredValue { .double(Double(self)) }
    public init(storedValue: StoredValue) throws { self = Float(try Double(storedValue: storedValue)) }
}

extension Date: PersistentValue {
    public static var attributeType: Schema.AttributeType { .date }
    public var storedValue: StoredValue { .date(self) }
    public init(storedValue: StoredValue) throws {
        guard case .date(let v) = storedValue else { throw storedValue.mismatch("date") }
        self = v
    }
}

extension Data: PersistentValue {
    public static var attributeType: Schema.AttributeType { .data }
    public var storedValue: StoredValue { .data(self) }
    public init(storedValue: StoredValue) throws {
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
    public static var attributeType: Schema.AttributeType { .uuid }
    public var storedValue: StoredValue { .uuid(self) }
    public init(storedValue: StoredValue) throws {
        guard case .uuid(let v) = storedValue else { throw storedValue.mismatch("uuid") }
        self = v
    }
}

extension URL: PersistentValue {
    public static var attributeType: Schema.AttributeType { .url }
    public var storedValue: StoredValue { .string(absoluteString) }
    public init(storedValue: StoredValue) throws {
        guard case .string(let v) = storedValue else { throw storedValue.mismatch("string (URL)") }
        guard let url = URL(string: v) else { throw StoredValueError.invalidURL(v) }
        self = url
    }
}

extension Decimal: PersistentValue {
    public static var attributeType: Schema.AttributeType { .decimal }
    public var storedValue: StoredValue { .decimal(self) }
    public init(storedValue: StoredValue) throws {
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
    public static var attributeType: Schema.AttributeType { .int }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int8: PersistentValue {
    public static var attributeType: Schema.AttributeType { .int8 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int16: PersistentValue {
    public static var attributeType: Schema.AttributeType { .int16 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int32: PersistentValue {
    public static var attributeType: Schema.AttributeType { .int32 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension Int64: PersistentValue {
    public static var attributeType: Schema.AttributeType { .int64 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt: PersistentValue {
    public static var attributeType: Schema.AttributeType { .uint }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt8: PersistentValue {
    public static var attributeType: Schema.AttributeType { .uint8 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt16: PersistentValue {
    public static var attributeType: Schema.AttributeType { .uint16 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt32: PersistentValue {
    public static var attributeType: Schema.AttributeType { .uint32 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}
extension UInt64: PersistentValue {
    public static var attributeType: Schema.AttributeType { .uint64 }
    public var storedValue: StoredValue { integerStoredValue }
    public init(storedValue: StoredValue) throws { try self.init(integerStoredValue: storedValue) }
}

extension Optional: PersistentValue where Wrapped: PersistentValue {
    public static var attributeType: Schema.AttributeType { .optional(Wrapped.attributeType) }
    public var storedValue: StoredValue { self?.storedValue ?? .null }
    public init(storedValue: StoredValue) throws {
        if case .null = storedValue { self = nil } else { self = try Wrapped(storedValue: storedValue) }
    }
}

extension Array: PersistentValue where Element: PersistentValue {
    public static var attributeType: Schema.AttributeType { .array(Element.attributeType) }
    public var storedValue: StoredValue { .array(map(\.storedValue)) }
    public init(storedValue: StoredValue) throws {
        guard case .array(let items) = storedValue else { throw storedValue.mismatch("array") }
        self = try items.map(Element.init(storedValue:))
    }
}

extension Dictionary: PersistentValue where Key == String, Value: PersistentValue {
    public static var attributeType: Schema.AttributeType { .dictionary(Value.attributeType) }
    public var storedValue: StoredValue { .dictionary(mapValues(\.storedValue)) }
    public init(storedValue: StoredValue) throws {
        guard case .dictionary(let items) = storedValue else { throw storedValue.mismatch("dictionary") }
        self = try items.mapValues(Value.init(storedValue:))
    }
}
