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
        /// Bytes of the store's files at the end.
        public var storeBytes = 0
        public var seconds = 0.0

        public var description: String {
            let moments = killsByMoment.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
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

        public var description: String {
            "kill test failed after kill \(kill) (seed \(seed); replay with NOTEKIT_KILL_SEED=\(seed) or "
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

/// One store being killed, and the in-memory replay it is compared with.
private struct Track {
    let url: URL
    let workload: StressWorkload
    /// The last step the store held at the last check.
    var step = 0
    let model: ModelContainer
    var modelStep = 0

    init(url: URL, seed: UInt64) throws {
        self.url = url
        workload = StressWorkload(seed: seed)
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
        return try StressWorkload.canonicalDump(ModelContext(model))
    }
}

/// Where a kill is aimed.
private enum Moment: String {
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
    // Running estimates of how long things take, in seconds, to aim kills inside them.
    var startupTime = 0.05
    var creationTime = 0.03
    var saveTime = 0.01
    var compactionTime = 0.05
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
        if creationsLeft > 0 { creationTime = try timeCreation() }
        while summary.kills < options.kills {
            if let limit = options.timeLimit, elapsed > limit { break }
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
                try round(&main, moment: nextMoment())
            }
            if summary.kills % options.progressEvery == 0 {
                options.progress?("kill \(summary.kills): step \(main.step), \(summary.acknowledged) saves acknowledged, "
                                  + String(format: "%.0f s", elapsed))
            }
        }
        try acceptsWrites(&main)
        summary.steps = main.step
        summary.storeBytes = Self.bytes(under: main.url)
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

    mutating func nextMoment() -> Moment {
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<10: .startup
        case 10..<22: .ack
        case 22..<62: .save
        case 62..<72: .blob
        case 72..<80: .large
        case 80..<87: .rotate
        case 87..<95: .compaction
        default: .trim
        }
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
        var seen: [StressChildProcess.Event] = []
        let acksWanted = Int.random(in: moment == .ack ? 1...4 : 0...6, using: &rng)
        // Startup kills aim at the end of the startup, where the store is opened (or created) and recovered.
        let fraction = Double.random(in: moment != .startup ? 0..<1.2 : creates ? 0.9..<1.1 : 0.4..<1.2, using: &rng)
        var savingSince: ContinuousClock.Instant?, compactingSince: ContinuousClock.Instant?
        // Waits for the moment, then sleeps a random part of how long the thing aimed at takes.
        var delay: Double?
        if moment == .startup { delay = fraction * (creates ? creationTime : startupTime) }
        let giveUp = ContinuousClock.now + .seconds(5)
        while delay == nil, child.isRunning || !child.endOfOutput, ContinuousClock.now < giveUp {
            for event in child.events(waitingUpTo: 0.05) {
                seen.append(event)
                let acks = seen.count { if case .acknowledged = $0 { true } else { false } }
                switch event {
                case .ready:
                    startupTime = 0.9 * startupTime + 0.1 * ((ContinuousClock.now - child.started) / .seconds(1))
                case .saving(_, let tags):
                    savingSince = .now
                    guard delay == nil, acks >= acksWanted else { break }
                    switch moment {
                    case .save: delay = fraction * saveTime
                    case .blob where tags.contains("blob"), .large where tags.contains("large"),
                         .rotate where tags.contains("rotate"):
                        delay = fraction * saveTime * 2
                    default: break
                    }
                case .acknowledged:
                    if let since = savingSince {
                        saveTime = 0.95 * saveTime + 0.05 * ((ContinuousClock.now - since) / .seconds(1))
                    }
                    if delay == nil, moment == .ack, acks >= acksWanted { delay = 0 }
                case .compacting:
                    compactingSince = .now
                    if delay == nil, moment == .compaction, acks >= acksWanted { delay = fraction * compactionTime }
                case .compacted:
                    if let since = compactingSince {
                        compactionTime = 0.9 * compactionTime + 0.1 * ((ContinuousClock.now - since) / .seconds(1))
                    }
                case .trimming:
                    if delay == nil, moment == .trim, acks >= acksWanted { delay = fraction * saveTime }
                case .failed, .finished, .trimmed:
                    break
                }
            }
        }
        if let delay, delay > 0 {
            let target = (moment == .startup ? child.started : ContinuousClock.now) + .seconds(delay)
            let wait = (target - .now) / .seconds(1)
            if wait > 0 { usleep(UInt32(min(wait, 5) * 1_000_000)) }
        }
        let (ending, last) = child.kill()
        seen += last
        summary.kills += 1
        summary.killsByMoment[moment.rawValue, default: 0] += 1

        if case .failed(let message) = seen.last(where: { if case .failed = $0 { true } else { false } }) {
            throw failure(track, "the child failed: \(message)")
        }
        switch ending {
        case .killed, .exited(0): break
        case .exited(let status):
            let text = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw failure(track, "the child exited with status \(status): \(text.suffix(2_000))")
        case .signalled(let signal):
            let text = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw failure(track, "the child died of signal \(signal): \(text.suffix(2_000))")
        }

        if creates {
            // Creation kills home in on the moment the manifest appears: later when the store's first segment was
            // not there yet, earlier when the manifest already was.
            let files = FileManager.default
            if files.fileExists(atPath: track.url.appendingPathComponent("MANIFEST").path) {
                creationTime *= 0.9
            } else if !files.fileExists(atPath: track.url.appendingPathComponent("segments/000001.seg").path) {
                creationTime *= 1.1
            }
        }
        var lastAcknowledged = track.step, lastIssued = track.step
        for event in seen {
            switch event {
            case .acknowledged(let step, let rotations, let compactions):
                guard step == lastAcknowledged + 1 else {
                    throw failure(track, "the child acknowledged step \(step) after step \(lastAcknowledged)")
                }
                lastAcknowledged = step
                summary.acknowledged += 1
                summary.rotations += rotations
                summary.compactions += compactions
            case .saving(let step, _):
                lastIssued = max(lastIssued, step)
                summary.issued += 1
            case .compacted:
                summary.compactions += 1
                summary.explicitCompactions += 1
            case .trimmed:
                summary.historyTrims += 1
            default: break
            }
        }
        // What the child was doing when it died.
        switch seen.last(where: { event in
            switch event { case .saving, .acknowledged, .compacting, .compacted, .trimming, .trimmed: true; default: false }
        }) {
        case .saving?: summary.killsDuringSave += 1
        case .compacting?: summary.killsDuringCompaction += 1
        case .trimming?: summary.killsDuringTrim += 1
        default: break
        }
        try check(&track, atLeast: lastAcknowledged, atMost: lastIssued)
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
        // 1. Before anything opens the store: no damage but a torn tail.
        let verification = StoreVerifier.verify(at: track.url)
        let torn = verification.problems.filter { $0.kind == .tornTail }
        let damage = verification.problems.filter { $0.kind != .tornTail }
        guard damage.isEmpty, torn.count <= 1 else {
            throw failure(track, "verify found damage after a kill: "
                          + verification.problems.map(\.description).joined(separator: "; "))
        }
        if !torn.isEmpty { summary.tornTails += 1 }

        // Half the time this process recovers the store; otherwise it reads it as it is and the next child recovers.
        let writable = rng.chance(0.5)
        let configuration = FileStoreConfiguration(url: track.url,
                                                   mode: writable ? .readWrite(createIfMissing: false) : .readOnly,
                                                   automaticCompaction: nil)
        let container: ModelContainer
        do {
            container = try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
        } catch {
            throw failure(track, "the store does not open \(writable ? "for writing" : "read-only") after a kill: \(error)")
        }
        guard let store = container.store as? FileStore else { throw failure(track, "not a file store") }
        defer { try? store.close() }
        if let torn = torn.first {
            guard store.recovery.tornTail?.offset == torn.offset else {
                throw failure(track, "verify reported a torn tail at byte \(torn.offset) of \(torn.file), the open "
                              + "\(store.recovery.tornTail.map { "at byte \($0.offset)" } ?? "none")")
            }
            if writable, store.recovery.tornTail?.quarantinedAt == nil {
                throw failure(track, "the torn tail at byte \(torn.offset) was not kept in quarantine")
            }
        } else if let tail = store.recovery.tornTail {
            throw failure(track, "the open found a torn tail at byte \(tail.offset) of \(tail.segment) that verify missed")
        }

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
        guard statistics.lastTransaction == UInt64(step) else {
            throw failure(track, "the store holds steps 1…\(step) in \(statistics.lastTransaction) transactions")
        }
        let history = try store.history()
        if let newest = history.records.last, newest.number != UInt64(step) {
            throw failure(track, "the newest transaction in history is \(newest.number), the store holds \(step)")
        }

        // 3. Exactly the state steps 1…k make.
        let actual = try StressWorkload.canonicalDump(context)
        let expected = try track.expectedState(through: step)

        if actual != expected {
            let missing = Set(expected).subtracting(actual).sorted().prefix(5)
            let extra = Set(actual).subtracting(expected).sorted().prefix(5)
            throw failure(track, "after steps 1…\(step) the store differs from the replay; expected but missing: "
                          + "\(missing.map { String($0.prefix(300)) }); present but unexpected: "
                          + "\(extra.map { String($0.prefix(300)) })")
        }

        // 4. A writable open leaves nothing behind that the manifest does not reach.
        if writable {
            try checkNoLeftovers(track, segments: statistics.segments, blobs: Self.blobNames(store))
            try store.close()
            let after = StoreVerifier.verify(at: track.url)
            guard after.ok else {
                throw failure(track, "verify found problems after recovery: "
                              + after.problems.map(\.description).joined(separator: "; "))
            }
        }
        track.step = step
    }

    func checkNoLeftovers(_ track: Track, segments: [Int], blobs: Set<String>) throws {
        let files = FileManager.default
        let segmentFiles = Set((try? files.contentsOfDirectory(atPath: track.url.appendingPathComponent("segments").path)) ?? [])
        let listed = Set(segments.map { String(format: "%06d.seg", $0) })
        guard segmentFiles == listed else {
            throw failure(track, "after recovery segments/ holds \(segmentFiles.sorted()), the manifest lists \(listed.sorted())")
        }
        let blobFiles = Set((try? files.contentsOfDirectory(atPath: track.url.appendingPathComponent("blobs").path)) ?? [])
        let referenced = Set(blobs.map { $0 + ".blob" })
        guard blobFiles == referenced else {
            throw failure(track, "after recovery blobs/ holds \(blobFiles.subtracting(referenced).sorted()) that "
                          + "nothing references and lacks \(referenced.subtracting(blobFiles).sorted())")
        }
        if files.fileExists(atPath: track.url.appendingPathComponent("MANIFEST.tmp").path) {
            throw failure(track, "after recovery MANIFEST.tmp is still there")
        }
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

    /// The blobs the store's rows name.
    static func blobNames(_ store: FileStore) throws -> Set<String> {
        var names = Set<String>()
        for entity in store.schema.entities {
            for row in try store.fetch(StoreFetchRequest(entity: entity.name)).snapshots {
                for case .external(let blob) in row.attributes { names.insert(blob.name) }
            }
        }
        return names
    }

    static func bytes(under url: URL) -> Int {
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey]) else {
            return 0
        }
        var total = 0
        for case let file as URL in walker {
            total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        }
        return total
    }
}
