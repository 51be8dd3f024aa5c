/// Which pages or rows of a checkpoint this process has checked against their checksums: each is checked the first
/// time it is read and not again, since neither file changes under an open reader (a new checkpoint is a new file,
/// renamed into place; the segment's rows are never rewritten). A scan that reads the same rows again, as every
/// query of a hot store does, then spends nothing on checksums. One bit per page or row.
struct CheckedOnce {
    private var words: [UInt64] = []

    /// Whether `number` was checked.
    func contains(_ number: Int) -> Bool {
        let word = number >> 6
        return word < words.count && words[word] & (1 << UInt64(number & 63)) != 0
    }

    /// Records that `number` passed its check.
    mutating func insert(_ number: Int) {
        let word = number >> 6
        if word >= words.count { words += [UInt64](repeating: 0, count: word + 1 - words.count) }
        words[word] |= 1 << UInt64(number & 63)
    }
}
