import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing

/// Readers in this process and in `notekit` children run every read path while two other processes save and
/// compact the store back to back (`notekit-stress compactor`): no read may report damage, and a `notekit compact`
/// that races a compaction is told the store is locked, or compacts, but never that it is damaged.
@Suite("Readers racing other processes", .serialized)
struct ReaderRaceTests {
    /// How long the compactors run, and the readers with them.
    static let seconds = 3.0

    /// Reads attempted and what went wrong, by read path.
    final class Tally: Sendable {
        private let state = Mutex<(reads: [String: Int], failures: [String])>(([:], []))

        func read(_ path: String, _ body: () throws -> Void) {
            do {
                try body()
                state.withLock { $0.reads[path, default: 0] += 1 }
            } catch {
                state.withLock {
                    $0.reads[path, default: 0] += 1
                    $0.failures.append("\(path): \(error)")
                }
            }
        }

        func fail(_ message: String) { state.withLock { $0.failures.append(message) } }
        var reads: [String: Int] { state.withLock { $0.reads } }
        var failures: [String] { state.withLock { $0.failures } }
    }

    struct Wrong: Error, CustomStringConvertible { var description: String }

    @Test("readers racing back-to-back compactions in other processes")
    func racingCompactions() throws {
        let url = TemporaryStores.newURL("race")
        let entries = 300
        try CompactionRace.create(at: url, entries: entries)
        let tally = Tally()
        let group = DispatchGroup()
        let compactorOutput = Mutex<[String]>([])
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                do {
                    let run = try CommandLineTests.run(ProcessStressTests.KillTests.executable, ["compactor", "--store", url.path,
                                                                  "--seconds", String(Self.seconds)])
                    compactorOutput.withLock { $0.append(run.output) }
                    if run.status != 0 { tally.fail("compactor exited \(run.status): \(run.errors)") }
                } catch {
                    tally.fail("compactor did not start: \(error)")
                }
            }
        }
        // `notekit` children, one after another, while the compactors run: each read command, and `compact`.
        let end = ContinuousClock.now + .seconds(Self.seconds)
        DispatchQueue.global().async(group: group) {
            let commands = [["verify"], ["stats", "--json"], ["dump"], ["schema"], ["history"], ["compact"]]
            var index = 0
            // At least one child however loaded the machine is: the window may pass before this thread starts.
            repeat {
                let command = commands[index % commands.count]
                index += 1
                tally.read("notekit \(command[0])") {
                    let run = try CommandLineTests.run(CommandLineTests.executable, [command[0], url.path] + command.dropFirst())
                    if command[0] == "compact", run.status == 4, run.errors.contains("another process") { return }
                    guard run.status == 0 else { throw Wrong(description: "exit \(run.status): \(run.errors)") }
                }
            } while ContinuousClock.now < end
        }

        // This process: every read path, again and again. One read-only open stays open and refreshes.
        let reader = try StoreInspector.openReadOnly(at: url)
        var round = 0
        func expectRows(_ count: Int?) throws {
            guard count == entries else { throw Wrong(description: "read \(count ?? -1) rows, not \(entries)") }
        }
        // Every read path at least once, however loaded the machine is (the count of rounds in the window is the
        // machine's speed, not a property of the store).
        repeat {
            round += 1
            tally.read("read-only open") {
                let configuration = FileStoreConfiguration(url: url, mode: .readOnly)
                let container = try ModelContainer(for: Schema(CompactionRace.models), configurations: [configuration])
                try expectRows(try ModelContext(container).fetchCount(FetchDescriptor<RaceEntry>()))
            }
            tally.read("refresh") {
                try reader.refresh()
                try expectRows(reader.statistics.rowsPerEntity["RaceEntry"])
            }
            tally.read("verify") {
                let report = try StoreVerifier.verify(at: url)
                guard report.ok else { throw Wrong(description: "\(report.problems)") }
            }
            tally.read("stats") { try expectRows(try StoreInspector.statistics(at: url).entities["RaceEntry"]) }
            tally.read("dump") {
                var lines = 0
                try StoreInspector.dump(try StoreInspector.openReadOnly(at: url)) { _ in lines += 1 }
                try expectRows(lines)
            }
            tally.read("schema") { _ = try StoreInspector.schemaHistory(at: url) }
            tally.read("history") { _ = try StoreInspector.openReadOnly(at: url).history() }
            tally.read("migration session") {
                try FileStoreConfiguration(url: url, mode: .readOnly).beginMigration().end()
            }
            if round % 4 == 0 {
                tally.read("salvage") {
                    let report = try FileStore.salvage(from: url, to: TemporaryStores.newURL("salvaged"))
                    guard report.isComplete else { throw Wrong(description: "\(report)") }
                    try expectRows(report.objectsKept)
                }
            }
        } while ContinuousClock.now < end
        group.wait()

        let compactions = compactorOutput.withLock { outputs in
            outputs.compactMap { $0.split(separator: "\n").last?.split(separator: " ").dropFirst().first.flatMap { Int($0) } }
                .reduce(0, +)
        }
        let reads = tally.reads
        let failures = tally.failures
        TestOutput.summary("readers racing compactions: \(compactions) compactions, "
                           + "reads \(reads.sorted { $0.key < $1.key }), "
                           + "\(failures.count) false damage report(s)")
        #expect(compactions >= 4, "the compactors compacted while the readers read")
        let paths: Set = ["read-only open", "refresh", "verify", "stats", "dump", "schema", "history", "migration session"]
        #expect(paths.isSubset(of: reads.keys), "every read path ran while the compactors compacted: \(reads)")
        #expect(reads.keys.contains { $0.hasPrefix("notekit ") }, "a notekit child read too: \(reads)")
        #expect(failures.isEmpty, "\(failures.count) false damage report(s): \(failures.prefix(8))")
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("Tools read a snapshot beside a writer that keeps saving, rotating and compacting")
    func besideAWriter() throws {
        let url = TemporaryStores.newURL("beside")
        let entries = 200
        try CompactionRace.create(at: url, entries: entries)
        // The app: one exclusive open that saves again and again, rotating small segments and compacting by itself.
        var configuration = CompactionRace.configuration(url)
        configuration.automaticCompaction = .init(minimumLogSize: 48 << 10, garbageRatio: 0.2)
        let writer = try ModelContainer(for: Schema(CompactionRace.models), configurations: [configuration])
        let tally = Tally()
        let end = ContinuousClock.now + .seconds(1.5)
        let group = DispatchGroup()
        let written = Mutex((saves: 0, compactions: 0))
        let writing = Mutex(true)
        DispatchQueue.global().async(group: group) {
            do {
                let context = ModelContext(writer)
                let store = StoreFiles.store(writer)
                let rows = try context.fetch(FetchDescriptor<RaceEntry>(sortBy: [SortDescriptor(\.number)]))
                var save = 0, compactions = 0
                // At least three compactions, however loaded the machine (within ten more seconds).
                while ContinuousClock.now < end || compactions < 3, ContinuousClock.now < end + .seconds(10) {
                    save += 1
                    for offset in 0..<6 {
                        let row = rows[(save * 6 + offset) % rows.count]
                        row.revision = save
                        row.body = String(repeating: "saved \(save) ", count: 60)
                    }
                    let first = store.statistics.segments.first
                    try context.save()
                    if store.statistics.segments.first != first { compactions += 1 }
                }
                written.withLock { $0 = (save, compactions) }
            } catch {
                tally.fail("the writer failed: \(error)")
            }
            writing.withLock { $0 = false }
        }
        func expectRows(_ count: Int?) throws {
            guard count == entries else { throw Wrong(description: "read \(count ?? -1) rows, not \(entries)") }
        }
        while writing.withLock({ $0 }) {
            tally.read("verify") {
                let report = try StoreVerifier.verify(at: url)
                guard report.ok else { throw Wrong(description: "\(report.problems)") }
            }
            tally.read("dump") {
                var lines = 0
                try StoreInspector.dump(try StoreInspector.openReadOnly(at: url)) { _ in lines += 1 }
                try expectRows(lines)
            }
            tally.read("stats") { try expectRows(try StoreInspector.statistics(at: url).entities["RaceEntry"]) }
            tally.read("schema") { _ = try StoreInspector.schemaHistory(at: url) }
            tally.read("salvage") {
                let report = try FileStore.salvage(from: url, to: TemporaryStores.newURL("salvaged"))
                guard report.isComplete else { throw Wrong(description: "\(report)") }
                try expectRows(report.objectsKept)
            }
        }
        group.wait()
        try StoreFiles.close(writer)
        let (saves, compactions) = written.withLock { $0 }
        TestOutput.summary("tools beside a writer: \(saves) saves, \(compactions) compactions, reads \(tally.reads)")
        #expect(saves > 20 && compactions > 2, "the writer saved \(saves) times and compacted \(compactions) times")
        #expect(tally.reads.values.reduce(0, +) >= 10, "\(tally.reads)")
        #expect(tally.failures.isEmpty, "\(tally.failures.count) false damage report(s): \(tally.failures.prefix(8))")
    }
}
