/// The position of each row of a table, found by the row's identifier: a hash table that stores positions only.
///
/// A `[PersistentIdentifier: Int]` stores each identifier a second time (24 bytes) beside its position (8), in
/// a power of two of buckets between three eighths and three quarters full: 32 bytes a bucket, 42 to 84 bytes a row
/// (67 at a million rows). The rows already hold their identifiers, so this table keeps one 8-byte word a bucket:
/// the row's position and 32 bits of its identifier's hash. A look-up finds the words whose hash bits match and
/// confirms each by reading that row's identifier through `identity` (almost always exactly one read); growing and
/// removing move words by their hash bits and read no row. 10 bytes a row when reserved for its rows (a replay
/// reserves each table's), at most 20 when grown by inserts.
///
/// Linear probing in an array of words of any size, at most four fifths full; a word's first probe is its hash
/// bits scaled to the size (a multiply and a shift, so that a size need not be a power of two). A removal shifts
/// the words after it back (no tombstones), so a look-up stops at the first empty word.
///
/// Positions are below 2³² − 1 (a table of four billion rows in memory would need hundreds of gigabytes first).
package struct RowPositions: Sendable {
    /// 0: empty. Otherwise `(position + 1) << 32 | hash bits`.
    private var words: [UInt64] = []
    /// The number of positions held.
    package private(set) var count = 0

    package init() {}

    /// The 32 bits of `id`'s hash a word keeps (the process's seeded hash, as a dictionary's).
    package static func hashBits(_ id: PersistentIdentifier) -> UInt32 { UInt32(truncatingIfNeeded: id.hashValue) }

    /// Where a look-up found an identifier: its word and its row's position.
    package struct Found {
        fileprivate let word: Int
        package let position: Int
    }

    // MARK: By identifier

    /// Where `id` is, if held: its row's position (and its word, for ``remove(_:)``); `identity` gives the
    /// identifier of the row at a position held here.
    ///
    /// - Complexity: O(1) on average: one hash, and one `identity` call for each word whose hash bits match.
    package func find(_ id: PersistentIdentifier, identity: (Int) -> PersistentIdentifier) -> Found? {
        find(hashBits: Self.hashBits(id)) { identity($0) == id }
    }

    /// Adds `id` at `position`.
    ///
    /// - Precondition: `id` is not held (the callers know a row is new, or look it up first), and `position` is
    ///   below 2³² − 1.
    package mutating func insert(_ id: PersistentIdentifier, at position: Int) {
        insert(hashBits: Self.hashBits(id), at: position)
    }

    // MARK: By hash bits (what the identifier forms call, and what tests use to force collisions)

    /// The first word whose hash bits are `hashBits` and whose position `matches` accepts.
    package func find(hashBits: UInt32, matches: (Int) -> Bool) -> Found? {
        guard count > 0 else { return nil }
        let size = words.count
        var at = Self.home(hashBits, size)
        while true {
            let word = words[at]
            if word == 0 { return nil }
            if UInt32(truncatingIfNeeded: word) == hashBits {
                let position = Int(word >> 32) - 1
                if matches(position) { return Found(word: at, position: position) }
            }
            at += 1
            if at == size { at = 0 }
        }
    }

    /// Adds a word for `position` with `hashBits`.
    ///
    /// - Precondition: `position` is below 2³² − 1.
    package mutating func insert(hashBits: UInt32, at position: Int) {
        precondition(position >= 0 && position < Int(UInt32.max), "a row position beyond 2^32 - 2")
        if !Self.fits(count + 1, in: words.count) { grow(toHold: max(count + 1, 2 * count)) }
        place(UInt64(position + 1) << 32 | UInt64(hashBits))
        count += 1
    }

    /// Removes what `found` (from a look-up since the last change) points at.
    package mutating func remove(_ found: Found) {
        let size = words.count
        var hole = found.word
        var next = hole + 1 == size ? 0 : hole + 1
        // Shift back every word after the hole that is not already at or past its home (its first probe).
        while words[next] != 0 {
            let home = Self.home(UInt32(truncatingIfNeeded: words[next]), size)
            // The word may fill the hole when its home is not in (hole, next], cyclically.
            let fits = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if fits {
                words[hole] = words[next]
                hole = next
            }
            next = next + 1 == size ? 0 : next + 1
        }
        words[hole] = 0
        count -= 1
    }

    /// Makes room for `capacity` positions in all, so that adding up to that many grows no more.
    package mutating func reserveCapacity(_ capacity: Int) {
        if !Self.fits(capacity, in: words.count) { grow(toHold: capacity) }
    }

    /// Removes every position, keeping the words when asked (as a dictionary's `removeAll(keepingCapacity:)`).
    package mutating func removeAll(keepingCapacity: Bool = false) {
        if keepingCapacity { words = [UInt64](repeating: 0, count: words.count) } else { words = [] }
        count = 0
    }

    /// The bytes the table's words take (for tests of what a row costs).
    package var heldBytes: Int { words.isEmpty ? 0 : 32 + 8 * words.count }

    // MARK: Private

    /// The first probe of a word with `hashBits` among `size` words: the bits scaled to `0..<size`.
    private static func home(_ hashBits: UInt32, _ size: Int) -> Int {
        Int((UInt64(hashBits) &* UInt64(size)) >> 32)
    }

    /// Whether `count` positions fit in `size` words, at most four fifths full.
    private static func fits(_ count: Int, in size: Int) -> Bool { count * 5 <= size * 4 }

    private mutating func place(_ word: UInt64) {
        let size = words.count
        var at = Self.home(UInt32(truncatingIfNeeded: word), size)
        while words[at] != 0 {
            at += 1
            if at == size { at = 0 }
        }
        words[at] = word
    }

    /// Re-places every word in the fewest words, at least 16, that hold `needed` at four fifths full.
    private mutating func grow(toHold needed: Int) {
        let size = max(16, (needed * 5 + 3) / 4)
        guard size > words.count else { return }
        let old = words
        words = [UInt64](repeating: 0, count: size)
        for word in old where word != 0 { place(word) }
    }
}
