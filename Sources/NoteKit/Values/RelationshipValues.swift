/// One row's relationship targets, in the entity's relationship order: the ``ModelSnapshot/relationships`` of a row.
///
/// A collection of ``RelationshipTargets`` held in one of two ways that answer every read, comparison and hash the
/// same:
/// - as an array: what ``init(_:)`` and an array literal make, and what a context builds as it edits;
/// - packed after the row's attribute values, in their allocation (see ``AttributeValues``): a file store packs the
///   rows it reads from disk this way when each to-many relationship has at most 8 targets, so that a to-one
///   target costs 25 bytes and a row no allocation of its own for its targets. Rows with longer to-many lists (a
///   folder's notes) keep them in an array, which every copy of the row shares.
///
/// Writing an element of a packed collection unpacks it first, once (O(n)); later writes are an array's. Reading
/// element `i` of a packed collection walks the `i` before it (a few bytes each) and makes the targets afresh: a
/// to-many with targets is allocated by each read.
public struct RelationshipValues: Sendable, Hashable, RandomAccessCollection, MutableCollection,
                                  ExpressibleByArrayLiteral, CustomStringConvertible {
    /// One relationship's targets.
    public typealias Element = RelationshipTargets
    /// A relationship's position in its entity, from 0.
    public typealias Index = Int
    /// The positions, `0..<count`.
    public typealias Indices = Range<Int>
    /// A run of positions' targets.
    public typealias SubSequence = Slice<RelationshipValues>

    private enum Storage: Sendable {
        case targets([RelationshipTargets])
        case packed(Packed)
    }

    /// A packing, which is never written once made (see ``AttributeValues``).
    private struct Packed: @unchecked Sendable {
        let buffer: PackedValues
    }

    private var storage: Storage

    /// No relationships.
    public init() { storage = .targets([]) }

    /// The targets of `targets`, in order, held as an array.
    public init(_ targets: [RelationshipTargets]) { storage = .targets(targets) }

    /// The targets of the literal, in order, held as an array.
    public init(arrayLiteral elements: RelationshipTargets...) { storage = .targets(elements) }

    /// The targets packed after the values of `packed`.
    init(packed: PackedValues) { storage = .packed(Packed(buffer: packed)) }

    /// Whether the targets are packed (after a row's attribute values, in their allocation).
    package var isPacked: Bool {
        if case .packed = storage { return true }
        return false
    }

    /// Whether the targets are packed in the allocation of `attributes`' values.
    package func isPacked(with attributes: AttributeValues) -> Bool {
        guard case .packed(let packed) = storage else { return false }
        return attributes.packedBuffer === packed.buffer
    }

    /// The bytes the targets take in allocations of their own: none when packed (they are part of their row's
    /// attribute allocation), else the array's elements and every to-many's identifiers. An estimate of what the
    /// allocator is asked for, for tests of what a row costs.
    package var heldBytes: Int {
        switch storage {
        case .packed: return 0
        case .targets(let targets):
            guard !targets.isEmpty else { return 0 }
            return 32 + targets.count * MemoryLayout<RelationshipTargets>.stride + targets.reduce(0) {
                if case .toMany(let ids) = $1, !ids.isEmpty { return $0 + 32 + ids.count * MemoryLayout<PersistentIdentifier>.stride }
                return $0
            }
        }
    }

    /// The targets as an array (O(n); no copy when they are held as one).
    public var array: [RelationshipTargets] {
        switch storage {
        case .targets(let targets): return targets
        case .packed(let packed): return (0..<packed.buffer.relationshipCount).map { packed.buffer.targets(at: $0) }
        }
    }

    /// 0.
    public var startIndex: Int { 0 }

    /// The number of relationships.
    public var endIndex: Int {
        switch storage {
        case .targets(let targets): return targets.count
        case .packed(let packed): return packed.buffer.relationshipCount
        }
    }

    /// `0..<count`.
    public var indices: Range<Int> { 0..<endIndex }

    /// `i + 1`.
    public func index(after i: Int) -> Int { i + 1 }

    /// `i - 1`.
    public func index(before i: Int) -> Int { i - 1 }

    /// The targets of the relationship at `position`. Setting them in packed targets unpacks them first.
    ///
    /// - Precondition: `position` is a valid index, as for an array.
    public subscript(position: Int) -> RelationshipTargets {
        get {
            switch storage {
            case .targets(let targets): return targets[position]
            case .packed(let packed):
                precondition(position >= 0 && position < packed.buffer.relationshipCount,
                             "RelationshipValues index out of range")
                return packed.buffer.targets(at: position)
            }
        }
        set {
            switch storage {
            case .targets(var targets):
                storage = .targets([])  // Leaves `targets` the only reference, so that the write does not copy.
                targets[position] = newValue
                storage = .targets(targets)
            case .packed:
                var targets = array
                targets[position] = newValue
                storage = .targets(targets)
            }
        }
    }

    /// Targets are equal when they have the same count and equal elements, however held.
    public static func == (lhs: RelationshipValues, rhs: RelationshipValues) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case let (.targets(a), .targets(b)): return a == b
        case let (.packed(a), .packed(b)) where a.buffer === b.buffer: return true
        default: return lhs.count == rhs.count && lhs.indices.allSatisfy { lhs[$0] == rhs[$0] }
        }
    }

    /// Hashes the count and the elements, consistently with `==` however the targets are held.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for targets in self { hasher.combine(targets) }
    }

    /// The targets as an array literal would print them.
    public var description: String { array.description }
}

extension AttributeValues {
    /// `values` and `relationships` packed in one allocation when the targets can be (each to-many has at most 8);
    /// else the values packed alone and the targets held as an array. How a row read from disk stays packed when
    /// an update rewrites it.
    ///
    /// - Complexity: O(n) in the values' bytes and the targets.
    package static func packing(_ values: [StoredValue], relationships: [RelationshipTargets])
        -> (attributes: AttributeValues, relationships: RelationshipValues) {
        var packer = AttributePacker(values)
        return packer.finish(relationships: relationships)
    }
}
