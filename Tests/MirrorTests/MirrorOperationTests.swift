import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing
@testable import NoteKitMirror

/// Issue 18, items 3 and 7: sync in the background survives the server going away, and `notekit mirror init|status`
/// work on any store beside the app.
@Suite("Background syncing and the notekit mirror commands", .enabled(if: TemporaryPostgres.runsServerTests,
                                                                       Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorOperationTests {
    static let zone = "iCloud.com.example.fieldnotes"

    /// Waits up to `seconds` for `condition`, checking every 50 ms.
    static func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }

    static func titles(_ container: ModelContainer) throws -> Set<String> {
        Set(try ModelContext(container).fetch(FetchDescriptor<NoteRecord>()).map(\.title))
    }

    @Test("Background syncing sends a local save soon after it, and resumes by itself after the server restarts")
    func backgroundSyncSurvivesRestart() throws {
        let zone = try MirrorZone(.file, ownServer: true)
        defer { withExtendedLifetime(zone) {} }
        let server = zone.server
        let (app, mirror) = try zone.device()
        let other = try ModelContainer.fieldNotes()
        let otherMirror = try StoreMirror(container: other, configuration: zone.configuration)
        // A long interval: only the save itself can make the first change go out quickly.
        mirror.startSyncing(every: .seconds(3600))
        defer { mirror.stopSyncing() }
        #expect(try mirror.status().isSyncingInBackground)
        // The first sync runs at once; the next one only when something is committed.
        #expect(try Self.eventually { try mirror.status().lastSync != nil })

        let context = ModelContext(app)
        let first = NoteRecord()
        first.title = "first"
        context.insert(first)
        try context.save()
        #expect(try Self.eventually { try otherMirror.sync(); return try Self.titles(other).contains("first") })

        // The server goes away: saves go on locally, the failure is recorded, nothing is lost.
        try server.stopServer(immediately: true)
        let second = NoteRecord()
        second.title = "while the server was down"
        context.insert(second)
        try context.save()
        #expect(try Self.eventually { try mirror.status().lastError != nil }, "the failed sync is recorded")
        #expect(try mirror.status().pendingLocalTransactions == 1)
        try server.start()
        // Nothing asks: the loop tries again by itself, sooner than its hour-long interval.
        #expect(try Self.eventually(30) {
            let status = try mirror.status()
            return status.pendingLocalTransactions == 0 && status.lastError == nil
        })
        #expect(try Self.eventually { try otherMirror.sync(); return try Self.titles(other).contains(second.title) })
        mirror.stopSyncing()
        #expect(try !mirror.status().isSyncingInBackground)
    }

    @Test("A commit that lands while a background sync runs is sent by the next sync, not an interval later")
    func commitDuringBackgroundSync() throws {
        let zone = try MirrorZone(.file)
        defer { withExtendedLifetime(zone) {} }
        let (app, mirror) = try zone.device()
        let other = try ModelContainer.fieldNotes()
        let otherMirror = try StoreMirror(container: other, configuration: zone.configuration)
        // The first background sync has exported (nothing) when a save lands: only the loop's next sync can send it.
        let saved = Mutex(false)
        mirror.afterExport.withLock {
            $0 = {
                guard !saved.withLock({ $0 }) else { return }
                let context = ModelContext(app)
                let note = NoteRecord()
                note.title = "saved during a sync"
                context.insert(note)
                try? context.save()
                saved.withLock { $0 = true }
            }
        }
        mirror.startSyncing(every: .seconds(3600))
        defer { mirror.stopSyncing() }
        #expect(try Self.eventually { try otherMirror.sync(); return try Self.titles(other).contains("saved during a sync") })
        #expect(saved.withLock { $0 })
    }

    static let executable: URL = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/notekit")
    }()

    static func notekit(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        try run(executable, arguments)
    }

    /// Runs `executable` to its end: its exit status and what it printed on each stream.
    static func run(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }

    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    @Test("notekit mirror init makes the tables from the store's own schema; status shows pending work and cursors")
    func commandLine() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let url = TemporaryStores.newURL()
        let app = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                     configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(app)
        context.insert(NoteRecord())
        try context.save()

        let never = try Self.notekit(["mirror", "status", url.path, "--json"])
        #expect(never.status == 0 && Self.json(never.output)["mirrored"] as? Bool == false, "\(never)")

        let connection = server.connectionString
        let initialized = try Self.notekit(["mirror", "init", url.path, "--zone", Self.zone, "--server", connection,
                                            "--json"])
        #expect(initialized.status == 0, "\(initialized.errors)")
        #expect((Self.json(initialized.output)["tablesCreated"] as? [String])?.contains("notekit.e_NoteRecord") == true)
        let again = try Self.notekit(["mirror", "init", url.path, "--zone", Self.zone, "--server", connection, "--json"])
        #expect((Self.json(again.output)["tablesCreated"] as? [String]) == [])

        // The app, with its model types, mirrors; the schema the command recorded is the app's.
        let configuration = MirrorConfiguration(connectionString: connection, zone: Self.zone)
        let mirror = try StoreMirror(container: app, configuration: configuration)
        context.insert(NoteRecord())
        try context.save()
        let pending = Self.json(try Self.notekit(["mirror", "status", url.path, "--json"]).output)
        #expect(pending["mirrored"] as? Bool == true && pending["pendingLocalTransactions"] as? Int == 2, "\(pending)")
        try mirror.sync()
        let synced = try Self.notekit(["mirror", "status", url.path, "--zone", Self.zone, "--server", connection,
                                       "--json"])
        let status = Self.json(synced.output)
        #expect(status["pendingLocalTransactions"] as? Int == 0 && status["exportedThrough"] as? Int == 2, "\(status)")
        #expect(status["lastError"] is NSNull && status["serverNewestChange"] as? Int == 2)
        #expect(status["device"] as? String == (try mirror.status()).device.uuidString.lowercased())

        // A server that refuses: a typed failure, exit 6, naming the server but never a password.
        let refused = try Self.notekit(["mirror", "init", url.path, "--zone", Self.zone,
                                        "--server", "host=/nonexistent-socket-dir user=app password=hunter2"])
        #expect(refused.status == 6, "\(refused)")
        #expect(refused.errors.contains("app@/nonexistent-socket-dir") && !refused.errors.contains("hunter2"))
        let badZone = try Self.notekit(["mirror", "init", url.path, "--zone", "a zone", "--server", connection])
        #expect(badZone.status == 2, "\(badZone)")
    }

    @Test("notekit mirror sync, without the app's types, sends an extension's saves and applies another machine's changes with their delete rules")
    func commandLineSync() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let connection = server.connectionString
        let configuration = MirrorConfiguration(connectionString: connection, zone: Self.zone)
        try configuration.initializeSchema(for: Schema(ModelContainer.fieldNotesModels))
        // This machine's store: written by an extension (a container without a mirror), synced only by the tool.
        let url = TemporaryStores.newURL()
        let sync = ["mirror", "sync", url.path, "--zone", Self.zone, "--server", connection, "--json"]
        let missing = try Self.notekit(sync)
        #expect(missing.status == 3, "no store at the path: \(missing)")
        let app = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                     configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(app)
        let note = NoteRecord()
        note.title = "from the extension"
        context.insert(note)
        let photo = PhotoRecord()
        photo.fileName = "p.jpg"
        photo.data = Data(repeating: 7, count: 3_000)
        note.photos.append(photo)
        try context.save()

        let first = try Self.notekit(sync)
        #expect(first.status == 0, "\(first)")
        #expect(Self.json(first.output)["exportedTransactions"] as? Int == 1, "\(first.output)")

        // Another machine, with the app's types, sees it, photo bytes included; then it deletes the note.
        let other = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                       configurations: [FileStoreConfiguration(url: TemporaryStores.newURL())])
        let otherMirror = try StoreMirror(container: other, configuration: configuration)
        try otherMirror.sync()
        let otherContext = ModelContext(other)
        let seen = try #require(try otherContext.fetch(FetchDescriptor<NoteRecord>()).first)
        #expect(seen.title == "from the extension" && seen.photos.first?.data == photo.data)
        let notebook = NotebookRecord()
        notebook.name = "Trips"
        otherContext.insert(notebook)
        try otherContext.delete(seen)
        try otherContext.save()
        try otherMirror.sync()

        // Meanwhile the extension adds a photo to the note here, which the other machine never saw: only this
        // store's own delete rule can remove it when the deletion arrives.
        do {
            let context = ModelContext(app)
            let note = try #require(try context.fetch(FetchDescriptor<NoteRecord>()).first)
            let late = PhotoRecord()
            late.fileName = "late.jpg"
            note.photos.append(late)
            try context.save()
        }

        // The tool sends the photo, then applies the deletion with the cascade the app's types declare, as one
        // transaction by "mirror".
        let second = try Self.notekit(sync)
        #expect(second.status == 0, "\(second)")
        let report = Self.json(second.output)
        #expect(report["exportedTransactions"] as? Int == 1 && (report["importTransactions"] as? [Int])?.count == 1,
                "\(second.output)")
        let check = ModelContext(app)
        #expect(try check.fetch(FetchDescriptor<NoteRecord>()).isEmpty)
        #expect(try check.fetch(FetchDescriptor<PhotoRecord>()).isEmpty, "the cascade ran in the tool")
        #expect(try check.fetch(FetchDescriptor<NotebookRecord>()).map(\.name) == ["Trips"])
        #expect(try check.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last?.author == StoreMirror.author)

        // Nothing new: nothing moves. A second sync of the app's own would take turns with it.
        let third = Self.json(try Self.notekit(sync).output)
        #expect(third["exportedTransactions"] as? Int == 0 && third["importedChanges"] as? Int == 0, "\(third)")
        let noZone = try Self.notekit(["mirror", "sync", url.path, "--server", connection])
        #expect(noZone.status == 2, "\(noZone)")
    }
}
