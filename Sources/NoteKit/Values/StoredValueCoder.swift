#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Public API

/// Converts `Encodable` values into ``StoredValue`` trees, the way `JSONEncoder` converts them into JSON.
///
/// Keyed containers become ``StoredValue/dictionary(_:)``, unkeyed containers ``StoredValue/array(_:)`` and single
/// values the matching scalar case:
///
/// - `Bool` is `.bool` and `String` is `.string`; `nil` is `.null`.
/// - `Int`, `Int8` … `Int64` and `UInt8` … `UInt32` are `.int`; `UInt` and `UInt64` are `.uint`, so no value is
///   lost. `Int128` and `UInt128` are `.int` or `.uint` when they fit 64 bits.
/// - `Double` is `.double`, and `Float` widens to `.double` exactly.
/// - `Date`, `Data`, `UUID` and `Decimal` keep their typed cases (`.date`, `.data`, `.uuid`, `.decimal`), and `URL`
///   is `.string` of its `absoluteString`: these types are recognised before their own `Codable` implementations
///   run, as `JSONEncoder` does for `Date`, `Data`, `URL` and `Decimal`.
///
/// A key encoded with `encodeIfPresent` and a `nil` value is left out of its dictionary, as in JSON; an explicit
/// `encodeNil` stores `.null`. Dictionaries keyed by `String` or `Int` encode as `.dictionary` with string keys
/// (`Int` keys as their decimal text), like `JSONEncoder`. ``StoredValueDecoder`` reverses the conversion.
package struct StoredValueEncoder: Sendable {
    /// Contextual information handed to the values being encoded, as `Encoder.userInfo`.
    package var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder with an empty `userInfo`.
    package init() {}

    /// Encodes a value into a stored value tree.
    ///
    /// - Parameter value: the value to encode.
    /// - Returns: the value's stored form: a dictionary for keyed encodings, an array for unkeyed ones, a scalar
    ///   case for single values.
    /// - Throws: `EncodingError.invalidValue` when `value` encodes nothing at all (its `encode(to:)` asks for no
    ///   container) or contains an `Int128`/`UInt128` that does not fit 64 bits; otherwise whatever the value's own
    ///   `encode(to:)` throws.
    package func encode<T: Encodable>(_ value: T) throws -> StoredValue {
        guard let result = try encodeStoredValue(value, codingPath: [], userInfo: userInfo) else {
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return result
    }
}

/// Converts ``StoredValue`` trees back into `Decodable` values, the way `JSONDecoder` reads JSON.
///
/// It reads what ``StoredValueEncoder`` writes, and also accepts the other numeric cases where a number is expected:
///
/// - Integers of every width accept `.int` and `.uint`, as long as the value fits the type exactly.
/// - `Double` and `Float` accept `.double`, `.int` and `.uint`; `Decimal` accepts `.decimal`, `.int` and `.uint`.
/// - `Data` accepts `.data`, and `.external`, whose bytes it loads with ``ExternalData/load()``.
/// - `URL` accepts a `.string` holding a valid URL.
///
/// `decodeNil(forKey:)` is `true` both for a key holding `.null` and for a missing key, so `decodeIfPresent` reads
/// either as `nil`.
package struct StoredValueDecoder: Sendable {
    /// Contextual information handed to the values being decoded, as `Decoder.userInfo`.
    package var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder with an empty `userInfo`.
    package init() {}

    /// Decodes a value of the given type from a stored value tree.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - value: the stored form, usually produced by ``StoredValueEncoder/encode(_:)``.
    /// - Returns: the decoded value.
    /// - Throws: `DecodingError`, with the coding path of the offending value:
    ///   `typeMismatch` when a value is of the wrong kind, `valueNotFound` when it is `.null` (or an unkeyed
    ///   container has run out) where a value is required, `keyNotFound` when a required key is missing, and
    ///   `dataCorrupted` when an integer does not fit its type, a `Float` would overflow, a string is not a valid
    ///   URL or external data cannot be loaded (the loader's error is the `underlyingError`). Errors thrown by the
    ///   type's own `init(from:)` pass through unchanged.
    package func decode<T: Decodable>(_ type: T.Type, from value: StoredValue) throws -> T {
        try decodeStoredValue(type, from: value, codingPath: [], userInfo: userInfo)
    }
}

// MARK: - Coding keys

/// The keys the coder makes up itself: array indexes and `super`.
private struct StoredValueCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    /// The key of an element of an unkeyed container, named as Foundation's coders name it.
    init(index: Int) {
        self.stringValue = "Index \(index)"
        self.intValue = index
    }

    /// The key `superEncoder()` and `superDecoder()` use.
    static let `super` = StoredValueCodingKey(stringValue: "super")
}

// MARK: - Encoding

/// Encodes `value` at `codingPath`: the typed cases for the types that have one, otherwise through its own
/// `encode(to:)`. Returns `nil` when the value encoded nothing.
private func encodeStoredValue<T: Encodable>(
    _ value: T, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]
) throws -> StoredValue? {
    // Exact type checks: a dynamic `as?` cast would also unwrap optionals and look through existentials.
    if T.self == Date.self { return .date(value as! Date) }
    if T.self == Data.self { return .data(value as! Data) }
    if T.self == UUID.self { return .uuid(value as! UUID) }
    if T.self == URL.self { return .string((value as! URL).absoluteString) }
    if T.self == Decimal.self { return .decimal(value as! Decimal) }
    let encoder = StoredValueEncoderImpl(codingPath: codingPath, userInfo: userInfo)
    try value.encode(to: encoder)
    return encoder.storage?.resolved
}

/// Encodes a value nested in a container; a value that encoded nothing becomes an empty dictionary, as in JSON.
private func encodeNestedStoredValue<T: Encodable>(
    _ value: T, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]
) throws -> StoredValue {
    try encodeStoredValue(value, codingPath: codingPath, userInfo: userInfo) ?? .dictionary([:])
}

/// The stored form of a 128-bit integer, which must fit 64 bits.
private func storedWideInteger<I: BinaryInteger>(_ value: I, codingPath: [any CodingKey]) throws -> StoredValue {
    if let narrow = Int64(exactly: value) { return .int(narrow) }
    if let narrow = UInt64(exactly: value) { return .uint(narrow) }
    throw EncodingError.invalidValue(value, EncodingError.Context(
        codingPath: codingPath, debugDescription: "\(value) does not fit in 64 bits, the widest stored integer."))
}

/// A value being encoded: finished, or a container that nested containers and encoders may still write into.
private enum PendingStoredValue {
    case value(StoredValue)
    case array(EncodedArrayStorage)
    case dictionary(EncodedDictionaryStorage)
    /// The output of a `superEncoder()`, read when the tree is finished.
    case encoder(StoredValueEncoderImpl)

    /// The finished value.
    var resolved: StoredValue {
        switch self {
        case .value(let value): value
        case .array(let storage): .array(storage.items.map(\.resolved))
        case .dictionary(let storage): .dictionary(storage.items.mapValues(\.resolved))
        case .encoder(let encoder): encoder.storage?.resolved ?? .dictionary([:])
        }
    }
}

/// The elements of an unkeyed container, shared by reference with the containers nested in it.
private final class EncodedArrayStorage {
    var items: [PendingStoredValue] = []
}

/// The entries of a keyed container, shared by reference with the containers nested in it.
private final class EncodedDictionaryStorage {
    var items: [String: PendingStoredValue] = [:]
}

private final class StoredValueEncoderImpl: Encoder {
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]
    /// What has been encoded at this path so far.
    var storage: PendingStoredValue?

    init(codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let dictionary: EncodedDictionaryStorage
        switch storage {
        case .dictionary(let existing)?:
            dictionary = existing
        case nil:
            dictionary = EncodedDictionaryStorage()
            storage = .dictionary(dictionary)
        default:
            preconditionFailure(
                "Attempt to push a keyed encoding container where a value of another kind was already encoded.")
        }
        return KeyedEncodingContainer(
            StoredValueKeyedEncodingContainer<Key>(storage: dictionary, codingPath: codingPath, userInfo: userInfo))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: EncodedArrayStorage
        switch storage {
        case .array(let existing)?:
            array = existing
        case nil:
            array = EncodedArrayStorage()
            storage = .array(array)
        default:
            preconditionFailure(
                "Attempt to push an unkeyed encoding container where a value of another kind was already encoded.")
        }
        return StoredValueUnkeyedEncodingContainer(storage: array, codingPath: codingPath, userInfo: userInfo)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        StoredValueSingleValueEncodingContainer(encoder: self)
    }
}

private struct StoredValueKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: EncodedDictionaryStorage
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    private func set(_ value: StoredValue, for key: Key) {
        storage.items[key.stringValue] = .value(value)
    }

    func encodeNil(forKey key: Key) throws { set(.null, for: key) }
    func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), for: key) }
    func encode(_ value: String, forKey key: Key) throws { set(.string(value), for: key) }
    func encode(_ value: Double, forKey key: Key) throws { set(.double(value), for: key) }
    func encode(_ value: Float, forKey key: Key) throws { set(.double(Double(value)), for: key) }
    func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), for: key) }
    func encode(_ value: UInt, forKey key: Key) throws { set(.uint(UInt64(value)), for: key) }
    func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: UInt32, forKey key: Key) throws { set(.int(Int64(value)), for: key) }
    func encode(_ value: UInt64, forKey key: Key) throws { set(.uint(value), for: key) }

    func encode(_ value: Int128, forKey key: Key) throws {
        set(try storedWideInteger(value, codingPath: codingPath + [key]), for: key)
    }

    func encode(_ value: UInt128, forKey key: Key) throws {
        set(try storedWideInteger(value, codingPath: codingPath + [key]), for: key)
    }

    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encodeNestedStoredValue(value, codingPath: codingPath + [key], userInfo: userInfo), for: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested: EncodedDictionaryStorage
        if case .dictionary(let existing)? = storage.items[key.stringValue] {
            nested = existing
        } else {
            nested = EncodedDictionaryStorage()
            storage.items[key.stringValue] = .dictionary(nested)
        }
        return KeyedEncodingContainer(
            StoredValueKeyedEncodingContainer<NestedKey>(
                storage: nested, codingPath: codingPath + [key], userInfo: userInfo))
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested: EncodedArrayStorage
        if case .array(let existing)? = storage.items[key.stringValue] {
            nested = existing
        } else {
            nested = EncodedArrayStorage()
            storage.items[key.stringValue] = .array(nested)
        }
        return StoredValueUnkeyedEncodingContainer(storage: nested, codingPath: codingPath + [key], userInfo: userInfo)
    }

    func superEncoder() -> any Encoder { superEncoder(at: StoredValueCodingKey.super) }
    func superEncoder(forKey key: Key) -> any Encoder { superEncoder(at: key) }

    private func superEncoder(at key: any CodingKey) -> any Encoder {
        let encoder = StoredValueEncoderImpl(codingPath: codingPath + [key], userInfo: userInfo)
        storage.items[key.stringValue] = .encoder(encoder)
        return encoder
    }
}

private struct StoredValueUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let storage: EncodedArrayStorage
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    var count: Int { storage.items.count }

    /// The coding path of the next element.
    private var nextPath: [any CodingKey] { codingPath + [StoredValueCodingKey(index: count)] }

    private func append(_ value: StoredValue) {
        storage.items.append(.value(value))
    }

    func encodeNil() throws { append(.null) }
    func encode(_ value: Bool) throws { append(.bool(value)) }
    func encode(_ value: String) throws { append(.string(value)) }
    func encode(_ value: Double) throws { append(.double(value)) }
    func encode(_ value: Float) throws { append(.double(Double(value))) }
    func encode(_ value: Int) throws { append(.int(Int64(value))) }
    func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    func encode(_ value: Int64) throws { append(.int(value)) }
    func encode(_ value: UInt) throws { append(.uint(UInt64(value))) }
    func encode(_ value: UInt8) throws { append(.int(Int64(value))) }
    func encode(_ value: UInt16) throws { append(.int(Int64(value))) }
    func encode(_ value: UInt32) throws { append(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { append(.uint(value)) }
    func encode(_ value: Int128) throws { append(try storedWideInteger(value, codingPath: nextPath)) }
    func encode(_ value: UInt128) throws { append(try storedWideInteger(value, codingPath: nextPath)) }

    func encode<T: Encodable>(_ value: T) throws {
        append(try encodeNestedStoredValue(value, codingPath: nextPath, userInfo: userInfo))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let nested = EncodedDictionaryStorage()
        storage.items.append(.dictionary(nested))
        return KeyedEncodingContainer(
            StoredValueKeyedEncodingContainer<NestedKey>(storage: nested, codingPath: path, userInfo: userInfo))
    }

    func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let nested = EncodedArrayStorage()
        storage.items.append(.array(nested))
        return StoredValueUnkeyedEncodingContainer(storage: nested, codingPath: path, userInfo: userInfo)
    }

    func superEncoder() -> any Encoder {
        let encoder = StoredValueEncoderImpl(codingPath: nextPath, userInfo: userInfo)
        storage.items.append(.encoder(encoder))
        return encoder
    }
}

private struct StoredValueSingleValueEncodingContainer: SingleValueEncodingContainer {
    let encoder: StoredValueEncoderImpl

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: StoredValue) {
        precondition(encoder.storage == nil,
                     "Attempt to encode a value through a single value container where a value was already encoded.")
        encoder.storage = .value(value)
    }

    func encodeNil() throws { set(.null) }
    func encode(_ value: Bool) throws { set(.bool(value)) }
    func encode(_ value: String) throws { set(.string(value)) }
    func encode(_ value: Double) throws { set(.double(value)) }
    func encode(_ value: Float) throws { set(.double(Double(value))) }
    func encode(_ value: Int) throws { set(.int(Int64(value))) }
    func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    func encode(_ value: Int64) throws { set(.int(value)) }
    func encode(_ value: UInt) throws { set(.uint(UInt64(value))) }
    func encode(_ value: UInt8) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt16) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt32) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { set(.uint(value)) }
    func encode(_ value: Int128) throws { set(try storedWideInteger(value, codingPath: codingPath)) }
    func encode(_ value: UInt128) throws { set(try storedWideInteger(value, codingPath: codingPath)) }

    func encode<T: Encodable>(_ value: T) throws {
        set(try encodeNestedStoredValue(value, codingPath: codingPath, userInfo: encoder.userInfo))
    }
}

// MARK: - Decoding

/// Decodes `type` from `value` at `codingPath`: the typed cases for the types that have one, otherwise through
/// the type's own `init(from:)`.
private func decodeStoredValue<T: Decodable>(
    _ type: T.Type, from value: StoredValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]
) throws -> T {
    if T.self == Date.self { return try StoredValueUnboxing.date(value, codingPath) as! T }
    if T.self == Data.self { return try StoredValueUnboxing.data(value, codingPath) as! T }
    if T.self == UUID.self { return try StoredValueUnboxing.uuid(value, codingPath) as! T }
    if T.self == URL.self { return try StoredValueUnboxing.url(value, codingPath) as! T }
    if T.self == Decimal.self { return try StoredValueUnboxing.decimal(value, codingPath) as! T }
    return try T(from: StoredValueDecoderImpl(value: value, codingPath: codingPath, userInfo: userInfo))
}

/// Reads the scalar types out of stored values, with the errors `JSONDecoder` would throw.
private enum StoredValueUnboxing {
    /// `valueNotFound` for `.null`, `typeMismatch` for any other kind.
    static func mismatch(_ type: Any.Type, _ value: StoredValue, _ codingPath: [any CodingKey]) -> DecodingError {
        if value.isNull {
            return .valueNotFound(type, DecodingError.Context(
                codingPath: codingPath, debugDescription: "Expected \(type) value but found null instead."))
        }
        return .typeMismatch(type, DecodingError.Context(
            codingPath: codingPath,
            debugDescription: "Expected to decode \(type) but found \(value.kindName) instead."))
    }

    static func corrupted(_ codingPath: [any CodingKey], _ description: String, underlying: (any Error)? = nil)
        -> DecodingError {
        .dataCorrupted(DecodingError.Context(
            codingPath: codingPath, debugDescription: description, underlyingError: underlying))
    }

    static func bool(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> Bool {
        guard case .bool(let v) = value else { throw mismatch(Bool.self, value, codingPath) }
        return v
    }

    static func string(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> String {
        guard case .string(let v) = value else { throw mismatch(String.self, value, codingPath) }
        return v
    }

    static func double(_ value: StoredValue, _ codingPath: [any CodingKey], as type: Any.Type = Double.self) throws
        -> Double {
        switch value {
        case .double(let v): return v
        case .int(let v): return Double(v)
        case .uint(let v): return Double(v)
        default: throw mismatch(type, value, codingPath)
        }
    }

    static func float(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> Float {
        let wide = try double(value, codingPath, as: Float.self)
        let narrow = Float(wide)
        if narrow.isInfinite && wide.isFinite {
            throw corrupted(codingPath, "Stored number \(wide) does not fit in Float.")
        }
        return narrow
    }

    static func integer<I: FixedWidthInteger>(_ type: I.Type, _ value: StoredValue, _ codingPath: [any CodingKey])
        throws -> I {
        let result: I?
        switch value {
        case .int(let v): result = I(exactly: v)
        case .uint(let v): result = I(exactly: v)
        default: throw mismatch(I.self, value, codingPath)
        }
        guard let result else { throw corrupted(codingPath, "Stored number \(value) does not fit in \(I.self).") }
        return result
    }

    static func date(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> Date {
        guard case .date(let v) = value else { throw mismatch(Date.self, value, codingPath) }
        return v
    }

    static func data(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> Data {
        switch value {
        case .data(let v):
            return v
        case .external(let blob):
            do {
                return try blob.load()
            } catch {
                throw corrupted(codingPath, "External data \(blob.name) cannot be read.", underlying: error)
            }
        default:
            throw mismatch(Data.self, value, codingPath)
        }
    }

    static func uuid(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> UUID {
        guard case .uuid(let v) = value else { throw mismatch(UUID.self, value, codingPath) }
        return v
    }

    static func url(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> URL {
        guard case .string(let v) = value else { throw mismatch(URL.self, value, codingPath) }
        guard let url = URL(string: v) else {
            throw corrupted(codingPath, "Invalid URL string \(String(reflecting: v)).")
        }
        return url
    }

    static func decimal(_ value: StoredValue, _ codingPath: [any CodingKey]) throws -> Decimal {
        switch value {
        case .decimal(let v): return v
        case .int(let v): return Decimal(v)
        case .uint(let v): return Decimal(v)
        default: throw mismatch(Decimal.self, value, codingPath)
        }
    }
}

private final class StoredValueDecoderImpl: Decoder {
    let value: StoredValue
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    init(value: StoredValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.value = value
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .dictionary(let dictionary) = value else {
            throw StoredValueUnboxing.mismatch([String: StoredValue].self, value, codingPath)
        }
        return KeyedDecodingContainer(
            StoredValueKeyedDecodingContainer<Key>(dictionary: dictionary, codingPath: codingPath, userInfo: userInfo))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let array) = value else {
            throw StoredValueUnboxing.mismatch([StoredValue].self, value, codingPath)
        }
        return StoredValueUnkeyedDecodingContainer(array: array, codingPath: codingPath, userInfo: userInfo)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        StoredValueSingleValueDecodingContainer(decoder: self)
    }
}

private struct StoredValueKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let dictionary: [String: StoredValue]
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    var allKeys: [Key] { dictionary.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { dictionary[key.stringValue] != nil }

    /// `true` for `.null` and for a missing key.
    func decodeNil(forKey key: Key) throws -> Bool {
        dictionary[key.stringValue]?.isNull ?? true
    }

    private func value(for key: Key) throws -> StoredValue {
        guard let value = dictionary[key.stringValue] else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(
                codingPath: codingPath, debugDescription: "No value for key \(String(reflecting: key.stringValue))."))
        }
        return value
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try StoredValueUnboxing.bool(value(for: key), codingPath + [key])
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try StoredValueUnboxing.string(value(for: key), codingPath + [key])
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try StoredValueUnboxing.double(value(for: key), codingPath + [key])
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try StoredValueUnboxing.float(value(for: key), codingPath + [key])
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try integer(type, key) }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        try StoredValueUnboxing.integer(type, value(for: key), codingPath + [key])
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decodeStoredValue(type, from: value(for: key), codingPath: codingPath + [key], userInfo: userInfo)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try StoredValueDecoderImpl(value: value(for: key), codingPath: codingPath + [key], userInfo: userInfo)
            .container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try StoredValueDecoderImpl(value: value(for: key), codingPath: codingPath + [key], userInfo: userInfo)
            .unkeyedContainer()
    }

    /// A decoder for the `super` entry; `.null` when it is missing, as in `JSONDecoder`.
    func superDecoder() throws -> any Decoder { superDecoder(at: StoredValueCodingKey.super) }
    func superDecoder(forKey key: Key) throws -> any Decoder { superDecoder(at: key) }

    private func superDecoder(at key: any CodingKey) -> any Decoder {
        StoredValueDecoderImpl(value: dictionary[key.stringValue] ?? .null, codingPath: codingPath + [key],
                               userInfo: userInfo)
    }
}

private struct StoredValueUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let array: [StoredValue]
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]
    private(set) var currentIndex = 0

    init(array: [StoredValue], codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.array = array
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    /// The coding path of the current element.
    private var currentPath: [any CodingKey] { codingPath + [StoredValueCodingKey(index: currentIndex)] }

    /// Decodes the current element with `body` and moves past it only when that succeeds.
    private mutating func next<T>(
        _ type: Any.Type, _ body: (StoredValue, [any CodingKey]) throws -> T
    ) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(
                codingPath: currentPath, debugDescription: "Unkeyed container is at end."))
        }
        let result = try body(array[currentIndex], currentPath)
        currentIndex += 1
        return result
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any?.self, DecodingError.Context(
                codingPath: currentPath, debugDescription: "Unkeyed container is at end."))
        }
        guard array[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, StoredValueUnboxing.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, StoredValueUnboxing.string) }
    mutating func decode(_ type: Double.Type) throws -> Double {
        try next(type) { try StoredValueUnboxing.double($0, $1) }
    }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type, StoredValueUnboxing.float) }
    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: Int128.Type) throws -> Int128 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try integer(type) }

    private mutating func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        try next(type) { try StoredValueUnboxing.integer(type, $0, $1) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let userInfo = userInfo
        return try next(type) { try decodeStoredValue(type, from: $0, codingPath: $1, userInfo: userInfo) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let userInfo = userInfo
        return try next(KeyedDecodingContainer<NestedKey>.self) {
            try StoredValueDecoderImpl(value: $0, codingPath: $1, userInfo: userInfo).container(keyedBy: type)
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let userInfo = userInfo
        return try next((any UnkeyedDecodingContainer).self) {
            try StoredValueDecoderImpl(value: $0, codingPath: $1, userInfo: userInfo).unkeyedContainer()
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        let userInfo = userInfo
        return try next((any Decoder).self) {
            StoredValueDecoderImpl(value: $0, codingPath: $1, userInfo: userInfo)
        }
    }
}

private struct StoredValueSingleValueDecodingContainer: SingleValueDecodingContainer {
    let decoder: StoredValueDecoderImpl

    var codingPath: [any CodingKey] { decoder.codingPath }
    private var value: StoredValue { decoder.value }

    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try StoredValueUnboxing.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try StoredValueUnboxing.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try StoredValueUnboxing.double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try StoredValueUnboxing.float(value, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: Int128.Type) throws -> Int128 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try StoredValueUnboxing.integer(type, value, codingPath) }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try StoredValueUnboxing.integer(type, value, codingPath) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decodeStoredValue(type, from: value, codingPath: codingPath, userInfo: decoder.userInfo)
    }
}
