#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One entry of an ``IndexTree``: the indexed attribute values of a row, and the row's identifier.
///
/// The identifier is the last sort component, so rows with equal keys still have one deterministic order.
package struct IndexEntry: Sendable, Hashable {
    package var key: [StoredValue]
    package var id: PersistentIdentifier
    package init(key: [StoredValue], id: PersistentIdentifier) {
        self.key = key
        self.id = id
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
/// Each entry is stored with a 128-bit order-preserving digest of its key (``Slot``). Keys are separate heap
/// arrays scattered in memory, so comparing two of them costs cache misses and reference counting; comparing
/// digests decides almost every comparison of inserts, removes and the bulk-load sort from the chunk alone.
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
    /// Sorted runs that, concatenated, are the whole index in order. No chunk is empty.
    private var chunks: [[Slot]] = []

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

    // MARK: - Mutation

    /// Adds an entry. O(log n) comparisons, at most ``chunkCapacity`` entries moved.
    mutating func insert(key: [StoredValue], id: PersistentIdentifier) {
        precondition(key.count == keyCount, "key has \(key.count) components, the index \(keyCount)")
        let entry = Slot(IndexEntry(key: key, id: id))
        count += 1
        guard !chunks.isEmpty else {
            chunks = [[entry]]
            return
        }
        // After every entry that sorts before or equal to it, so equal entries keep their insertion order.
        var at = firstPosition { Self.compare($0, entry) > 0 }
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
        let entry = Slot(IndexEntry(key: key, id: id))
        let at = firstPosition { Self.compare($0, entry) >= 0 }
        guard at.chunk < chunks.count, Self.compare(chunks[at.chunk][at.offset], entry) == 0 else { return false }
        chunks[at.chunk].remove(at: at.offset)
        count -= 1
        if chunks[at.chunk].count < minChunk { rebalance(at.chunk) }
        return true
    }

    /// Replaces the whole content at once: one O(n log n) sort (O(n) when the input is already in order), then
    /// slicing into evenly filled chunks.
    mutating func bulkLoad(_ entries: [IndexEntry]) {
        // Sort (digest, position) pairs rather than entries: the pairs are small and trivial, so the sort moves
        // no reference-counted values, and it reads an entry's key only when digests tie.
        var order = entries.indices.map { i in
            precondition(entries[i].key.count == keyCount, "every key needs \(keyCount) components")
            return (digest: Slot.digest(of: entries[i].key), index: i)
        }
        order.sort { a, b in
            if a.digest != b.digest && a.digest & b.digest & Slot.usable != 0 { return a.digest < b.digest }
            return Self.compare(entries[a.index], a.digest, entries[b.index], b.digest) < 0
        }
        count = entries.count
        chunks = []
        guard !entries.isEmpty else { return }
        // Even sizes (differing by at most one) so no tail chunk starts out below `minChunk`.
        let n = entries.count, parts = (n + loadChunk - 1) / loadChunk
        chunks.reserveCapacity(parts)
        for i in 0..<parts {
            chunks.append(order[n * i / parts ..< n * (i + 1) / parts].map {
                Slot(digest: $0.digest, entry: entries[$0.index])
            })
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
                for i in offsets(c).reversed() where !body(chunks[c][i].entry) { return }
            }
        } else {
            for c in chunkRange {
                for i in offsets(c) where !body(chunks[c][i].entry) { return }
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
        private let chunks: [[Slot]]
        /// The entry the cursor is on; nil once past the range.
        private var at: Position?
        /// Ascending: the exclusive end; descending: the inclusive first position.
        private let stop: Position?
        private let reverse: Bool

        fileprivate init(chunks: [[Slot]], at: Position?, stop: Position?, reverse: Bool) {
            self.chunks = chunks
            self.at = at
            self.stop = stop
            self.reverse = reverse
        }

        /// The current entry, or nil when the scan is over.
        var entry: IndexEntry? { at.map { chunks[$0.chunk][$0.offset].entry } }

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
        let n = min(bound.values.count, keyCount)
        return firstPosition { slot in
            let c = Self.compareKeys(slot.entry.key, bound.values, count: n)
            return after ? c > 0 : c >= 0
        }
    }

    /// The first position whose entry satisfies `isPast`, which must be false for a prefix of the entries and
    /// true for the rest; the end position when it holds for none.
    private func firstPosition(where isPast: (Slot) -> Bool) -> Position {
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

    @inline(__always)
    private static func compare(_ a: Slot, _ b: Slot) -> Int { compare(a.entry, a.digest, b.entry, b.digest) }

    /// Compares two entries: key components in turn, then identifiers; digests first when they decide.
    @inline(__always)
    private static func compare(_ a: IndexEntry, _ da: UInt128, _ b: IndexEntry, _ db: UInt128) -> Int {
        if da != db && da & db & Slot.usable != 0 { return da < db ? -1 : 1 }
        if da == db && da & Slot.complete != 0 { return compareIDs(a.id, b.id) }
        return order(a, b)
    }

    /// The order of the index (negative when `a` comes first, 0 when equal, positive after): key components in
    /// turn (``StoredValue/compare(_:_:)``), then identifiers. The digests only ever shortcut this comparison.
    @inline(__always)
    static func order(_ a: IndexEntry, _ b: IndexEntry) -> Int {
        let c = compareKeys(a.key, b.key, count: min(a.key.count, b.key.count))
        return c != 0 ? c : compareIDs(a.id, b.id)
    }

    /// Compares the first `n` components of two keys, without allocating.
    @inline(__always)
    private static func compareKeys(_ a: [StoredValue], _ b: [StoredValue], count n: Int) -> Int {
        for i in 0..<n {
            let c = StoredValue.compare(a[i], b[i])
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

extension IndexTree {
    /// An entry with a digest of its key: an order-preserving 128-bit summary of its leading components.
    ///
    /// For keys `a`, `b`: digest(a) < digest(b) implies a < b, so unequal digests decide a comparison without
    /// reading the keys. Components are written in order, each a 4-bit kind rank (the ranks of
    /// `StoredValue.compare`) and then value bits; writing stops after the first component whose bits do not
    /// identify its value (strings, UUIDs, data, large numbers...), because later components only matter
    /// when that one is equal. The low two bits are flags: `usable` (false for decimals, which compare with
    /// other numbers through a conversion the digest cannot mirror) and `complete` (every component was written
    /// exactly, so equal digests mean equal keys).
    fileprivate struct Slot {
        static let usable: UInt128 = 1, complete: UInt128 = 2
        var digest: UInt128
        var entry: IndexEntry

        init(_ entry: IndexEntry) { self.init(digest: Self.digest(of: entry.key), entry: entry) }
        init(digest: UInt128, entry: IndexEntry) {
            self.digest = digest
            self.entry = entry
        }

        static func digest(of key: [StoredValue]) -> UInt128 {
            var bits: UInt128 = 0, used = 0, isComplete = true
            func write(_ value: UInt64, width: Int) {
                let fits = min(width, 126 - used)  // the two flag bits stay free
                if fits < width { isComplete = false }
                guard fits > 0 else { return }
                bits |= (UInt128(value) >> (width - fits)) << (128 - used - fits)
                used += fits
            }
            components: for value in key {
                switch value {
                case .null: write(0, width: 4)
                case .bool(let b): write(1, width: 4); write(b ? 1 : 0, width: 1)
                case .int, .uint, .double:
                    // Numbers of every representation compare through their Double value (exactly below 2^53).
                    let d = value.doubleValue ?? .nan
                    write(2, width: 4); write(Self.orderBits(d), width: 64)
                    if !(abs(d) < 0x1p53) { isComplete = false; break components }
                case .decimal: return 0
                case .string: write(3, width: 4); isComplete = false; break components
                case .date(let date):
                    let t = date.timeIntervalSinceReferenceDate
                    write(4, width: 4); write(Self.orderBits(t), width: 64)
                    if t.isNaN { isComplete = false; break components }
                case .data, .external: write(5, width: 4); isComplete = false; break components
                case .uuid(let u):
                    write(6, width: 4); write(IndexTree.words(u).0, width: 64)
                    isComplete = false; break components
                case .array: write(7, width: 4); isComplete = false; break components
                case .dictionary: write(8, width: 4); isComplete = false; break components
                }
            }
            return bits | usable | (isComplete ? complete : 0)
        }

        /// Bits whose unsigned order is the order of `StoredValue.compare` on doubles (-0 == 0, NaN last).
        static func orderBits(_ d: Double) -> UInt64 {
            let bits = (d == 0 ? 0.0 : d.isNaN ? .nan : d).bitPattern
            return bits >> 63 == 1 ? ~bits : bits | 1 << 63
        }
    }
}

extension IndexEntry {
    /// The order of an ``IndexTree``'s entries, as a three-way comparison: key components in turn
    /// (``StoredValue/compare(_:_:)``), then identifiers. For what keeps an index outside memory (the file store's
    /// checkpoint) in the same order as the tree.
    package static func compare(_ a: IndexEntry, _ b: IndexEntry) -> Int { IndexTree.order(a, b) }

    /// How the first `bound.count` components of `key` compare with `bound`: the comparison an ``IndexBound``
    /// makes in an ``IndexTree``.
    package static func compare(_ key: [StoredValue], prefix bound: [StoredValue]) -> Int {
        IndexTree.order(key, prefix: bound)
    }
}

extension IndexTree {
    fileprivate static func order(_ key: [StoredValue], prefix bound: [StoredValue]) -> Int {
        compareKeys(key, bound, count: min(key.count, bound.count))
    }

    /// Every entry, in order.
    var entries: [IndexEntry] {
        var entries: [IndexEntry] = []
        entries.reserveCapacity(count)
        scan(from: nil, to: nil) { entries.append($0); return true }
        return entries
    }
}
