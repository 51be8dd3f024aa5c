import NoteKitCommandLine
import NoteKitMirror

extension Command {
    /// Every command of `notekit`, in the order `notekit help` lists them. `help` and `--version`, which are about
    /// notekit itself rather than a store, follow them in the usage (``Command/usage``).
    static let all: [Command] = [
        Command(name: "demo", help: """
            usage: notekit demo [PATH]
            Creates a notes store at PATH (default ./NoteKitDemo.notekit) with nested folders, filed and unfiled notes,
            a drawing, revisions and an attachment (its file in PATH.attachments), or reopens it, and prints the folder
            tree with note counts. Running it again adds nothing.
            """,
            actions: .single(Action(
                synopsis: "[PATH]",
                summary: "create or reopen a notes store and print its folder tree (default ./NoteKitDemo.notekit)",
                run: { try Demo.run(path: $0.path(default: "./NoteKitDemo.notekit")) }))),

        Command(name: "stats", help: """
            usage: notekit stats PATH [--json]
            Prints the store's format version, current schema version and hash, live records per entity, segments,
            bytes, external blobs and the range of transactions in its log. --json prints one JSON object with
            formatVersion, schemaVersion, schemaHash, entities, segments, bytes, segmentBytes, blobs, blobBytes,
            firstTransaction and lastTransaction. Writes nothing.
            """,
            actions: .single(Action(
                synopsis: "PATH [--json]",
                summary: "format version, schema, records per entity, segments, bytes, blobs, history range",
                flags: ["json"],
                run: { try StoreCommands.stats(path: $0.path(), json: $0.json) }))),

        Command(name: "verify", help: """
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
            actions: .single(Action(
                synopsis: "PATH [--json]",
                summary: "read everything, write nothing; exit 1 when anything is wrong",
                flags: ["json"],
                run: { try StoreCommands.verify(path: $0.path(), json: $0.json) }))),

        Command(name: "dump", help: """
            usage: notekit dump PATH [--entity NAME] [--sorted] [--json]
            Prints every live record (of entity NAME only, when given) as one JSON object per line: {"entity", "id",
            "attributes", "relationships"}, dates as ISO 8601 text in UTC to the millisecond. It prints JSON lines
            with or without --json. --sorted prints each entity's records, and each to-many relationship's targets, by
            identifier rather than in insertion order, so that two stores with the same objects (a mirror's devices)
            print the same lines. An entity the store does not have is a usage error (exit 2). Writes nothing.
            """,
            actions: .single(Action(
                synopsis: "PATH [--entity NAME] [--sorted]",
                summary: "every live record as one JSON object per line (--json accepted)",
                // dump prints JSON lines either way: --json is accepted so that every data command takes it.
                flags: ["json", "sorted"], options: ["entity"],
                run: {
                    try StoreCommands.dump(path: $0.path(), entity: $0.options["entity"],
                                           sorted: $0.flags.contains("sorted"))
                }))),

        Command(name: "history", help: """
            usage: notekit history PATH [--after N] [--limit N] [--json]
            Prints each transaction the store's history keeps (after transaction N, at most --limit of them), oldest
            first: its number, time, author and how many objects it inserted, updated and deleted. --json prints one
            JSON object per line with tx, time, author, inserted [{entity, id}], updated [{entity, id, properties}] and
            deleted [{entity, id, tombstone}]. Says so on standard error when transactions after N were deleted from
            history. Writes nothing.
            """,
            actions: .single(Action(
                synopsis: "PATH [--after N] [--limit N] [--json]",
                summary: "the transactions the store's history keeps, oldest first",
                flags: ["json"], options: ["after", "limit"],
                run: {
                    try StoreCommands.history(path: $0.path(), after: try $0.wholeNumber("after").map(UInt64.init),
                                              limit: try $0.wholeNumber("limit"), json: $0.json)
                }))),

        Command(name: "schema", help: """
            usage: notekit schema PATH [--json]
            Prints every schema the store was written with, oldest first: entities, attributes, relationships,
            constraints and indexes. --json prints {"current": VERSION, "schemas": [...]}, each schema in the form
            the store records it. Writes nothing.
            """,
            actions: .single(Action(
                synopsis: "PATH [--json]",
                summary: "the schemas the store was written with, version by version",
                flags: ["json"],
                run: { try StoreCommands.schema(path: $0.path(), json: $0.json) }))),

        Command(name: "compact", help: """
            usage: notekit compact PATH [--json]
            Rewrites the store as one segment holding its current state and deletes what no longer counts. Prints the
            bytes before and after; --json prints {"bytesBefore", "bytesAfter", "segmentsRemoved", "blobsRemoved",
            "retiredBlobsDeleted"}. Needs the store's write lock: exits 4 when another open keeps it past 5 seconds.
            When standard error is a terminal and it takes over a second, a line there counts the seconds.
            """,
            actions: .single(Action(
                synopsis: "PATH [--json]",
                summary: "rewrite the store as one segment; prints bytes before and after",
                flags: ["json"],
                run: { try StoreCommands.compact(path: $0.path(), json: $0.json) }))),

        Command(name: "backup", help: """
            usage: notekit backup PATH --to NEWPATH [--json]
            Writes a copy of the store's last commit as a new store at NEWPATH: every object, the schema history, the
            history kept and every blob an object names, in one segment with its checkpoint. It takes no lock: apps and
            tools keep saving, rotating and compacting the store meanwhile. The copy is verified (as notekit verify
            does) before it is renamed into place, so NEWPATH never holds part of one; NEWPATH must not exist (exit 2).
            A plain copy of a live store's directory (cp -a) is no backup: it can mix moments, or miss blobs its
            segments name. --json prints {"path", "lastTransaction", "objects", "historyTransactions", "blobs",
            "promisedBlobs", "bytes"}.
            """,
            actions: .single(Action(
                synopsis: "PATH --to NEWPATH [--json]",
                summary: "a verified copy of the store's last commit, taken while others write",
                flags: ["json"], options: ["to"],
                run: { arguments in
                    let destination = try arguments.destination(of: "backup")
                    return try StoreCommands.backup(path: arguments.path(), to: destination, json: arguments.json)
                }))),

        Command(name: "salvage", help: """
            usage: notekit salvage PATH --to NEWPATH [--best-effort | --consistent-prefix] [--json]
            Copies every intact transaction of a damaged store into a new store at NEWPATH and reports what it left
            out. PATH is only read. Exits 1 when something was left out. --best-effort (the default) keeps every
            later transaction whose objects survive the damage; --consistent-prefix keeps only the transactions
            before the first one lost, a state the store was in. --json prints {"mode", "complete",
            "transactionsKept", "objectsKept", "segmentsUsed", "skippedBytes", "skippedRecords"}, each skipped part
            as {"file", "offset", "length", "reason"} and, for a transaction left out, its "transaction".
            """,
            actions: .single(Action(
                synopsis: "PATH --to NEWPATH [--best-effort | --consistent-prefix] [--json]",
                summary: "copy every intact transaction into a new store; never touches PATH",
                flags: ["json", "best-effort", "consistent-prefix"], options: ["to"],
                // salvage is the command the hint would name.
                suggestsSalvage: false,
                run: { arguments in
                    let destination = try arguments.destination(of: "salvage")
                    let consistentPrefix = arguments.flags.contains("consistent-prefix")
                    if consistentPrefix && arguments.flags.contains("best-effort") {
                        throw UsageError.conflictingFlags(command: "salvage", first: "--best-effort",
                                                          second: "--consistent-prefix")
                    }
                    return try StoreCommands.salvage(path: arguments.path(), to: destination,
                                                     mode: consistentPrefix ? .consistentPrefix : .bestEffort,
                                                     json: arguments.json)
                }))),

        Command(name: "mirror", help: """
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
            actions: .subcommands([
                Subcommand(name: "init", action: .mirror(
                    synopsis: "PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]",
                    summary: "create or update a PostgreSQL server's tables for the store's schema",
                    run: MirrorCommands.initialize(path:configuration:json:))),
                Subcommand(name: "status", action: Action(
                    synopsis: "PATH [--zone ZONE --server CONNECTION] [--json]",
                    summary: "the store's mirroring: device, pending transactions, cursors, last error",
                    flags: ["json"], options: Action.mirrorOptions,
                    run: { arguments in
                        let configuration = arguments.options["zone"] == nil
                            ? nil : try MirrorCommands.configuration(arguments)
                        return try MirrorCommands.status(path: arguments.path(), configuration: configuration,
                                                         json: arguments.json)
                    })),
                Subcommand(name: "sync", action: .mirror(
                    synopsis: "PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]",
                    summary: "send the store's new transactions, then apply the server's changes",
                    run: MirrorCommands.sync(path:configuration:json:))),
                Subcommand(name: "fetch-blobs", action: .mirror(
                    synopsis: "PATH --zone ZONE [--server CONNECTION] [--namespace NS] [--json]",
                    summary: "fetch the blobs an import left on the server, for readers that do not mirror",
                    run: MirrorCommands.fetchBlobs(path:configuration:json:))),
            ])),
    ]
}

extension Command.Action {
    /// The options every `mirror` subcommand takes.
    static let mirrorOptions: Set<String> = ["zone", "server", "namespace"]

    /// A `mirror` subcommand that needs `--zone`: `run` gets the store path, the configuration of the options and
    /// whether `--json` was given.
    static func mirror(synopsis: String, summary: String,
                       run: @escaping @Sendable (String, MirrorConfiguration, Bool) throws -> Int32) -> Self {
        Self(synopsis: synopsis, summary: summary, flags: ["json"], options: mirrorOptions, run: { arguments in
            let path = try arguments.path()
            return try run(path, try MirrorCommands.configuration(arguments), arguments.json)
        })
    }
}
