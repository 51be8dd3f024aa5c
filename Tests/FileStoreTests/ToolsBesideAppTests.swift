import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing

/// Issue 15, item 5: the tools work while an app has the store open and keeps writing. `notekit compact` is a writer
/// like any other: it waits for its turn at the lock, never reports damage, and loses none of the app's saves.
@Suite("Tools beside a running app")
struct ToolsBesideAppTests {
    /// Runs the built `notekit` with `arguments`; its output and errors together.
    static func notekit(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let run = try CommandLineTests.run(CommandLineTests.executable, arguments)
        return (run.status, run.output + run.errors)
    }

    /// The app saves a revision number into every row, again and again, in `sharing`, while `notekit compact` and
    /// `notekit verify` run in other processes; returns their runs and the last revision the app saved.
    static func compactBesideApp(sharing: FileStoreConfiguration.Sharing?, compactions: Int)
        throws -> (runs: [(status: Int32, output: String)], saved: Int, url: URL) {
        let url = TemporaryStores.newURL("tools-beside-app")
        try CompactionRace.create(at: url, entries: 50)
        var configuration = FileStoreConfiguration(url: url, automaticCompaction: nil)
        if let sharing { configuration.sharing = sharing }
        configuration.lockTimeout = 2
        let app = try ModelContainer(for: Schema(CompactionRace.models), configurations: [configuration])
        let saved = Mutex(0)
        let stop = Mutex(false)
        let failure = Mutex<String?>(nil)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            do {
                let context = ModelContext(app)
                let rows = try context.fetch(FetchDescriptor<RaceEntry>())
                var revision = 0
                while !stop.withLock({ $0 }) {
                    revision += 1
                    for row in rows { row.revision = revision }
                    try context.save()
                    saved.withLock { $0 = revision }
                    // A pause between saves, as an app has: the tools get the lock between them, and the loop does
                    // not spend a core for the seconds an exclusive app makes `notekit compact` wait.
                    usleep(1_000)
                }
            } catch {
                failure.withLock { $0 = "the app's save failed: \(error)" }
            }
        }
        /// Waits (up to 10 s) until the app has saved after `revision`: each tool runs between the app's saves.
        func appSaved(after revision: Int) {
            let deadline = ContinuousClock.now + .seconds(10)
            while saved.withLock({ $0 }) <= revision, failure.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
                usleep(1_000)
            }
        }
        var runs: [(status: Int32, output: String)] = []
        for _ in 0..<compactions {
            appSaved(after: saved.withLock { $0 })
            runs.append(try notekit(["compact", url.path]))
            runs.append(try notekit(["verify", url.path]))
        }
        appSaved(after: saved.withLock { $0 })
        stop.withLock { $0 = true }
        group.wait()
        try StoreFiles.close(app)
        if let failure = failure.withLock({ $0 }) { Issue.record(Comment(rawValue: failure)) }
        return (runs, saved.withLock { $0 }, url)
    }

    @Test("notekit compact and verify beside an app that keeps saving (the default sharing): each compacts or verifies, no damage, no save lost")
    func compactBesideSharedApp() throws {
        // The app opens the store in the default configuration, as seed 001's app does.
        let (runs, saved, url) = try Self.compactBesideApp(sharing: nil, compactions: 4)
        for run in runs {
            #expect(run.status == 0, "\(run.output)")
            #expect(!run.output.contains("damage") && !run.output.contains("does not exist"), "\(run.output)")
        }
        #expect(runs.filter { $0.output.hasPrefix("compacted") }.count == 4)
        // Every save the app made (each acknowledged by save() returning) is in the store, compacted or not.
        let reopened = try ModelContainer(for: Schema(CompactionRace.models),
                                          configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        let revisions = Set(try ModelContext(reopened).fetch(FetchDescriptor<RaceEntry>()).map(\.revision))
        #expect(saved > 4, "the app saved between the tools' runs")
        #expect(revisions == [saved], "the app's last save was revision \(saved); the store holds \(revisions)")
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("Beside an exclusive app, notekit compact waits its busy timeout and says the store is locked, naming the app")
    func compactBesideExclusiveApp() throws {
        let (runs, saved, url) = try Self.compactBesideApp(sharing: .exclusive, compactions: 1)
        let compact = try #require(runs.first)
        #expect(compact.status != 0)
        #expect(compact.output.contains("pid \(getpid())"), "\(compact.output)")
        #expect(!compact.output.contains("damage"), "\(compact.output)")
        // verify reads beside it, as always.
        #expect(runs.last?.status == 0, "\(runs.last?.output ?? "")")
        #expect(saved > 0)
        _ = url
    }
}
