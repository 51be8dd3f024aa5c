import Foundation

/// Work that waits (on child processes, a lock's timeout) run on a thread of its own, for a test that would otherwise
/// hold one of Swift concurrency's threads while it waits. Swift Testing runs tests on those threads, one a core: on
/// two cores, a kill test waiting on its children for a minute left the rest of the suite one thread.
///
/// The test resumes, and ends, when a thread of Swift concurrency's is free again: in a full run that is when every
/// other test has started, so tests that must not overlap should take turns inside their bodies (a lock), not by
/// Swift Testing's `.serialized`, which starts each only once the previous one has ended.
public enum OwnThread {
    /// Runs `body` on a new thread and returns what it returns, or throws what it throws; the calling task is
    /// suspended meanwhile, its thread free for other tests. `body` must not record issues (`#expect`): it runs
    /// outside the test's task. Check what it returns after the call instead.
    public static func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}
