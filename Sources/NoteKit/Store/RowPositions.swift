/// The position of each row of a table, found by the row's identifier: a hash table that stores positions only.
///
/// A `[PersistentIdentifier: Int]` stores each identifier a second time (24 bytes) beside its position (8), in
/// buckets that are between three eighths and three quarters full: 32 bytes a bucket, 42 to 84 bytes a row (67 at a
/// million rows). The rows already hold their identifiers, so this table keeps one 8-byte word a bucket: the row's
/// position and 32 bits of its identifier's hash. A look-up finds the buckets whose hash bits match and confirms each
/// by reading that row's identifier through `identity` (almost always exactly one read); growing and removing move
/// words by their hash bits and read no row. About 8 to 21 bytes a row (17 at a million).
///
/// Linear probing in a power-of-two array of words, at most three quarters full; a removal shifts the words after
/// it back (no tombstones), so a look-up stops at the first empty word.
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

    /// The position of `id`, if held; `identity` gives the identifier of the row at a position held here.
    ///
    /// - Complexity: O(1) on average: one hash, and one `identity` call for each word whose hash bits match.
    package func position(of id: PersistentIdentifier, identity: (Int) -> PersistentIdentifier) -> Int? {
        find(id, identity: identity)?.position
    }

    /// Where `id` is, if held (for ``remove(_:)``).
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
        let mask = words.count - 1
        var at = Int(hashBits) & mask
        while true {
            let word = words[at]
            if word == 0 { return nil }
            if UInt32(truncatingIfNeeded: word) == hashBits {
                let position = Int(word >> 32) - 1
                if matches(position) { return Found(word: at, position: position) }
            }
            at = (at + 1) & mask
        }
    }

    /// Adds a word for `position` with `hashBits`.
    ///
    /// - Precondition: `position` is below 2³² − 1.
    package mutating func insert(hashBits: UInt32, at position: Int) {
        precondition(position >= 0 && position < Int(UInt32.max), "a row position beyond 2^32 - 2")
        if (count + 1) * 4 > words.count * 3 { grow(toHold: count + 1) }
        place(UInt64(position + 1) << 32 | UInt64(hashBits))
        count += 1
    }

    /// Removes what `found` (from a look-up since the last change) points at.
    package mutating func remove(_ found: Found) {
        let mask = words.count - 1
        var hole = found.word
        var next = (hole + 1) & mask
        // Shift back every word after the hole that is not already at or past its home (its first probe).
        while words[next] != 0 {
            let home = Int(UInt32(truncatingIfNeeded: words[next])) & mask
            // The word may fill the hole when its home is not in (hole, next], cyclically.
            let fits = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if fits {
                words[hole] = words[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        words[hole] = 0
        count -= 1
    }

    /// Makes room for `capacity` positions in all, so that adding up to that many grows no more.
    package mutating func reserveCapacity(_ capacity: Int) {
        if capacity * 4 > words.count * 3 { grow(toHold: capacity) }
    }

    /// Removes every position, keeping the words when asked (as a dictionary's `removeAll(keepingCapacity:)`).
    package mutating func removeAll(keepingCapacity: Bool = false) {
        if keepingCapacity { words = [UInt64](repeating: 0, count: words.count) } else { words = [] }
        count = 0
    }

    /// The bytes the table's words take (for tests of what a row costs).
    package var heldBytes: Int { words.isEmpty ? 0 : 32 + 8 * words.count }

    // MARK: Private

    private mutating func place(_ word: UInt64) {
        let mask = words.count - 1
        var at = Int(UInt32(truncatingIfNeeded: word)) & mask
        while words[at] != 0 { at = (at + 1) & mask }
        words[at] = word
    }

    /// Re-places every word in the smallest power of two, at least 16, that holds `needed` at three quarters full.
    private mutating func grow(toHold needed: Int) {
        var size = 16
        while needed * 4 > size * 3 { size *= 2 }
        guard size > words.count else { return }
        let old = words
        words = [UInt64](repeating: 0, count: size)
        for word in old where word != 0 { place(word) }
    }
}
