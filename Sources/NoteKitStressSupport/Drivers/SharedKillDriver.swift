import Foundation
import NoteKit
import NoteKitFileStore

/// The kill test with several writers on one store (docs/reliability/kill.md, *Several writers*): runs one
/// `notekit-stress child --writer K` per writer on the same store, all at once, shared per save; kills one of them
/// with SIGKILL at a random moment while the others go on, then pauses the others between two saves, checks the
/// store, restarts the killed writer from the step after the last one the store holds for it, and lets the others
/// go on.
///
/// Each writer touches only its own objects (``StressWorkload/writer``), so its part of the store is checked as
/// ``KillDriver`` checks a whole store: its steps are the last ``StressWorkload/window`` of a prefix of those it
/// issued, with every acknowledged one; its objects equal a replay of that prefix on the in-memory store. And the
/// store as a whole: no damage but a torn tail, as many transactions as all writers' steps, and a history whose
/// authors (`w<K>-step<N>`) go up one step at a time per writer and end at each writer's last step.
///
/// ```swift
/// let summary = try SharedKillDriver.run(.init(executable: stress, directory: scratch, seed: 42, kills: 100))
/// ```
public enum SharedKillDriver {
    public struct Options: Sendable {
        /// The `notekit-stress` executable.
        public var executable: URL
        /// Where the store is made; it must exist.
        public var directory: URL
        public var seed: UInt64
        /// How many processes write the store at once (2…255).
        public var writers: Int
        /// How many times to kill a writer.
        public var kills: Int
        /// Stops after this many seconds even if fewer kills were made.
        public var timeLimit: Double?
        /// The time limit ends the run only once this many kills are made: a loaded machine takes longer for them,
        /// and never checks less.
        public var minimumKills = 0
        /// How long a save waits for another writer's lock.
        public var lockTimeout: Double
        public var progress: (@Sendable (String) -> Void)?
        public var progressEvery: Int

        public init(executable: URL, directory: URL, seed: UInt64, writers: Int = 2, kills: Int,
                    timeLimit: Double? = nil, lockTimeout: Double = 3, progress: (@Sendable (String) -> Void)? = nil,
                    progressEvery: Int = 100) {
            precondition((2...255).contains(writers), "2…255 writers")
            self.executable = executable
            self.directory = directory
            self.seed = seed
            self.writers = writers
            self.kills = kills
            self.timeLimit = timeLimit
            self.lockTimeout = lockTimeout
            self.progress = progress
            self.progressEvery = progressEvery
        }
    }

    /// Runs the test.
    ///
    /// - Throws: ``KillDriver/Failure`` at the first check that fails (the store is then left in place), or an
    ///   error starting a child.
    public static func run(_ options: Options) throws -> KillDriver.Summary {
        signal(SIGPIPE, SIG_IGN)
        var run = try SharedRun(options: options)
        defer { run.stopAll() }
        return try run.go()
    }
}

/// One writer: its replay, what its children reported since the last check, and its running child.
private final class Writer {
    let number: Int
    var track: Track
    var ledger = StepLedger(step: 0)
    var child: StressChildProcess?
    /// Events since the last check.
    var seen: [StressChildProcess.Event] = []

    init(number: Int, url: URL, seed: UInt64) throws {
        self.number = number
        track = try Track(url: url, seed: seed, writer: number)
    }

    /// Reads what the child wrote, waiting up to `timeout` seconds for a line.
    func drain(waitingUpTo timeout: Double = 0) {
        if let child { seen += child.events(waitingUpTo: timeout) }
    }
}

private struct SharedRun {
    let options: SharedKillDriver.Options
    let url: URL
    let errors: URL
    var summary: KillDriver.Summary
    var rng: SeededGenerator
    var aim = KillAim()
    let writers: [Writer]
    let began = ContinuousClock.now

    init(options: SharedKillDriver.Options) throws {
        self.options = options
        url = options.directory.appendingPathComponent("shared.notekit")
        errors = options.directory.appendingPathComponent("child.stderr")
        summary = KillDriver.Summary(seed: options.seed)
        summary.writers = options.writers
        rng = SeededGenerator(seed: options.seed ^ 0x7368_6172_6564)
        writers = try (1...options.writers).map {
            try Writer(number: $0, url: options.directory.appendingPathComponent("shared.notekit"),
                       seed: options.seed &+ UInt64($0) &* 0x9E37_79B9_7F4A_7C15)
        }
    }

    var elapsed: Double { (ContinuousClock.now - began) / .seconds(1) }

    func failure(_ reason: String) -> KillDriver.Failure {
        KillDriver.Failure(seed: options.seed, kill: summary.kills, store: url.path, reason: reason,
                           writers: options.writers)
    }

    func checked<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let failed as KillChecks.Failed { throw failure(failed.reason) }
    }

    mutating func go() throws -> KillDriver.Summary {
        // The store exists before the writers start: two creating it at once is refused to one of them (it is
        // told to open it again), which is not what this test is about.
        do {
            let container = try ModelContainer(for: Schema(StressWorkload.models),
                                               configurations: [FileStoreConfiguration(url: url, sharing: .perSave)])
            try (container.store as? FileStore)?.close()
        }
        for writer in writers { try start(writer) }
        // The writer restarted last: a startup kill aims at it, while it opens the store.
        var restarted: Writer?
        while summary.kills < options.kills {
            if let limit = options.timeLimit, elapsed > limit, summary.kills >= options.minimumKills { break }
            var moment = KillAim.moment(ofKill: summary.kills, &rng)
            let victim: Writer
            if moment == .startup, let fresh = restarted {
                victim = fresh
            } else {
                if moment == .startup { moment = .save }
                victim = writers[Int.random(in: 0..<writers.count, using: &rng)]
            }
            try round(victim, moment: moment)
            restarted = victim
            if summary.kills % options.progressEvery == 0 {
                let steps = writers.map { "w\($0.number) \($0.track.step)" }.joined(separator: ", ")
                options.progress?("kill \(summary.kills): steps \(steps), \(summary.acknowledged) saves acknowledged, "
                                  + String(format: "%.0f s", elapsed))
            }
        }
        // The end: every writer paused and checked, then stopped; the store takes a save of every writer's next
        // step from this process, and is checked again.
        try pauseAndCheck(victim: nil)
        stopAll()
        try acceptsWrites()
        summary.steps = writers.reduce(0) { $0 + $1.track.step }
        summary.storeBytes = KillChecks.bytes(under: url)
        summary.segmentsStarted = KillChecks.nextSegment(url).map { $0 - 1 } ?? 0
        summary.seconds = elapsed
        return summary
    }

    mutating func start(_ writer: Writer) throws {
        writer.child = try StressChildProcess(
            executable: options.executable,
            arguments: ["child", "--store", url.path, "--seed", String(writer.track.workload.seed),
                        "--from", String(writer.track.step + 1), "--writer", String(writer.number),
                        "--lock-timeout", String(options.lockTimeout), "--controlled"]
                + (rng.chance(0.25) ? ["--durability", "deferred"] : []),
            errors: errors, controlled: true)
    }

    func stopAll() {
        for writer in writers {
            if let child = writer.child { _ = child.kill() }
            writer.child = nil
        }
    }

    // MARK: One kill

    mutating func round(_ victim: Writer, moment: Moment) throws {
        guard let child = victim.child else { throw failure("writer \(victim.number) has no child") }
        let others = writers.filter { $0 !== victim }
        victim.seen += aim.waitForMoment(moment, in: child, creates: false, rng: &rng) {
            for other in others { other.drain() }
        }
        let (ending, last) = child.kill()
        victim.child = nil
        victim.seen += last
        summary.kills += 1
        summary.killsByMoment[moment.rawValue, default: 0] += 1
        if let problem = KillChecks.problem(ending: ending, events: victim.seen, errors: errors) {
            throw failure("writer \(victim.number): \(problem)")
        }
        KillChecks.countKill(after: victim.seen, into: &summary)
        try pauseAndCheck(victim: victim)
        // The killed writer starts again from the step after its last one in the store; the others go on.
        try start(victim)
        for other in others { other.child?.send("resume") }
    }

    /// Pauses every writer still running between two of its saves, then checks the store, which nobody writes.
    mutating func pauseAndCheck(victim: Writer?) throws {
        let running = writers.filter { $0.child != nil }
        for writer in running { writer.child?.send("pause") }
        for writer in running {
            let giveUp = ContinuousClock.now + .seconds(max(15, 3 * options.lockTimeout))
            while !writer.seen.contains(where: { if case .paused = $0 { true } else { false } }) {
                guard let child = writer.child, ContinuousClock.now < giveUp, child.isRunning || !child.endOfOutput
                else {
                    let (ending, last) = writer.child?.kill() ?? (.killed, [])
                    writer.child = nil
                    writer.seen += last
                    let problem = KillChecks.problem(ending: ending, events: writer.seen, errors: errors)
                    throw failure("writer \(writer.number) did not pause: \(problem ?? "no answer in time")")
                }
                writer.drain(waitingUpTo: 0.05)
            }
        }
        for writer in writers {
            var counted = KillDriver.Summary(seed: 0)
            if let problem = writer.ledger.take(writer.seen, into: &counted) {
                throw failure("writer \(writer.number): \(problem)")
            }
            summary.acknowledged += counted.acknowledged
            summary.acknowledgedByWriter[writer.number, default: 0] += counted.acknowledged
            summary.issued += counted.issued
            summary.explicitCompactions += counted.explicitCompactions
            summary.compactions += counted.explicitCompactions
            summary.historyTrims += counted.historyTrims
            if case .paused(let at) = writer.seen.last(where: { if case .paused = $0 { true } else { false } }),
               at != writer.ledger.lastAcknowledged {
                throw failure("writer \(writer.number) paused after step \(at), but acknowledged steps up to "
                              + "\(writer.ledger.lastAcknowledged)")
            }
            writer.seen = []
        }
        try check(victim: victim)
    }

    // MARK: Checks

    /// The checks with every writer stopped or paused; sets each writer's `track.step` to the last step the store
    /// holds for it.
    mutating func check(victim: Writer?) throws {
        // 1. Before anything opens the store: no damage but a torn tail. A third of the time this process recovers
        // the store (an open shared per save, as the writers'); otherwise the next save of a paused writer cuts the
        // torn tail off under the lock, or the restarted writer's open does, whichever comes first.
        let writable = rng.chance(1.0 / 3)
        let torn = try checked { try KillChecks.verifyAllowingTornTail(url) }
        if torn != nil { summary.tornTails += 1 }
        let (container, store) = try checked {
            try KillChecks.open(url, writable: writable, sharing: .perSave, torn: torn)
        }
        defer { try? store.close() }

        // 2. Each writer's part: whole steps, a prefix of those it issued with every acknowledged one, and exactly
        // the objects the replay of that prefix makes.
        let context = ModelContext(container)
        var held: [Int: Int] = [:]
        for writer in writers {
            let present = try StressWorkload.stepsPresent(in: context, writer: writer.number)
            let step = present.last ?? 0
            let name = "writer \(writer.number)"
            guard present == StressWorkload.expectedSteps(through: step) else {
                throw failure("\(name)'s steps present are not the last \(StressWorkload.window) of a prefix: "
                              + "\(present.first ?? 0)…\(step), missing "
                              + "\(Set(StressWorkload.expectedSteps(through: step)).subtracting(present).sorted())")
            }
            guard step >= writer.ledger.lastAcknowledged else {
                throw failure("\(name)'s step \(writer.ledger.lastAcknowledged) was acknowledged but the store holds "
                              + "its steps up to \(step)")
            }
            guard step <= writer.ledger.lastIssued else {
                throw failure("the store holds \(name)'s step \(step) but it issued steps up to "
                              + "\(writer.ledger.lastIssued) only")
            }
            if writer === victim, step > writer.ledger.lastAcknowledged { summary.unacknowledgedKept += 1 }
            let actual = try StressWorkload.canonicalDump(context, writer: writer.number)
            let expected = try writer.track.expectedState(through: step)
            if actual != expected {
                throw failure("after its steps 1…\(step) \(name)'s objects differ from the replay; "
                              + KillChecks.difference(expected: expected, actual: actual))
            }
            held[writer.number] = step
        }

        // 3. The store as a whole: one transaction per step of any writer, and a history (the latest transactions)
        // whose authors take each writer's steps one at a time, up to its last.
        let total = held.values.reduce(0, +)
        let statistics = store.statistics
        guard statistics.lastTransactionNumber == UInt64(total) else {
            throw failure("the writers' steps \(held.sorted { $0.key < $1.key }) add up to \(total), the store holds "
                          + "\(statistics.lastTransactionNumber) transactions")
        }
        let records = try store.history().records
        if total > 0, records.last?.number != UInt64(total) {
            throw failure("the newest transaction in history is \(records.last.map { "\($0.number)" } ?? "none"), "
                          + "the store holds \(total)")
        }
        var lastInHistory: [Int: Int] = [:]
        var previous: UInt64?
        for record in records {
            if let previous, record.number != previous + 1 {
                throw failure("history skips from transaction \(previous) to \(record.number)")
            }
            previous = record.number
            guard let (writer, step) = ShareRead.author(record.author), held[writer] != nil else {
                throw failure("transaction \(record.number) has author \(record.author ?? "nil"), not a writer's step")
            }
            if let before = lastInHistory[writer], step != before + 1 {
                throw failure("in history, transaction \(record.number) is writer \(writer)'s step \(step), after "
                              + "its step \(before)")
            }
            lastInHistory[writer] = step
        }
        for (writer, step) in lastInHistory where held[writer] != step {
            throw failure("writer \(writer)'s last transaction in history is its step \(step), the store holds its "
                          + "steps up to \(held[writer] ?? 0)")
        }

        // 4. A writable open leaves nothing behind that the manifest does not reach.
        if writable { try checked { try KillChecks.recoveredCleanly(url, store: store) } }
        for writer in writers {
            // A killed writer's save in flight may be in the store: its next child starts after it.
            writer.track.step = held[writer.number] ?? 0
            writer.ledger = StepLedger(step: writer.track.step)
        }
    }

    /// Every writer's next step, saved by this process through an open shared per save, then checked.
    mutating func acceptsWrites() throws {
        for writer in writers {
            do {
                let configuration = FileStoreConfiguration(url: url, lockTimeout: options.lockTimeout,
                                                           sharing: .perSave)
                let container = try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
                let context = ModelContext(container)
                let step = writer.track.step + 1
                context.author = "w\(writer.number)-step\(step)"
                try writer.track.workload.apply(step: step, in: context)
                try context.save()
                try (container.store as? FileStore)?.close()
                writer.ledger = StepLedger(step: step)
            } catch {
                throw failure("the store does not take writer \(writer.number)'s next save: \(error)")
            }
        }
        try check(victim: nil)
    }
}
