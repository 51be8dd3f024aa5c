import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Runs the built `notekit` executable against fixtures and stores damaged on purpose.
@Suite("The notekit command-line tool")
struct CommandLineTests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String

        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]) ?? [:]
        }
    }

    static let executable: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/notekit")
    }()

    /// Runs `notekit` with `arguments` in `directory`.
    func notekit(_ arguments: String..., in directory: URL? = nil) throws -> Run {
        try Self.run(Self.executable, arguments, in: directory)
    }

    /// Runs `executable` with `arguments` in `directory` and waits for it: the one way the file-store tests run a
    /// built tool (`notekit`, `notekit-stress`) to its end.
    static func run(_ executable: URL, _ arguments: [String], in directory: URL? = nil) throws -> Run {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: out, as: UTF8.self),
                   errors: String(decoding: err, as: UTF8.self))
    }

    /// A copy of Fixtures/v3, migrated once to today's schema (so it has attachments to none, blobs, revisions).
    func store() throws -> URL {
        let (container, copy) = try StoreFixture.openCopy(of: FixtureReplayTests.fixture(3),
                                                          schema: Schema(versionedSchema: NotesSchema.self))
        try StoreFiles.close(container)
        return copy
    }

    @Test("The executable is built by swift test")
    func built() {
        #expect(FileManager.default.isExecutableFile(atPath: Self.executable.path))
    }

    @Test("demo creates a store with the README's data, and running it again adds nothing")
    func demo() throws {
        let directory = TemporaryStores.newURL("demo")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let first = try notekit("demo", in: directory)
        #expect(first.status == 0, "\(first.errors)")
        #expect(first.output.contains("created ./NoteKitDemo.notekit"))
        #expect(first.output.contains("│   └── Travel (2 notes)") && first.output.contains("└── Unfiled (2 notes)"))
        let second = try notekit("demo", in: directory)
        #expect(second.status == 0 && second.output.contains("nothing added"))
        let stats = try notekit("stats", directory.appendingPathComponent("NoteKitDemo.notekit").path, "--json")
        let entities = stats.json["entities"] as? [String: Int]
        #expect(entities == ["Folder": 4, "Note": 6, "NoteDrawing": 1, "NoteRevision": 3, "NoteAttachment": 1])
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("NoteKitDemo.notekit.attachments").path))
        #expect(try notekit("verify", directory.appendingPathComponent("NoteKitDemo.notekit").path).status == 0)
    }

    @Test("stats --json gives the format version, entities, segments and bytes, and writes nothing")
    func stats() throws {
        let url = try store()
        let before = StoreFiles.contents(of: url)
        let run = try notekit("stats", url.path, "--json")
        #expect(run.status == 0)
        let json = run.json
        #expect(json["formatVersion"] as? Int == 1)
        #expect(json["schemaVersion"] as? String == "4.0.0")
        #expect((json["entities"] as? [String: Int])?["Note"] == NotesFixtureData.notes(version: 3).count)
        #expect(json["segments"] as? Int == 1)
        #expect((json["bytes"] as? Int ?? 0) > 1000)
        #expect(StoreFiles.contents(of: url) == before)
        let text = try notekit("stats", url.path)
        #expect(text.output.contains("format version   1") && text.output.contains("NoteRevision"))
    }

    @Test("verify passes a healthy store, even a copy nobody may write")
    func verifyHealthy() throws {
        let url = try store()
        let run = try notekit("verify", url.path, "--json")
        #expect(run.status == 0)
        #expect(run.json["ok"] as? Bool == true && (run.json["problems"] as? [Any])?.isEmpty == true)
        // The committed fixture itself is verified without being changed.
        let fixture = FixtureReplayTests.fixture(2)
        #expect(try notekit("verify", fixture.path).status == 0)
        #expect(try StoreFixture.verify(fixture) == [])
    }

    @Test("verify reports a truncated tail with its file, offset and kind")
    func verifyTornTail() throws {
        let url = try store()
        let segment = StoreFiles.segment(url)
        let bytes = try Data(contentsOf: segment)
        let last = try StoreFiles.recordOffsets(segment).last!
        try bytes.prefix(last + 20).write(to: segment)
        let before = StoreFiles.contents(of: url)
        let run = try notekit("verify", url.path, "--json")
        #expect(run.status == 1)
        let problems = run.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.count == 1)
        #expect(problems.first?["kind"] as? String == "tornTail")
        #expect(problems.first?["offset"] as? Int == last)
        #expect((problems.first?["file"] as? String)?.hasSuffix("segments/000001.seg") == true)
        #expect(StoreFiles.contents(of: url) == before, "verify writes nothing")
        let text = try notekit("verify", url.path)
        #expect(text.status == 1 && text.errors.hasPrefix("error: ") && text.errors.contains("at byte \(last)"))
    }

    @Test("verify reports a byte flipped in the middle as a checksum mismatch at that record")
    func verifyFlippedByte() throws {
        let url = try store()
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        var bytes = try Data(contentsOf: segment)
        bytes[offsets[2] + 40] ^= 0x04
        try bytes.write(to: segment)
        let run = try notekit("verify", url.path, "--json")
        #expect(run.status == 1)
        let problems = run.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.contains { $0["kind"] as? String == "checksumMismatch" && $0["offset"] as? Int == offsets[2] })
    }

    @Test("verify reports an unknown format version, and a deleted external blob")
    func verifyVersionAndBlob() throws {
        let url = try store()
        let blobs = try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("blobs").path)
        try FileManager.default.removeItem(at: url.appendingPathComponent("blobs/" + blobs[0]))
        let missing = try notekit("verify", url.path, "--json")
        #expect(missing.status == 1)
        let problems = missing.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.contains {
            $0["kind"] as? String == "missingBlob" && ($0["file"] as? String)?.hasSuffix(blobs[0]) == true
        })

        let segment = StoreFiles.segment(url)
        var bytes = try Data(contentsOf: segment)
        bytes.replaceSubrange(0..<9, with: Data("NOTEKIT/7".utf8))
        try bytes.write(to: segment)
        let future = try notekit("verify", url.path, "--json")
        #expect(future.status == 1)
        #expect((future.json["problems"] as? [[String: Any]])?.first?["kind"] as? String == "unsupportedFormatVersion")
        let stats = try notekit("stats", url.path)
        #expect(stats.status == 1 && stats.errors.contains("format version 7; this build reads version 1"))
    }

    @Test("verify reports a relationship pointing at nothing")
    func verifyDanglingRelationship() throws {
        let url = try store()
        // Remove a folder's row from the state by hand: append a transaction deleting it without unlinking its notes.
        let store = try StoreInspector.openForWriting(at: url)
        let folder = try #require(try store.fetch(StoreFetchRequest(entity: "Folder")).snapshots
            .first { $0.attributes[1] == .string("Inbox") })
        _ = try store.save(ChangeSet(deleted: [ModelDeletion(id: folder.id)]))
        try store.close()
        let run = try notekit("verify", url.path, "--json")
        #expect(run.status == 1)
        let problems = run.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.contains { $0["kind"] as? String == "danglingRelationship" })
    }

    @Test("dump prints every live record as one JSON object per line")
    func dump() throws {
        let url = try store()
        let run = try notekit("dump", url.path, "--entity", "Note")
        #expect(run.status == 0)
        let lines = run.output.split(separator: "\n")
        #expect(lines.count == NotesFixtureData.notes(version: 3).count)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["entity"] as? String == "Note" && object["id"] is String)
            #expect(object["attributes"] is [String: Any] && object["relationships"] is [String: Any])
        }
        #expect(run.output.contains("日本語のメモ"))
        #expect(try notekit("dump", url.path).output.split(separator: "\n").count > lines.count)
        let unknown = try notekit("dump", url.path, "--entity", "Nope")
        #expect(unknown.status == 1 && unknown.errors.hasPrefix("error: "))
    }

    @Test("schema prints the stored schema history, version by version")
    func schema() throws {
        let url = try store()
        let run = try notekit("schema", url.path)
        #expect(run.status == 0)
        #expect(run.output.contains("Schema 3.0.0") && run.output.contains("current: Schema 4.0.0"))
        #expect(run.output.contains("entity NoteAttachment"))
    }

    @Test("history lists the transactions kept, after a number and up to a limit, as text or JSON lines")
    func history() throws {
        let url = try store()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            context.author = "cli test"
            for title in ["one", "two"] {
                context.insert(Note.titled(title))
                try context.save()
            }
            try StoreFiles.close(container)
        }
        let kept = try StoreInspector.openReadOnly(at: url).history().records
        try #require(kept.count >= 3)
        let all = try notekit("history", url.path)
        #expect(all.status == 0)
        let lines = all.output.split(separator: "\n")
        #expect(lines.count == kept.count)
        #expect(lines.last?.hasPrefix("#\(kept.last!.number)  ") == true)
        #expect(lines.last?.contains("cli test") == true)
        #expect(lines.contains { $0.contains(HistoryRecord.migrationAuthor) }, "the store was migrated when copied")

        let after = kept[0].number
        let json = try notekit("history", url.path, "--after", "\(after)", "--limit", "2", "--json")
        let objects = json.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(objects.compactMap { $0["tx"] as? Int }.map(UInt64.init) == kept[1...2].map(\.number))
        let inserted = objects.flatMap { ($0["inserted"] as? [[String: Any]]) ?? [] }
        #expect(inserted.count == kept[1...2].reduce(0) { $0 + $1.inserted.count })

        let bad = try notekit("history", url.path, "--limit", "many")
        #expect(bad.status == 2 && bad.errors.contains("--limit takes a whole number"))
        let stats = try notekit("stats", url.path, "--json").json
        #expect(stats["historyTransactions"] as? Int == kept.count)
    }

    @Test("compact prints the bytes before and after, and the store stays whole")
    func compact() throws {
        let url = try store()
        let run = try notekit("compact", url.path)
        #expect(run.status == 0 && run.output.contains("bytes of segments before"))
        #expect(try notekit("verify", url.path).status == 0)
    }

    @Test("salvage copies what is intact into a new store and never touches the damaged one")
    func salvage() throws {
        let url = try store()
        let segment = StoreFiles.segment(url)
        var bytes = try Data(contentsOf: segment)
        let offsets = try StoreFiles.recordOffsets(segment)
        bytes[offsets[1] + 30] ^= 0x01
        try bytes.write(to: segment)
        let before = StoreFiles.contents(of: url)
        let destination = TemporaryStores.newURL("salvaged")
        let run = try notekit("salvage", url.path, "--to", destination.path)
        #expect(run.status == 1, "something was left out")
        #expect(run.errors.contains("left out"))
        #expect(StoreFiles.contents(of: url) == before)
        #expect(try notekit("verify", destination.path).status == 0)
    }

    @Test("Usage errors exit 2; every command has --help")
    func usage() throws {
        #expect(try notekit().status == 2)
        #expect(try notekit("frobnicate").status == 2)
        #expect(try notekit("stats").status == 2)
        #expect(try notekit("stats", "a", "b").status == 2)
        #expect(try notekit("salvage", "a").status == 2)
        #expect(try notekit("verify", "x", "--jsn").errors.hasPrefix("error: unknown option --jsn"))
        for command in ["demo", "stats", "verify", "dump", "schema", "compact", "salvage"] {
            let run = try notekit(command, "--help")
            #expect(run.status == 0 && run.output.hasPrefix("usage: notekit \(command)"))
        }
        let missing = try notekit("stats", "/nonexistent/store")
        #expect(missing.status == 1 && missing.errors == "error: there is no NoteKit store at /nonexistent/store\n")
    }
}
