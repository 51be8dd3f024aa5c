import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitFixtures
import NoteKitTestSupport
import Testing
@testable import notekit

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

    /// A copy of Fixtures/v3, migrated once to today's schema (so it has attachments to none, blobs, revisions),
    /// among this process's test stores, which are removed when it ends.
    func store() throws -> URL {
        let (container, copy) = try StoreFixture.openCopy(of: FixtureReplayTests.fixture(3),
                                                          schema: Schema(versionedSchema: NotesSchema.self))
        try StoreFiles.close(container)
        let url = TemporaryStores.newURL("cli")
        try FileManager.default.moveItem(at: copy, to: url)
        return url
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
        // The manifest's: the migration replaced Fixtures/v3's version 1 manifest with a version 2 one.
        #expect(json["formatVersion"] as? Int == 2)
        #expect(json["schemaVersion"] as? String == "4.0.0")
        #expect((json["entities"] as? [String: Int])?["Note"] == NotesFixtureData.notes(version: 3).count)
        #expect(json["segments"] as? Int == 1)
        #expect((json["bytes"] as? Int ?? 0) > 1000)
        #expect(StoreFiles.contents(of: url) == before)
        let text = try notekit("stats", url.path)
        #expect(text.output.contains("format version   2") && text.output.contains("NoteRevision"))
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

    @Test("verify reports a truncated tail with its file, offset and kind, as a save in progress or cut short, not damage")
    func verifyTornTail() throws {
        let url = try store()
        let segment = StoreFiles.segment(url)
        let bytes = try Data(contentsOf: segment)
        let last = try StoreFiles.recordOffsets(segment).last!
        try bytes.prefix(last + 20).write(to: segment)
        let before = StoreFiles.contents(of: url)
        let run = try notekit("verify", url.path, "--json")
        // What a reader beside a writer sees while a save is being appended: never a damage report (issue 15).
        #expect(run.status == 0)
        #expect(run.json["ok"] as? Bool == true)
        let problems = run.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.count == 1)
        #expect(problems.first?["kind"] as? String == "tornTail")
        #expect(problems.first?["offset"] as? Int == last)
        #expect((problems.first?["file"] as? String)?.hasSuffix("segments/000001.seg") == true)
        #expect(StoreFiles.contents(of: url) == before, "verify writes nothing")
        let text = try notekit("verify", url.path)
        #expect(text.status == 0 && text.output.contains("ends in an incomplete record at byte \(last)"), "\(text.output)")
        #expect(!text.errors.contains("salvage"), "no salvage hint for a torn tail")
    }

    @Test("verify reports a damaged checkpoint as a damagedCheckpoint warning with its offset, exiting 0")
    func verifyDamagedCheckpoint() throws {
        let url = try store()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.automaticCompaction = nil }
        try StoreFiles.store(container).compact()
        try StoreFiles.close(container)
        let path = url.appendingPathComponent("CHECKPOINT")
        var bytes = try Data(contentsOf: path)
        bytes[4096 + 9] ^= 0x04
        try bytes.write(to: path)
        let run = try notekit("verify", url.path, "--json")
        #expect(run.status == 0)
        #expect(run.json["ok"] as? Bool == true)
        let problems = run.json["problems"] as? [[String: Any]] ?? []
        #expect(problems.map { $0["kind"] as? String } == ["damagedCheckpoint"])
        #expect(problems.first?["offset"] as? Int == 4096 + 9)
        let text = try notekit("verify", url.path)
        #expect(text.status == 0 && text.output.contains("CHECKPOINT at byte \(4096 + 9)"), "\(text.output)")
        #expect(!text.errors.contains("salvage"), "no salvage hint for a checkpoint")
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
        #expect(stats.status == 5 && stats.errors.contains("format version 7; this build reads versions 1, 2"))
    }

    @Test("verify reports a relationship pointing at nothing")
    func verifyDanglingRelationship() throws {
        let url = try store()
        // Remove a folder's row from the state by hand: append a transaction deleting it without unlinking its notes.
        let store = try StoreInspector.openForWriting(at: url)
        let folder = try #require(try store.fetch(StoreFetchRequest(entity: "Folder")).rows
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
        #expect(unknown.status == 2 && unknown.errors.hasPrefix("error: "))
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
        #expect(missing.status == 3 && missing.errors == "error: there is no NoteKit store at /nonexistent/store\n")
    }
}

/// Issue 36, item 7: `notekit`'s usage, each command's help and the dispatch of a command line all come from one
/// table of commands (`Command.all`, Sources/notekit/Command+Table.swift), so none of them can miss a command.
@Suite("The notekit table of commands")
struct CommandTableTests {
    let cli = CommandLineTests()

    /// The command lines that name each of the table's actions: `[stats]`, or `[mirror, init]`, `[mirror, sync]`, ….
    static func commandLines(of command: Command) -> [[String]] {
        switch command.actions {
        case .single: [[command.name]]
        case .subcommands(let subcommands): subcommands.map { [command.name, $0.name] }
        }
    }

    @Test("Every command of the table answers --help with exit 0 and the text notekit help COMMAND prints")
    func everyCommandAnswersHelp() throws {
        for command in Command.all {
            let help = try cli.notekit("help", command.name)
            #expect(help.status == 0 && help.output == command.help + "\n", "help \(command.name): \(help.errors)")
            for words in [[command.name]] + Self.commandLines(of: command) {
                for flag in ["--help", "-h"] {
                    let run = try CommandLineTests.run(CommandLineTests.executable, words + [flag])
                    #expect(run.status == 0, "\(words) \(flag): \(run.errors)")
                    #expect(run.output == help.output && run.errors.isEmpty, "\(words) \(flag): \(run.output)")
                }
            }
        }
    }

    @Test("notekit mirror --help and notekit mirror sync --help exit 0 and print the mirror help")
    func mirrorHelp() throws {
        let help = try cli.notekit("help", "mirror")
        #expect(help.status == 0 && help.output.hasPrefix("usage: notekit mirror init PATH --zone ZONE"))
        for words in [["mirror", "--help"], ["mirror", "sync", "--help"], ["mirror", "-h"],
                      ["mirror", "status", "/nonexistent/store", "--help"]] {
            let run = try CommandLineTests.run(CommandLineTests.executable, words)
            #expect(run.status == 0 && run.output == help.output && run.errors.isEmpty, "\(words): \(run.errors)")
        }
        let missing = try cli.notekit("mirror")
        #expect(missing.status == 2)
        #expect(missing.errors == "error: mirror takes init, status, sync or fetch-blobs (see notekit help mirror)\n")
    }

    @Test("The usage lists every command of the table with its synopsis, then help and --version, and nothing else")
    func usageListsTheTable() throws {
        let usage = try cli.notekit("help")
        #expect(usage.status == 0)
        for command in Command.all {
            for line in command.usageLines {
                #expect(usage.output.contains(line + "\n"), "\(command.name): \(line)")
            }
        }
        // The first word of each line of the commands section (lines indented two spaces), in order.
        let section = usage.output.components(separatedBy: "commands:\n").last?.components(separatedBy: "\n\n").first
        let listed = (section ?? "").split(separator: "\n").filter { !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        let expected = Command.all.flatMap { command in Self.commandLines(of: command).map { $0[0] } }
        #expect(listed == expected + ["help", "--version"], "\(listed)")
        let bare = try cli.notekit()
        #expect(bare.status == 2 && bare.errors == usage.output, "notekit alone prints the usage on standard error")
    }

    @Test("An unknown option is a usage error, exit 2, that names it and the command's help, for every command")
    func unknownOptionExitsTwo() throws {
        for command in Command.all {
            for words in Self.commandLines(of: command) {
                let run = try CommandLineTests.run(CommandLineTests.executable, words + ["store", "--bogus"])
                #expect(run.status == 2, "\(words): \(run.errors)")
                #expect(run.errors == "error: unknown option --bogus (see notekit help \(command.name))\n",
                        "\(words): \(run.errors)")
                #expect(run.output.isEmpty)
            }
        }
    }
}

/// Issue 36, item 7: `notekit`, `notekit-bench` and `notekit-stress` read their command lines with one parser
/// (NoteKitCommandLine), which refuses an option the subcommand does not take before anything runs, where the
/// benchmark and the stress tool used to ignore it (and run a whole workload on a mistyped option).
@Suite("Every NoteKit tool refuses an option it does not know")
struct ToolOptionTests {
    enum Tool: String, Sendable, CustomTestStringConvertible {
        case notekit, bench = "notekit-bench", stress = "notekit-stress"

        var executable: URL {
            switch self {
            case .notekit: CommandLineTests.executable
            case .bench: BenchmarkColdTests.executable
            case .stress: ProcessStressTests.KillTests.executable
            }
        }

        var testDescription: String { rawValue }
    }

    /// Where a subcommand would write, were the bad word not refused: every path below is in it.
    static let scratch = TemporaryStores.root.appendingPathComponent("tool-options").path

    /// A command line of each subcommand that ends soon even if the word after it were ignored. (`reader`,
    /// `migrate` and `mirror-app` wait on standard input, and read their words like the others.)
    static let commandLines: [(tool: Tool, words: [String])] = [
        (.notekit, ["stats", scratch + "/missing"]),
        (.notekit, ["mirror", "sync", scratch + "/missing", "--zone", "z"]),
        (.bench, ["w1", "--notes", "1", "--dir", scratch]),
        (.bench, ["history", "--transactions", "1", "--dir", scratch]),
        (.bench, ["cold", "--notes", "1", "--runs", "1", "--dir", scratch]),
        (.bench, ["rows", "--notes", "1", "--runs", "1"]),
        (.bench, ["memory", "--notes", "1", "--dir", scratch]),
        (.bench, ["mirror", "--server", "host=/nonexistent", "--notes", "1", "--dir", scratch]),
        (.bench, ["top20", scratch + "/missing"]),
        (.bench, ["open", scratch + "/missing"]),
        (.stress, ["kill", "--kills", "1", "--seconds", "1", "--dir", scratch]),
        (.stress, ["child", "--store", scratch + "/child", "--seed", "1", "--from", "1", "--steps", "0"]),
        (.stress, ["share", "--seconds", "1", "--writers", "1", "--readers", "0", "--dir", scratch]),
        (.stress, ["compactor", "--store", scratch + "/compactor", "--seconds", "0.1"]),
        (.stress, ["add", "--store", scratch + "/add", "--title", "t"]),
        (.stress, ["mirror-device", "--store", scratch + "/device", "--server", "host=/nonexistent", "--zone", "z",
                   "--seed", "1", "--ops", "0"]),
        (.stress, ["backup-writer", "--store", scratch + "/backup", "--steps", "1"]),
    ]

    @Test("An unknown option is a usage error, exit 2, whose first line names it", arguments: commandLines)
    func unknownOption(tool: Tool, words: [String]) throws {
        let run = try CommandLineTests.run(tool.executable, words + ["--bogus"])
        #expect(run.status == 2, "\(tool) \(words): \(run.errors)")
        let first = run.errors.split(separator: "\n").first.map(String.init)
        #expect(first?.hasPrefix("error: unknown option --bogus") == true, "\(tool) \(words): \(run.errors)")
        #expect(run.output.isEmpty, "\(tool) \(words): \(run.output)")
    }

    @Test("A positional argument where the benchmark or the stress tool takes none is a usage error, exit 2",
          arguments: commandLines.filter { $0.tool != .notekit && !["top20", "open"].contains($0.words[0]) })
    func unexpectedArgument(tool: Tool, words: [String]) throws {
        let run = try CommandLineTests.run(tool.executable, words + ["extra"])
        #expect(run.status == 2, "\(tool) \(words): \(run.errors)")
        #expect(run.errors.hasPrefix("error: unexpected argument extra\n"), "\(tool) \(words): \(run.errors)")
    }

    @Test("--help prints the benchmark's and the stress tool's usage on standard output, exit 0")
    func help() throws {
        for (tool, words) in [(Tool.bench, ["--help"]), (.bench, ["cold", "--help"]), (.stress, ["-h"]),
                              (.stress, ["child", "--help"])] {
            let run = try CommandLineTests.run(tool.executable, words)
            #expect(run.status == 0 && run.errors.isEmpty, "\(tool) \(words): \(run.errors)")
            #expect(run.output.hasPrefix("usage: \(tool.rawValue) "), "\(tool) \(words): \(run.output)")
        }
    }
}

/// The command-line contract a script relies on, as with sqlite3: exit codes by kind of failure, `--version`,
/// `help <command>`, and `--json` on every command that prints data.
@Suite("The notekit command-line contract")
struct CommandLineContractTests {
    let cli = CommandLineTests()

    /// A plain file where a store should be.
    func plainFile() throws -> URL {
        let url = TemporaryStores.newURL("plain")
        try Data("not a store\n".utf8).write(to: url)
        return url
    }

    /// A store whose first segment has a byte flipped in its third record.
    func damagedStore() throws -> URL {
        let url = try cli.store()
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        var bytes = try Data(contentsOf: segment)
        bytes[offsets[2] + 40] ^= 0x04
        try bytes.write(to: segment)
        return url
    }

    @Test("Exit 1: damage found, and the message ends with the salvage command that may help")
    func damageExitsOne() throws {
        let url = try damagedStore()
        let hint = "notekit salvage \(url.path) --to NEWPATH"
        for command in ["stats", "dump", "history", "verify"] {
            let run = try cli.notekit(command, url.path)
            #expect(run.status == 1, "\(command): \(run.errors)")
            #expect(run.errors.hasSuffix(hint + "\n"), "\(command): \(run.errors)")
        }
        let json = try cli.notekit("verify", url.path, "--json")
        #expect(json.status == 1 && json.json["ok"] as? Bool == false)
    }

    @Test("Exit 2: a bad flag, a missing argument, an unknown command or an entity the store does not have")
    func usageExitsTwo() throws {
        let url = try cli.store()
        #expect(try cli.notekit("stats", url.path, "--frobnicate").status == 2)
        #expect(try cli.notekit("compact").status == 2)
        #expect(try cli.notekit("frobnicate").status == 2)
        let unknown = try cli.notekit("dump", url.path, "--entity", "Nope")
        #expect(unknown.status == 2 && unknown.errors.hasPrefix("error: "))
    }

    @Test("Exit 3: a missing path or a plain file, with one clear message from every command")
    func notAStoreExitsThree() throws {
        let file = try plainFile()
        let missing = TemporaryStores.newURL("missing")
        for command in ["stats", "verify", "dump", "history", "schema", "compact"] {
            let plain = try cli.notekit(command, file.path)
            #expect(plain.status == 3, "\(command): \(plain.errors)")
            #expect(plain.errors == "error: \(file.path) is a file, not a NoteKit store (a store is a directory "
                    + "holding a MANIFEST)\n", "\(command)")
            let absent = try cli.notekit(command, missing.path)
            #expect(absent.status == 3, "\(command): \(absent.errors)")
            #expect(absent.errors == "error: there is no NoteKit store at \(missing.path)\n", "\(command)")
        }
        let salvage = try cli.notekit("salvage", file.path, "--to", TemporaryStores.newURL("rescued").path)
        #expect(salvage.status == 3 && !salvage.errors.contains("errno"), "\(salvage.errors)")
    }

    @Test("Exit 4: a store another process holds open exclusively is locked")
    func lockedExitsFour() throws {
        let url = try cli.store()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        defer { try? StoreFiles.close(container) }
        let run = try cli.notekit("compact", url.path)
        #expect(run.status == 4, "\(run.errors)")
        #expect(run.errors.hasPrefix("error: ") && run.errors.contains("lock"))
    }

    @Test("Exit 5: a store written by a newer NoteKit (a format version this build does not read) is refused")
    func newerFormatExitsFive() throws {
        let url = try cli.store()
        let segment = StoreFiles.segment(url)
        var bytes = try Data(contentsOf: segment)
        bytes.replaceSubrange(0..<9, with: Data("NOTEKIT/7".utf8))
        try bytes.write(to: segment)
        for command in ["stats", "dump", "compact"] {
            let run = try cli.notekit(command, url.path)
            #expect(run.status == 5, "\(command): \(run.errors)")
            #expect(run.errors.contains("format version 7; this build reads versions 1, 2"), "\(command)")
        }
    }

    @Test("--version names the library, the format versions it reads and the notes schema, as text and JSON")
    func version() throws {
        let text = try cli.notekit("--version")
        #expect(text.status == 0)
        #expect(text.output.hasPrefix("notekit 0.1.0-dev"), "\(text.output)")
        #expect(text.output.contains("store format 2 (reads 1, 2)") && text.output.contains("notes schema 4.0.0"))
        let json = try cli.notekit("--version", "--json")
        #expect(json.status == 0)
        #expect(json.json["version"] as? String == "0.1.0-dev")
        #expect(json.json["formatVersions"] as? [Int] == [1, 2])
        #expect(json.json["notesSchemaVersion"] as? String == "4.0.0")
    }

    @Test("help <command> prints that command's help, and help of an unknown command is a usage error")
    func helpCommand() throws {
        for command in ["demo", "stats", "verify", "dump", "history", "schema", "compact", "salvage"] {
            let help = try cli.notekit("help", command)
            let flag = try cli.notekit(command, "--help")
            #expect(help.status == 0 && help.output.hasPrefix("usage: notekit \(command)"), "\(command)")
            #expect(help.output == flag.output)
        }
        let general = try cli.notekit("help")
        #expect(general.status == 0 && general.output.contains("exit codes"))
        #expect(try cli.notekit("help", "frobnicate").status == 2)
    }

    @Test("--json on every command that prints data gives one JSON document, or JSON lines for dump and history")
    func jsonEverywhere() throws {
        let url = try cli.store()
        func document(_ arguments: String...) throws -> [String: Any] {
            let run = try CommandLineTests.run(CommandLineTests.executable, arguments)
            #expect(run.status == 0, "\(arguments): \(run.errors)")
            let object = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any]
            return try #require(object, "\(arguments): \(run.output)")
        }
        func lines(_ arguments: String...) throws -> [[String: Any]] {
            let run = try CommandLineTests.run(CommandLineTests.executable, arguments)
            #expect(run.status == 0, "\(arguments): \(run.errors)")
            return try run.output.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
        }
        #expect(try document("stats", url.path, "--json")["formatVersion"] as? Int == 2)
        #expect(try document("verify", url.path, "--json")["ok"] as? Bool == true)
        let schema = try document("schema", url.path, "--json")
        let schemas = try #require(schema["schemas"] as? [[String: Any]])
        #expect(schemas.count >= 2 && schema["current"] as? String == "4.0.0")
        #expect(try lines("dump", url.path, "--entity", "Folder", "--json").allSatisfy { $0["entity"] as? String == "Folder" })
        #expect(try !lines("history", url.path, "--json").isEmpty)
        let compact = try document("compact", url.path, "--json")
        #expect(compact["bytesBefore"] is Int && compact["bytesAfter"] is Int && compact["segmentsRemoved"] is [String])
        let rescued = TemporaryStores.newURL("rescued")
        let salvage = try document("salvage", url.path, "--to", rescued.path, "--json")
        #expect(salvage["complete"] as? Bool == true && salvage["transactionsKept"] is Int)
        #expect(salvage["skippedBytes"] as? [Any] != nil && salvage["skippedRecords"] as? [Any] != nil)
        #expect(try document("--version", "--json")["version"] is String)
    }

    @Test(".gitignore covers everything `notekit demo` creates in the current directory")
    func demoIsIgnored() throws {
        let directory = TemporaryStores.newURL("demo")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #expect(try cli.notekit("demo", in: directory).status == 0)
        let created = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        try #require(created.count >= 2, "the store and its attachments folder")
        let root = CommandLineTests.executable.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        for url in created {
            let isDirectory = (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true
            let name = url.lastPathComponent + (isDirectory ? "/" : "")
            // `git check-ignore --no-index` matches the name against the repository's .gitignore as if the demo had
            // run at its root (where `swift run notekit demo` puts it): status 0 ignored, 1 not ignored.
            let git = try CommandLineTests.run(URL(fileURLWithPath: "/usr/bin/env"),
                                               ["git", "-C", root.path, "check-ignore", "--no-index", "-q", name])
            #expect(git.status == 0, "\(name) is not ignored: \(git.errors)")
        }
    }

    @Test("dump and history print dates in ISO 8601, not seconds since 2001")
    func readableDates() throws {
        let url = try cli.store()
        let iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/
        let dump = try cli.notekit("dump", url.path, "--entity", "Note")
        let notes = dump.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        try #require(!notes.isEmpty)
        for note in notes {
            let attributes = note["attributes"] as? [String: Any] ?? [:]
            let created = try #require(attributes["createdAt"] as? String, "\(attributes)")
            #expect(created.wholeMatch(of: iso) != nil, "\(created)")
        }
        let history = try cli.notekit("history", url.path)
        let time = try #require(history.output.split(separator: "\n").first?.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first)
        #expect(String(time).wholeMatch(of: iso) != nil, "\(time)")
    }
}
