// notekit: look inside any NoteKit store, prove it healthy, shrink it, rescue what a damaged one holds, and run the
// demo. Exit codes: 0 success, 1 damage found or the operation failed, 2 usage error.
import Foundation
import NoteKit
import NoteKitFileStore

let usage = """
    usage: notekit <command> [arguments]

    commands:
      demo [PATH]                  create or reopen a notes store and print its folder tree (default ./NoteKitDemo.notekit)
      stats PATH [--json]          format version, schema, records per entity, segments, bytes, blobs, history range
      verify PATH [--json]         read everything, write nothing; exit 1 when anything is wrong
      dump PATH [--entity NAME]    every live record as one JSON object per line
      history PATH [--after N] [--limit N] [--json]
                                   the transactions the store's history keeps, oldest first
      schema PATH                  the schemas the store was written with, version by version
      compact PATH                 rewrite the store as one segment; prints bytes before and after
      salvage PATH --to NEWPATH    copy every intact transaction into a new store; never touches PATH

    notekit <command> --help describes a command.
    """

let help: [String: String] = [
    "demo": """
        usage: notekit demo [PATH]
        Creates a notes store at PATH (default ./NoteKitDemo.notekit) with nested folders, filed and unfiled notes,
        a drawing, revisions and an attachment (its file in PATH.attachments), or reopens it, and prints the folder
        tree with note counts. Running it again adds nothing.
        """,
    "stats": """
        usage: notekit stats PATH [--json]
        Prints the store's format version, current schema version and hash, live records per entity, segments,
        bytes, external blobs and the range of transactions in its log. --json prints one JSON object with
        formatVersion, schemaVersion, schemaHash, entities, segments, bytes, segmentBytes, blobs, blobBytes,
        firstTransaction and lastTransaction. Writes nothing.
        """,
    "verify": """
        usage: notekit verify PATH [--json]
        Reads every record, relationship and blob of the store, writes nothing (a read-only copy works), and lists
        each problem with its file, byte offset and kind: a torn tail, a checksum mismatch, an undecodable record,
        an unknown format version, a missing external blob, a relationship pointing at nothing. Takes no lock: run
        beside an app that writes or compacts the store, it reads again when the store changed under it, and reports
        only what two reads in a row found. Exits 0 when the store is healthy, 1 otherwise. --json prints {"ok": …, "problems": [{"file", "offset", "kind", "message"}]}.
        """,
    "dump": """
        usage: notekit dump PATH [--entity NAME]
        Prints every live record as one JSON object per line: {"entity", "id", "attributes", "relationships"}.
        """,
    "history": """
        usage: notekit history PATH [--after N] [--limit N] [--json]
        Prints each transaction the store's history keeps (after transaction N, at most --limit of them), oldest
        first: its number, time, author and how many objects it inserted, updated and deleted. --json prints one
        JSON object per line with tx, time, author, inserted [{entity, id}], updated [{entity, id, properties}] and
        deleted [{entity, id, tombstone}]. Says so on standard error when transactions after N were deleted from
        history. Writes nothing.
        """,
    "schema": """
        usage: notekit schema PATH
        Prints every schema the store was written with, oldest first: entities, attributes, relationships,
        constraints and indexes.
        """,
    "compact": """
        usage: notekit compact PATH
        Rewrites the store as one segment holding its current state and deletes what no longer counts. Prints the
        bytes before and after. Needs the store's write lock.
        """,
    "salvage": """
        usage: notekit salvage PATH --to NEWPATH
        Copies every intact transaction of a damaged store into a new store at NEWPATH and reports what it left
        out. PATH is only read. Exits 1 when something was left out.
        """,
]

/// Prints `message` to standard error as one `error:` line.
func fail(_ message: String) {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
}

/// Prints a JSON object on one line, keys sorted.
func printJSON(_ object: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    print(String(decoding: data, as: UTF8.self))
}

func run(_ words: [String]) -> Int32 {
    guard let command = words.first else {
        print(usage)
        return 2
    }
    if command == "--help" || command == "-h" || command == "help" {
        print(usage)
        return 0
    }
    let rest = Array(words.dropFirst())
    do {
        switch command {
        case "demo":
            let arguments = try Arguments(rest)
            if arguments.flags.contains("help") { print(help["demo"]!); return 0 }
            return try Demo.run(path: arguments.path(default: "./NoteKitDemo.notekit"))
        case "stats":
            let arguments = try Arguments(rest, flags: ["json"])
            if arguments.flags.contains("help") { print(help["stats"]!); return 0 }
            return try Commands.stats(path: arguments.path(), json: arguments.flags.contains("json"))
        case "verify":
            let arguments = try Arguments(rest, flags: ["json"])
            if arguments.flags.contains("help") { print(help["verify"]!); return 0 }
            return try Commands.verify(path: arguments.path(), json: arguments.flags.contains("json"))
        case "dump":
            let arguments = try Arguments(rest, options: ["entity"])
            if arguments.flags.contains("help") { print(help["dump"]!); return 0 }
            return try Commands.dump(path: arguments.path(), entity: arguments.options["entity"])
        case "history":
            let arguments = try Arguments(rest, flags: ["json"], options: ["after", "limit"])
            if arguments.flags.contains("help") { print(help["history"]!); return 0 }
            func number(_ name: String) throws -> Int? {
                guard let text = arguments.options[name] else { return nil }
                guard let value = Int(text), value >= 0 else {
                    throw Arguments.UsageError(description: "--\(name) takes a whole number, not \(text)")
                }
                return value
            }
            return try Commands.history(path: arguments.path(), after: try number("after").map(UInt64.init),
                                        limit: try number("limit"), json: arguments.flags.contains("json"))
        case "schema":
            let arguments = try Arguments(rest)
            if arguments.flags.contains("help") { print(help["schema"]!); return 0 }
            return try Commands.schema(path: arguments.path())
        case "compact":
            let arguments = try Arguments(rest)
            if arguments.flags.contains("help") { print(help["compact"]!); return 0 }
            return try Commands.compact(path: arguments.path())
        case "salvage":
            let arguments = try Arguments(rest, options: ["to"])
            if arguments.flags.contains("help") { print(help["salvage"]!); return 0 }
            guard let destination = arguments.options["to"] else {
                throw Arguments.UsageError(description: "salvage needs --to NEWPATH")
            }
            return try Commands.salvage(path: arguments.path(), to: destination)
        default:
            fail("unknown command \(command)")
            FileHandle.standardError.write(Data((usage + "\n").utf8))
            return 2
        }
    } catch let error as Arguments.UsageError {
        fail("\(error) (see notekit \(command) --help)")
        return 2
    } catch {
        fail("\(error)")
        return 1
    }
}

exit(run(Array(CommandLine.arguments.dropFirst())))
