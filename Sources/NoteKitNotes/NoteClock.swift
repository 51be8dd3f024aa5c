#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import NoteKit

/// Where the notes helpers get the time, so that tests can say exactly when things happen (T7).
public protocol NoteClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's clock.
public struct SystemNoteClock: NoteClock {
    /// The system's clock; it holds no state.
    public init() {}
    /// The system's current time (`Date()`).
    public func now() -> Date { Date() }
}

/// A clock that says what it is told, for tests and fixtures.
public final class ManualNoteClock: NoteClock {
    private let current: Mutex<Date>

    /// A clock stopped at `date`.
    public init(_ date: Date) { current = Mutex(date) }

    /// The time the clock was last set to (or stopped at, or advanced to). Safe to call from any thread.
    public func now() -> Date { current.withLock { $0 } }

    /// Sets the time.
    public func set(_ date: Date) { current.withLock { $0 = date } }

    /// Moves the time forward by `interval` seconds.
    public func advance(by interval: TimeInterval) { current.withLock { $0 += interval } }
}
