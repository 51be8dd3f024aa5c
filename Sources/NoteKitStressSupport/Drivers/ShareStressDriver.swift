import Foundation
import NoteKit
import NoteKitFileStore

/// The share test (docs/reliability/share.md): many processes on one store at once, as an app, its extensions and
/// command-line tools use it. N writers (`notekit-stress child --writer K`, shared per save, with small segments
/// so that they rotate, compacting now and then) save their steps and are killed with SIGKILL at random moments and
/// restarted, while M readers (`notekit-stress reader`) read the store by every read path (``ShareRead/Path``),
/// again and again, and report each read.
///
/// What it counts, and what must be zero:
/// - reads attempted, per path and outcome; a read that reports damage is a false report when the store verifies
///   clean at the end (and the run fails either way); a read that saw part of a writer's steps, or a history with
///   a hole, is inconsistent; a read that missed a save acknowledged before the read began is stale;
/// - acknowledged saves lost: checked when a killed writer restarts (it starts after the last step the store holds
///   for it, which must be at least its last acknowledged one) and at the end, when every writer's part of the
///   store must equal a replay of its steps;
/// - saves (and compactions, history deletions, opens) refused with `locked` after the busy wait: a figure, with
///   the wait.
///
/// ```swift
/// let summary = try ShareStressDriver.run(.init(executable: stress, directory: scratch, seed: 42, seconds: 4))
/// #expect(summary.failures.isEmpty, "\(summary)")
/// ```
public enum ShareStressDriver {
    public struct Options: Sendable {
        /// The `notekit-stress` executable.
        public var executable: URL
        /// Where the store is made; it must exist.
        public var directory: URL
        public var seed: UInt64
        /// Processes writing the store at once (1…255), and processes reading it.
        public var writers: Int
        public var readers: Int
        /// How long the writers and readers run, in seconds (the end's checks come after).
        public var seconds: Double
        /// How long a writer's save waits for the lock before it is refused with `locked`.
        public var lockTimeout: Double
        /// Receives a line now and then (every `progressEvery` seconds).
        public var progress: (@Sendable (String) -> Void)?
        public var progressEvery: Double

        public init(executable: URL, directory: URL, seed: UInt64, writers: Int = 2, readers: Int = 2,
                    seconds: Double, lockTimeout: Double = 3, progress: (@Sendable (String) -> Void)? = nil,
                    progressEvery: Double = 10) {
            self.executable = executable
            self.directory = directory
            self.seed = seed
            self.writers = writers
            self.readers = readers
            self.seconds = seconds
            self.lockTimeout = lockTimeout
            self.progress = progress
            self.progressEvery = progressEvery
        }
    }

    /// The figures of a run, and what went wrong in it.
    public struct Summary: Sendable, CustomStringConvertible {
        public var seed: UInt64
        /// Processes that wrote and read the store, and how long they ran, in seconds.
        public var writers = 0
        public var readers = 0
        public var seconds = 0.0
        /// Reads by path and outcome.
        public var reads: [ShareRead.Path: [ShareRead.Outcome: Int]] = [:]
        /// Reads that missed a save acknowledged before they began.
        public var staleReads = 0
        /// Writers' opens that reported damage (and were tried again).
        public var writerOpenDamage = 0
        /// Whether `StoreVerifier` found the store clean (but for a torn tail) at the end, with every writer paused.
        public var verifiedCleanAtEnd = false
        /// Saves acknowledged, saves started (a save refused or lost to a kill is started again), kills, explicit
        /// compactions and history deletions completed, segments the store started (rotations and compactions).
        public var acknowledged = 0
        public var issued = 0
        public var kills = 0
        public var explicitCompactions = 0
        public var historyTrims = 0
        public var segmentsStarted = 0
        /// Acknowledged saves the store did not hold when their writer restarted or at the end.
        public var acknowledgedLost = 0
        /// Refusals with `locked` after the busy wait, by what was refused (`save`, `compact`, `trim`, `open`), and
        /// the longest wait before one.
        public var lockRefusals: [String: Int] = [:]
        public var longestRefusedWait = 0.0
        public var lockTimeout = 0.0
        /// The first reads of each kind that went wrong (path, outcome, error), for a look.
        public var samples: [String] = []
        /// What went wrong; empty when the run passed.
        public var failures: [String] = []

        public init(seed: UInt64) { self.seed = seed }

        /// Reads of every path and outcome.
        public var readsAttempted: Int { reads.values.reduce(0) { $0 + $1.values.reduce(0, +) } }
        /// Reads that ended with `outcome`, on every path.
        public func reads(_ outcome: ShareRead.Outcome) -> Int { reads.values.reduce(0) { $0 + ($1[outcome] ?? 0) } }
        /// Damage reported by a reader or by a writer's open.
        public var damageReports: Int { reads(.damage) + writerOpenDamage }
        /// Damage reported on a store that verified clean at the end.
        public var falseDamageReports: Int { verifiedCleanAtEnd ? damageReports : 0 }

        public var description: String {
            let paths = ShareRead.Path.allCases.map { path in
                let counts = reads[path] ?? [:]
                let outcomes = ShareRead.Outcome.allCases.compactMap { outcome in
                    counts[outcome].map { "\(outcome.rawValue) \($0)" }
                }
                return "\(path.rawValue): \(outcomes.isEmpty ? "none" : outcomes.joined(separator: ", "))"
            }
            let refusals = lockRefusals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            let verdict = failures.isEmpty ? "passed" : "FAILED: " + failures.joined(separator: "; ")
            return """
                share test: seed \(seed), \(writers) writers, \(readers) readers, \(String(format: "%.1f", seconds)) s
                  reads attempted \(readsAttempted): \(paths.joined(separator: "; "))
                  damage reports \(damageReports) (\(reads(.damage)) by readers, \(writerOpenDamage) by writers' \
                opens); false damage reports \(falseDamageReports) (the store verified \
                \(verifiedCleanAtEnd ? "clean" : "DAMAGED") at the end); inconsistent reads \(reads(.inconsistent)); \
                stale reads \(staleReads)
                  saves acknowledged \(acknowledged), started \(issued); kills \(kills); explicit compactions \
                \(explicitCompactions); history deletions \(historyTrims); segments started \(segmentsStarted)
                  acknowledged saves lost \(acknowledgedLost)
                  refused with locked after the busy wait of \(String(format: "%g", lockTimeout)) s: \
                \(lockRefusals.values.reduce(0, +)) (\(refusals.isEmpty ? "none" : refusals.joined(separator: ", "))), \
                longest wait before a refusal \(String(format: "%.3f", longestRefusedWait)) s
                \(samples.map { "  sample: " + $0 + "\n" }.joined())  \(verdict)
                """
        }
    }

    /// Runs the test: starts the children, kills and restarts writers until the time is up, pauses the writers,
    /// stops the readers, and checks the store. Every child is killed on every way out.
    ///
    /// - Returns: the figures; the run failed when ``Summary/failures`` is not empty.
    /// - Throws: an error starting a child or creating the store: the harness could not run.
    public static func run(_ options: Options) throws -> Summary {
        precondition((1...255).contains(options.writers), "1…255 writers")
        signal(SIGPIPE, SIG_IGN)
        let run = try ShareRun(options: options)
        defer { run.stopAll() }
        try run.go()
        return run.summary
    }
}

/// One writer: its replay, its ledger, and its running child.
private final class ShareWriter {
    let number: Int
    var track: Track
    var ledger = StepLedger(step: 0)
    var child: StressChildProcess?
    /// When each acknowledgement was read (``ShareClock``): a read that began later must see the step.
    var acknowledgedAt: [(time: UInt64, step: Int)] = []
    /// Consecutive failed starts, to give up on a writer that cannot start.
    var failedStarts = 0
    /// Asked to pause, the child said it paused (the end).
    var paused = false
    /// When the child last wrote a line, or started.
    var heard = ContinuousClock.now

    init(number: Int, url: URL, seed: UInt64) throws {
        self.number = number
        track = try Track(url: url, seed: seed, writer: number)
    }

    /// The last step acknowledged before `time`.
    func acknowledged(before time: UInt64) -> Int {
        acknowledgedAt.last { $0.time < time }?.step ?? 0
    }
}

/// A class, not a struct: the kill aim's wait reads the other children's lines (and counts them) as it goes.
private final class ShareRun {
    let options: ShareStressDriver.Options
    let url: URL
    let errors: URL
    var summary: ShareStressDriver.Summary
    var rng: SeededGenerator
    var aim = KillAim()
    let writers: [ShareWriter]
    var readers: [StressChildProcess?]
    /// When each reader last wrote a line, or started.
    var readersHeard: [ContinuousClock.Instant]
    let began = ContinuousClock.now
    var lastProgress = ContinuousClock.now
    /// Sample messages kept per (path, outcome).
    var sampled: Set<String> = []
    /// The end has begun: a writer started now is asked to pause at once.
    var finishing = false

    init(options: ShareStressDriver.Options) throws {
        self.options = options
        url = options.directory.appendingPathComponent("share.notekit")
        errors = options.directory.appendingPathComponent("children.stderr")
        summary = ShareStressDriver.Summary(seed: options.seed)
        summary.writers = options.writers
        summary.readers = options.readers
        summary.lockTimeout = options.lockTimeout
        rng = SeededGenerator(seed: options.seed ^ 0x7368_6172_6532)
        writers = try (1...options.writers).map {
            try ShareWriter(number: $0, url: options.directory.appendingPathComponent("share.notekit"),
                            seed: options.seed &+ UInt64($0) &* 0x9E37_79B9_7F4A_7C15)
        }
        readers = Array(repeating: nil, count: options.readers)
        readersHeard = Array(repeating: .now, count: options.readers)
    }

    /// A child that writes nothing for this long is hung: a read, an open or a save takes well under a second here,
    /// and a save waits at most the lock timeout.
    var silenceLimit: Duration { .seconds(max(60, 10 * options.lockTimeout)) }

    var elapsed: Double { (ContinuousClock.now - began) / .seconds(1) }

    func go() throws {
        // The store exists before anyone starts: creating it is not what this test is about.
        let container = try ModelContainer(for: Schema(StressWorkload.models),
                                           configurations: [FileStoreConfiguration(url: url, sharing: .perSave)])
        try (container.store as? FileStore)?.close()
        for writer in writers { try start(writer) }
        for index in readers.indices { try startReader(index) }

        var restarted: ShareWriter?
        while elapsed < options.seconds, summary.failures.count < 20 {
            var moment = KillAim.nextMoment(&rng)
            let victim: ShareWriter
            if moment == .startup, let fresh = restarted {
                victim = fresh
            } else {
                if moment == .startup { moment = .save }
                victim = writers[Int.random(in: 0..<writers.count, using: &rng)]
            }
            guard let child = victim.child else { try start(victim); continue }
            // The victim's lines go to the aim, which waits for the moment in them; everyone else's are read meanwhile.
            let seen = aim.waitForMoment(moment, in: child, creates: false, rng: &rng) {
                self.drainAll(except: victim)
            }
            take(seen, from: victim)
            guard elapsed < options.seconds + 1 else { break }
            let (ending, last) = child.kill()
            victim.child = nil
            take(last, from: victim)
            summary.kills += 1
            if ending != .killed { ended(victim, ending) }
            try start(victim)
            restarted = victim
            drainAll()
            if options.progressEvery > 0, (ContinuousClock.now - lastProgress) / .seconds(1) >= options.progressEvery {
                lastProgress = .now
                options.progress?(String(format: "%.0f s: ", elapsed) + "\(summary.readsAttempted) reads "
                                  + "(\(summary.damageReports) damage), \(summary.acknowledged) saves acknowledged, "
                                  + "\(summary.kills) kills")
            }
        }
        summary.seconds = elapsed
        try finish()
    }

    // MARK: Children

    func start(_ writer: ShareWriter) throws {
        writer.child = try StressChildProcess(
            executable: options.executable,
            arguments: ["child", "--store", url.path, "--seed", String(writer.track.workload.seed),
                        "--from", "resume", "--writer", String(writer.number),
                        "--lock-timeout", String(options.lockTimeout), "--controlled", "--retry"],
            errors: errors, controlled: true)
        writer.paused = false
        writer.heard = .now
        if finishing { writer.child?.send("pause") }
    }

    func startReader(_ index: Int) throws {
        readers[index] = try StressChildProcess(
            executable: options.executable,
            arguments: ["reader", "--store", url.path,
                        "--seed", String(options.seed &+ UInt64(index + 1) &* 0x5851_F42D)],
            errors: errors, controlled: true)
        readersHeard[index] = .now
    }

    /// Kills every child still running; each is killed once (its pipe is closed after).
    func stopAll() {
        for writer in writers {
            _ = writer.child?.kill()
            writer.child = nil
        }
        for index in readers.indices {
            _ = readers[index]?.kill()
            readers[index] = nil
        }
    }

    /// Reads what every child (but `skipped`) wrote, without waiting; restarts a child that ended by itself.
    func drainAll(except skipped: ShareWriter? = nil) {
        for writer in writers where writer !== skipped {
            guard let child = writer.child else { continue }
            take(child.events(waitingUpTo: 0), from: writer)
            let hung = child.isRunning && !writer.paused && ContinuousClock.now - writer.heard > silenceLimit
            if hung || !child.isRunning {
                // Hung, or ended by itself: what it wrote last is in the pipe.
                let (ending, last) = child.kill()
                writer.child = nil
                take(last, from: writer)
                if hung {
                    writer.failedStarts += 1
                    summary.failures.append("writer \(writer.number) wrote nothing for \(silenceLimit): hung, killed")
                } else {
                    ended(writer, ending)
                }
                if writer.failedStarts < 5 { try? start(writer) }
            }
        }
        for index in readers.indices {
            guard let reader = readers[index] else { continue }
            let lines = reader.lines(waitingUpTo: 0)
            for line in lines { take(line) }
            if !lines.isEmpty { readersHeard[index] = .now }
            let hung = reader.isRunning && ContinuousClock.now - readersHeard[index] > silenceLimit
            if hung || !reader.isRunning {
                let (ending, last) = reader.killReadingLines()
                for line in last { take(line) }
                summary.failures.append(hung ? "reader \(index + 1) wrote nothing for \(silenceLimit): hung, killed"
                                        : "reader \(index + 1) ended by itself (\(ending)): \(stderrTail())")
                readers[index] = nil
                if summary.failures.count < 20 { try? startReader(index) }
            }
        }
    }

    /// A writer's child ended other than by this driver's SIGKILL.
    func ended(_ writer: ShareWriter, _ ending: StressChildProcess.Ending) {
        guard ending != .killed else { return }
        writer.failedStarts += 1
        summary.failures.append("writer \(writer.number) ended by itself (\(ending)): \(stderrTail())")
    }

    func stderrTail() -> String {
        String(((try? String(contentsOf: errors, encoding: .utf8)) ?? "").suffix(600))
    }

    // MARK: What the children say

    func take(_ events: [StressChildProcess.Event], from writer: ShareWriter) {
        let now = ShareClock.now
        if !events.isEmpty { writer.heard = .now }
        for event in events {
            var counted = KillDriver.Summary(seed: 0)
            switch event {
            case .ready(let from):
                writer.failedStarts = 0
                let held = from - 1
                if held < writer.ledger.lastAcknowledged {
                    summary.acknowledgedLost += writer.ledger.lastAcknowledged - held
                    summary.failures.append("writer \(writer.number) acknowledged steps up to "
                                            + "\(writer.ledger.lastAcknowledged), the store holds them up to \(held)")
                } else if held > writer.ledger.lastIssued {
                    summary.failures.append("the store holds writer \(writer.number)'s steps up to \(held), it "
                                            + "started steps up to \(writer.ledger.lastIssued) only")
                }
                writer.ledger = StepLedger(step: held)
            case .refused(let what, _, let waited):
                summary.lockRefusals[what, default: 0] += 1
                summary.longestRefusedWait = max(summary.longestRefusedWait, waited)
            case .openDamage(let message):
                summary.writerOpenDamage += 1
                sample("writer \(writer.number) open", "damage", message)
            case .failed(let message):
                summary.failures.append("writer \(writer.number) failed: \(message)")
            case .paused(let at):
                writer.paused = true
                if at != writer.ledger.lastAcknowledged {
                    summary.failures.append("writer \(writer.number) paused after step \(at), but acknowledged "
                                            + "steps up to \(writer.ledger.lastAcknowledged)")
                }
            default:
                if let problem = writer.ledger.take([event], into: &counted) {
                    summary.failures.append("writer \(writer.number): \(problem)")
                }
                if case .acknowledged(let step, _, _) = event { writer.acknowledgedAt.append((now, step)) }
            }
            summary.acknowledged += counted.acknowledged
            summary.issued += counted.issued
            summary.explicitCompactions += counted.explicitCompactions
            summary.historyTrims += counted.historyTrims
        }
    }

    func take(_ line: Substring) {
        guard let read = ShareRead(line) else {
            summary.failures.append("a reader wrote a line that is not a read: \(line.prefix(300))")
            return
        }
        summary.reads[read.path, default: [:]][read.outcome, default: 0] += 1
        if read.outcome != .ok { sample(read.path.rawValue, read.outcome.rawValue, read.detail) }
        guard let steps = read.steps else { return }
        for writer in writers {
            let required = writer.acknowledged(before: read.started)
            let seen = steps[writer.number] ?? 0
            if seen < required {
                summary.staleReads += 1
                sample(read.path.rawValue, "stale", "saw writer \(writer.number)'s steps up to \(seen), its step "
                       + "\(required) was acknowledged before the read began")
            }
        }
    }

    func sample(_ path: String, _ outcome: String, _ message: String) {
        guard sampled.insert("\(path) \(outcome)").inserted else { return }
        summary.samples.append("\(path) \(outcome): \(message.prefix(400))")
    }

    // MARK: The end

    func finish() throws {
        // Every writer between two saves, holding no lock.
        finishing = true
        for writer in writers { writer.child?.send("pause") }
        for writer in writers {
            let giveUp = ContinuousClock.now + .seconds(max(15, 3 * options.lockTimeout))
            while !writer.paused, let child = writer.child, ContinuousClock.now < giveUp,
                  child.isRunning || !child.endOfOutput {
                take(child.events(waitingUpTo: 0.05), from: writer)
                drainAll()
            }
            if !writer.paused { summary.failures.append("writer \(writer.number) did not pause at the end") }
        }
        // The readers finish the read they are in, and say so.
        for reader in readers { reader?.send("stop") }
        let stopBy = ContinuousClock.now + .seconds(10)
        for index in readers.indices {
            guard let reader = readers[index] else { continue }
            while !reader.endOfOutput, ContinuousClock.now < stopBy {
                for line in reader.lines(waitingUpTo: 0.05) { take(line) }
            }
            if !reader.endOfOutput {
                summary.failures.append("reader \(index + 1) did not finish its read within 10 s of being stopped")
            }
            for line in reader.killReadingLines().lines { take(line) }
            readers[index] = nil
        }
        try check()
        stopAll()
        summary.segmentsStarted = KillChecks.nextSegment(url).map { $0 - 1 } ?? 0
        if summary.damageReports > 0 {
            summary.failures.insert(summary.verifiedCleanAtEnd
                ? "\(summary.damageReports) false damage reports: the store verifies clean"
                : "\(summary.damageReports) damage reports, and the store does not verify clean", at: 0)
        }
        if summary.reads(.inconsistent) > 0 {
            summary.failures.insert("\(summary.reads(.inconsistent)) inconsistent reads", at: 0)
        }
        if summary.staleReads > 0 { summary.failures.insert("\(summary.staleReads) stale reads", at: 0) }
    }

    /// With every writer paused and no reader: the store verifies clean, and each writer's part of it is the
    /// replay of its steps up to the last one the store holds, which is at least the last one acknowledged.
    func check() throws {
        let torn: VerificationReport.Problem?
        do {
            torn = try KillChecks.verifyAllowingTornTail(url)
            summary.verifiedCleanAtEnd = true
        } catch {
            summary.failures.append("at the end, \(error.reason)")
            return
        }
        let container: ModelContainer
        let store: FileStore
        do {
            (container, store) = try KillChecks.open(url, writable: false, sharing: .perSave, torn: torn)
        } catch let failed as KillChecks.Failed {
            summary.failures.append("at the end, \(failed.reason)")
            return
        }
        defer { try? store.close() }
        let context = ModelContext(container)
        var total = 0
        for writer in writers {
            let present = try StressWorkload.stepsPresent(in: context, writer: writer.number)
            let step = present.last ?? 0
            total += step
            if present != StressWorkload.expectedSteps(through: step) {
                summary.failures.append("at the end, writer \(writer.number)'s steps are not the last "
                                        + "\(StressWorkload.window) of a prefix: \(present.first ?? 0)…\(step)")
            }
            if step < writer.ledger.lastAcknowledged {
                summary.acknowledgedLost += writer.ledger.lastAcknowledged - step
                summary.failures.append("at the end, writer \(writer.number) acknowledged steps up to "
                                        + "\(writer.ledger.lastAcknowledged), the store holds them up to \(step)")
            }
            if step > writer.ledger.lastIssued {
                summary.failures.append("at the end, the store holds writer \(writer.number)'s steps up to \(step), "
                                        + "it started steps up to \(writer.ledger.lastIssued) only")
            }
            let actual = try StressWorkload.canonicalDump(context, writer: writer.number)
            let expected = try writer.track.expectedState(through: step)
            if actual != expected {
                summary.failures.append("at the end, writer \(writer.number)'s objects after its steps 1…\(step) "
                                        + "differ from the replay; "
                                        + KillChecks.difference(expected: expected, actual: actual))
            }
        }
        if store.statistics.lastTransactionNumber != UInt64(total) {
            summary.failures.append("at the end, the writers' steps add up to \(total), the store holds "
                                    + "\(store.statistics.lastTransactionNumber) transactions")
        }
    }
}
