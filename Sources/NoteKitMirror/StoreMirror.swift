import Foundation
import NoteKit
import NoteKitFileStore
import Synchronization

/// Mirrors one store to a PostgreSQL server: sends every local transaction to the server and applies the other
/// devices' changes, merged field by field (docs/MIRROR.md). The process that creates one mirrors; other processes
/// that open the same store without one (extensions, tools) do not, and what they commit is sent by this one,
/// since the store's history is the queue.
///
/// ```swift
/// let mirror = try StoreMirror(container: container,
///                              configuration: MirrorConfiguration(connectionString: "host=db dbname=notes",
///                                                                 zone: "iCloud.com.example.fieldnotes"))
/// let report = try mirror.sync()
/// ```
///
/// Call ``sync()`` from any thread; two syncs of one store (in one process or several) take turns.
public final class StoreMirror: Sendable {
    /// The author of the transactions an import commits, as a context's `author` would be.
    public static let author = "mirror"

    /// The server, zone and namespace.
    public let configuration: MirrorConfiguration
    let container: ModelContainer
    private let plan: MirrorPlan
    /// Where the store fetches the blobs an import brought without their bytes.
    private let blobFetcher: MirrorBlobFetcher
    /// The columns this version's statements use, checked on the server at each sync.
    private let columns: [ServerTables.Column]
    private let engine: Mutex<MirrorStateFile>
    private let loop = Mutex<SyncLoop?>(nil)
    /// Per-entity conflict resolvers (``resolveConflicts(of:with:)``), by entity name.
    let resolvers = Mutex<[String: MirrorConflictResolver]>([:])
    /// For tests and the stress tool: runs between a sync's export (committed on the server) and its import (where a
    /// save makes a local edit not yet sent, and where a kill interrupts a pull).
    package let afterExport = Mutex<(@Sendable () -> Void)?>(nil)

    /// A mirror of `container`'s store to the server `configuration` names. Nothing is sent or read until
    /// ``sync()``; the server's tables must have been made by `ModelContainer.initializeMirrorSchema(_:)`.
    ///
    /// A file store's mirroring state (device identity, clock, how far it has exported and imported: never the
    /// connection string) is kept in `MIRROR` in its directory; an in-memory store's lives as long as this object.
    ///
    /// - Throws: ``MirrorError/invalidName(kind:name:reason:)`` for a zone, namespace, entity or property the
    ///   server cannot name.
    public init(container: ModelContainer, configuration: MirrorConfiguration) throws(MirrorError) {
        try ServerTables.validateZone(configuration.zone)
        columns = try ServerTables(schema: container.schema, namespace: configuration.namespace).columns
        plan = try MirrorPlan(schema: container.schema, namespace: configuration.namespace)
        self.container = container
        self.configuration = configuration
        blobFetcher = MirrorBlobFetcher(configuration: configuration, namespace: plan.namespace)
        let file = MirrorStateFile(directory: (container.store as? FileStore)?.configuration.url)
        // From now on the history, the export queue, keeps everything this device has not sent.
        do {
            try file.withLock { () throws in
                let state = try SyncSession.loadState(file, configuration)
                try SyncSession.hold(container, after: state.exportedThrough)
            }
        } catch let error as MirrorError {
            throw error
        } catch {
            throw .storeFailed(operation: "hold its history", reason: "\(error)")
        }
        engine = Mutex(file)
        // A file store fetches through it what its rows name and its disk lacks, for as long as it is open.
        (container.store as? FileStore)?.attachRemoteBlobSource(blobFetcher)
    }

    /// Sends the local transactions the server does not have yet, then applies the other devices' changes, in
    /// batches, each as one local transaction by ``author``.
    ///
    /// Safe to retry after any failure: a transaction the server already has is never recorded twice, and an
    /// import interrupted before its local save is read again.
    ///
    /// - Throws: ``MirrorError/schemaNotInitialized(zone:namespace:)`` (also for tables made by an earlier version
    ///   that lack a column this one writes: `initializeMirrorSchema` again adds it),
    ///   ``MirrorError/schemaBehindZone(zone:schemaVersion:zoneVersion:)`` (before anything is written),
    ///   connection and server errors, ``MirrorError/storeFailed(operation:reason:)`` when the store refuses, and
    ///   the state file's errors.
    /// - Complexity: one server round trip an exported object; a few an imported batch of up to 500 changes.
    @discardableResult
    public func sync() throws(MirrorError) -> MirrorSyncReport {
        try engine.withLock { file throws(MirrorError) -> MirrorSyncReport in
            let result: Result<MirrorSyncReport, MirrorError>
            do {
                result = .success(try file.withLock { () throws -> MirrorSyncReport in
                    var session = try SyncSession(container: container, configuration: configuration, plan: plan,
                                                  file: file, blobFetcher: blobFetcher)
                    session.resolvers = resolvers.withLock { $0 }
                    session.expectedColumns = columns
                    session.afterExport = afterExport.withLock { $0 }
                    return try session.run()
                })
            } catch let error as MirrorError {
                result = .failure(error)
            } catch {
                result = .failure(.storeFailed(operation: "sync", reason: "\(error)"))
            }
            if case .failure(let error) = result {
                // For `status` and `notekit mirror status`; a state that cannot be written changes nothing here.
                try? file.withLock { () throws in
                    guard var state = try file.load() else { return }
                    state.lastSyncAt = Date()
                    state.lastError = error.description
                    try file.save(state)
                }
            }
            return try result.get()
        }
    }

    /// Where mirroring stands: the device, what is waiting to be sent, the server cursor, the last sync and its
    /// error. Reads the device's state and the store's history; contacts no server.
    ///
    /// - Throws: the state file's errors, or ``MirrorError/storeFailed(operation:reason:)`` when the history cannot
    ///   be read.
    /// - Complexity: O(transactions kept in history).
    public func status() throws(MirrorError) -> MirrorStatus {
        let state = try engine.withLock { file throws(MirrorError) in try SyncSession.loadState(file, configuration) }
        let log: HistoryLog
        do { log = try container.store.history() } catch {
            throw .storeFailed(operation: "read its history", reason: "\(error)")
        }
        return MirrorStatus(state: state, history: log,
                            isSyncingInBackground: loop.withLock { $0 != nil })
    }

    // MARK: Background

    /// Starts syncing in the background: now, then every `interval`, and within a quarter second of any transaction
    /// committed to the store since the last sync (a save here, or another process's). A failed sync
    /// (the server down, the network gone) is recorded in ``status()`` and tried again after 1 second, then 2, 4, …
    /// up to `interval`, so mirroring resumes by itself soon after the server comes back. Starting again replaces the
    /// interval.
    ///
    /// The syncs run on a thread of their own; ``sync()`` may still be called at any time (the two take turns).
    public func startSyncing(every interval: Duration = .seconds(30)) {
        stopSyncing()
        let background = SyncLoop(interval: interval)
        loop.withLock { $0 = background }
        background.start(mirror: self)
    }

    /// Stops background syncing, waiting for a sync in progress to end. Does nothing when it is not running.
    public func stopSyncing() {
        let background = loop.withLock { current -> SyncLoop? in
            defer { current = nil }
            return current
        }
        background?.stop()
    }

    /// Asks the background loop to sync now rather than at its next turn; does nothing when it is not running.
    public func syncSoon() {
        loop.withLock { $0 }?.wake()
    }

    deinit { loop.withLock { $0 }?.stop() }

    /// The store's transaction number, after a file store has looked for other processes' commits.
    func currentTransactionNumber() -> UInt64 {
        if let store = container.store as? FileStore { _ = try? store.refresh() }
        return container.store.transactionNumber
    }
}

extension StoreMirror {
    /// The mirroring status of the file store at `url` as its mirroring process last left it, for a tool beside the
    /// app (`notekit mirror status`): nil when the store has never been mirrored. Opens the store read-only to count
    /// what is waiting; ``MirrorStatus/isSyncingInBackground`` is false (another process's loop is not visible).
    ///
    /// - Throws: the state file's errors, or ``MirrorError/storeFailed(operation:reason:)`` when the store cannot be
    ///   opened or its history read.
    public static func status(ofStoreAt url: URL) throws(MirrorError) -> MirrorStatus? {
        guard let state = try MirrorStateFile(directory: url).load() else { return nil }
        do {
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            return MirrorStatus(state: state, history: try store.history(),
                                isSyncingInBackground: false)
        } catch {
            throw .storeFailed(operation: "open \(url.path) to read its history", reason: "\(error)")
        }
    }

    /// The sequence number of the newest change the server holds for `configuration`'s zone (0 when none): with
    /// ``MirrorStatus/serverCursor``, how far a device is behind.
    ///
    /// - Throws: connection and server errors; ``MirrorError/schemaNotInitialized(zone:namespace:)`` when the
    ///   server has no NoteKit tables in the namespace.
    public static func newestServerChange(configuration: MirrorConfiguration) throws(MirrorError) -> Int64 {
        try ServerTables.validateZone(configuration.zone)
        let namespace = try ServerTables.identifier(configuration.namespace, kind: "namespace", prefix: "").quoted
        let connection = try PostgresConnection(configuration.connectionString)
        do {
            let rows = try connection.execute(
                "SELECT coalesce(max(seq), 0) FROM \(namespace).\"changes\" WHERE zone = $1",
                [configuration.zone], purpose: "read the newest change").values
            return rows.first?.first.flatMap { $0 }.flatMap(Int64.init) ?? 0
        } catch MirrorError.serverError(_, _, "42P01", _) {
            throw .schemaNotInitialized(zone: configuration.zone, namespace: configuration.namespace)
        }
    }
}
