#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The clocks the file store reads: the wall clock, only to record when something happened (a transaction's time,
/// a segment's creation), and a monotonic clock, to measure every wait and interval (lock deadlines and their
/// backoff, deferred durability's flushes, automatic refresh). The wall clock can step back or jump ahead (NTP, a
/// user changing the time, a virtual machine restored); a wait measured with it could end at once or never.
///
/// A seam for tests, which step the wall clock to show that nothing waits by it; not public.
struct StoreClocks: Sendable {
    /// The time of day, recorded in the log.
    var wall: @Sendable () -> Date
    /// A clock that never goes back and does not jump: `ContinuousClock`, which also counts time asleep.
    var monotonic: @Sendable () -> ContinuousClock.Instant

    init(wall: @escaping @Sendable () -> Date = { Date() },
         monotonic: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.wall = wall
        self.monotonic = monotonic
    }

    /// The system's clocks.
    static let system = StoreClocks()
}
