#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One row's attribute values, in the entity's attribute order: the ``ModelSnapshot/attributes`` of a row.
///
/// A collection of ``StoredValue`` held in one of two ways that answer every read, comparison and hash the same:
/// - as an array of values: what ``init(_:)`` and an array literal make, and what a context builds as it edits;
/// - packed: every value's bytes in one allocation, each value decoded when it is read. A file store packs the rows
///   it reads from disk, so that a row costs about its values' own bytes: a 240-character string takes 245 bytes
///   packed, and 288 (plus the 24-byte element that refers to it) in an array.
///
/// Writing an element of a packed collection unpacks it first, once (O(n)); later writes are an array's.
/// Reading an element of a packed collection is O(1) and makes the value afresh: a string or data value longer
/// than 15 bytes is allocated by each read.
public struct AttributeValues: Sendable, Hashable, RandomAccessCollection, MutableCollection,
                               ExpressibleByArrayLiteral, CustomStringConvertible {
    /// One attribute's value.
    public typealias Element = StoredValue
    /// An attribute's position in its entity, from 0.
    public typealias Index = Int
    /// The positions, `0..<count`.
    public typealias Indices = Range<Int>
    /// A run of positions' values.
    public typealias SubSequence = Slice<AttributeValues>

    private enum Storage: Sendable {
        case values([StoredValue])
        case packed(Packed)
    }

    /// A packing, which is never written once made: safe to share between threads, as `ManagedBuffer` itself
    /// cannot say.
    private struct Packed: @unchecked Sendable {
        let buffer: PackedValues
    }

    private var storage: Storage

    /// No values.
    public init() { storage = .values([]) }

    /// The values of `values`, in order, held as an array.
    public init(_ values: [StoredValue]) { storage = .values(values) }

    /// The values of the literal, in order, held as an array.
    public init(arrayLiteral elements: StoredValue...) { storage = .values(elements) }

    /// `values` packed in one allocation (see the type's discussion); held as an array instead when they are too
    /// large to pack (more than 4 GiB of bytes).
    ///
    /// - Complexity: O(n) in the values' bytes.
    package init(packing values: [StoredValue]) {
        storage = PackedValues.make(values).map { .packed(Packed(buffer: $0)) } ?? .values(values)
    }

    init(packed: PackedValues) { storage = .packed(Packed(buffer: packed)) }

    /// The packing, when the values are packed.
    var packedBuffer: PackedValues? {
        if case .packed(let packed) = storage { return packed.buffer }
        return nil
    }

    /// Whether the values are packed in one allocation.
    package var isPacked: Bool {
        if case .packed = storage { return true }
        return false
    }

    /// The bytes the values take in their own allocations: the packed buffer (its header and bytes), or the array's
    /// elements and every string's and data value's bytes beyond what an element holds inline. An estimate of
    /// what the allocator is asked for, without its own overhead, for tests of what a row costs.
    package var heldBytes: Int {
        switch storage {
        case .packed(let packed):
            return packed.buffer.heldBytes
        case .values(let values):
            return 32 + values.count * MemoryLayout<StoredValue>.stride
                + values.reduce(0) { $0 + PackedValues.outOfLineBytes(of: $1) }
        }
    }

    /// The values as an array (O(n); no copy when they are held as one).
    public var array: [StoredValue] {
        switch storage {
        case .values(let values): return values
        case .packed(let packed): return (0..<packed.buffer.count).map { packed.buffer.value(at: $0) }
        }
    }

    /// 0.
    public var startIndex: Int { 0 }

    /// The number of values.
    public var endIndex: Int {
        switch storage {
        case .values(let values): return values.count
        case .packed(let packed): return packed.buffer.count
        }
    }

    /// `0..<count`.
    public var indices: Range<Int> { 0..<endIndex }

    /// `i + 1`.
    public func index(after i: Int) -> Int { i + 1 }

    /// `i - 1`.
    public func index(before i: Int) -> Int { i - 1 }

    /// The value at `position`. Setting one in packed values unpacks them first.
    ///
    /// - Precondition: `position` is a valid index, as for an array.
    public subscript(position: Int) -> StoredValue {
        get {
            switch storage {
            case .values(let values): return values[position]
            case .packed(let packed):
                precondition(position >= 0 && position < packed.buffer.count, "AttributeValues index out of range")
                return packed.buffer.value(at: position)
            }
        }
        set {
            switch storage {
            case .values(var values):
                storage = .values([])  // Leaves `values` the only reference, so that the write does not copy.
                values[position] = newValue
                storage = .values(values)
            case .packed:
                var values = array
                values[position] = newValue
                storage = .values(values)
            }
        }
    }

    /// Whether the value at `index` is `value` (``StoredValue``'s `==`), without making the packed value: a
    /// string or data value is compared in place.
    ///
    /// - Precondition: `index` is a valid index.
    package func holds(_ value: StoredValue, at index: Int) -> Bool {
        switch storage {
        case .values(let values): return values[index] == value
        case .packed(let packed): return packed.buffer.holds(value, at: index)
        }
    }

    /// Whether the values at `index` here and in `other` are equal (``StoredValue``'s `==`), without making a
    /// packed value.
    ///
    /// - Precondition: `index` is a valid index of both.
    package func hasSameValue(at index: Int, as other: AttributeValues) -> Bool {
        switch (storage, other.storage) {
        case let (.values(mine), _): return other.holds(mine[index], at: index)
        case let (_, .values(theirs)): return holds(theirs[index], at: index)
        case let (.packed(mine), .packed(theirs)): return mine.buffer.hasSameValue(at: index, as: theirs.buffer)
        }
    }

    /// Calls `body` with the UTF-8 of the string at `index`, in place when packed, and returns its result; nil,
    /// without calling it, when the value there is not a string.
    ///
    /// - Precondition: `index` is a valid index.
    package func withStringBytes<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows
        -> Result? {
        switch storage {
        case .values(let values):
            guard case .string(var string) = values[index] else { return nil }
            return try string.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .packed(let packed):
            return try packed.buffer.withStringBytes(at: index, body)
        }
    }

    /// Values are equal when they have the same count and equal elements (``StoredValue``'s `==`), however held.
    public static func == (lhs: AttributeValues, rhs: AttributeValues) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case let (.values(a), .values(b)): return a == b
        case let (.packed(a), .packed(b)): return a.buffer.hasSameValues(as: b.buffer)
        default: return lhs.count == rhs.count && lhs.indices.allSatisfy { lhs.hasSameValue(at: $0, as: rhs) }
        }
    }

    /// Hashes the count and the elements, consistently with `==` however the values are held.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for value in self { hasher.combine(value) }
    }

    /// The values as an array literal would print them.
    public var description: String { array.description }
}

/// Attribute values packed in one allocation: a header, then an offset per value, then the values' bytes, and
/// then, in a row read from disk, the row's relationship targets (``RelationshipValues``), which the values' count,
/// bytes and comparisons leave out.
///
/// Each value is a tag byte and its payload: nothing for null and the two booleans, 8 bytes for numbers and dates
/// (their bits), a length and the UTF-8 or raw bytes for strings and data (one length byte below 256 bytes, four
/// above), 16 bytes for a UUID. Decimals, arrays that are not empty, dictionaries and external references are
/// kept aside as values, and the tag holds their number. One set of values has exactly one packing, so two
/// packings hold equal values exactly when their bytes and side values are equal (``StoredValue``'s `==` is
/// identity: the same kind and the same bits).
///
/// Offsets are 2 bytes when the values fit in 64 KiB, else 4. Immutable once made.
final class PackedValues: ManagedBuffer<PackedValues.Header, UInt8> {
    struct Header {
        /// Decimals, non-empty arrays, dictionaries and external references, in the order of their values.
        var side: [StoredValue]
        /// The number of values.
        var count: UInt16
        /// The number of relationships whose targets follow the values (0: none do).
        var relationshipCount: UInt16
        /// The bytes after the header that hold the values: the offsets, then the values. The relationships'
        /// targets, when there are any, follow.
        var bytes: UInt32
    }

    /// The tag of one relationship's targets after the values: a to-one with none, a to-one with its identifier,
    /// or a to-many with a byte that counts its identifiers (at most ``maximumPackedTargets``), then them.
    fileprivate enum TargetTag: UInt8 {
        case unset, one, many
    }

    /// The most targets a to-many relationship may have for its row's relationships to be packed. A packed list is
    /// made afresh by each read, so long lists (a folder's notes) stay arrays, shared by every copy of the row.
    static let maximumPackedTargets = 8

    /// Whether `relationships` can follow a row's values: each to-many has at most ``maximumPackedTargets``
    /// targets, and there are fewer than 65,536 relationships.
    static func canPack(_ relationships: [RelationshipTargets]) -> Bool {
        guard relationships.count <= Int(UInt16.max) else { return false }
        for targets in relationships {
            if case .toMany(let ids) = targets, ids.count > maximumPackedTargets { return false }
        }
        return true
    }

    /// The bytes `relationships` take after the values.
    private static func targetBytes(_ relationships: [RelationshipTargets]) -> Int {
        relationships.reduce(0) { total, targets in
            switch targets {
            case .toOne(nil): total + 1
            case .toOne: total + 1 + PersistentIdentifier.packedSize
            case .toMany(let ids): total + 2 + ids.count * PersistentIdentifier.packedSize
            }
        }
    }

    fileprivate enum Tag: UInt8 {
        case null, `false`, `true`, int, uint, double, date, shortString, string, shortData, data, uuid, emptyArray
        case side
    }

    var count: Int { Int(header.count) }

    var heldBytes: Int {
        var targets = 0
        if header.relationshipCount > 0 {
            withUnsafeMutablePointers { header, elements in
                let base = UnsafeRawPointer(elements)
                let start = Int(header.pointee.bytes)
                targets = Self.targetStart(Int(header.pointee.relationshipCount), from: start, base) - start
            }
        }
        return 16 + MemoryLayout<Header>.stride + Int(header.bytes) + targets
    }

    /// The number of relationships whose targets follow the values.
    var relationshipCount: Int { Int(header.relationshipCount) }

    /// Where the targets of relationship `index` start, walking from `start` (the first relationship's).
    private static func targetStart(_ index: Int, from start: Int, _ base: UnsafeRawPointer) -> Int {
        var at = start
        for _ in 0..<index {
            switch TargetTag(rawValue: base.load(fromByteOffset: at, as: UInt8.self)) {
            case .unset, nil: at += 1
            case .one: at += 1 + PersistentIdentifier.packedSize
            case .many: at += 2 + Int(base.load(fromByteOffset: at + 1, as: UInt8.self)) * PersistentIdentifier.packedSize
            }
        }
        return at
    }

    /// The targets of relationship `index`, made from their bytes.
    ///
    /// - Complexity: O(`index` + the targets), with an allocation for a to-many that has targets.
    func targets(at index: Int) -> RelationshipTargets {
        withUnsafeMutablePointers { header, elements in
            let base = UnsafeRawPointer(elements)
            let at = Self.targetStart(index, from: Int(header.pointee.bytes), base)
            switch TargetTag(rawValue: base.load(fromByteOffset: at, as: UInt8.self)) {
            case .unset: return .toOne(nil)
            case .one: return .toOne(PersistentIdentifier(packedAt: base + at + 1))
            case .many:
                let count = Int(base.load(fromByteOffset: at + 1, as: UInt8.self))
                return .toMany((0..<count).map {
                    PersistentIdentifier(packedAt: base + at + 2 + $0 * PersistentIdentifier.packedSize)
                })
            case nil: preconditionFailure("a packing NoteKit made holds an unknown target tag")
            }
        }
    }

    /// The bytes a value's array element refers to outside itself (a string's or data value's buffer).
    static func outOfLineBytes(of value: StoredValue) -> Int {
        switch value {
        case .string(let string): return string.utf8.count > 15 ? 32 + string.utf8.count + 1 : 0
        case .data(let data): return data.count > 14 ? 32 + data.count : 0
        default: return 0
        }
    }

    /// The packing of `values`; nil when its bytes would pass `UInt32.max` or there are 65,536 values or more.
    static func make(_ values: [StoredValue]) -> PackedValues? {
        AttributePacker(values).finishPacked(relationships: nil)
    }

    /// The packing of the values whose encodings are `segments` of `scratch` (nil: null), in index order, with
    /// `arrived` their side values in the order they were set, and then `relationships`' targets when given (they
    /// must pass ``canPack(_:)``); nil when its bytes would pass `UInt32.max` or there are 65,536 values or more.
    fileprivate static func make(_ scratch: UnsafeRawBufferPointer, segments: [(start: Int, end: Int)?],
                                 side arrived: [StoredValue], relationships: [RelationshipTargets]?) -> PackedValues? {
        guard segments.count <= Int(UInt16.max) else { return nil }
        let payload = segments.reduce(0) { $0 + ($1.map { $0.end - $0.start } ?? 1) }
        let narrow = 2 * segments.count + payload
        let width = narrow <= Int(UInt16.max) ? 2 : 4
        let total = width * segments.count + payload
        let targets = relationships.map(targetBytes) ?? 0
        guard total + targets <= Int(UInt32.max) else { return nil }
        let buffer = create(minimumCapacity: total + targets) { _ in
            Header(side: [], count: UInt16(segments.count), relationshipCount: UInt16(relationships?.count ?? 0),
                   bytes: UInt32(total))
        }
        let packed = unsafeDowncast(buffer, to: PackedValues.self)
        packed.withUnsafeMutablePointers { header, elements in
            let base = UnsafeMutableRawPointer(elements)
            let start = width * segments.count
            var at = start
            var side: [StoredValue] = []
            if !arrived.isEmpty { side.reserveCapacity(arrived.count) }
            for (index, segment) in segments.enumerated() {
                let offset = at - start
                if width == 2 {
                    base.storeBytes(of: UInt16(offset).littleEndian, toByteOffset: 2 * index, as: UInt16.self)
                } else {
                    base.storeBytes(of: UInt32(offset).littleEndian, toByteOffset: 4 * index, as: UInt32.self)
                }
                guard let segment else {
                    base.storeBytes(of: Tag.null.rawValue, toByteOffset: at, as: UInt8.self)
                    at += 1
                    continue
                }
                let length = segment.end - segment.start
                (base + at).copyMemory(from: scratch.baseAddress! + segment.start, byteCount: length)
                if scratch[segment.start] == Tag.side.rawValue {
                    // Side values are numbered in the order of their values, so that one set of values has one
                    // packing whatever order it was set in.
                    let arrival = Int(UInt32(littleEndian: scratch.loadUnaligned(fromByteOffset: segment.start + 1,
                                                                                 as: UInt32.self)))
                    base.storeBytes(of: UInt32(side.count).littleEndian, toByteOffset: at + 1, as: UInt32.self)
                    side.append(arrived[arrival])
                }
                at += length
            }
            header.pointee.side = side
            if let relationships { Self.write(relationships, at: base + at) }
        }
        return packed
    }

    /// Writes `relationships`' targets at `address`, as ``targets(at:)`` reads them.
    private static func write(_ relationships: [RelationshipTargets], at address: UnsafeMutableRawPointer) {
        var at = 0
        for targets in relationships {
            switch targets {
            case .toOne(nil):
                address.storeBytes(of: TargetTag.unset.rawValue, toByteOffset: at, as: UInt8.self)
                at += 1
            case .toOne(let id?):
                address.storeBytes(of: TargetTag.one.rawValue, toByteOffset: at, as: UInt8.self)
                id.pack(at: address + at + 1)
                at += 1 + PersistentIdentifier.packedSize
            case .toMany(let ids):
                address.storeBytes(of: TargetTag.many.rawValue, toByteOffset: at, as: UInt8.self)
                address.storeBytes(of: UInt8(ids.count), toByteOffset: at + 1, as: UInt8.self)
                at += 2
                for id in ids {
                    id.pack(at: address + at)
                    at += PersistentIdentifier.packedSize
                }
            }
        }
    }

    /// The value whose encoding starts at `at` of `base`, with `side` the side values its tag numbers.
    fileprivate static func decode(at: Int, _ base: UnsafeRawPointer, side: [StoredValue]) -> StoredValue {
        func word<Word: FixedWidthInteger>(_: Word.Type, _ from: Int) -> Word {
            Word(littleEndian: base.loadUnaligned(fromByteOffset: from, as: Word.self))
        }
        func bytes(long: Bool) -> UnsafeRawBufferPointer {
            let length = long ? Int(word(UInt32.self, at + 1)) : Int(word(UInt8.self, at + 1))
            return UnsafeRawBufferPointer(start: base + at + (long ? 5 : 2), count: length)
        }
        switch Tag(rawValue: base.load(fromByteOffset: at, as: UInt8.self)) {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .int: return .int(word(Int64.self, at + 1))
        case .uint: return .uint(word(UInt64.self, at + 1))
        case .double: return .double(Double(bitPattern: word(UInt64.self, at + 1)))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: word(UInt64.self, at + 1))))
        case .shortString: return .string(String(decoding: bytes(long: false), as: UTF8.self))
        case .string: return .string(String(decoding: bytes(long: true), as: UTF8.self))
        case .shortData: return .data(Data(bytes(long: false)))
        case .data: return .data(Data(bytes(long: true)))
        case .uuid: return .uuid(UUID(uuid: base.loadUnaligned(fromByteOffset: at + 1, as: uuid_t.self)))
        case .emptyArray: return .array([])
        case .side: return side[Int(word(UInt32.self, at + 1))]
        case nil: preconditionFailure("a packing NoteKit made holds an unknown tag")
        }
    }

    /// Where the value at `index` starts in the bytes after the header: its tag.
    private func start(of index: Int, _ header: UnsafeMutablePointer<Header>, _ base: UnsafeRawPointer) -> Int {
        let count = Int(header.pointee.count)
        if header.pointee.bytes > UInt32(UInt16.max) {
            return 4 * count + Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: 4 * index, as: UInt32.self)))
        }
        return 2 * count + Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: 2 * index, as: UInt16.self)))
    }

    /// The bytes of the value whose tag is at `at`, tag included.
    private static func length(at: Int, _ base: UnsafeRawPointer) -> Int {
        switch Tag(rawValue: base.load(fromByteOffset: at, as: UInt8.self)) {
        case .null, .false, .true, .emptyArray, nil: return 1
        case .int, .uint, .double, .date: return 9
        case .shortString, .shortData: return 2 + Int(base.load(fromByteOffset: at + 1, as: UInt8.self))
        case .string, .data:
            return 5 + Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at + 1, as: UInt32.self)))
        case .uuid: return 17
        case .side: return 5
        }
    }

    /// Whether the value at `index` is `value`; strings and data are compared in place.
    func holds(_ value: StoredValue, at index: Int) -> Bool {
        switch value {
        case .string(var string):
            return string.withUTF8 { expected in
                withBytes(at: index, ofString: true) { $0.elementsEqual(UnsafeRawBufferPointer(expected)) } ?? false
            }
        case .data(let data):
            return data.withUnsafeBytes { expected in
                withBytes(at: index, ofString: false) { $0.elementsEqual(expected) } ?? false
            }
        default:
            return self.value(at: index) == value
        }
    }

    /// Calls `body` with the bytes of the string at `index`; nil when the value there is not a string.
    func withStringBytes<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result? {
        try withBytes(at: index, ofString: true, body)
    }

    /// Calls `body` with the bytes of the string (`ofString`) or the data value at `index`; nil when the value
    /// there is not one.
    private func withBytes<Result>(at index: Int, ofString isString: Bool,
                                   _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result? {
        try withUnsafeMutablePointers { header, elements in
            let base = UnsafeRawPointer(elements)
            let at = start(of: index, header, base)
            let long: Bool
            switch Tag(rawValue: base.load(fromByteOffset: at, as: UInt8.self)) {
            case .shortString where isString, .shortData where !isString: long = false
            case .string where isString, .data where !isString: long = true
            default: return nil
            }
            let count = long ? Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at + 1, as: UInt32.self)))
                : Int(base.load(fromByteOffset: at + 1, as: UInt8.self))
            return try body(UnsafeRawBufferPointer(start: base + at + (long ? 5 : 2), count: count))
        }
    }

    /// Whether the values at `index` here and in `other` are equal: the same bytes, or equal side values.
    func hasSameValue(at index: Int, as other: PackedValues) -> Bool {
        if self === other { return true }
        return withUnsafeMutablePointers { header, elements in
            other.withUnsafeMutablePointers { otherHeader, otherElements in
                let base = UnsafeRawPointer(elements), otherBase = UnsafeRawPointer(otherElements)
                let at = start(of: index, header, base), otherAt = other.start(of: index, otherHeader, otherBase)
                if base.load(fromByteOffset: at, as: UInt8.self) == Tag.side.rawValue {
                    return value(at: index) == other.value(at: index)
                }
                let length = Self.length(at: at, base)
                return length == Self.length(at: otherAt, otherBase)
                    && UnsafeRawBufferPointer(start: base + at, count: length)
                        .elementsEqual(UnsafeRawBufferPointer(start: otherBase + otherAt, count: length))
            }
        }
    }

    /// The value at `index`, made from its bytes.
    func value(at index: Int) -> StoredValue {
        withUnsafeMutablePointers { header, elements in
            let base = UnsafeRawPointer(elements)
            return Self.decode(at: start(of: index, header, base), base, side: header.pointee.side)
        }
    }

    /// Whether `other` holds equal values: the same bytes and equal side values.
    func hasSameValues(as other: PackedValues) -> Bool {
        if self === other { return true }
        guard header.count == other.header.count, header.bytes == other.header.bytes,
              header.side == other.header.side else { return false }
        return withUnsafeMutablePointerToElements { mine in
            other.withUnsafeMutablePointerToElements { theirs in
                let count = Int(header.bytes)
                return UnsafeRawBufferPointer(start: mine, count: count)
                    .elementsEqual(UnsafeRawBufferPointer(start: theirs, count: count))
            }
        }
    }
}

/// Packs one row's attribute values into ``AttributeValues``, set in any order: how a decoder builds a packed
/// row straight from what it reads, with no array of values and no `String` for text it can copy. Its working
/// room is kept from row to row.
package struct AttributePacker {
    private typealias Tag = PackedValues.Tag
    private var scratch: [UInt8] = []
    private var segments: [(start: Int, end: Int)?] = []
    private var side: [StoredValue] = []

    package init() {}

    /// A packer that holds `values`, each set at its index.
    init(_ values: [StoredValue]) {
        begin(count: values.count)
        for (index, value) in values.enumerated() { set(value, at: index) }
    }

    /// Starts a row of `count` values, each null until set.
    package mutating func begin(count: Int) {
        scratch.removeAll(keepingCapacity: true)
        side.removeAll(keepingCapacity: true)
        segments.removeAll(keepingCapacity: true)
        segments.append(contentsOf: repeatElement(nil, count: count))
    }

    /// Sets the value at `index` (a later set of the same index replaces it).
    package mutating func set(_ value: StoredValue, at index: Int) {
        let start = scratch.count
        switch value {
        case .null: tag(.null)
        case .bool(let flag): tag(flag ? .true : .false)
        case .int(let number): tag(.int); word(number)
        case .uint(let number): tag(.uint); word(number)
        case .double(let number): tag(.double); word(number.bitPattern)
        case .date(let date): tag(.date); word(date.timeIntervalSinceReferenceDate.bitPattern)
        case .string(var string):
            string.withUTF8 { bytes(UnsafeRawBufferPointer($0), short: .shortString, long: .string) }
        case .data(let data): data.withUnsafeBytes { bytes($0, short: .shortData, long: .data) }
        case .uuid(let uuid):
            tag(.uuid)
            withUnsafeBytes(of: uuid.uuid) { scratch.append(contentsOf: $0) }
        case .array(let elements) where elements.isEmpty: tag(.emptyArray)
        case .decimal, .array, .dictionary, .external:
            tag(.side)
            word(UInt32(side.count))
            side.append(value)
        }
        segments[index] = (start, scratch.count)
    }

    /// Sets the value at `index` to the string whose UTF-8 is `utf8`, without making the string.
    ///
    /// - Precondition: `utf8` is valid UTF-8 (a reader that checked it).
    package mutating func setString(utf8: UnsafeRawBufferPointer, at index: Int) {
        let start = scratch.count
        bytes(utf8, short: .shortString, long: .string)
        segments[index] = (start, scratch.count)
    }

    /// The row's values, packed; held as an array instead in the cases a packing cannot hold them (more than
    /// 4 GiB of bytes, or 65,536 values or more).
    package mutating func finish() -> AttributeValues {
        if let packed = finishPacked(relationships: nil) { return AttributeValues(packed: packed) }
        return unpacked()
    }

    /// The row's values and `relationships`' targets, packed in one allocation when the targets can be
    /// (``RelationshipValues``), else the values packed alone and the targets held as an array.
    package mutating func finish(relationships: [RelationshipTargets])
        -> (attributes: AttributeValues, relationships: RelationshipValues) {
        if !relationships.isEmpty, PackedValues.canPack(relationships),
           let packed = finishPacked(relationships: relationships) {
            return (AttributeValues(packed: packed), RelationshipValues(packed: packed))
        }
        return (finish(), RelationshipValues(relationships))
    }

    private func unpacked() -> AttributeValues {
        scratch.withUnsafeBytes { scratch in
            AttributeValues(segments.map { segment in
                segment.map { PackedValues.decode(at: $0.start, scratch.baseAddress!, side: side) } ?? .null
            })
        }
    }

    fileprivate func finishPacked(relationships: [RelationshipTargets]?) -> PackedValues? {
        scratch.withUnsafeBytes { PackedValues.make($0, segments: segments, side: side, relationships: relationships) }
    }

    private mutating func tag(_ tag: Tag) { scratch.append(tag.rawValue) }

    private mutating func word<Word: FixedWidthInteger>(_ word: Word) {
        withUnsafeBytes(of: word.littleEndian) { scratch.append(contentsOf: $0) }
    }

    private mutating func bytes(_ bytes: UnsafeRawBufferPointer, short: Tag, long: Tag) {
        if bytes.count < 256 {
            tag(short)
            word(UInt8(bytes.count))
        } else {
            tag(long)
            word(UInt32(bytes.count))
        }
        scratch.append(contentsOf: bytes)
    }
}
