/// What a checkpoint read lately (its pages, one entity's rows), kept to answer the next reads without reading or
/// decoding again, up to a fixed number of entries: a read of the whole store keeps no more than a read of a few
/// rows, as SQLite's page cache is bounded (`PRAGMA cache_size`, 2,000 KiB by default).
///
/// Two generations: entries go into the recent one; when it holds `limit / 2`, it becomes the older one (the
/// previous older one is dropped) and a new recent one starts. A hit in the older generation moves the entry into
/// the recent one. So what is read again and again stays, what one scan passed over leaves after at most `limit`
/// more reads, and no entry carries a use count or list links. At most `limit` entries are held.
struct RecentlyRead<Value> {
    private var recent: [Int: Value] = [:]
    private var older: [Int: Value] = [:]
    private let half: Int

    /// A cache of at most `limit` entries (at least 2).
    init(limit: Int) { half = max(1, limit / 2) }

    /// The entry for `key`, if kept; a hit in the older generation is moved to the recent one.
    ///
    /// - Complexity: O(1) on average.
    mutating func value(for key: Int) -> Value? {
        if let value = recent[key] { return value }
        guard let value = older.removeValue(forKey: key) else { return nil }
        insert(value, for: key)
        return value
    }

    /// Keeps `value` for `key` (replacing what was kept).
    ///
    /// - Complexity: O(1) on average; O(`limit`) once every `limit / 2` inserts, when a generation is dropped.
    mutating func insert(_ value: Value, for key: Int) {
        if recent[key] == nil, recent.count >= half {
            older = recent
            recent = [:]
            recent.reserveCapacity(half)
        }
        recent[key] = value
        older[key] = nil
    }

    /// The number of entries held (for tests: never above the limit).
    var count: Int { recent.count + older.count }
}
