import Foundation
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
///
/// Their drivers start when Swift Testing plans the run (``StartsEarly``), not when the tests' turn on its two
/// threads comes: in a full run that turn came after two minutes of other tests, and the drivers, which mostly wait
/// on their children, then ran alone at the end of the run instead of beside it.
@Suite("Process stress tests, one at a time")
enum ProcessStressTests {
    /// Held by a process stress test's driver while it runs.
    static let oneAtATime = Mutex(())

    /// Runs `driver` on a thread of its own, after the other process stress tests' drivers have finished.
    static func run<Summary: Sendable>(_ driver: @escaping @Sendable () throws -> Summary) async throws -> Summary {
        try await OwnThread.run { try oneAtATime.withLock { _ in try driver() } }
    }
}

/// What a process stress test's driver did: the seed and the directory it ran with, and its summary or the error it
/// threw. The test checks it; the driver, running outside the test's task, records no issue itself.
struct StressOutcome<Summary: Sendable>: Sendable {
    var seed: UInt64
    var directory: URL
    var summary: Result<Summary, any Error>

    /// Makes `directory` and runs `driver` in turn with the other process stress tests (``ProcessStressTests/run(_:)``).
    static func run(seed: UInt64, directory: URL,
                    _ driver: @escaping @Sendable () throws -> Summary) async -> StressOutcome {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return StressOutcome(seed: seed, directory: directory, summary: .success(try await ProcessStressTests.run(driver)))
        } catch {
            return StressOutcome(seed: seed, directory: directory, summary: .failure(error))
        }
    }
}

/// A process stress test's run, made once a process: started by ``StartsEarly`` when the run is planned, or by its
/// test when the test comes first (a run through an API that does not prepare traits).
final class EarlyRun<Summary: Sendable>: Sendable {
    private let make: @Sendable () async -> StressOutcome<Summary>
    private let task = Mutex<Task<StressOutcome<Summary>, Never>?>(nil)

    init(_ make: @escaping @Sendable () async -> StressOutcome<Summary>) { self.make = make }

    /// Starts the run if it has not started.
    func start() { _ = started() }

    /// What the run did, once it has finished; starts it first if it has not started.
    var outcome: StressOutcome<Summary> {
        get async { await started().value }
    }

    private func started() -> Task<StressOutcome<Summary>, Never> {
        task.withLock { task in
            if let task { return task }
            let new = Task.detached(operation: make)
            task = new
            return new
        }
    }
}

/// Starts a process stress test's ``EarlyRun`` when Swift Testing prepares the test, which it does for every test a
/// run selects before it runs any: a filter that leaves the test out never starts it.
struct StartsEarly: TestTrait {
    let start: @Sendable () -> Void

    func prepare(for test: Test) async throws { start() }
}

extension Trait where Self == StartsEarly {
    /// Starts `run` when the run is planned.
    static func startsEarly<Summary>(_ run: EarlyRun<Summary>) -> Self { StartsEarly(start: run.start) }
}
