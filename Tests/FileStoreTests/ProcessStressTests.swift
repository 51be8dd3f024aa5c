import NoteKitTestSupport
import Synchronization
import Testing

/// The tests that run child processes on a store for tens of seconds and count what they did in the time given
/// (the kill tests, the share test): one at a time, so that none takes the cores another's time limit counts on.
/// The rest of the suite still runs beside them.
///
/// They take turns by ``oneAtATime``, on the threads their drivers run on (``OwnThread``), rather than by
/// `.serialized`: a test waiting on its own thread ends only when one of Swift Testing's threads is free, which in a
/// full run is after every other test has started, and `.serialized` would start the next one only then.
@Suite("Process stress tests, one at a time")
enum ProcessStressTests {
    /// Held by a process stress test's driver while it runs.
    static let oneAtATime = Mutex(())

    /// Runs `driver` on a thread of its own, after the other process stress tests' drivers have finished.
    static func run<Summary: Sendable>(_ driver: @escaping @Sendable () throws -> Summary) async throws -> Summary {
        try await OwnThread.run { try oneAtATime.withLock { _ in try driver() } }
    }
}
