#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One entry of an ``IndexTree``: the indexed attribute values of a row, and the row's identifier.
///
/// The identifier is the last sort component, so rows with equal keys still have one deterministic order.
///
/// An entry a tree hands out (``IndexTree/scan(from:to:reverse:_:)``, ``IndexTree/Cursor``) may hold its key as the
/// tree does, in its digest alone (see ``IndexTree``'s *Layout*): reading ``key`` then builds the array, so code that
/// only orders entries compares them with ``compare(_:_:)``, which reads no array.
package struct IndexEntry: Sendable, Hashable {
    /// The key's order-preserving digest (``IndexTree/digest(count:_:)``) in an entry of a tree; 0, which never
    /// decides a comparison, in an entry made from a key.
    var digest: UInt128
    /// The key's values; nil when the digest determines them exactly (it is then an exact digest of a tree's).
    var values: [StoredValue]?
    package var id: PersistentIdentifier

    /// The indexed values, exactly as stored (`.int(5)` stays `.int(5)`, `-0.0` stays `-0.0`).
    ///
    /// - Complexity: O(1) when the entry holds an array; otherwise O(components) and one allocation, to decode
    ///   the digest.
    package var key: [StoredValue] {
        get { values ?? IndexTree.values(of: digest) }
        set {
            values = newValue
            digest = 0
        }
    }

    package init(key: [StoredValue], id: PersistentIdentifier) {
        self.init(digest: 0, values: key, id: id)
    }

    init(digest: UInt128, values: [StoredValue]?, id: PersistentIdentifier) {
        self.digest = digest
        self.values = values
        self.id = id
    }

    /// Entries are equal with the same identifier and the same key values (``StoredValue``'s identity), however
    /// each holds its key.
    package static func == (lhs: IndexEntry, rhs: IndexEntry) -> Bool { lhs.id == rhs.id && lhs.key == rhs.key }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(id)
    }
}

/// A bound on a key prefix: it compares only the first `values.count` components of a key.
///
/// With a key of two components, an inclusive lower bound `[true]` admits every `(true, x)`, and an exclusive
/// lower bound `[true]` starts after every `(true, x)`. An empty `values` compares equal to every key.
package struct IndexBound: Sendable, Hashable {
    package var values: [StoredValue]
    package var isInclusive: Bool
    package init(values: [StoredValue], isInclusive: Bool) {
        self.values = values
        self.isInclusive = isInclusive
    }
}

/// An in-memory ordered index over a compound key, for equality and range queries and ordered scans.
///
/// Entries are ordered lexicographically by key components (``StoredValue/compare(_:_:)``), then by identifier.
/// The tree is a multiset: the store never inserts the same (key, identifier) twice, and this type does not
/// spend a search checking it.
///
/// ## Layout
/// A sorted array of sorted chunks of at most ``chunkCapacity`` (512) entries. A search is a binary search over
/// the chunks' last entries and then one within a chunk, so O(log n) comparisons; an insert or remove moves at
/// most a chunk's worth of entries, plus, on the rare split or merge, the top-level array of chunk references
/// (n / 256 words, one `memmove`). Compared with a B+tree this is far less code, scans are tight loops over
/// contiguous memory, and bulk loading is one sort and a slicing pass. Counting a range adds up chunk sizes:
/// O(n / 256), about two thousand additions at a million entries.
///
/// Each entry (48 bytes) holds a 128-bit order-preserving digest of its key (``digest(count:_:)``), an optional
/// array of the key's values, and the identifier. Comparing digests decides almost every comparison of inserts,
/// removes and the bulk-load sort from the chunk alone, without reaching the keys scattered in memory. When the
/// digest determines the key exactly (nulls, booleans, numbers below 2^53 and dates, as long as they fit: every
/// key of a boolean and a date does), the entry holds no array: its key is decoded from the digest when read,
/// one component at a time and without allocating when compared. Other keys (strings, UUIDs, large numbers...)
/// keep their array. ``outOfLineKeys`` counts those.
///
/// ## Value semantics
/// `IndexTree` is a struct whose storage is nested arrays, so it is copy-on-write with structural sharing:
/// copying it (say, to hand a consistent snapshot to a fetch on another actor) is O(1), and the first mutation
/// of the copy duplicates only the top level (one retain per chunk) and the one chunk it touches, not the data.
/// A final class would have to be cloned in full, O(n), for the same snapshots.
struct IndexTree: Sendable {
    /// The number of key components of every entry.
    let keyCount: Int
    /// Chunks above this size split in two; it bounds the entries one insert or remove moves.
    let chunkCapacity: Int
    /// The number of entries.
    private(set) var count = 0
    /// Sorted runs that, concatenated, are the whole index in order. No chunk is empty. Every entry has its
    /// digest, and an array of values only when the digest is not exact.
    private var chunks: [[IndexEntry]] = []

    /// Creates an empty index.
    ///
    /// - Parameter chunkCapacity: tests pass a tiny capacity to exercise splits and merges.
    init(keyCount: Int, chunkCapacity: Int = 512) {
        precondition(keyCount > 0, "an index has at least one key component")
        precondition(chunkCapacity >= 4, "chunks hold at least four entries")
        self.keyCount = keyCount
        self.chunkCapacity = chunkCapacity
    }

    /// Chunks below this size merge with a neighbour, keeping the top level near n / 256 chunks long.
    private var minChunk: Int { chunkCapacity / 4 }
    /// Bulk loading fills chunks to this size, leaving room for inserts before the first splits.
    private var loadChunk: Int { chunkCapacity * 3 / 4 }

    /// The sizes of the chunks, for tests of the layout invariants.
    var chunkSizes: [Int] { chunks.map(\.count) }

    /// How many entries hold their key in an array of their own (a heap block each), rather than in the digest
    /// alone: for tests of the layout.
    ///
    /// - Complexity: O(n).
    var outOfLineKeys: Int { chunks.reduce(0) { n, chunk in chunk.reduce(n) { $1.values == nil ? $0 : $0 + 1 } } }

    // MARK: - Mutation

    /// Adds an entry. O(log n) comparisons, at most ``chunkCapacity`` entries moved.
    mutating func insert(key: [StoredValue], id: PersistentIdentifier) {
        precondition(key.count == keyCount, "key has \(key.count) components, the index \(keyCount)")
        let entry = Self.entry(key: key, id: id)
        count += 1
        guard !chunks.isEmpty else {
            chunks = [[entry]]
            return
        }
        // After every entry that sorts before or equal to it, so equal entries keep their insertion order.
        var at = firstPosition { Self.order($0, entry) > 0 }
        if at.chunk == chunks.count {
            at = Position(chunk: chunks.count - 1, offset: chunks[chunks.count - 1].count)
        }
        // A full chunk doubles, but never past the most it holds before splitting (the default growth would
        // leave bulk-loaded and split chunks with up to twice the memory they can use).
        let size = chunks[at.chunk].count
        if size == chunks[at.chunk].capacity {
            chunks[at.chunk].reserveCapacity(min(chunkCapacity + 1, max(2 * size, 16)))
        }
        chunks[at.chunk].insert(entry, at: at.offset)
        if chunks[at.chunk].count > chunkCapacity { split(at.chunk) }
    }

    /// Removes one entry equal to (key, id) in the index order.
    ///
    /// - Returns: whether such an entry was present.
    @discardableResult
    mutating func remove(key: [StoredValue], id: PersistentIdentifier) -> Bool {
        guard key.count == keyCount else { return false }
        let entry = Self.entry(key: key, id: id)
        let at = firstPosition { Self.order($0, entry) >= 0 }
        guard at.chunk < chunks.count, Self.order(chunks[at.chunk][at.offset], entry) == 0 else { return false }
        chunks[at.chunk].remove(at: at.offset)
        count -= 1
        if chunks[at.chunk].count < minChunk { rebalance(at.chunk) }
        return true
    }

    /// Replaces the whole content with `entries` (made from keys, or handed out by a tree): one O(n log n) sort
    /// (O(n) when the input is already in order), then slicing into evenly filled chunks.
    mutating func bulkLoad(_ entries: [IndexEntry]) {
        load(entries.map { entry in
            // An entry without values has a tree's exact digest already.
            guard let key = entry.values else { return entry }
            precondition(key.count == keyCount, "every key needs \(keyCount) components")
            return Self.entry(key: key, id: entry.id)
        })
    }

    /// Replaces the whole content with the entries of `rows` (nil ones skipped), whose key is the attributes at
    /// `slots`, as ``bulkLoad(_:)`` does, but building a key array only for the rows whose digest does not
    /// determine the key.
    mutating func bulkLoad(_ rows: some Collection<ModelSnapshot?>, slots: [Int]) {
        precondition(slots.count == keyCount, "every key needs \(keyCount) components")
        var entries: [IndexEntry] = []
        entries.reserveCapacity(rows.count)
        // Rows bound in place (`case let row?`), not copied out: a copy would retain each row's arrays.
        for case let row? in rows {
            let (digest, isExact) = Self.digest(count: slots.count) { row.attributes[slots[$0]] }
            entries.append(IndexEntry(digest: digest, values: isExact ? nil : slots.map { row.attributes[$0] }, id: row.id))
        }
        load(entries)
    }

    /// Replaces the whole content with `entries`, each a tree's (with its digest).
    private mutating func load(_ entries: [IndexEntry]) {
        // Sort (digest, position) pairs rather than entries: the pairs are small and trivial, so the sort moves
        // no reference-counted values, and it reads an entry's key only when digests tie.
        var order = entries.indices.map { i in (digest: entries[i].digest & Self.orderMask, index: i) }
        order.sort { a, b in
            if a.digest != b.digest && a.digest & b.digest & Self.usable != 0 { return a.digest < b.digest }
            return Self.order(entries[a.index], entries[b.index]) < 0
        }
        count = entries.count
        chunks = []
        guard !entries.isEmpty else { return }
        // Even sizes (differing by at most one) so no tail chunk starts out below `minChunk`.
        let n = entries.count, parts = (n + loadChunk - 1) / loadChunk
        chunks.reserveCapacity(parts)
        for i in 0..<parts {
            chunks.append(order[n * i / parts ..< n * (i + 1) / parts].map { entries[$0.index] })
        }
    }

    /// Splits an overfull chunk into two halves.
    private mutating func split(_ c: Int) {
        let half = chunks[c].count / 2
        let tail = Array(chunks[c][half...])
        chunks[c].removeSubrange(half...)  // keeps its capacity for the inserts to come
        chunks.insert(tail, at: c + 1)
    }

    /// Merges an underfull chunk with its smaller neighbour, or evens the two out when they would overfill one.
    private mutating func rebalance(_ c: Int) {
        guard chunks.count > 1 else {
            if chunks[c].isEmpty { chunks.removeAll() }
            return
        }
        let useLeft = c == chunks.count - 1 || (c > 0 && chunks[c - 1].count <= chunks[c + 1].count)
        let left = useLeft ? c - 1 : c, right = left + 1
        let total = chunks[left].count + chunks[right].count
        if total <= chunkCapacity {
            let moved = chunks.remove(at: right)
            chunks[left].append(contentsOf: moved)
            return
        }
        let excess = chunks[left].count - total / 2
        if excess > 0 {
            let tail = Array(chunks[left].suffix(excess))
            chunks[left].removeLast(excess)
            chunks[right].insert(contentsOf: tail, at: 0)
        } else {
            let head = Array(chunks[right].prefix(-excess))
            chunks[right].removeFirst(-excess)
            chunks[left].append(contentsOf: head)
        }
    }

    // MARK: - Queries

    /// Visits the entries whose key lies between the bounds (nil = unbounded), in ascending order, or descending
    /// when `reverse` is true, until `body` returns false.
    ///
    /// The entries are the tree's own (see ``IndexEntry``): handing one over allocates nothing, reading its
    /// ``IndexEntry/key`` may.
    ///
    /// - Complexity: O(log n) to find the range, then O(1) per entry visited.
    func scan(from lower: IndexBound?, to upper: IndexBound?, reverse: Bool = false,
              _ body: (IndexEntry) -> Bool) {
        guard let (lo, hi) = range(lower, upper) else { return }
        // `hi` is exclusive and may be the end position (chunk == chunks.count, offset 0).
        let chunkRange = lo.chunk...min(hi.chunk, chunks.count - 1)
        func offsets(_ c: Int) -> Range<Int> {
            (c == lo.chunk ? lo.offset : 0) ..< (c == hi.chunk ? hi.offset : chunks[c].count)
        }
        if reverse {
            for c in chunkRange.reversed() {
                for i in offsets(c).reversed() where !body(chunks[c][i]) { return }
            }
        } else {
            for c in chunkRange {
                for i in offsets(c) where !body(chunks[c][i]) { return }
            }
        }
    }

    /// The number of entries whose key lies between the bounds (nil = unbounded).
    ///
    /// - Complexity: O(log n) comparisons plus one addition per chunk in the range, without visiting entries.
    func count(from lower: IndexBound?, to upper: IndexBound?) -> Int {
        if lower == nil && upper == nil { return count }
        guard let (lo, hi) = range(lower, upper) else { return 0 }
        if lo.chunk == hi.chunk { return hi.offset - lo.offset }
        var n = chunks[lo.chunk].count - lo.offset + hi.offset  // hi.offset is 0 at the end position
        for c in lo.chunk + 1 ..< hi.chunk { n += chunks[c].count }
        return n
    }

    /// A scan of the entries between the bounds (nil = unbounded), ascending or descending when `reverse`, read
    /// one entry at a time: for merging this index with another ordered source (``RowBase/scanIndex``).
    ///
    /// The cursor holds its own copy of the tree (O(1), copy-on-write), so later changes to the tree do not move it.
    func cursor(from lower: IndexBound?, to upper: IndexBound?, reverse: Bool = false) -> Cursor {
        guard let (lo, hi) = range(lower, upper) else { return Cursor(chunks: [], at: nil, stop: nil, reverse: reverse) }
        if !reverse { return Cursor(chunks: chunks, at: lo, stop: hi, reverse: false) }
        // Descending: from the last entry before `hi` down to `lo`.
        let last = hi.offset > 0 ? Position(chunk: hi.chunk, offset: hi.offset - 1)
            : Position(chunk: hi.chunk - 1, offset: chunks[hi.chunk - 1].count - 1)
        return Cursor(chunks: chunks, at: last, stop: lo, reverse: true)
    }

    /// One place in a scan (see ``cursor(from:to:reverse:)``).
    struct Cursor {
        private let chunks: [[IndexEntry]]
        /// The entry the cursor is on; nil once past the range.
        private var at: Position?
        /// Ascending: the exclusive end; descending: the inclusive first position.
        private let stop: Position?
        private let reverse: Bool

        fileprivate init(chunks: [[IndexEntry]], at: Position?, stop: Position?, reverse: Bool) {
            self.chunks = chunks
            self.at = at
            self.stop = stop
            self.reverse = reverse
        }

        /// The current entry (the tree's own, as ``IndexTree/scan(from:to:reverse:_:)`` hands out), or nil when
        /// the scan is over.
        var entry: IndexEntry? { at.map { chunks[$0.chunk][$0.offset] } }

        /// Moves to the next entry of the scan.
        mutating func advance() {
            guard var position = at, let stop else { return }
            if reverse {
                if position.offset > 0 { position.offset -= 1 } else if position.chunk > 0 {
                    position.chunk -= 1
                    position.offset = chunks[position.chunk].count - 1
                } else { at = nil; return }
                at = position < stop ? nil : position
            } else {
                position.offset += 1
                if position.offset == chunks[position.chunk].count { position = Position(chunk: position.chunk + 1, offset: 0) }
                at = position < stop ? position : nil
            }
        }
    }

    // MARK: - Positions

    /// A place between entries: before entry `offset` of chunk `chunk`. The end is (chunks.count, 0).
    fileprivate struct Position: Comparable {
        var chunk: Int
        var offset: Int
        static func < (a: Position, b: Position) -> Bool { (a.chunk, a.offset) < (b.chunk, b.offset) }
    }

    /// The half-open range of positions between two bounds, or nil when it is empty.
    private func range(_ lower: IndexBound?, _ upper: IndexBound?) -> (Position, Position)? {
        // An inclusive lower bound starts at the first key >= it, an exclusive one at the first key > it;
        // an inclusive upper bound ends before the first key > it, an exclusive one before the first key >= it.
        let lo = lower.map { position(of: $0, after: !$0.isInclusive) } ?? Position(chunk: 0, offset: 0)
        let hi = upper.map { position(of: $0, after: $0.isInclusive) } ?? Position(chunk: chunks.count, offset: 0)
        return lo < hi ? (lo, hi) : nil
    }

    /// The first position whose entry's key prefix sorts after the bound (`after`) or at or after it.
    private func position(of bound: IndexBound, after: Bool) -> Position {
        firstPosition { entry in
            let c = Self.order(entry, prefix: bound.values)
            return after ? c > 0 : c >= 0
        }
    }

    /// The first position whose entry satisfies `isPast`, which must be false for a prefix of the entries and
    /// true for the rest; the end position when it holds for none.
    private func firstPosition(where isPast: (IndexEntry) -> Bool) -> Position {
        // The first chunk whose last entry is past holds the answer (its earlier chunks hold none).
        var lo = 0, hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if isPast(chunks[mid][chunks[mid].count - 1]) { hi = mid } else { lo = mid + 1 }
        }
        guard lo < chunks.count else { return Position(chunk: chunks.count, offset: 0) }
        let chunk = lo
        lo = 0
        hi = chunks[chunk].count - 1  // known to be past
        while lo < hi {
            let mid = (lo + hi) / 2
            if isPast(chunks[chunk][mid]) { hi = mid } else { lo = mid + 1 }
        }
        return Position(chunk: chunk, offset: lo)
    }

    // MARK: - Order

    /// The order of the index (negative when `a` comes first, 0 when equal, positive after): key components in
    /// turn (``StoredValue/compare(_:_:)``), then identifiers. Digests decide when they can; keys held in a digest
    /// alone are read from it, without allocating.
    @inline(__always)
    static func order(_ a: IndexEntry, _ b: IndexEntry) -> Int {
        let da = a.digest & orderMask, db = b.digest & orderMask
        if da != db && da & db & usable != 0 { return da < db ? -1 : 1 }
        if da == db && da & complete != 0 { return compareIDs(a.id, b.id) }
        let c: Int
        if let x = a.values, let y = b.values {
            c = compareKeys(x, y, count: min(x.count, y.count))
        } else {
            c = compareKeys(KeyReader(a), KeyReader(b))
        }
        return c != 0 ? c : compareIDs(a.id, b.id)
    }

    /// How the first `bound.count` components of `entry`'s key compare with `bound`.
    @inline(__always)
    fileprivate static func order(_ entry: IndexEntry, prefix bound: [StoredValue]) -> Int {
        if let key = entry.values { return compareKeys(key, bound, count: min(key.count, bound.count)) }
        return compareKeys(KeyReader(entry), KeyReader(bound))
    }

    /// Compares the first `n` components of two keys, without allocating.
    @inline(__always)
    fileprivate static func compareKeys(_ a: [StoredValue], _ b: [StoredValue], count n: Int) -> Int {
        for i in 0..<n {
            let c = StoredValue.compare(a[i], b[i])
            if c != 0 { return c }
        }
        return 0
    }

    /// Compares two keys component by component until either ends.
    private static func compareKeys(_ a: KeyReader, _ b: KeyReader) -> Int {
        var a = a, b = b
        while let x = a.next(), let y = b.next() {
            let c = StoredValue.compare(x, y)
            if c != 0 { return c }
        }
        return 0
    }

    /// The order of `PersistentIdentifier`'s `<` (entity name, then key bytes), as one three-way comparison:
    /// the 16 key bytes compare as two big-endian words instead of byte by byte.
    @inline(__always)
    private static func compareIDs(_ a: PersistentIdentifier, _ b: PersistentIdentifier) -> Int {
        if a.entityName != b.entityName { return a.entityName < b.entityName ? -1 : 1 }
        let x = words(a.primaryKey), y = words(b.primaryKey)
        return x < y ? -1 : (x == y ? 0 : 1)
    }

    @inline(__always)
    fileprivate static func words(_ uuid: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) {
            (UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)),
             UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }
}

// MARK: - Digests

extension IndexTree {
    /// Digest flags: `usable` is false for keys with a decimal, which compares with other numbers through a
    /// conversion the digest cannot mirror; `complete` says every component was written exactly, so equal digests
    /// mean keys equal in the order.
    fileprivate static let usable: UInt128 = 1, complete: UInt128 = 2
    /// Bits 2 and 3 say which case the key's number was (``Representation``). They are not part of the order:
    /// `.int(5)` and `.double(5)` compare equal.
    private static let representationShift = 2
    fileprivate static let orderMask: UInt128 = ~(0b11 << 2)

    /// Which case of `StoredValue` a complete digest's number component (a key has at most one: two take more
    /// bits than a digest has) was.
    private enum Representation: UInt128 {
        case int = 0, uint = 1, double = 2
    }

    /// The tree's entry for `key` and `id`: with the key's digest, and without its array when the digest is exact.
    fileprivate static func entry(key: [StoredValue], id: PersistentIdentifier) -> IndexEntry {
        let (digest, isExact) = digest(count: key.count) { key[$0] }
        return IndexEntry(digest: digest, values: isExact ? nil : key, id: id)
    }

    /// An order-preserving 128-bit summary of a key's leading components, and whether it determines the key's
    /// values exactly (so the key needs no array).
    ///
    /// For keys `a`, `b`: digest(a) < digest(b) (less bits 2 and 3) implies a < b, so unequal digests decide a
    /// comparison without reading the keys. Components are written in order from the top bit down to bit 4, each a
    /// 4-bit kind tag (one more than the kind's rank in `StoredValue.compare`, so that 0 marks the end of a
    /// complete key) and then value bits: a bit for a boolean, 64 order bits for a number (its `Double` value) or a
    /// date. Writing stops after the first component whose bits do not identify its value (strings, UUIDs, data,
    /// large numbers...), because later components only matter when that one is equal. The low bits are the
    /// flags (``usable``, ``complete``) and the number's ``Representation``.
    ///
    /// A digest is exact when it is complete and its number or date is not `-0.0` (which orders as `0.0` but
    /// differs from it as a stored value).
    @inline(__always)
    static func digest(count: Int, _ component: (Int) -> StoredValue) -> (digest: UInt128, isExact: Bool) {
        var bits: UInt128 = 0, used = 0, isComplete = true, isExact = true
        var representation: Representation?
        func write(_ value: UInt64, width: Int) {
            let fits = min(width, 124 - used)  // bits 0 to 3 stay free
            if fits < width { isComplete = false }
            guard fits > 0 else { return }
            bits |= (UInt128(value) >> (width - fits)) << (128 - used - fits)
            used += fits
        }
        components: for i in 0..<count {
            let value = component(i)
            switch value {
            case .null: write(1, width: 4)
            case .bool(let b): write(2, width: 4); write(b ? 1 : 0, width: 1)
            case .int, .uint, .double:
                // Numbers of every representation compare through their Double value (exactly below 2^53).
                let d = value.doubleValue ?? .nan
                write(3, width: 4); write(Self.orderBits(d), width: 64)
                if !(abs(d) < 0x1p53) { isComplete = false; break components }
                if representation != nil || (d == 0 && d.sign == .minus) { isExact = false }
                representation = switch value {
                case .int: .int
                case .uint: .uint
                default: .double
                }
            case .decimal: return (0, false)
            case .string: write(4, width: 4); isComplete = false; break components
            case .date(let date):
                let t = date.timeIntervalSinceReferenceDate
                write(5, width: 4); write(Self.orderBits(t), width: 64)
                if t.isNaN { isComplete = false; break components }
                if t == 0 && t.sign == .minus { isExact = false }
            case .data, .external: write(6, width: 4); isComplete = false; break components
            case .uuid(let u):
                write(7, width: 4); write(IndexTree.words(u).0, width: 64)
                isComplete = false; break components
            case .array: write(8, width: 4); isComplete = false; break components
            case .dictionary: write(9, width: 4); isComplete = false; break components
            }
        }
        bits |= usable | (isComplete ? complete : 0)
        bits |= (representation?.rawValue ?? 0) << representationShift
        return (bits, isComplete && isExact)
    }

    /// Bits whose unsigned order is the order of `StoredValue.compare` on doubles (-0 == 0, NaN last).
    private static func orderBits(_ d: Double) -> UInt64 {
        let bits = (d == 0 ? 0.0 : d.isNaN ? .nan : d).bitPattern
        return bits >> 63 == 1 ? ~bits : bits | 1 << 63
    }

    /// The double whose ``orderBits(_:)`` are `bits` (for any but NaN and -0, which orderBits merges).
    private static func double(orderBits bits: UInt64) -> Double {
        Double(bitPattern: bits >> 63 == 1 ? bits & ~(1 << 63) : ~bits)
    }

    /// The values of a key an exact digest determines.
    static func values(of digest: UInt128) -> [StoredValue] {
        var reader = KeyReader(digest: digest)
        var values: [StoredValue] = []
        while let value = reader.next() { values.append(value) }
        return values
    }

    /// Reads a key's components in order, from its array or decoded from an exact digest, without allocating.
    private struct KeyReader {
        private let values: [StoredValue]?
        private var index = 0
        /// The components still to decode, in the top bits.
        private var bits: UInt128
        private let representation: Representation

        init(_ entry: IndexEntry) {
            if let values = entry.values { self.init(values) } else { self.init(digest: entry.digest) }
        }

        init(_ values: [StoredValue]) {
            self.values = values
            bits = 0
            representation = .int
        }

        init(digest: UInt128) {
            values = nil
            bits = digest & ~0b1111
            representation = Representation(rawValue: digest >> IndexTree.representationShift & 0b11) ?? .double
        }

        /// The next component, or nil after the last.
        mutating func next() -> StoredValue? {
            if let values {
                guard index < values.count else { return nil }
                index += 1
                return values[index - 1]
            }
            let kind = bits >> 124
            bits <<= 4
            func take(_ width: Int) -> UInt64 {
                defer { bits <<= width }
                return UInt64(truncatingIfNeeded: bits >> (128 - width))
            }
            switch kind {
            case 0: return nil
            case 1: return .null
            case 2: return .bool(take(1) == 1)
            case 3:
                let d = IndexTree.double(orderBits: take(64))
                switch representation {
                case .int: return .int(Int64(d))
                case .uint: return .uint(UInt64(d))
                case .double: return .double(d)
                }
            case 5: return .date(Date(timeIntervalSinceReferenceDate: IndexTree.double(orderBits: take(64))))
            default:
                // An exact digest holds no other kind.
                assertionFailure("a key digest is not exact")
                return nil
            }
        }
    }
}

extension IndexEntry {
    /// The order of an ``IndexTree``'s entries, as a three-way comparison: key components in turn
    /// (``StoredValue/compare(_:_:)``), then identifiers. For what keeps an index outside memory (the file store's
    /// checkpoint) in the same order as the tree. It reads no key array an entry does not hold.
    package static func compare(_ a: IndexEntry, _ b: IndexEntry) -> Int { IndexTree.order(a, b) }

    /// How the first `bound.count` components of `key` compare with `bound`: the comparison an ``IndexBound``
    /// makes in an ``IndexTree``.
    package static func compare(_ key: [StoredValue], prefix bound: [StoredValue]) -> Int {
        IndexTree.compareKeys(key, bound, count: min(key.count, bound.count))
    }
}

extension IndexTree {
    /// Every entry, in order.
    var entries: [IndexEntry] {
        var entries: [IndexEntry] = []
        entries.reserveCapacity(count)
        scan(from: nil, to: nil) { entries.append($0); return true }
        return entries
    }
}
