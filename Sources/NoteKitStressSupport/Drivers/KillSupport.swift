import Foundation
import NoteKit
import NoteKitFileStore

// What the kill drivers share: aiming a kill at a moment of a child's work, reading what a child reported, and the
// checks of a store after a kill that do not depend on whose steps it holds.

/// Aims kills at moments of a child's work, from running estimates of how long things take (in seconds).
struct KillAim {
    var startupTime = 0.05
    var creationTime = 0.03
    var saveTime = 0.01
    var compactionTime = 0.05

    /// The moments the first kills of a run aim at, one each, before the others are drawn at random: a short run
    /// (`swift test`'s bounded one) still aims at every moment. A startup comes last, when the shared test has a
    /// writer it restarted to aim it at.
    static let inTurn: [Moment] = [.save, .ack, .blob, .large, .rotate, .compaction, .trim, .startup]

    /// The moment the kill numbered `index` (from 0) aims at: ``inTurn``'s first, then ``nextMoment(_:)``'s.
    static func moment(ofKill index: Int, _ rng: inout SeededGenerator) -> Moment {
        index < inTurn.count ? inTurn[index] : nextMoment(&rng)
    }

    /// A moment to aim at, weighted towards saves.
    static func nextMoment(_ rng: inout SeededGenerator) -> Moment {
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

    /// Waits (up to 5 seconds) for the event that starts `moment` after a random number of acknowledgements, then
    /// sleeps a random part (0–120%) of how long that kind of thing has been taking; a startup kill sleeps from
    /// the child's start instead. Returns the events seen. `tick` runs between reads of the child's output (a run
    /// with several children reads the others' there).
    mutating func waitForMoment(_ moment: Moment, in child: StressChildProcess, creates: Bool,
                                rng: inout SeededGenerator, tick: () -> Void = {})
        -> [StressChildProcess.Event] {
        var seen: [StressChildProcess.Event] = []
        let acksWanted = Int.random(in: moment == .ack ? 1...4 : 0...6, using: &rng)
        // Startup kills aim at the end of the startup, where the store is opened (or created) and recovered.
        let fraction = Double.random(in: moment != .startup ? 0..<1.2 : creates ? 0.9..<1.1 : 0.4..<1.2, using: &rng)
        var savingSince: ContinuousClock.Instant?, compactingSince: ContinuousClock.Instant?
        var delay: Double?
        if moment == .startup { delay = fraction * (creates ? creationTime : startupTime) }
        let giveUp = ContinuousClock.now + .seconds(5)
        var acks = 0
        while delay == nil, child.isRunning || !child.endOfOutput, ContinuousClock.now < giveUp {
            tick()
            for event in child.events(waitingUpTo: 0.05) {
                seen.append(event)
                if case .acknowledged = event { acks += 1 }
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
                case .failed, .finished, .trimmed, .paused, .refused, .openDamage:
                    break
                }
            }
        }
        if let delay, delay > 0 {
            let target = (moment == .startup ? child.started : ContinuousClock.now) + .seconds(delay)
            let wait = (target - .now) / .seconds(1)
            if wait > 0 { usleep(UInt32(min(wait, 5) * 1_000_000)) }
        }
        return seen
    }
}

/// What one writer's children reported: the last step acknowledged and the last issued, checked to go up one at a
/// time.
struct StepLedger {
    var lastAcknowledged: Int
    var lastIssued: Int

    /// Starting from a store that holds steps 1…`step`.
    init(step: Int) {
        lastAcknowledged = step
        lastIssued = step
    }

    /// Takes `events` into account, and counts them in `summary`; returns what is wrong, if anything.
    mutating func take(_ events: [StressChildProcess.Event], into summary: inout KillDriver.Summary) -> String? {
        for event in events {
            switch event {
            case .acknowledged(let step, let rotations, let compactions):
                guard step == lastAcknowledged + 1 else {
                    return "the child acknowledged step \(step) after step \(lastAcknowledged)"
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
        return nil
    }
}

/// The checks after a kill that any store gets.
enum KillChecks {
    /// A check that failed; the driver adds the seed, the kill and the store.
    struct Failed: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// What is wrong with how a child ended, if anything: it reported an error, exited with a failure or died of
    /// a signal other than SIGKILL.
    static func problem(ending: StressChildProcess.Ending, events: [StressChildProcess.Event], errors: URL) -> String? {
        if case .failed(let message) = events.last(where: { if case .failed = $0 { true } else { false } }) {
            return "the child failed: \(message)"
        }
        let text = { ((try? String(contentsOf: errors, encoding: .utf8)) ?? "").suffix(2_000) }
        switch ending {
        case .killed, .exited(0): return nil
        case .exited(let status): return "the child exited with status \(status): \(text())"
        case .signalled(let signal): return "the child died of signal \(signal): \(text())"
        }
    }

    /// Counts what the child was doing when it died.
    static func countKill(after events: [StressChildProcess.Event], into summary: inout KillDriver.Summary) {
        switch events.last(where: { event in
            switch event { case .saving, .acknowledged, .compacting, .compacted, .trimming, .trimmed: true; default: false }
        }) {
        case .saving?: summary.killsDuringSave += 1
        case .compacting?: summary.killsDuringCompaction += 1
        case .trimming?: summary.killsDuringTrim += 1
        default: break
        }
    }

    /// Before anything reopens the store: `StoreVerifier` finds no damage but, at most, one torn tail, returned.
    static func verifyAllowingTornTail(_ url: URL) throws(Failed) -> VerificationReport.Problem? {
        let verification: VerificationReport
        do { verification = try StoreVerifier.verify(at: url) } catch { throw Failed("verify could not read: \(error)") }
        let torn = verification.problems.filter { $0.kind == .tornTail }
        let damage = verification.damage
        guard damage.isEmpty, torn.count <= 1 else {
            throw Failed("verify found damage after a kill: "
                         + verification.problems.map(\.description).joined(separator: "; "))
        }
        return torn.first
    }

    /// Opens the store (for writing, or read-only) and checks that the open excluded exactly the torn tail the
    /// verifier reported, and that a writable open kept its bytes in quarantine.
    static func open(_ url: URL, writable: Bool, sharing: FileStoreConfiguration.Sharing = .exclusive,
                     torn: VerificationReport.Problem?) throws -> (ModelContainer, FileStore) {
        var configuration = FileStoreConfiguration(url: url,
                                                   mode: writable ? .readWrite(createIfMissing: false) : .readOnly,
                                                   automaticCompaction: nil, sharing: sharing)
        if sharing == .perSave { configuration.lockTimeout = 5 }
        let container: ModelContainer
        do {
            container = try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
        } catch {
            throw Failed("the store does not open \(writable ? "for writing" : "read-only") after a kill: \(error)")
        }
        guard let store = container.store as? FileStore else { throw Failed("not a file store") }
        if let torn {
            guard store.recovery.tornTail?.offset == torn.offset else {
                throw Failed("verify reported a torn tail at byte \(torn.offset) of \(torn.file), the open "
                             + "\(store.recovery.tornTail.map { "at byte \($0.offset)" } ?? "none")")
            }
            if writable, store.recovery.tornTail?.quarantinedAt == nil {
                throw Failed("the torn tail at byte \(torn.offset) was not kept in quarantine")
            }
        } else if let tail = store.recovery.tornTail {
            throw Failed("the open found a torn tail at byte \(tail.offset) of \(tail.segment) that verify missed")
        }
        return (container, store)
    }

    /// After a writable open: `segments/` holds exactly the segments the manifest lists, `blobs/` exactly the
    /// blobs live objects reference (besides retired ones), and `MANIFEST.tmp` is gone; closed again, the verifier
    /// finds nothing.
    static func recoveredCleanly(_ url: URL, store: FileStore) throws {
        let files = FileManager.default
        let segmentFiles = Set((try? files.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path)) ?? [])
        let listed = Set(store.statistics.segments.map { String(format: "%06d.seg", $0) })
        guard segmentFiles == listed else {
            throw Failed("after recovery segments/ holds \(segmentFiles.sorted()), the manifest lists \(listed.sorted())")
        }
        // Blobs no object names any more are retired, not deleted (docs/FORMAT.md, *External storage*).
        let blobFiles = Set(((try? files.contentsOfDirectory(atPath: url.appendingPathComponent("blobs").path)) ?? [])
            .filter { !$0.hasPrefix("retired-") })
        let referenced = Set(try blobNames(store).map { $0 + ".blob" })
        guard blobFiles == referenced else {
            throw Failed("after recovery blobs/ holds \(blobFiles.subtracting(referenced).sorted()) that "
                         + "nothing references and lacks \(referenced.subtracting(blobFiles).sorted())")
        }
        if files.fileExists(atPath: url.appendingPathComponent("MANIFEST.tmp").path) {
            throw Failed("after recovery MANIFEST.tmp is still there")
        }
        try store.close()
        let after = try StoreVerifier.verify(at: url)
        guard after.ok else {
            throw Failed("verify found problems after recovery: " + after.problems.map(\.description).joined(separator: "; "))
        }
    }

    /// The first lines in which two canonical dumps differ, for a failure message.
    static func difference(expected: [String], actual: [String]) -> String {
        let missing = Set(expected).subtracting(actual).sorted().prefix(5)
        let extra = Set(actual).subtracting(expected).sorted().prefix(5)
        return "expected but missing: \(missing.map { String($0.prefix(300)) }); present but unexpected: "
            + "\(extra.map { String($0.prefix(300)) })"
    }

    /// The blobs the store's rows name.
    static func blobNames(_ store: FileStore) throws -> Set<String> {
        var names = Set<String>()
        for entity in store.schema.entities {
            for row in try store.fetch(StoreFetchRequest(entity: entity.name)).rows {
                for case .external(let blob) in row.attributes { names.insert(blob.name) }
            }
        }
        return names
    }

    /// The manifest's `nextSegment`: one more than the number of segments the store ever started.
    static func nextSegment(_ url: URL) -> Int? {
        guard let text = try? String(contentsOf: url.appendingPathComponent("MANIFEST"), encoding: .utf8),
              let range = text.range(of: #""nextSegment":"#) else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
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
