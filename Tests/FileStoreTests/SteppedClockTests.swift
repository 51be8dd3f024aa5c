import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Synchronization
import Testing

@testable import NoteKitFileStore

/// A wall clock a test can step, as NTP, a user or a restored virtual machine steps the real one.
final class SteppingWallClock: Sendable {
    private let state = Mutex<(offset: TimeInterval, readings: Int, stepAfter: Int?, step: TimeInterval)>(
        (0, 0, nil, 0))

    init() {}

    /// Steps the clock by `seconds` (negative: back) once it has been read `readings` more times.
    func step(by seconds: TimeInterval, afterReadings readings: Int) {
        state.withLock { $0.step = seconds; $0.stepAfter = $0.readings + readings }
    }

    /// Steps the clock by `seconds` now.
    func step(by seconds: TimeInterval) { state.withLock { $0.offset += seconds } }

    func now() -> Date {
        state.withLock { state in
            state.readings += 1
            if let after = state.stepAfter, state.readings > after {
                state.offset += state.step
                state.stepAfter = nil
            }
            return Date().addingTimeInterval(state.offset)
        }
    }

    /// The store's clocks with this wall clock and the real monotonic one.
    var clocks: StoreClocks { StoreClocks(wall: { self.now() }) }
}

@Suite("Clocks: waits and intervals are measured by a monotonic clock, never by the wall clock")
struct SteppedClockTests {
    /// Runs `body` on another thread and waits for it up to `limit` seconds; then calls `release` (which must let
    /// `body` finish) and waits for it regardless, so no thread outlives the test.
    private func run<T: Sendable>(_ body: @escaping @Sendable () -> T, limit: Double,
                                  release: () throws -> Void) rethrows -> (result: T?, seconds: Double) {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<T?>(nil)
        let started = ContinuousClock.now
        DispatchQueue.global().async {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        let finished = done.wait(timeout: .now() + limit) == .success
        let elapsed = ContinuousClock.now - started
        try release()
        if !finished { done.wait() }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return (finished ? result.withLock { $0 } : nil, seconds)
    }

    @Test("A lock wait of 3 s ends after about 3 s although the wall clock steps back a day while it waits")
    func lockWaitSurvivesStepBack() throws {
        let url = TemporaryStores.newURL()
        let holder = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        // Read once for the deadline, then a day back.
        let wall = SteppingWallClock()
        wall.step(by: -86_400, afterReadings: 1)
        let (outcome, seconds) = try run({ () -> String in
            do {
                _ = try StoreFiles.open(url, NotesSchema.models) {
                    $0.lockTimeout = 3
                    $0.clocks = wall.clocks
                }
                return "opened"
            } catch {
                return "\(error)"
            }
        }, limit: 20, release: { try StoreFiles.close(holder) })
        // The holder is another open of this process, so the refusal says so.
        #expect(outcome == "\(FileStoreError.lockedInThisProcess(path: url.path))", "still waiting after \(seconds) s")
        #expect(seconds >= 2.5 && seconds < 20)
        TestOutput.summary("Clocks: a 3 s lock wait with the wall clock a day back ended after \(seconds) s")
    }

    @Test("A save shared per save waits for the lock by the monotonic clock too, whatever the wall clock does")
    func perSaveLockWaitSurvivesStepBack() throws {
        let url = TemporaryStores.newURL()
        let wall = SteppingWallClock()
        let writer = try StoreFiles.open(url, NotesSchema.models) {
            $0.sharing = .perSave
            $0.lockTimeout = 2
            $0.clocks = wall.clocks
        }
        let context = ModelContext(writer)
        context.insert(Folder(name: "before"))
        try context.save()
        // Another process's save, holding the lock.
        let held = try #require(try POSIXFileSystem().tryLock(url.appendingPathComponent("LOCK").path))
        let container = UncheckedBox(writer)
        let (outcome, seconds) = run({ () -> String in
            let context = ModelContext(container.value)
            context.insert(Folder(name: "during"))
            // The save reads the clock once as its wait begins; then the clock goes an hour back.
            wall.step(by: -3_600, afterReadings: 1)
            do {
                try context.save()
                return "saved"
            } catch {
                return "\(error)"
            }
        }, limit: 20, release: { held.unlock() })
        #expect(outcome == "\(FileStoreError.locked(path: url.path, holder: getpid(), timeout: 2))",
                "still waiting after \(seconds) s")
        #expect(seconds >= 1.5 && seconds < 20)
        try StoreFiles.close(writer)
    }

    @Test("Deferred durability keeps flushing at its interval after the wall clock steps back a day")
    func deferredFlushesSurviveStepBack() throws {
        let url = TemporaryStores.newURL()
        let wall = SteppingWallClock()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.durability = .deferred(interval: 0.1)
            $0.fileSystem = fileSystem
            $0.clocks = wall.clocks
        }
        let context = ModelContext(container)
        context.insert(Folder(name: "first"))
        try context.save()
        wall.step(by: -86_400)
        fileSystem.clearLog()
        let clock = ContinuousClock()
        let start = clock.now
        var saves = 0
        while clock.now - start < .seconds(1.5) {
            context.insert(Folder(name: "save \(saves)"))
            try context.save()
            saves += 1
            Thread.sleep(forTimeInterval: 0.01)
        }
        let flushes = fileSystem.calls.filter { $0.operation == .fsync && $0.path.contains("/segments/") }.count
        // 1.5 s at one flush per 0.1 s: about 15; a generous floor.
        #expect(flushes >= 4, "\(flushes) flushes in 1.5 s of \(saves) saves after the wall clock stepped back")
        TestOutput.summary("Clocks: \(flushes) flushes in 1.5 s of \(saves) saves at a 0.1 s interval, "
                           + "the wall clock a day back")
        try StoreFiles.close(container)
    }
}

/// Hands a non-Sendable value to another thread in a test that waits for it.
private final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
