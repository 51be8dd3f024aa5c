import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitCommandLine
import NoteKitMirror

/// `notekit mirror init|status|sync|fetch-blobs`: a store's mirroring, for any NoteKit store (by the schema stored
/// in it).
enum MirrorCommands {
    /// The mirror configuration of `--server` (a libpq connection string or URI; empty: libpq's `PG…` environment
    /// variables and defaults), `--zone` and `--namespace`.
    static func configuration(_ arguments: Arguments) throws(UsageError) -> MirrorConfiguration {
        guard let zone = arguments.options["zone"] else {
            throw .missingOption(command: "mirror", option: "--zone", placeholder: "ZONE")
        }
        return MirrorConfiguration(connectionString: arguments.options["server"] ?? "", zone: zone,
                                   namespace: arguments.options["namespace"] ?? "notekit")
    }

    /// Creates or updates the server's tables for the store's current schema (`initializeMirrorSchema`).
    static func initialize(path: String, configuration: MirrorConfiguration, json: Bool) throws -> Int32 {
        let url = try StoreCommands.storeURL(path)
        guard let schema = try StoreInspector.schemaHistory(at: url).last else {
            throw FileStoreError.storeNotFound(path: url.path)
        }
        let changes = try configuration.initializeSchema(for: schema)
        if json {
            printJSON(["tablesCreated": changes.tablesCreated, "columnsAdded": changes.columnsAdded,
                       "schemaRecorded": changes.schemaRecorded, "schemaVersion": schema.version.description,
                       "zone": configuration.zone])
        } else {
            print("\(configuration.description): \(changes)")
        }
        return 0
    }

    /// Where the store's mirroring stands, from its `MIRROR` state and its history; with `configuration`, the
    /// server's newest change too.
    static func status(path: String, configuration: MirrorConfiguration?, json: Bool) throws -> Int32 {
        let url = try StoreCommands.storeURL(path)
        guard let status = try StoreMirror.status(ofStoreAt: url) else {
            if json { printJSON(["mirrored": false]) } else { print("\(path) has never been mirrored") }
            return 0
        }
        let latest = try configuration.map { try StoreMirror.newestServerChange(configuration: $0) }
        if json {
            var object: [String: Any] = [
                "mirrored": true, "device": status.device.uuidString.lowercased(), "zone": status.zone,
                "pendingLocalTransactions": status.pendingLocalTransactions,
                "serverCursor": status.serverCursor,
            ]
            object["exportedThrough"] = status.exportedThrough.map { $0.transactionNumber as Any } ?? NSNull()
            object["lastSync"] = status.lastSync.map { ISO8601DateFormatter().string(from: $0) as Any } ?? NSNull()
            object["lastError"] = status.lastError.map { $0 as Any } ?? NSNull()
            if let latest { object["serverNewestChange"] = latest }
            printJSON(object)
        } else {
            print(status.description)
            if let latest { print("server's newest change: \(latest)") }
        }
        return 0
    }

    /// Syncs the store once, as its app's `StoreMirror.sync()` does, with the schema the store records: its entities
    /// become dynamic models, so the import applies the same delete rules, inverses and unique upserts as the app's
    /// types would. Per-entity resolvers are the app's code: this sync merges every field last-writer-wins.
    static func sync(path: String, configuration: MirrorConfiguration, json: Bool) throws -> Int32 {
        let (container, mirror) = try open(path: path, configuration: configuration)
        defer { try? container.close() }
        let report = try mirror.sync()
        if json {
            printJSON([
                "exportedTransactions": report.exportedTransactions, "exportedBaseline": report.exportedBaseline,
                "importedChanges": report.importedChanges,
                "importTransactions": report.importTransactions.map { $0.transactionNumber },
                "skippedRows": report.skippedRows.map {
                    ["zone": $0.zone, "entity": $0.entity, "id": $0.id, "reason": $0.reason]
                },
                "deniedDeletions": report.deniedDeletions.map { $0.description },
                "zone": configuration.zone,
            ])
        } else {
            print("\(configuration.description): \(report)")
            for row in report.skippedRows { print("skipped \(row)") }
        }
        return report.skippedRows.isEmpty ? 0 : ExitStatus.damage.rawValue
    }

    /// Fetches every blob the store names whose bytes an import left on the server (`StoreMirror.fetchRemoteBlobs()`),
    /// so that processes that do not mirror the store can read them.
    static func fetchBlobs(path: String, configuration: MirrorConfiguration, json: Bool) throws -> Int32 {
        // Opening a mirror on a store never mirrored would make it a device of the zone as a side effect: that is
        // sync's to do. (Only a salvaged copy of a mirrored store holds promises without a mirroring state.)
        guard try StoreMirror.status(ofStoreAt: try StoreCommands.storeURL(path)) != nil else {
            if json { printJSON(["blobsFetched": 0, "mirrored": false, "zone": configuration.zone]) } else {
                print("\(path) is not mirrored: nothing fetched (notekit mirror sync makes it a device of the zone)")
            }
            return 0
        }
        let (container, mirror) = try open(path: path, configuration: configuration)
        defer { try? container.close() }
        let fetched = try mirror.fetchRemoteBlobs()
        if json {
            printJSON(["blobsFetched": fetched, "zone": configuration.zone])
        } else {
            print("\(configuration.description): fetched \(fetched) blob(s)")
        }
        return 0
    }

    /// The store at `path`, opened by the schema it records (dynamic models: no app types needed), and its mirror.
    private static func open(path: String, configuration: MirrorConfiguration) throws
        -> (container: ModelContainer, mirror: StoreMirror) {
        let url = try StoreCommands.storeURL(path)
        guard let schema = try StoreInspector.schemaHistory(at: url).last else {
            throw FileStoreError.storeNotFound(path: url.path)
        }
        let container = try ModelContainer(for: try schema.withDynamicModels(),
                                           configurations: [FileStoreConfiguration(url: url)])
        do {
            return (container, try StoreMirror(container: container, configuration: configuration))
        } catch {
            try? container.close()
            throw error
        }
    }
}
