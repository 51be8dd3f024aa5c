import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

extension ProcessStressTests {
    /// The share test, bounded for `swift test` (docs/reliability/share.md): writer processes sharing one store per
    /// save, killed at random and restarted, and reader processes running every read path on it at the same time.
    ///
    /// 2.5 seconds in `swift test`, 4 with `NOTEKIT_LONG_TESTS=1` (``LongTests``).
    /// `NOTEKIT_SHARE_SEED=N` replays a seed; `NOTEKIT_SHARE_SECONDS=S`, `NOTEKIT_SHARE_WRITERS=N` and
    /// `NOTEKIT_SHARE_READERS=M` change the run. The long mode is run by hand:
    /// `swift run -c release notekit-stress share --writers 3 --readers 3 --seconds 120 --seed N`.
    @Suite("Share test: writers killed at random and readers on every read path, on one store")
    struct ShareStressTests {
        static let run = EarlyRun<ShareStressDriver.Summary> {
            let environment = ProcessInfo.processInfo.environment
            let seed = environment["NOTEKIT_SHARE_SEED"].flatMap { UInt64($0) }
                ?? UInt64.random(in: 1...UInt64(UInt32.max))
            let seconds = LongTests.value("NOTEKIT_SHARE_SECONDS", bounded: 2.5, long: 4.0)
            let writers = environment["NOTEKIT_SHARE_WRITERS"].flatMap { Int($0) } ?? 2
            let readers = environment["NOTEKIT_SHARE_READERS"].flatMap { Int($0) } ?? 2
            TestOutput.summary("share test: seed \(seed) (replay with NOTEKIT_SHARE_SEED=\(seed))")
            let directory = TemporaryStores.newURL("share")
            // The driver waits on its children most of the time: on a thread of its own, not the suite's.
            let options = ShareStressDriver.Options(executable: KillTests.executable, directory: directory, seed: seed,
                                                    writers: writers, readers: readers, seconds: seconds)
            return await StressOutcome.run(seed: seed, directory: directory) { try ShareStressDriver.run(options) }
        }

        @Test("Readers racing killed writers, rotations and compactions never see damage, and no acknowledged save is lost",
              .startsEarly(run))
        func readersAndKilledWriters() async throws {
            let outcome = await Self.run.outcome
            let (seed, directory) = (outcome.seed, outcome.directory)
            let summary = try outcome.summary.get()
            TestOutput.summary("\(summary)")
            #expect(summary.falseDamageReports == 0 && summary.damageReports == 0, "\(summary)")
            #expect(summary.acknowledgedLost == 0, "\(summary)")
            #expect(summary.failures.isEmpty, "\(summary)")
            // The run must have done what it is about: reads on every path, saves, kills, rotations, compactions.
            #expect(ShareRead.Path.allCases.allSatisfy { summary.reads[$0]?.isEmpty == false }, "\(summary)")
            #expect(summary.acknowledged > 0 && summary.kills > 0, "\(summary)")
            #expect(summary.segmentsStarted > 1 && summary.explicitCompactions > 0, "\(summary)")
            if summary.failures.isEmpty {
                try FileManager.default.removeItem(at: directory)
            } else {
                let kept = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "notekit-share-failed-\(seed)-\(ProcessInfo.processInfo.processIdentifier)")
                if (try? FileManager.default.moveItem(at: directory, to: kept)) != nil {
                    print("share test: the store is moved to \(kept.path)")
                }
            }
        }
    }
}
