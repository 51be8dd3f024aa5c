import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

extension ProcessStressTests {
    /// The kill test (docs/reliability/kill.md): a child process saves steps of a seeded workload on a file store
    /// and is killed with SIGKILL at random moments: 12 times in `swift test`, the first eight aimed at one moment
    /// each; 250 times with `NOTEKIT_LONG_TESTS=1` (``LongTests``), as `.ci/run` runs it.
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

        /// How many kills: 12 bounded, 250 long.
        static var kills: Int { LongTests.value("NOTEKIT_KILL_KILLS", bounded: 12, long: 250) }

        /// The kills made whatever the time: the time limit keeps a loaded machine from running long; the first 50
        /// kills (10 bounded: the eight moments and the creations among them) happen whatever it takes (a machine
        /// busy with other suites once made 29 in the time; a bounded run beside the whole suite, a kill every few
        /// seconds).
        static var minimumKills: Int { min(kills, LongTests.isEnabled ? 50 : 10) }

        static let run = EarlyRun<KillDriver.Summary> {
            let seed = Self.seed
            TestOutput.summary("kill test: seed \(seed) (replay with NOTEKIT_KILL_SEED=\(seed))")
            let directory = TemporaryStores.newURL("kill")
            var options = KillDriver.Options(executable: Self.executable, directory: directory, seed: seed,
                                             kills: Self.kills, timeLimit: LongTests.isEnabled ? 110 : 40)
            options.minimumKills = Self.minimumKills
            // The driver waits on its children most of the time: on a thread of its own, not the suite's.
            return await StressOutcome.run(seed: seed, directory: directory) { [options] in try KillDriver.run(options) }
        }

        @Test("Killed at random moments, the store keeps every acknowledged save, only whole ones, and takes new writes",
              .startsEarly(run))
        func randomKills() async throws {
            let outcome = await Self.run.outcome
            let (seed, directory, minimum) = (outcome.seed, outcome.directory, Self.minimumKills)
            do {
                let summary = try outcome.summary.get()
                TestOutput.summary("\(summary)")
                #expect(summary.kills >= minimum, "too few kills in the time allowed: \(summary)")
                #expect(summary.acknowledged > 0 && summary.rotations > 0 && summary.compactions > 0,
                        "the run must save, rotate and compact: \(summary)")
                #expect(summary.kills - summary.creationKills < 8 || summary.aimedAtEveryMoment,
                        "the first eight kills aim at every moment: \(summary)")
                try FileManager.default.removeItem(at: directory)
            } catch let failure as KillDriver.Failure {
                // The test's temporary directory goes when the process ends: the stores are moved out, for a look.
                let kept = FileManager.default.temporaryDirectory
                    .appendingPathComponent("notekit-kill-failed-\(seed)-\(ProcessInfo.processInfo.processIdentifier)")
                let moved = (try? FileManager.default.moveItem(at: directory, to: kept)) != nil
                let whereKept = moved ? " (the stores are moved to \(kept.path))" : ""
                Issue.record("\(failure)\(whereKept); replay with NOTEKIT_KILL_SEED=\(seed)")
            } catch {
                Issue.record(error, "kill test: replay with NOTEKIT_KILL_SEED=\(seed)")
            }
        }
    }

    /// The kill test with several writers sharing a store per save (docs/reliability/kill.md, *Several writers*): two
    /// children write one store at once, one of them is killed at a random moment while the other goes on, and the
    /// store is checked with the other paused between saves.
    ///
    /// 10 kills in `swift test`, the first eight aimed at one moment each; 60 with `NOTEKIT_LONG_TESTS=1`.
    /// `NOTEKIT_SHARED_KILL_SEED=N` replays a seed; `NOTEKIT_SHARED_KILL_KILLS=N` changes how many kills,
    /// `NOTEKIT_SHARED_KILL_WRITERS=N` how many writers. The long mode:
    /// `swift run -c release notekit-stress kill --writers 2 --kills 1000 --seed N --dir /tmp/kill`.
    @Suite("Kill test: SIGKILL of one writer among several sharing a store")
    struct SharedKillTests {
        static let environment = ProcessInfo.processInfo.environment
        /// How many kills: 10 bounded, 60 long; the first 20 (all 10 bounded) happen whatever the time takes: fewer
        /// might land none during a save. The time limit keeps a loaded machine from running long.
        static var kills: Int { LongTests.value("NOTEKIT_SHARED_KILL_KILLS", bounded: 10, long: 60) }
        static var minimumKills: Int { min(kills, 20) }
        static var writers: Int { environment["NOTEKIT_SHARED_KILL_WRITERS"].flatMap { Int($0) } ?? 2 }

        static let run = EarlyRun<KillDriver.Summary> {
            let seed = environment["NOTEKIT_SHARED_KILL_SEED"].flatMap { UInt64($0) }
                ?? UInt64.random(in: 1...UInt64(UInt32.max))
            TestOutput.summary("shared kill test: seed \(seed) (replay with NOTEKIT_SHARED_KILL_SEED=\(seed))")
            let directory = TemporaryStores.newURL("shared-kill")
            var options = SharedKillDriver.Options(executable: KillTests.executable, directory: directory,
                                                   seed: seed, writers: writers, kills: kills, timeLimit: 35)
            options.minimumKills = minimumKills
            return await StressOutcome.run(seed: seed, directory: directory) { [options] in
                try SharedKillDriver.run(options)
            }
        }

        @Test("One of two writers killed at random moments: each writer's acknowledged saves stay, whole, and all write on",
              .startsEarly(run))
        func randomKillsOfOneWriter() async throws {
            let outcome = await Self.run.outcome
            let (seed, directory, minimum, writers) = (outcome.seed, outcome.directory, Self.minimumKills, Self.writers)
            do {
                let summary = try outcome.summary.get()
                TestOutput.summary("\(summary)")
                #expect(summary.kills >= minimum, "too few kills in the time allowed: \(summary)")
                #expect(summary.kills < 8 || summary.aimedAtEveryMoment,
                        "the first eight kills aim at every moment: \(summary)")
                #expect(summary.killsDuringSave > 0, "no kill landed during a save: \(summary)")
                #expect((1...writers).allSatisfy { summary.acknowledgedByWriter[$0, default: 0] > 0 },
                        "every writer must save: \(summary)")
                #expect(summary.segmentsStarted > 1 && summary.explicitCompactions > 0,
                        "the run must rotate and compact: \(summary)")
                try FileManager.default.removeItem(at: directory)
            } catch let failure as KillDriver.Failure {
                let kept = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "notekit-shared-kill-failed-\(seed)-\(ProcessInfo.processInfo.processIdentifier)")
                let moved = (try? FileManager.default.moveItem(at: directory, to: kept)) != nil
                let whereKept = moved ? " (the store is moved to \(kept.path))" : ""
                Issue.record("\(failure)\(whereKept); replay with NOTEKIT_SHARED_KILL_SEED=\(seed)")
            } catch {
                Issue.record(error, "shared kill test: replay with NOTEKIT_SHARED_KILL_SEED=\(seed)")
            }
        }
    }
}
