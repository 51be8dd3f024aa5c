import Foundation

/// A hybrid logical clock (Kulkarni et al., 2014) in one 64-bit number: the wall clock's milliseconds since 1970
/// in the high bits, a counter in the low 16. It never goes back and always moves past every clock it has seen, so
///
/// - a device's own edits are ordered as they were made even when its wall clock steps back or lags another
///   machine's (each tick is at least one more than the last), and
/// - an edit made after importing another device's edit is later than it, whatever the two wall clocks say.
///
/// Concurrent edits (neither saw the other) are ordered by their wall clocks, as last-writer-wins users expect.
struct HybridLogicalClock: Hashable, Codable {
    /// The last value issued or seen.
    private(set) var last: UInt64

    init(last: UInt64 = 0) { self.last = last }

    /// Bits of the counter below the milliseconds.
    static let counterBits: UInt64 = 16
    /// Milliseconds past this (about the year 4200) are taken as this, so that the clock fits PostgreSQL's signed
    /// bigint with room to count.
    static let maximumMilliseconds: UInt64 = 1 << 45

    /// The clock value of wall time `date` with a zero counter.
    static func physical(_ date: Date) -> UInt64 {
        let milliseconds = date.timeIntervalSince1970 * 1000
        guard milliseconds.isFinite, milliseconds > 0 else { return 0 }
        return min(UInt64(milliseconds), maximumMilliseconds) << counterBits
    }

    /// The clock of a local event at wall time `date`: later than everything issued or seen.
    mutating func tick(at date: Date) -> UInt64 {
        last = max(last + 1, Self.physical(date))
        return last
    }

    /// Takes in a clock read from another device, so that every later tick is after it.
    mutating func receive(_ clock: UInt64) {
        last = max(last, clock)
    }
}
