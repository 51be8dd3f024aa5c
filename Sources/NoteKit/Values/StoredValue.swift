#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The value of one attribute as the engine and every store see it.
///
/// Model properties are typed Swift values; stores, indexes, predicates and rows work with `StoredValue`,
/// a closed set of cases that every store can persist and compare. Each attribute's ``Schema/AttributeType``
/// says which case it uses, and the attribute's codec converts between the Swift type and this value.
///
/// Integers of every width up to 64 bits are `.int`, except `UInt` and `UInt64` which are `.uint` so that no
/// value is lost. `Float` widens to `.double` exactly. `URL` is `.string` (its `absoluteString`).
///
/// Two notions of sameness, on purpose:
/// - `==` and `hash(into:)` are *identity*: the same kind and the same bits. `-0.0` differs from `0.0`, a NaN equals
///   the same NaN, and two strings are equal only with the same Unicode scalars. That is what "did this property
///   change?" and unique keys need (as in SQLite, which compares bytes), and it keeps `Hashable` lawful.
/// - ``StoredValue/compare(_:_:)`` is Swift's *value* order, used by predicates, sorting and indexes: `.null`
///   sorts first, numbers compare numerically across `.int`, `.uint` and `.double`, strings compare as Swift's
///   `<` and `==` do (canonical equivalence), and values of unrelated kinds order by kind.
public enum StoredValue: Sendable, Hashable {
    /// No value: an optional attribute's `nil`, or a to-one relationship with no target. It sorts before every other
    /// value.
    case null
    /// A `Bool`.
    case bool(Bool)
    /// A signed integer of any width up to 64 bits, and an unsigned one narrower than 64 bits.
    case int(Int64)
    /// A `UInt` or `UInt64`, kept unsigned so that values above `Int64.max` are not lost.
    case uint(UInt64)
    /// A `Double`, or a `Float` widened exactly. Compared by value in ``compare(_:_:)``, by bit pattern in `==`.
    case double(Double)
    /// A `String`, or a `URL`'s `absoluteString`.
    case string(String)
    /// A `Date` (encoded as its seconds since 1 January 2001).
    case date(Date)
    /// Bytes stored inline with the row.
    case data(Data)
    /// A `UUID`.
    case uuid(UUID)
    /// A `Decimal`, kept exactly.
    case decimal(Decimal)
    /// An array attribute's elements, in order.
    case array([StoredValue])
    /// A dictionary attribute's values, by `String` key.
    case dictionary([String: StoredValue])
    /// Bytes kept outside the store's main files and loaded only when read (``Schema/Attribute/Option/externalStorage``).
    case external(ExternalData)

    /// Whether this is `.null`.
    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the case, used in error messages ("string", "int", …).
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int: "int"
        case .uint: "uint"
        case .double: "double"
        case .string: "string"
        case .date: "date"
        case .data: "data"
        case .uuid: "uuid"
        case .decimal: "decimal"
        case .array: "array"
        case .dictionary: "dictionary"
        case .external: "external data"
        }
    }
}

// MARK: - Identity

extension StoredValue {
    /// Two stored values are equal when they are of the same kind with the same bits: `-0.0` differs from `0.0`, a NaN
    /// equals the same NaN, strings must have the same Unicode scalars, and `.int(1)` differs from `.uint(1)`. Use
    /// ``compare(_:_:)`` for the order predicates and sorts use.
    public static func == (lhs: StoredValue, rhs: StoredValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.uint(a), .uint(b)): a == b
        case let (.double(a), .double(b)): a.bitPattern == b.bitPattern
        case let (.string(a), .string(b)): a.unicodeScalars.elementsEqual(b.unicodeScalars)
        case let (.date(a), .date(b)):
            a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case let (.data(a), .data(b)): a == b
        case let (.uuid(a), .uuid(b)): a == b
        case let (.decimal(a), .decimal(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.dictionary(a), .dictionary(b)): a == b
        case let (.external(a), .external(b)): a == b
        default: false
        }
    }

    /// Hashes the kind and the bits, consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let v): hasher.combine(1); hasher.combine(v)
        case .int(let v): hasher.combine(2); hasher.combine(v)
        case .uint(let v): hasher.combine(3); hasher.combine(v)
        case .double(let v): hasher.combine(4); hasher.combine(v.bitPattern)
        case .string(let v):
            hasher.combine(5)
            for scalar in v.unicodeScalars { hasher.combine(scalar.value) }
        case .date(let v): hasher.combine(6); hasher.combine(v.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let v): hasher.combine(7); hasher.combine(v)
        case .uuid(let v): hasher.combine(8); hasher.combine(v)
        case .decimal(let v): hasher.combine(9); hasher.combine(v)
        case .array(let v): hasher.combine(10); hasher.combine(v)
        case .dictionary(let v): hasher.combine(11); hasher.combine(v)
        case .external(let v): hasher.combine(12); hasher.combine(v)
        }
    }
}

// MARK: - Ordering

extension StoredValue {
    /// The rank of a value's kind, used to order values of unrelated kinds deterministically.
    private var kindRank: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .int, .uint, .double, .decimal: 2
        case .string: 3
        case .date: 4
        case .data, .external: 5
        case .uuid: 6
        case .array: 7
        case .dictionary: 8
        }
    }

    /// Compares two values in the total order used by sorts and indexes.
    ///
    /// - Returns: a negative number when `lhs` sorts first, zero when they are equal in this order, a positive
    ///   number when `rhs` sorts first.
    /// - Complexity: O(1) for scalars; O(n) for strings, data, arrays and dictionaries.
    public static func compare(_ lhs: StoredValue, _ rhs: StoredValue) -> Int {
        switch (lhs, rhs) {
        case (.null, .null): return 0
        case let (.bool(a), .bool(b)): return a == b ? 0 : (a ? 1 : -1)
        case let (.int(a), .int(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.uint(a), .uint(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.double(a), .double(b)): return compareDoubles(a, b)
        case let (.string(a), .string(b)): return StringOrder.compare(a, b)
        case let (.date(a), .date(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.uuid(a), .uuid(b)): return compareUUIDs(a, b)
        case let (.data(a), .data(b)): return compareBytes(a, b)
        case let (.decimal(a), .decimal(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.array(a), .array(b)):
            for (x, y) in zip(a, b) {
                let c = compare(x, y)
                if c != 0 { return c }
            }
            return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
        case let (.dictionary(a), .dictionary(b)):
            return compare(.array(a.sorted { $0.key < $1.key }.flatMap { [.string($0.key), $0.value] }),
                           .array(b.sorted { $0.key < $1.key }.flatMap { [.string($0.key), $0.value] }))
        case let (.external(a), .external(b)):
            return a.name < b.name ? -1 : (a.name == b.name ? 0 : 1)
        default:
            if lhs.kindRank == 2 && rhs.kindRank == 2 { return compareNumbers(lhs, rhs) }
            return lhs.kindRank < rhs.kindRank ? -1 : (lhs.kindRank == rhs.kindRank ? 0 : 1)
        }
    }

    private static func compareDoubles(_ a: Double, _ b: Double) -> Int {
        if a < b { return -1 }
        if a > b { return 1 }
        if a == b { return 0 }
        // NaN sorts after every number and equal to itself, so the order stays total.
        if a.isNaN { return b.isNaN ? 0 : 1 }
        return -1
    }

    private static func compareUUIDs(_ a: UUID, _ b: UUID) -> Int {
        let x = a.uuid, y = b.uuid
        return withUnsafeBytes(of: x) { xb in
            withUnsafeBytes(of: y) { yb in
                for i in 0..<16 where xb[i] != yb[i] { return xb[i] < yb[i] ? -1 : 1 }
                return 0
            }
        }
    }

    private static func compareBytes(_ a: Data, _ b: Data) -> Int {
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
    }

    /// Numbers of different representations compare by value; exact for integers, IEEE for doubles.
    private static func compareNumbers(_ lhs: StoredValue, _ rhs: StoredValue) -> Int {
        switch (lhs, rhs) {
        case let (.int(a), .uint(b)): return a < 0 ? -1 : compare(.uint(UInt64(a)), .uint(b))
        case let (.uint(a), .int(b)): return b < 0 ? 1 : compare(.uint(a), .uint(UInt64(b)))
        case let (.decimal(a), _): return compare(.decimal(a), .decimal(rhs.decimalValue ?? 0))
        case let (_, .decimal(b)): return compare(.decimal(lhs.decimalValue ?? 0), .decimal(b))
        default: return compareDoubles(lhs.doubleValue ?? .nan, rhs.doubleValue ?? .nan)
        }
    }

    /// The value as a `Double` when it is a number, for cross-kind comparison.
    var doubleValue: Double? {
        switch self {
        case .int(let v): Double(v)
        case .uint(let v): Double(v)
        case .double(let v): v
        case .decimal(let v): Double(v.description)
        default: nil
        }
    }

    var decimalValue: Decimal? {
        switch self {
        case .int(let v): Decimal(v)
        case .uint(let v): Decimal(v)
        case .double(let v): Decimal(v)
        case .decimal(let v): v
        default: nil
        }
    }
}

extension StoredValue: CustomStringConvertible {
    /// A short readable form for messages and schema listings: numbers and booleans as Swift prints them, a string
    /// quoted, a date as `date(seconds since 2001)`, data and external data by their size.
    public var description: String {
        switch self {
        case .null: "null"
        case .bool(let v): String(v)
        case .int(let v): String(v)
        case .uint(let v): String(v)
        case .double(let v): String(v)
        case .string(let v): String(reflecting: v)
        case .date(let v): "date(\(v.timeIntervalSinceReferenceDate))"
        case .data(let v): "data(\(v.count) bytes)"
        case .uuid(let v): v.uuidString
        case .decimal(let v): "decimal(\(v))"
        case .array(let v): "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(let v):
            "[" + v.sorted { $0.key < $1.key }.map { "\(String(reflecting: $0.key)): \($0.value)" }
                .joined(separator: ", ") + "]"
        case .external(let v): "external(\(v.name), \(v.size) bytes)"
        }
    }
}
