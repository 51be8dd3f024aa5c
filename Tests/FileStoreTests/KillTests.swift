import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// The kill test, bounded for `swift test` (docs/reliability/kill.md): a child process saves steps of a seeded
/// workload on a file store and is killed with SIGKILL at random moments, a few hundred times.
///
/// `NOTEKIT_KILL_SEED=N` replays a seed; `NOTEKIT_KILL_KILLS=N` changes how many kills. The long mode is run by
/// hand: `swift run -c release notekit-stress kill --kills 4000 --seed N --dir /tmp/kill`.
@Suite("Kill test: SIGKILL at random moments")
struct KillTests {
    static let executable: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/notekit-stress")
    }()

    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["NOTEKIT_KILL_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64(UInt32.max))
    }

    @Test("Killed at random moments, the store keeps every acknowledged save, only whole ones, and takes new writes")
    func randomKills() throws {
        let seed = Self.seed
        let kills = ProcessInfo.processInfo.environment["NOTEKIT_KILL_KILLS"].flatMap { Int($0) } ?? 250
        print("kill test: seed \(seed) (replay with NOTEKIT_KILL_SEED=\(seed))")
        let directory = TemporaryStores.newURL("kill")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            // The time limit keeps a loaded machine from running long; the kills still have to happen.
            let summary = try KillDriver.run(.init(executable: Self.executable, directory: directory, seed: seed,
                                                   kills: kills, timeLimit: 110))
            print(summary)
            #expect(summary.kills >= min(kills, 50), "too few kills in the time allowed: \(summary)")
            #expect(summary.acknowledged > 0 && summary.rotations > 0 && summary.compactions > 0,
                    "the run must save, rotate and compact: \(summary)")
            try FileManager.default.removeItem(at: directory)
        } catch let failure as KillDriver.Failure {
            // The test's temporary directory goes when the process ends: the stores are moved out, for a look.
            let kept = FileManager.default.temporaryDirectory
                .appendingPathComponent("notekit-kill-failed-\(seed)-\(ProcessInfo.processInfo.processIdentifier)")
            let moved = (try? FileManager.default.moveItem(at: directory, to: kept)) != nil
            let whereKept = moved ? " (the stores are moved to \(kept.path))" : ""
            Issue.record("\(failure)\(whereKept)")
        }
    }
}
