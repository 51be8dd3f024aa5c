#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One aggregate a store computes over the objects a fetch descriptor matches, without making them: a count, or the
/// sum, smallest, largest or mean of a persisted attribute (or of one reached through to-one relationships). The
/// result has the attribute's own type: `.max(\.createdAt)` gives a `Date?`, `.sum(\.size)` an `Int`.
///
/// SwiftData has no aggregates; Core Data had `NSExpression` with `propertiesToGroupBy` and `[String: Any]` results.
/// NoteKit's are values of the model's key paths and come back typed, through ``ModelContext/aggregate(_:_:)`` and
/// ``ModelContext/aggregate(_:groupedBy:order:limit:_:)``:
///
/// ```swift
/// let pinned = FetchDescriptor<Note>(predicate: #Predicate { $0.isPinned })
/// let (count, oldest, newest) = try context.aggregate(pinned, .count, .min(\.createdAt), .max(\.createdAt))
/// ```
///
/// Nil values are skipped, as SQL's aggregates skip NULL: `.min` and `.max` of no value are nil, `.sum` of none is
/// zero, `.average` of none is nil.
public struct Aggregate<Root: PersistentModel, Value> {
    let kind: StoreAggregateRequest.Operation.Kind
    /// The key path aggregated (nil for a count).
    let keyPath: AnyKeyPath?
    /// The aggregate's stored value as `Value`.
    let decode: (StoredValue) throws -> Value
}

extension Aggregate where Value == Int {
    /// The number of objects.
    public static var count: Self { Aggregate(kind: .count, keyPath: nil) { $0.integerValue ?? 0 } }
}

extension Aggregate {
    /// The smallest value of `keyPath` (nil when no object matches).
    public static func min<V: Comparable>(_ keyPath: KeyPath<Root, V>) -> Self where Value == V? {
        Aggregate(kind: .minimum, keyPath: keyPath, decode: optional(V.self))
    }

    /// The smallest non-nil value of `keyPath` (nil when there is none).
    public static func min<V: Comparable>(_ keyPath: KeyPath<Root, V?>) -> Self where Value == V? {
        Aggregate(kind: .minimum, keyPath: keyPath, decode: optional(V.self))
    }

    /// The largest value of `keyPath` (nil when no object matches).
    public static func max<V: Comparable>(_ keyPath: KeyPath<Root, V>) -> Self where Value == V? {
        Aggregate(kind: .maximum, keyPath: keyPath, decode: optional(V.self))
    }

    /// The largest non-nil value of `keyPath` (nil when there is none).
    public static func max<V: Comparable>(_ keyPath: KeyPath<Root, V?>) -> Self where Value == V? {
        Aggregate(kind: .maximum, keyPath: keyPath, decode: optional(V.self))
    }

    /// The mean of `keyPath`'s values, as a `Double` (nil when no object matches).
    public static func average<V: BinaryInteger>(_ keyPath: KeyPath<Root, V>) -> Self where Value == Double? {
        Aggregate(kind: .average, keyPath: keyPath, decode: mean)
    }

    /// The mean of `keyPath`'s non-nil values, as a `Double` (nil when there is none).
    public static func average<V: BinaryInteger>(_ keyPath: KeyPath<Root, V?>) -> Self where Value == Double? {
        Aggregate(kind: .average, keyPath: keyPath, decode: mean)
    }

    /// The mean of `keyPath`'s values (nil when no object matches).
    public static func average<V: BinaryFloatingPoint>(_ keyPath: KeyPath<Root, V>) -> Self where Value == Double? {
        Aggregate(kind: .average, keyPath: keyPath, decode: mean)
    }

    /// The mean of `keyPath`'s non-nil values (nil when there is none).
    public static func average<V: BinaryFloatingPoint>(_ keyPath: KeyPath<Root, V?>) -> Self where Value == Double? {
        Aggregate(kind: .average, keyPath: keyPath, decode: mean)
    }

    private static func optional<V>(_ type: V.Type) -> (StoredValue) throws -> V? {
        { stored in try stored.isNull ? nil : decodeStored(stored, as: V.self) }
    }

    private static func mean(_ stored: StoredValue) -> Double? { stored.isNull ? nil : stored.doubleValue }
}

extension Aggregate where Value: AdditiveArithmetic {
    /// The sum of `keyPath`'s values (zero when no object matches). An integer sum that overflows the type throws
    /// ``FetchError/predicateFailed(entity:reason:)``, where Swift would trap.
    public static func sum(_ keyPath: KeyPath<Root, Value>) -> Self {
        Aggregate(kind: .sum, keyPath: keyPath) { stored in try stored.isNull ? .zero : decodeStored(stored, as: Value.self) }
    }

    /// The sum of `keyPath`'s non-nil values (zero when there is none).
    public static func sum(_ keyPath: KeyPath<Root, Value?>) -> Self {
        Aggregate(kind: .sum, keyPath: keyPath) { stored in try stored.isNull ? .zero : decodeStored(stored, as: Value.self) }
    }
}

/// `stored` as a `V`, by `V`'s attribute codec.
///
/// - Throws: ``FetchError/predicateFailed(entity:reason:)`` when `V` has no stored form or the value does not fit it.
func decodeStored<V>(_ stored: StoredValue, as type: V.Type) throws -> V {
    guard let codec = AttributeCodecFactory.make(V.self) else {
        throw FetchError.predicateFailed(entity: "", reason: "\(V.self) has no stored form")
    }
    do { return try codec.decode(stored) } catch {
        throw FetchError.predicateFailed(entity: "", reason: "an aggregate of \(stored.kindName) does not fit \(V.self): \(error)")
    }
}

/// One group of an aggregation: the value the objects share, and the group's aggregates, in the order they were
/// asked for.
public struct AggregateGroup<Key, each Value> {
    /// The value of the grouping key path the group's objects share (nil for those where it is nil: no target).
    public let key: Key
    /// The group's aggregates, in the order asked.
    public let values: (repeat each Value)
}

/// The order of an aggregation's groups.
public enum AggregateOrder: Sendable, Hashable {
    /// By the groups' key, in Swift's order for its type (nil first, ascending).
    case key(SortOrder)
    /// By the value of the aggregate at this position of the list asked for (from 0); ties by key, ascending.
    case aggregate(Int, SortOrder)
}
