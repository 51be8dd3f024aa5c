// notekit: look inside any NoteKit store, prove it healthy, shrink it, rescue what a damaged one holds, and run the
// demo. Its exit codes are ExitStatus's (ExitStatus.swift), listed by `notekit help`.
import Foundation
import NoteKit
import NoteKitFileStore

let usage = """
    usage: notekit <command> [arguments]

    commands:
      demo [PATH]                  create or reopen a notes store and print its folder tree (default ./NoteKitDemo.notekit)
      stats PATH [--json]          format version, schema, records per entity, segments, bytes, blobs, history range
      verify PATH [--json]         read everything, write nothing; exit 1 when anything is wrong
      dump PATH [--entity NAME] [--sorted]
                                   every live record as one JSON object per line (--json accepted)
      history PATH [--after N] [--limit N] [--json]
                                   the transactions the store's history keeps, oldest first
      schema PATH [--json]         the schemas the store was written with, version by version
      compact PATH [--json]        rewrite the store as one segment; prints bytes before and after
      backup PATH --to NEWPATH [--json]
                                   a verified copy of the store's last commit, taken while others write
      salvage PATH --to NEWPATH [--best-effort | --consistent-prefix] [--json]
                                   copy every intact transaction into a new store; never touches PATH
      mirror init PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
                                   create or update a PostgreSQL server's tables for the store's schema
      mirror status PATH [--zone ZONE --server CONNECTION] [--json]
                                   the store's mirroring: device, pending transactions, cursors, last error
      mirror sync PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
                                   send the store's new transactions, then apply the server's changes
      mirror fetch-blobs PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
                                   fetch the blobs an import left on the server, for readers that do not mirror
      help [COMMAND]               this text, or what COMMAND does (as notekit COMMAND --help)
      --version [--json]           notekit's version, the store format versions it reads, the notes schema

    \(ExitStatus.table)
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
        only what two reads in a row found. A torn tail (an incomplete last record: a save in progress, or one a
        crash cut short, which the next writable open sets aside) is listed but is not damage. Exits 0 when the
        store is healthy, 1 otherwise, with the salvage command that may help on standard error. --json prints
        {"ok": …, "problems": [{"file", "offset", "kind", "message"}]}.
        """,
    "dump": """
        usage: notekit dump PATH [--entity NAME] [--sorted] [--json]
        Prints every live record (of entity NAME only, when given) as one JSON object per line: {"entity", "id",
        "attributes", "relationships"}, dates as ISO 8601 text in UTC to the millisecond. It prints JSON lines
        with or without --json. --sorted prints each entity's records, and each to-many relationship's targets, by
        identifier rather than in insertion order, so that two stores with the same objects (a mirror's devices)
        print the same lines. An entity the store does not have is a usage error (exit 2). Writes nothing.
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
        usage: notekit schema PATH [--json]
        Prints every schema the store was written with, oldest first: entities, attributes, relationships,
        constraints and indexes. --json prints {"current": VERSION, "schemas": [...]}, each schema in the form
        the store records it. Writes nothing.
        """,
    "compact": """
        usage: notekit compact PATH [--json]
        Rewrites the store as one segment holding its current state and deletes what no longer counts. Prints the
        bytes before and after; --json prints {"bytesBefore", "bytesAfter", "segmentsRemoved", "blobsRemoved",
        "retiredBlobsDeleted"}. Needs the store's write lock: exits 4 when another open keeps it past 5 seconds.
        When standard error is a terminal and it takes over a second, a line there counts the seconds.
        """,
    "backup": """
        usage: notekit backup PATH --to NEWPATH [--json]
        Writes a copy of the store's last commit as a new store at NEWPATH: every object, the schema history, the
        history kept and every blob an object names, in one segment with its checkpoint. It takes no lock: apps and
        tools keep saving, rotating and compacting the store meanwhile. The copy is verified (as notekit verify
        does) before it is renamed into place, so NEWPATH never holds part of one; NEWPATH must not exist (exit 2).
        A plain copy of a live store's directory (cp -a) is no backup: it can mix moments, or miss blobs its
        segments name. --json prints {"path", "lastTransaction", "objects", "historyTransactions", "blobs",
        "promisedBlobs", "bytes"}.
        """,
    "salvage": """
        usage: notekit salvage PATH --to NEWPATH [--best-effort | --consistent-prefix] [--json]
        Copies every intact transaction of a damaged store into a new store at NEWPATH and reports what it left
        out. PATH is only read. Exits 1 when something was left out. --best-effort (the default) keeps every
        later transaction whose objects survive the damage; --consistent-prefix keeps only the transactions
        before the first one lost, a state the store was in. --json prints {"mode", "complete",
        "transactionsKept", "objectsKept", "segmentsUsed", "skippedBytes", "skippedRecords"}, each skipped part
        as {"file", "offset", "length", "reason"} and, for a transaction left out, its "transaction".
        """,
    "mirror": """
        usage: notekit mirror init PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
               notekit mirror status PATH [--zone ZONE --server CONNECTION] [--json]
               notekit mirror sync PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
               notekit mirror fetch-blobs PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]
        init creates or updates the tables of a PostgreSQL server for the store's current schema, as the app's
        initializeMirrorSchema does (docs/MIRROR.md); running it again changes nothing. It refuses a schema of an
        older major version than the zone's (exit 5). status prints the store's mirroring as its mirroring process
        last left it: the device, the local transactions not sent yet, the last exported transaction, the server
        cursor, when the last sync ended and why it failed; with --zone and --server, the server's newest change
        too. CONNECTION is a libpq connection string or URI (TLS options pass through); without --server, libpq's
        PG… environment variables apply. A password in it is never printed; prefer ~/.pgpass. --json prints one
        JSON object:
        init {"tablesCreated", "columnsAdded", "schemaRecorded", "schemaVersion", "zone"}; status {"mirrored",
        "device", "zone", "pendingLocalTransactions", "exportedThrough", "serverCursor", "lastSync", "lastError",
        "serverNewestChange"}.
        sync runs one sync of the store, as its app's StoreMirror.sync() does: it sends the local transactions not
        sent yet, then applies the server's changes as transactions of author "mirror". It needs no model types:
        the store's recorded schema gives the delete rules, inverses and unique constraints. It takes turns with a
        sync the app runs at the same time. The app's per-entity resolvers do not run in it: every field merges
        last-writer-wins. A server row that does not decode is reported and skipped (exit 1); a store whose schema
        is behind the zone's is refused before anything is sent (exit 5). --json prints {"exportedTransactions",
        "exportedBaseline", "importedChanges", "importTransactions", "skippedRows", "deniedDeletions", "zone"}.
        An import records external-storage bytes by their hash and leaves them on the server: a process that mirrors
        the store fetches each when it first reads it. fetch-blobs fetches all of them now, so that extensions and
        tools that do not mirror can read them (a store never mirrored is left alone); --json prints
        {"blobsFetched", "zone"}.
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

/// Runs one command line and returns its exit status (``ExitStatus``).
func run(_ words: [String]) -> Int32 {
    guard let command = words.first else {
        FileHandle.standardError.write(Data((usage + "\n").utf8))
        return ExitStatus.usage.rawValue
    }
    let rest = Array(words.dropFirst())
    /// The store path the command was given, for the salvage hint that ends a report of damage.
    var storePath: String?
    do {
        func arguments(flags: Set<String> = [], options: Set<String> = []) throws -> Arguments? {
            let arguments = try Arguments(rest, flags: flags, options: options)
            if arguments.flags.contains("help") {
                print(help[command]!)
                return nil
            }
            storePath = arguments.positional.first
            return arguments
        }
        switch command {
        case "--help", "-h", "help":
            let arguments = try Arguments(rest)
            guard let topic = arguments.positional.first else {
                print(usage)
                return ExitStatus.ok.rawValue
            }
            guard arguments.positional.count == 1, let text = help[topic] else {
                throw Arguments.UsageError(description: arguments.positional.count == 1
                    ? "unknown command \(topic)" : "help takes one command, got \(arguments.positional.count)")
            }
            print(text)
        case "--version":
            let arguments = try Arguments(rest, flags: ["json"])
            guard arguments.positional.isEmpty else {
                throw Arguments.UsageError(description: "--version takes no arguments")
            }
            if arguments.flags.contains("json") { printJSON(NoteKitVersion.json) } else { print(NoteKitVersion.text) }
        case "demo":
            guard let arguments = try arguments() else { break }
            return try Demo.run(path: arguments.path(default: "./NoteKitDemo.notekit"))
        case "stats":
            guard let arguments = try arguments(flags: ["json"]) else { break }
            return try Commands.stats(path: arguments.path(), json: arguments.flags.contains("json"))
        case "verify":
            guard let arguments = try arguments(flags: ["json"]) else { break }
            return try Commands.verify(path: arguments.path(), json: arguments.flags.contains("json"))
        case "dump":
            // dump prints JSON lines either way: --json is accepted so that every data command takes it.
            guard let arguments = try arguments(flags: ["json", "sorted"], options: ["entity"]) else { break }
            return try Commands.dump(path: arguments.path(), entity: arguments.options["entity"],
                                     sorted: arguments.flags.contains("sorted"))
        case "history":
            guard let arguments = try arguments(flags: ["json"], options: ["after", "limit"]) else { break }
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
            guard let arguments = try arguments(flags: ["json"]) else { break }
            return try Commands.schema(path: arguments.path(), json: arguments.flags.contains("json"))
        case "compact":
            guard let arguments = try arguments(flags: ["json"]) else { break }
            return try Commands.compact(path: arguments.path(), json: arguments.flags.contains("json"))
        case "backup":
            guard let arguments = try arguments(flags: ["json"], options: ["to"]) else { break }
            guard let destination = arguments.options["to"] else {
                throw Arguments.UsageError(description: "backup needs --to NEWPATH")
            }
            return try Commands.backup(path: arguments.path(), to: destination, json: arguments.flags.contains("json"))
        case "salvage":
            guard let arguments = try arguments(flags: ["json", "best-effort", "consistent-prefix"], options: ["to"])
            else { break }
            storePath = nil  // salvage is the command the hint would name
            guard let destination = arguments.options["to"] else {
                throw Arguments.UsageError(description: "salvage needs --to NEWPATH")
            }
            let consistentPrefix = arguments.flags.contains("consistent-prefix")
            if consistentPrefix && arguments.flags.contains("best-effort") {
                throw Arguments.UsageError(description: "salvage takes --best-effort or --consistent-prefix, not both")
            }
            return try Commands.salvage(path: arguments.path(), to: destination,
                                        mode: consistentPrefix ? .consistentPrefix : .bestEffort,
                                        json: arguments.flags.contains("json"))
        case "mirror":
            guard let subcommand = rest.first, ["init", "status", "sync", "fetch-blobs"].contains(subcommand) else {
                throw Arguments.UsageError(description: "mirror takes init, status, sync or fetch-blobs")
            }
            let arguments = try Arguments(Array(rest.dropFirst()), flags: ["json"],
                                          options: ["zone", "server", "namespace"])
            if arguments.flags.contains("help") {
                print(help[command]!)
                break
            }
            storePath = arguments.positional.first
            let json = arguments.flags.contains("json")
            if subcommand == "sync" {
                return try MirrorCommands.sync(path: arguments.path(),
                                               configuration: MirrorCommands.configuration(arguments), json: json)
            }
            if subcommand == "fetch-blobs" {
                return try MirrorCommands.fetchBlobs(path: arguments.path(),
                                                     configuration: MirrorCommands.configuration(arguments), json: json)
            }
            if subcommand == "init" {
                return try MirrorCommands.initialize(path: arguments.path(),
                                                     configuration: MirrorCommands.configuration(arguments), json: json)
            }
            let configuration = arguments.options["zone"] == nil ? nil : try MirrorCommands.configuration(arguments)
            return try MirrorCommands.status(path: arguments.path(), configuration: configuration, json: json)
        default:
            fail("unknown command \(command)")
            FileHandle.standardError.write(Data((usage + "\n").utf8))
            return ExitStatus.usage.rawValue
        }
        return ExitStatus.ok.rawValue
    } catch let error as Arguments.UsageError {
        let topic = help[command] == nil ? "notekit help" : "notekit help \(command)"
        fail("\(error) (see \(topic))")
        return ExitStatus.usage.rawValue
    } catch {
        let status = ExitStatus(error)
        fail("\(error)")
        if status == .damage, let storePath {
            FileHandle.standardError.write(Data((Commands.salvageHint(storePath) + "\n").utf8))
        }
        return status.rawValue
    }
}

exit(run(Array(CommandLine.arguments.dropFirst())))
