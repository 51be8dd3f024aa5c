import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Issue 18's seed-001 acceptance: the main app mirrors the store (`cloudKitDatabase: .private(…)`), its share
/// extension writes the same store without mirroring (`.none`), and another machine sees the extension's note after
/// the app's next sync, which the extension's commit brings on.
@Suite("Seed 001: the app mirrors, its extensions do not", .enabled(if: TemporaryPostgres.runsServerTests,
                                                                  Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct Seed001MirrorTests {
    static let zone = "iCloud.com.example.fieldnotes"
    static let stress = MirrorConvergenceTests.device

    @Test("An extension's write reaches another machine through the app's background sync")
    func extensionWriteReachesAnotherMachine() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        try configuration.initializeSchema(for: Schema(ModelContainer.fieldNotesModels))
        let store = TemporaryStores.newURL("FieldNotes")

        // The app: mirrors in the background, with an hour's interval.
        let app = Process()
        app.executableURL = Self.stress
        app.arguments = ["mirror-app", "--store", store.path, "--server", server.connectionString, "--zone", Self.zone]
        let input = Pipe(), output = Pipe()
        app.standardInput = input
        app.standardOutput = output
        try app.run()
        defer { if app.isRunning { app.terminate() } }
        let reader = output.fileHandleForReading
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("ready\n") {
            let chunk = reader.availableData
            try #require(!chunk.isEmpty, "the app ended before it was ready: \(String(decoding: seen, as: UTF8.self))")
            seen.append(chunk)
        }

        // The share extension: the same store, no mirror configuration.
        let title = "shared from Safari"
        let added = try MirrorConvergenceTests.run(Self.stress, ["add", "--store", store.path, "--title", title])
        #expect(added.status == 0, "\(added.lines)")

        // Another machine: its own store, mirrored to the same zone.
        let machine = try ModelContainer.fieldNotes()
        let mirror = try StoreMirror(container: machine, configuration: configuration)
        let deadline = Date().addingTimeInterval(20)
        var found = false
        while !found && Date() < deadline {
            try mirror.sync()
            found = try ModelContext(machine).fetch(FetchDescriptor<NoteRecord>()).contains { $0.title == title }
            if !found { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(found, "the extension's note never reached the other machine")

        // The extension never mirrored: the server knows two devices, the app and the other machine.
        let devices = try PostgresConnection(server.connectionString).execute(
            "SELECT count(*) FROM notekit.devices WHERE zone = $1", [Self.zone], purpose: "test").values
        #expect(devices == [["2"]])
        let author = try PostgresConnection(server.connectionString).execute(
            "SELECT author FROM notekit.changes WHERE zone = $1 ORDER BY seq", [Self.zone], purpose: "test").values
        #expect(author == [["add \(title)"]], "the extension's transaction, sent by the app, keeps its author")

        try input.fileHandleForWriting.close()
        app.waitUntilExit()
        let rest = String(decoding: seen + reader.readDataToEndOfFile(), as: UTF8.self)
        #expect(app.terminationStatus == 0 && rest.contains("stopped 0"), "\(rest)")
    }
}
