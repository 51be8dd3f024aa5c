import Foundation
import NoteKit
import NoteKitFileStore

/// The kill test (docs/reliability/kill.md): runs `notekit-stress child` on one store again and again, kills it
/// with SIGKILL at random moments, and after each kill checks the store against a replay of the same steps on the
/// in-memory store.
///
/// After each kill:
/// 1. ``StoreVerifier`` finds no problem but, at most, a torn tail (before anything reopens the store);
/// 2. the steps present are exactly the last ``StressWorkload/window`` of a prefix 1…k of the steps issued, with k
///    at least the last step acknowledged and at most the last step issued, and k transactions in the store;
/// 3. the state equals the in-memory replay of steps 1…k, line for line: no part of step k + 1 is visible;
/// 4. an open that recovers (here, or in the next child) leaves no torn tail, no leftover file and no blob that
///    nothing references; the next child continues on the same store from step k + 1.
///
/// ```swift
/// let summary = try KillDriver.run(.init(executable: stress, directory: scratch, seed: 42, kills: 300))
/// print(summary)
/// ```
public enum KillDriver {
    public struct Options: Sendable {
        /// The `notekit-stress` executable.
        public var executable: URL
        /// Where the stores are made; it must exist.
        public var directory: URL
        public var seed: UInt64
        /// How many times to kill a child.
        public var kills: Int
        /// Stops after this many seconds even if fewer kills were made.
        public var timeLimit: Double?
        /// The time limit ends the run only once this many kills are made: a loaded machine takes longer for them,
        /// and never checks less.
        public var minimumKills = 0
        /// How many of the kills land while a child creates a new store (each on a store of its own).
        public var creationKills: Int
        /// Receives a line now and then (every `progressEvery` kills).
        public var progress: (@Sendable (String) -> Void)?
        public var progressEvery: Int

        public init(executable: URL, directory: URL, seed: UInt64, kills: Int, timeLimit: Double? = nil,
                    creationKills: Int? = nil, progress: (@Sendable (String) -> Void)? = nil,
                    progressEvery: Int = 100) {
            self.executable = executable
            self.directory = directory
            self.seed = seed
            self.kills = kills
            self.timeLimit = timeLimit
            self.creationKills = creationKills ?? max(1, kills / 10)
            self.progress = progress
            self.progressEvery = progressEvery
        }
    }

    /// What a run did.
    public struct Summary: Sendable, CustomStringConvertible {
        public var seed: UInt64
        public var kills = 0
        /// Kills while a child was creating a new store.
        public var creationKills = 0
        /// Of those, the kills that left segment 1 written and no manifest yet.
        public var interruptedCreations = 0
        /// Saves whose `save()` returned in a child.
        public var acknowledged = 0
        /// Saves a child started (a step lost to a kill is issued again by the next child).
        public var issued = 0
        /// Kills that came while a save was in flight (after `save STEP`, before `ack STEP`), during an explicit
        /// compaction, during a history deletion.
        public var killsDuringSave = 0
        public var killsDuringCompaction = 0
        public var killsDuringTrim = 0
        /// Steps found in the store after a kill that had not been acknowledged: the save in flight was committed.
        public var unacknowledgedKept = 0
        /// The last step the store holds at the end.
        public var steps = 0
        public var rotations = 0
        /// Automatic and explicit compactions that completed.
        public var compactions = 0
        public var explicitCompactions = 0
        public var historyTrims = 0
        /// Kills after which the store had a torn tail.
        public var tornTails = 0
        /// Kills per moment aimed at (startup, save, blob, large, rotate, compaction, trim, ack).
        public var killsByMoment: [String: Int] = [:]
        /// Whether some kill aimed at each moment (the first eight kills of a run aim at one each).
        public var aimedAtEveryMoment: Bool {
            Moment.allCases.allSatisfy { killsByMoment[$0.rawValue, default: 0] > 0 }
        }
        /// Bytes of the store's files at the end.
        public var storeBytes = 0
        /// Writers sharing the store (``SharedKillDriver``); 1 for ``KillDriver``.
        public var writers = 1
        /// With several writers: saves acknowledged per writer, and the segments the store started in all
        /// (rotations and compactions by every writer; `rotations` and `compactions` then count only explicit
        /// compactions, since a writer cannot tell its own segments from the others').
        public var acknowledgedByWriter: [Int: Int] = [:]
        public var segmentsStarted = 0
        public var seconds = 0.0

        public var description: String {
            let moments = killsByMoment.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            if writers > 1 {
                let perWriter = acknowledgedByWriter.sorted { $0.key < $1.key }.map { "w\($0.key) \($0.value)" }
                    .joined(separator: ", ")
                return "shared kill test: seed \(seed), \(writers) writers: \(kills) kills in "
                    + String(format: "%.1f", seconds) + " s; saves acknowledged \(acknowledged) (\(perWriter)), "
                    + "issued \(issued), kills during a save \(killsDuringSave) (the save kept \(unacknowledgedKept)), "
                    + "during an explicit compaction \(killsDuringCompaction), during a history deletion "
                    + "\(killsDuringTrim); steps in the store \(steps); segments started \(segmentsStarted), explicit "
                    + "compactions \(explicitCompactions), history trims \(historyTrims), torn tails \(tornTails); "
                    + "store bytes \(storeBytes); kills aimed at: \(moments); failures 0"
            }
            return "kill test: seed \(seed): \(kills) kills (\(creationKills) while creating a store, "
                + "\(interruptedCreations) before its manifest) in "
                + String(format: "%.1f", seconds) + " s; saves acknowledged \(acknowledged), issued \(issued), "
                + "kills during a save \(killsDuringSave) (the save kept \(unacknowledgedKept)), during an explicit "
                + "compaction \(killsDuringCompaction), during a history deletion \(killsDuringTrim); steps in the store "
                + "\(steps); rotations \(rotations), "
                + "compactions \(compactions) (\(explicitCompactions) explicit), history trims \(historyTrims), "
                + "torn tails \(tornTails); store bytes \(storeBytes); kills aimed at: \(moments); failures 0"
        }
    }

    /// A check that failed, with what is needed to look again.
    public struct Failure: Error, CustomStringConvertible {
        public var seed: UInt64
        public var kill: Int
        public var store: String
        public var reason: String
        /// Writers sharing the store (``SharedKillDriver``); 1 for ``KillDriver``.
        public var writers = 1

        public var description: String {
            if writers > 1 {
                return "shared kill test failed after kill \(kill) (seed \(seed), \(writers) writers; replay with "
                    + "NOTEKIT_SHARED_KILL_SEED=\(seed) or `notekit-stress kill --writers \(writers) --seed \(seed)`; "
                    + "store kept at \(store)): \(reason)"
            }
            return "kill test failed after kill \(kill) (seed \(seed); replay with NOTEKIT_KILL_SEED=\(seed) or "
                + "`notekit-stress kill --seed \(seed)`; store kept at \(store)): \(reason)"
        }
    }

    /// Runs the kill test.
    ///
    /// - Throws: ``Failure`` at the first check that fails (the store is then left in place), or an error starting
    ///   a child.
    public static func run(_ options: Options) throws -> Summary {
        var run = Run(options: options)
        return try run.go()
    }
}

// MARK: - The run

/// One store being killed (or one writer's part of it), and the in-memory replay it is compared with.
struct Track {
    let url: URL
    let workload: StressWorkload
    /// The last step the store held at the last check.
    var step = 0
    let model: ModelContainer
    var modelStep = 0

    init(url: URL, seed: UInt64, writer: Int? = nil) throws {
        self.url = url
        workload = StressWorkload(seed: seed, writer: writer)
        model = try ModelContainer(for: Schema(StressWorkload.models),
                                   configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
    }

    /// The state after steps 1…`target`, replayed on the in-memory store.
    mutating func expectedState(through target: Int) throws -> [String] {
        while modelStep < target {
            modelStep += 1
            let context = ModelContext(model)
            try workload.apply(step: modelStep, in: context)
            try context.save()
        }
        return try StressWorkload.canonicalDump(ModelContext(model), writer: workload.writer)
    }
}

/// Where a kill is aimed.
enum Moment: String, CaseIterable {
    /// While the child starts and opens the store (recovery included), or creates a new one.
    case startup
    /// Right after an acknowledgement: between saves.
    case ack
    /// Some time into a save.
    case save
    /// Into a save that writes blobs, a large record, or starts a segment.
    case blob, large, rotate
    /// Into an explicit compaction, or a history deletion.
    case compaction, trim
}

private struct Run {
    let options: Options
    typealias Options = KillDriver.Options
    var summary: KillDriver.Summary
    var rng: SeededGenerator
    var aim = KillAim()
    let began = ContinuousClock.now

    init(options: Options) {
        self.options = options
        summary = KillDriver.Summary(seed: options.seed)
        rng = SeededGenerator(seed: options.seed ^ 0x6B69_6C6C)
    }

    var elapsed: Double { (ContinuousClock.now - began) / .seconds(1) }

    mutating func go() throws -> KillDriver.Summary {
        var main = try Track(url: options.directory.appendingPathComponent("kill.notekit"), seed: options.seed)
        var creationsLeft = options.creationKills
        var mainKills = 0
        if creationsLeft > 0 { aim.creationTime = try timeCreation() }
        while summary.kills < options.kills {
            if let limit = options.timeLimit, elapsed > limit, summary.kills >= options.minimumKills { break }
            // Creation kills are spread over the run.
            if creationsLeft > 0, rng.chance(Double(creationsLeft) / Double(max(1, options.kills - summary.kills))) {
                creationsLeft -= 1
                var fresh = try Track(url: options.directory.appendingPathComponent("create-\(summary.kills).notekit"),
                                      seed: options.seed &+ UInt64(summary.kills))
                try round(&fresh, moment: .startup)
                try acceptsWrites(&fresh)
                try? FileManager.default.removeItem(at: fresh.url)
                summary.creationKills += 1
            } else {
                try round(&main, moment: KillAim.moment(ofKill: mainKills, &rng))
                mainKills += 1
            }
            if summary.kills % options.progressEvery == 0 {
                options.progress?("kill \(summary.kills): step \(main.step), \(summary.acknowledged) saves acknowledged, "
                                  + String(format: "%.0f s", elapsed))
            }
        }
        try acceptsWrites(&main)
        summary.steps = main.step
        summary.storeBytes = KillChecks.bytes(under: main.url)
        summary.seconds = elapsed
        return summary
    }

    /// How long a child takes from its start to having created a new store, the median of three: where creation
    /// kills start aiming (the store's first files are written at the end of that time).
    func timeCreation() throws -> Double {
        var times: [Double] = []
        for attempt in 0..<3 {
            let url = options.directory.appendingPathComponent("calibrate-\(attempt).notekit")
            let child = try StressChildProcess(executable: options.executable,
                                               arguments: ["child", "--store", url.path, "--seed", "1", "--from", "1",
                                                           "--steps", "0"],
                                               errors: options.directory.appendingPathComponent("child.stderr"))
            let giveUp = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < giveUp, !child.events(waitingUpTo: 0.05).contains(.ready(from: 1)) {}
            times.append((ContinuousClock.now - child.started) / .seconds(1))
            _ = child.kill()
            try? FileManager.default.removeItem(at: url)
        }
        return times.sorted()[1]
    }

    func failure(_ track: Track, _ reason: String) -> KillDriver.Failure {
        KillDriver.Failure(seed: options.seed, kill: summary.kills, store: track.url.path, reason: reason)
    }

    // MARK: One kill

    mutating func round(_ track: inout Track, moment: Moment) throws {
        let creates = !FileManager.default.fileExists(atPath: track.url.path)
        let errors = options.directory.appendingPathComponent("child.stderr")
        let child = try StressChildProcess(
            executable: options.executable,
            arguments: ["child", "--store", track.url.path, "--seed", String(track.workload.seed), "--from",
                        String(track.step + 1), "--steps", "400"]
                + (rng.chance(0.25) ? ["--durability", "deferred"] : []),
            errors: errors)
        var seen = aim.waitForMoment(moment, in: child, creates: creates, rng: &rng)
        let (ending, last) = child.kill()
        seen += last
        summary.kills += 1
        summary.killsByMoment[moment.rawValue, default: 0] += 1

        if let problem = KillChecks.problem(ending: ending, events: seen, errors: errors) {
            throw failure(track, problem)
        }

        if creates {
            // Creation kills home in on the moment the manifest appears: later when the store's first segment was
            // not there yet, earlier when the manifest already was.
            let files = FileManager.default
            if files.fileExists(atPath: track.url.appendingPathComponent("MANIFEST").path) {
                aim.creationTime *= 0.9
            } else if !files.fileExists(atPath: track.url.appendingPathComponent("segments/000001.seg").path) {
                aim.creationTime *= 1.1
            }
        }
        var ledger = StepLedger(step: track.step)
        if let problem = ledger.take(seen, into: &summary) { throw failure(track, problem) }
        KillChecks.countKill(after: seen, into: &summary)
        try check(&track, atLeast: ledger.lastAcknowledged, atMost: ledger.lastIssued)
    }

    // MARK: Checks

    /// The checks after a kill; sets `track.step` to the last step the store holds.
    mutating func check(_ track: inout Track, atLeast lastAcknowledged: Int, atMost lastIssued: Int) throws {
        let manifest = track.url.appendingPathComponent("MANIFEST")
        guard FileManager.default.fileExists(atPath: manifest.path) else {
            // Only a store being created has no manifest yet: nothing was committed, so an open creates it anew.
            guard track.step == 0, lastAcknowledged == 0 else {
                throw failure(track, "the manifest is missing after step \(max(track.step, lastAcknowledged))")
            }
            if FileManager.default.fileExists(atPath: track.url.appendingPathComponent("segments/000001.seg").path) {
                summary.interruptedCreations += 1
            }
            return
        }
        // 1. Before anything opens the store: no damage but a torn tail. Half the time this process recovers the
        // store; otherwise it reads it as it is and the next child recovers it.
        let writable = rng.chance(0.5)
        let torn = try checked(track) { try KillChecks.verifyAllowingTornTail(track.url) }
        if torn != nil { summary.tornTails += 1 }
        let (container, store) = try checked(track) { try KillChecks.open(track.url, writable: writable, torn: torn) }
        defer { try? store.close() }

        // 2. Whole steps, a prefix of those issued, every acknowledged one among them.
        let context = ModelContext(container)
        let present = try StressWorkload.stepsPresent(in: context)
        let step = present.last ?? 0
        guard present == StressWorkload.expectedSteps(through: step) else {
            throw failure(track, "the steps present are not the last \(StressWorkload.window) of a prefix: "
                          + "\(present.first ?? 0)…\(step), missing "
                          + "\(Set(StressWorkload.expectedSteps(through: step)).subtracting(present).sorted())")
        }
        guard step >= lastAcknowledged else {
            throw failure(track, "step \(lastAcknowledged) was acknowledged but the store holds steps up to \(step)")
        }
        guard step <= lastIssued else {
            throw failure(track, "the store holds step \(step) but only steps up to \(lastIssued) were issued")
        }
        if step > lastAcknowledged { summary.unacknowledgedKept += 1 }
        let statistics = store.statistics
        guard statistics.lastTransactionNumber == UInt64(step) else {
            throw failure(track, "the store holds steps 1…\(step) in \(statistics.lastTransactionNumber) transactions")
        }
        let history = try store.history()
        if let newest = history.records.last, newest.number != UInt64(step) {
            throw failure(track, "the newest transaction in history is \(newest.number), the store holds \(step)")
        }

        // 3. Exactly the state steps 1…k make.
        let actual = try StressWorkload.canonicalDump(context)
        let expected = try track.expectedState(through: step)

        if actual != expected {
            throw failure(track, "after steps 1…\(step) the store differs from the replay; "
                          + KillChecks.difference(expected: expected, actual: actual))
        }

        // 4. A writable open leaves nothing behind that the manifest does not reach.
        if writable { try checked(track) { try KillChecks.recoveredCleanly(track.url, store: store) } }
        track.step = step
    }

    /// Runs `body`, turning a failed check into a ``KillDriver/Failure`` that names the kill and the store.
    func checked<T>(_ track: Track, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let failed as KillChecks.Failed { throw failure(track, failed.reason) }
    }

    /// The store takes a new save after everything: step k + 1, in this process, and reads back exactly.
    mutating func acceptsWrites(_ track: inout Track) throws {
        let configuration = FileStoreConfiguration(url: track.url)
        do {
            let container = try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
            let context = ModelContext(container)
            try track.workload.apply(step: track.step + 1, in: context)
            try context.save()
            try (container.store as? FileStore)?.close()
        } catch {
            throw failure(track, "the store does not take a new save: \(error)")
        }
        try check(&track, atLeast: track.step + 1, atMost: track.step + 1)
    }
}
