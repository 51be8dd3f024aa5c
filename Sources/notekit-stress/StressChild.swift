import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport

/// The process the kill test kills: saves the steps of a ``StressWorkload`` on a file store with small segments
/// and eager compaction, and reports each on standard output with write(2) as it happens, so that a line the
/// parent reads was written before the child went on.
///
/// Lines: `ready FROM`, `save STEP [blob] [large] [rotate]` before a save, `ack STEP rotations=R compactions=C`
/// after `save()` returned, `compact STEP`/`compacted STEP` around an explicit compaction, `trim STEP`/`trimmed STEP`
/// around a history deletion, `done` at the end, and `error MESSAGE` before exiting with status 1.
///
/// With a writer number, the child is one of several writing the store at once (`sharing: .perSave`): its steps
/// touch only its own objects (``StressWorkload/writer``), each save's transaction author is `w<K>-step<N>`, and
/// with `controlled` it reads `pause` and `resume` lines on standard input between saves: on `pause` it writes
/// `paused STEP` (the last step it saved) and waits, holding no lock, until `resume`; at the end of its input it
/// exits.
///
/// With `retry` (the share test, docs/reliability/share.md), a refusal is a figure, not the end: a save, compaction
/// or history deletion refused with ``FileStoreError/locked(path:)`` after the busy wait writes
/// `locked save|compact|trim STEP waited=SECONDS` (a save is then tried again, from a fresh context; a compaction
/// or deletion is skipped), and an open refused with `locked` or with damage writes `locked open waited=SECONDS`
/// or `damage open ERROR` and opens again, up to 50 times.
struct StressChild {
    let url: URL
    let workload: StressWorkload
    let configuration: FileStoreConfiguration
    let controlled: Bool
    let retry: Bool
    private let control = ControlInput()

    /// Segments rotate after about this many bytes, so a run of a few hundred saves rotates many times.
    static let segmentSize = 48 << 10

    init(url: URL, seed: UInt64, deferred: Bool, writer: Int? = nil, lockTimeout: Double? = nil,
         controlled: Bool = false, retry: Bool = false) {
        self.url = url
        self.controlled = controlled
        self.retry = retry
        workload = StressWorkload(seed: seed, writer: writer)
        configuration = FileStoreConfiguration(
            url: url, durability: deferred ? .deferred(interval: 0.05) : .everySave,
            maximumSegmentSize: Self.segmentSize,
            automaticCompaction: .init(minimumLogSize: 160 << 10, garbageRatio: 0.4),
            lockTimeout: writer == nil ? nil : lockTimeout ?? 5,
            historyRetention: .latest(200), sharing: writer == nil ? .exclusive : .perSave)
    }

    /// Saves `steps` steps (without end when nil) from step `from`, or from the step after the last one the store
    /// holds (of this writer) when `from` is nil.
    func run(from: Int?, steps: Int?) -> Never {
        do {
            try saveSteps(from: from, count: steps)
            emit("done")
            exit(0)
        } catch {
            emit("error \(error)")
            exit(1)
        }
    }

    private func saveSteps(from requested: Int?, count: Int?) throws {
        let container = try open()
        guard let store = container.store as? FileStore else { throw ChildError("the container's store is not a file store") }
        let held = try StressWorkload.stepsPresent(in: ModelContext(container), writer: workload.writer).last ?? 0
        let from = requested ?? held + 1
        guard held == from - 1 else { throw ChildError("the store holds steps up to \(held), not \(from - 1)") }
        emit("ready \(from)")

        for step in from..<(from + min(count ?? .max, Int.max - from)) {
            if controlled { obeyControl(saved: step - 1) }
            let (plan, before) = try save(step: step, in: container, store: store)

            let statistics = store.statistics
            if let error = statistics.lastCompactionError {
                throw ChildError("automatic compaction after step \(step) failed: \(error)")
            }
            let after = statistics.segments
            let compactions = before.first.map { after.contains($0) ? 0 : 1 } ?? 0
            let started = (after.last ?? 0) - (before.last ?? 0)
            emit("ack \(step) rotations=\(started - compactions) compactions=\(compactions)")

            if plan.compactsAfter {
                emit("compact \(step)")
                if try ranUnlessLocked("compact \(step)", { try store.compact() }) { emit("compacted \(step)") }
            }
            if plan.trimsHistoryAfter, statistics.lastTransactionNumber > 60 {
                emit("trim \(step)")
                let through = statistics.lastTransactionNumber - 50
                if try ranUnlessLocked("trim \(step)", { try store.deleteHistory([1...through]) }) { emit("trimmed \(step)") }
            }
        }
        try store.close()
    }

    /// Saves step `step`, again from a fresh context as long as the lock is refused (with `retry`); returns the
    /// step's plan and the segments before the save that went through.
    private func save(step: Int, in container: ModelContainer, store: FileStore) throws
        -> (StressWorkload.Plan, before: [Int]) {
        while true {
            let context = ModelContext(container)
            if let writer = workload.writer { context.author = "w\(writer)-step\(step)" }
            let plan = try workload.apply(step: step, in: context)
            let before = store.statistics.segments
            var tags: [String] = []
            if plan.writesBlob { tags.append("blob") }
            if plan.isLarge { tags.append("large") }
            if let active = before.last, activeSize(active) > Self.segmentSize { tags.append("rotate") }
            emit((["save", String(step)] + tags).joined(separator: " "))
            if try ranUnlessLocked("save \(step)", { try context.save() }) { return (plan, before) }
        }
    }

    /// Opens the store; with `retry`, again after a refusal or a report of damage, up to 50 times.
    private func open() throws -> ModelContainer {
        var attempts = 0
        while true {
            let began = ContinuousClock.now
            do {
                return try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
            } catch where retry && attempts < 50 {
                attempts += 1
                switch StressReader.classify(error) {
                case .locked: emit("locked open waited=\(Self.seconds(since: began))")
                case .damage: emit("damage open \(String(describing: error).replacingOccurrences(of: "\n", with: " "))")
                default: throw error
                }
                usleep(20_000)
            }
        }
    }

    /// Runs `body`; true when it ran, false when `retry` is on and the lock was refused (said on standard output).
    private func ranUnlessLocked(_ what: String, _ body: () throws -> Void) throws -> Bool {
        let began = ContinuousClock.now
        do {
            try body()
            return true
        } catch FileStoreError.locked where retry {
            emit("locked \(what) waited=\(Self.seconds(since: began))")
            return false
        }
    }

    private static func seconds(since instant: ContinuousClock.Instant) -> String {
        String(format: "%.3f", (ContinuousClock.now - instant) / .seconds(1))
    }

    /// Between saves: when the parent asked for a pause, says so and waits for `resume`; exits at the end of input.
    private func obeyControl(saved: Int) {
        var waiting = false
        while true {
            guard let line = control.nextLine(waiting: waiting) else { return }
            switch line {
            case "pause"?:
                emit("paused \(saved)")
                waiting = true
            case "resume"?:
                waiting = false
            case nil:
                // The parent is gone.
                emit("done")
                exit(0)
            default:
                break
            }
        }
    }

    private func activeSize(_ segment: Int) -> Int {
        let path = url.appendingPathComponent("segments").appendingPathComponent(String(format: "%06d.seg", segment)).path
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    struct ChildError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// Writes `line` to standard output at once, unbuffered.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}

/// Lines on standard input, read with read(2) so that nothing waits in a buffer poll(2) cannot see.
final class ControlInput {
    private var pending: [UInt8] = []

    /// The next line: `.some(nil)` at the end of input; nil when no line is there and `waiting` is false.
    func nextLine(waiting: Bool) -> String?? {
        while true {
            if let end = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<end], as: UTF8.self)
                pending.removeSubrange(...end)
                return .some(line)
            }
            var poller = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, waiting ? -1 : 0)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 256)
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return .some(nil) }
            pending += chunk[..<count]
        }
    }
}
