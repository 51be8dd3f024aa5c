import Foundation
import NoteKit
import NoteKitFileStore
import Synchronization

/// A server row a sync could not apply, and why: reported and skipped, never applied in part.
public struct MirrorSkippedRow: Sendable, Hashable, CustomStringConvertible {
    /// The zone the row belongs to.
    public var zone: String
    /// The entity of the row's table (`e_<entity>`).
    public var entity: String
    /// The row's key: the object's primary key, as the server holds it.
    public var id: String
    /// What is wrong with it.
    public var reason: String

    /// `zone/Entity/id: reason`.
    public var description: String { "\(zone)/\(entity)/\(id): \(reason)" }
}

/// What one ``StoreMirror/sync()`` did.
public struct MirrorSyncReport: Sendable, Hashable, CustomStringConvertible {
    /// Local transactions sent to the server (the mirror's own imports and migrations are never sent).
    public var exportedTransactions = 0
    /// Whether the store's history no longer reached back to the last export (trimmed, or a server that lost the
    /// zone), so every object was sent as it is now.
    public var exportedBaseline = false
    /// Other devices' changes taken from the server.
    public var importedChanges = 0
    /// The local transactions the imports committed, each with author ``StoreMirror/author``.
    public var importTransactions: [DefaultHistoryToken] = []
    /// Server rows that could not be applied (they stay on the server, and are read again by later syncs).
    public var skippedRows: [MirrorSkippedRow] = []
    /// Objects another device deleted that a `.deny` delete rule kept here, because they still have targets here.
    public var deniedDeletions: [PersistentIdentifier] = []

    /// One line: what was sent and received.
    public var description: String {
        var text = "exported \(exportedTransactions) transaction(s)\(exportedBaseline ? " and a baseline" : ""), "
            + "imported \(importedChanges) change(s) in \(importTransactions.count) transaction(s)"
        if !skippedRows.isEmpty { text += ", skipped \(skippedRows.count) row(s)" }
        if !deniedDeletions.isEmpty { text += ", kept \(deniedDeletions.count) object(s) a deny rule protects" }
        return text
    }
}

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

    /// The store's generation, after a file store has looked for other processes' commits.
    func currentGeneration() -> UInt64 {
        if let store = container.store as? FileStore { _ = try? store.refresh() }
        return container.store.generation
    }
}

/// Where a store's mirroring stands (``StoreMirror/status()``, `notekit mirror status`).
public struct MirrorStatus: Sendable, Hashable, CustomStringConvertible {
    /// The device's identity on the server.
    public var device: UUID
    /// The zone the store mirrors to.
    public var zone: String
    /// Local transactions committed and not sent yet (the mirror's own imports and migrations are never sent).
    public var pendingLocalTransactions: Int
    /// The last local transaction the server has, nil before the first export.
    public var exportedThrough: DefaultHistoryToken?
    /// The server's change sequence number this device has imported through (0 before the first import).
    public var serverCursor: Int64
    /// When the last sync ended, successfully or not; nil before the first.
    public var lastSync: Date?
    /// Why the last sync failed; nil when it succeeded.
    public var lastError: String?
    /// Whether this process runs background syncing for the store (``StoreMirror/startSyncing(every:)``).
    public var isSyncingInBackground: Bool

    init(state: MirrorState, history: HistoryLog, isSyncingInBackground: Bool) {
        device = state.device
        zone = state.zone
        pendingLocalTransactions = history.records.lazy.filter {
            $0.number > state.exportedThrough && !SyncSession.localOnlyAuthors.contains($0.author ?? "")
        }.count
        exportedThrough = state.exportedThrough == 0 ? nil : DefaultHistoryToken(transactionNumber: state.exportedThrough)
        serverCursor = state.importedSequence
        lastSync = state.lastSyncAt
        lastError = state.lastError
        self.isSyncingInBackground = isSyncingInBackground
    }

    /// A few lines: the device, what is pending, the cursors and the last sync.
    public var description: String {
        var lines = ["device \(device) in zone \(zone)",
                     "pending local transactions: \(pendingLocalTransactions)",
                     "exported through: \(exportedThrough.map(\.description) ?? "nothing yet")",
                     "server cursor: \(serverCursor)"]
        lines.append("last sync: " + (lastSync.map { "\($0)" } ?? "never") + (lastError.map { " (failed: \($0))" } ?? ""))
        if isSyncingInBackground { lines.append("syncing in the background") }
        return lines.joined(separator: "\n")
    }
}

/// The background loop of ``StoreMirror/startSyncing(every:)``: a thread that syncs when woken, when its interval has
/// passed, or when the store has a transaction it has not synced (checked every quarter second: a generation read,
/// and for a file store a look at whether another process appended), until stopped. It uses no Swift concurrency
/// task, so that a cooperative pool kept busy by the app cannot hold it up.
private final class SyncLoop: @unchecked Sendable {
    private let condition = NSCondition()
    let interval: Double
    // Guarded by `condition`.
    private var stopped = false
    private var woken = false
    private var finished = false

    static let threadName = "NoteKitMirror sync"

    init(interval: Duration) {
        let parts = interval.components
        self.interval = max(0.01, Double(parts.seconds) + Double(parts.attoseconds) / 1e18)
    }

    func start(mirror: StoreMirror) {
        // Weak: the loop must not keep the mirror alive, whose deinit stops it.
        let thread = Thread { [weak mirror, self] in
            // After a failure (the server down, the network gone) the next attempt comes sooner than the interval:
            // 1 second, doubling up to the interval, so that mirroring resumes soon after the server is back.
            var wait = 0.0, retry = 1.0
            var synced: UInt64?
            while let mirror, self.waitForTurn(seconds: wait, mirror: mirror, synced: synced) {
                // Read before the sync, not after: a commit that lands while the sync runs, or between its end and
                // the next look, must bring the next sync forward. (The sync's own import moves the generation too,
                // which costs one more sync that finds nothing.)
                let before = mirror.currentGeneration()
                if (try? mirror.sync()) != nil {
                    wait = self.interval
                    retry = 1
                    synced = before
                } else {
                    wait = min(self.interval, retry)
                    retry = min(retry * 2, self.interval)
                    // What is committed from now on brings the next sync forward, but not what the failed sync left
                    // pending: that waits for the retry.
                    synced = mirror.currentGeneration()
                }
            }
            self.condition.lock()
            self.finished = true
            self.condition.broadcast()
            self.condition.unlock()
        }
        thread.name = Self.threadName
        thread.start()
    }

    /// Waits until woken, `seconds` have passed or the store moved past `synced`; false once stopped.
    private func waitForTurn(seconds: Double, mirror: StoreMirror, synced: UInt64?) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            condition.lock()
            if !stopped && !woken { _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.25))) }
            let (isStopped, isWoken) = (stopped, woken)
            woken = false
            condition.unlock()
            if isStopped { return false }
            if isWoken || Date() >= deadline { return true }
            if let synced, mirror.currentGeneration() != synced { return true }
        }
    }

    func wake() {
        condition.lock()
        woken = true
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while !finished && Thread.current.name != Self.threadName { condition.wait() }
        condition.unlock()
    }
}

/// One sync: the state read at its start, the connection, and what it did.
struct SyncSession {
    let container: ModelContainer
    let configuration: MirrorConfiguration
    let plan: MirrorPlan
    let file: MirrorStateFile
    let connection: PostgresConnection
    var state: MirrorState
    var report = MirrorSyncReport()
    /// Whether everything must be sent as it is now: the server has never seen this device's earlier exports.
    var needsBaseline = false
    /// Merges queued for the server transaction under way.
    var merges: [MergeShape: MergeGroup] = [:]
    /// Link writes queued for the server transaction under way.
    var linkWrites: [LinkGroupKey: LinkGroup] = [:]
    /// The objects the server transaction under way merged, by entity: checked for unique-key collisions.
    var touched: [String: Set<String>] = [:]
    /// The columns of NoteKit's tables this version uses (``ServerTables/columns``).
    var expectedColumns: [ServerTables.Column] = []
    /// Conflict resolvers by entity name, and the test hook run after the export.
    var resolvers: [String: MirrorConflictResolver] = [:]
    var afterExport: (@Sendable () -> Void)?
    /// What the blobs an import records are fetched by, when first read.
    let blobFetcher: MirrorBlobFetcher
    /// Attributes this push resolved, by entity, attribute and object key: named by a resolution change row.
    var resolvedFields: [String: [String: Set<String>]] = [:]
    /// The value and clock columns of entity tables, as the server has them (newer schemas' included), by entity.
    var serverColumns: [String: [(value: String, clock: String)]] = [:]
    let coding = MirrorValueCoding()

    /// Transactions of these authors are never sent: imports (every device makes its own) and migrations.
    static let localOnlyAuthors: Set<String> = [StoreMirror.author, HistoryRecord.migrationAuthor]
    static let importBatch = 500

    init(container: ModelContainer, configuration: MirrorConfiguration, plan: MirrorPlan,
         file: MirrorStateFile, blobFetcher: MirrorBlobFetcher) throws(MirrorError) {
        self.container = container
        self.configuration = configuration
        self.plan = plan
        self.file = file
        self.blobFetcher = blobFetcher
        state = try Self.loadState(file, configuration)
        connection = try PostgresConnection(configuration.connectionString)
    }

    /// The device's state, made (and saved) on the store's first mirroring.
    ///
    /// - Throws: ``MirrorError/stateOfAnotherZone(zone:namespace:)`` for the state of another zone, and the state
    ///   file's errors.
    static func loadState(_ file: MirrorStateFile, _ configuration: MirrorConfiguration) throws(MirrorError)
        -> MirrorState {
        let loaded = try file.load()
        if let loaded, loaded.zone != configuration.zone || loaded.namespace != configuration.namespace {
            throw .stateOfAnotherZone(zone: loaded.zone, namespace: loaded.namespace)
        }
        if let loaded { return loaded }
        let state = MirrorState(zone: configuration.zone, namespace: configuration.namespace)
        try file.save(state)
        return state
    }

    /// Holds the store's history after `exported`: trimming (retention, `deleteHistory`) keeps what is not sent.
    static func hold(_ container: ModelContainer, after exported: UInt64) throws(MirrorError) {
        guard let store = container.store as? any HistoryHolding else { return }
        do { try store.holdHistory(after: exported) } catch {
            throw .storeFailed(operation: "hold its history", reason: "\(error)")
        }
    }

    var ns: String { plan.namespace }
    var zone: String { configuration.zone }

    mutating func run() throws -> MirrorSyncReport {
        try register()
        try export()
        afterExport?()
        try importChanges()
        state.lastSyncAt = Date()
        state.lastError = nil
        try file.save(state)
        return report
    }

    // MARK: Registration

    /// Checks the zone's schemas and records the device; a server that has no record of a device this state says
    /// has exported before (a new or reset server) gets everything again.
    private mutating func register() throws(MirrorError) {
        let schema = container.schema
        let schemas: PostgresConnection.Rows
        do {
            schemas = try connection.execute("""
                SELECT schema_hash, major, minor, patch FROM \(ns)."zone_schemas" WHERE zone = $1
                """, [zone], purpose: "read the zone's schemas")
        } catch MirrorError.serverError(_, _, "42P01", _) {
            throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace)
        }
        var newest: Schema.Version?
        var known = false
        for row in schemas.values {
            if row[0] == schema.contentHash { known = true }
            if let major = row[1].flatMap(Int.init), let minor = row[2].flatMap(Int.init),
               let patch = row[3].flatMap(Int.init) {
                let version = Schema.Version(major, minor, patch)
                if newest.map({ version > $0 }) ?? true { newest = version }
            }
        }
        // Behind means an older major version; an older minor one writes what it knows and leaves the rest.
        if let newest, schema.version.major < newest.major {
            throw .schemaBehindZone(zone: zone, schemaVersion: schema.version.description,
                                    zoneVersion: newest.description)
        }
        guard known else { throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace) }
        // Tables made by an earlier version of NoteKit lack what this one writes (`merged_into`, the links'
        // `written_seq`): refused before anything is written, until initializeMirrorSchema adds them.
        let present = Set(try connection.execute("""
            SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = $1
            """, [configuration.namespace], purpose: "check the mirror's tables").values.compactMap { $0[0] })
        if expectedColumns.contains(where: { !present.contains("\($0.table).\($0.name)") }) {
            throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace)
        }
        let device = try connection.execute("""
            INSERT INTO \(ns)."devices" AS d (zone, device, schema_hash, seen_at) VALUES ($1, $2::uuid, $3, now())
            ON CONFLICT (zone, device) DO UPDATE SET schema_hash = EXCLUDED.schema_hash, seen_at = now()
            RETURNING exported_token, (xmax = 0)
            """, [zone, state.device.uuidString, schema.contentHash], purpose: "record the device")
        let isNew = device.values.first?[1] == "t"
        let serverExported = device.values.first?[0].flatMap { $0 }.flatMap(UInt64.init)
        if isNew && (state.exportedThrough > 0 || state.importedSequence > 0) {
            // The server never saw this device: it lost the zone or is another server. Start over with it.
            state.exportedThrough = 0
            state.importedSequence = 0
            needsBaseline = true
        } else if let serverExported, serverExported > state.exportedThrough {
            // The server committed an export whose local record was lost to a crash.
            state.exportedThrough = serverExported
            state.pendingClocks.removeAll { $0.transaction <= serverExported }
        }
    }

    // MARK: Export

    /// The store's generation and its history through at least that generation: read in this order (after a file
    /// store has picked up other processes' commits), so that a save landing in between is never counted in the
    /// generation while missing from the history (an import computed against such a history could overwrite it).
    private func generationAndHistory() throws -> (UInt64, HistoryLog) {
        if let fileStore = container.store as? FileStore { _ = try fileStore.refresh() }
        let generation = container.store.generation
        return (generation, try container.store.history())
    }

    /// Gives each local transaction not clocked yet its clock: the next tick at its commit time.
    private mutating func assignClocks(_ log: HistoryLog, through last: UInt64) throws(MirrorError) {
        var changed = false
        for record in log.records where record.number > state.clockedThrough && record.number <= last {
            if !Self.localOnlyAuthors.contains(record.author ?? "") {
                state.pendingClocks.append(.init(transaction: record.number,
                                                 clock: state.clock.tick(at: record.timestamp)))
            }
            state.clockedThrough = record.number
            changed = true
        }
        if last > state.clockedThrough {
            // Numbers the history does not hold (deleted from it) are covered by a baseline export.
            state.clockedThrough = last
            changed = true
        }
        if changed { try file.save(state) }
    }

    private mutating func export() throws {
        let (generation, log) = try generationAndHistory()
        let exported = state.exportedThrough
        guard generation > exported || needsBaseline else { return }
        try assignClocks(log, through: generation)
        let records = log.records.filter { $0.number > exported && $0.number <= generation }
        let complete = generation <= exported || records.map(\.number) == Array((exported + 1)...generation)
        if !complete || needsBaseline {
            try exportBaseline(through: generation)
            return
        }
        let clocks = Dictionary(state.pendingClocks.map { ($0.transaction, $0.clock) }, uniquingKeysWith: max)
        var batch: [(HistoryRecord, UInt64)] = []
        var objects = 0
        func flush(_ session: inout SyncSession, through last: UInt64) throws {
            try session.push(batch, through: last)
            batch = []
            objects = 0
        }
        for record in records {
            if let clock = clocks[record.number] {
                batch.append((record, clock))
                objects += record.changeCount
            }
            if objects >= 1000 { try flush(&self, through: record.number) }
        }
        if !batch.isEmpty || state.exportedThrough < generation { try flush(&self, through: generation) }
    }

    /// Sends `batch` (transactions and their clocks) in one server transaction, then records that everything
    /// through `last` is exported.
    private mutating func push(_ batch: [(HistoryRecord, UInt64)], through last: UInt64) throws {
        let store = container.store
        try connection.transaction(purpose: "send local changes") { () throws(MirrorError) in
            try lockZone()
            for (record, clock) in batch {
                let body = Self.body(of: record)
                let inserted = try connection.execute("""
                    INSERT INTO \(ns)."changes" (zone, device, token, author, body)
                    VALUES ($1, $2::uuid, $3::bigint, $4, $5::jsonb) ON CONFLICT DO NOTHING RETURNING seq
                    """, [zone, state.device.uuidString, String(record.number), record.author, body],
                    purpose: "record a change")
                // Already there: a push whose local record of success was lost. Its objects were merged then.
                guard let seq = inserted.values.first?.first.flatMap({ $0 }).flatMap(Int64.init) else { continue }
                let insertedIDs = record.inserted
                let snapshots = store.snapshots(for: insertedIDs + record.updated.map(\.id))
                for (id, snapshot) in zip(insertedIDs, snapshots.prefix(insertedIDs.count)) {
                    guard let snapshot, let entity = plan.entities[id.entityName] else { continue }
                    try merge(snapshot, entity: entity, attributes: entity.attributes, toOnes: entity.toOnes,
                              clock: clock, created: true)
                    try pushLinks(snapshot, links: entity.links, clock: clock, seq: seq, created: true)
                }
                for (update, snapshot) in zip(record.updated, snapshots.dropFirst(insertedIDs.count)) {
                    guard let snapshot, let entity = plan.entities[update.id.entityName] else { continue }
                    let names = Set(update.properties)
                    let attributes = entity.attributes.filter { names.contains($0.name) }
                    let toOnes = entity.toOnes.filter { names.contains($0.name) }
                    try pushLinks(snapshot, links: entity.links.filter { names.contains($0.name) }, clock: clock,
                                  seq: seq, created: false)
                    guard !attributes.isEmpty || !toOnes.isEmpty else { continue }
                    try merge(snapshot, entity: entity, attributes: attributes, toOnes: toOnes, clock: clock,
                              created: false)
                    if let resolver = resolvers[entity.name] {
                        try resolveAtPush(snapshot, entity: entity, attributes: attributes, clock: clock,
                                          resolver: resolver)
                    }
                }
                for deletion in record.deleted {
                    guard let entity = plan.entities[deletion.id.entityName] else { continue }
                    try queue(MergeShape(entity: entity, attributes: [], toOnes: [], kind: .deletion),
                              key: Self.key(deletion.id), values: [String(clock)])
                }
            }
            try flushMerges()
            try flushLinks()
            try resolveUniqueKeys()
            if !resolvedFields.isEmpty {
                try recordResolution(survivors: [:], losers: [], referrers: resolvedFields)
                resolvedFields = [:]
            }
            try connection.execute("""
                UPDATE \(ns)."devices" SET exported_token = $3::bigint, seen_at = now()
                WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the export")
        }
        report.exportedTransactions += batch.count
        state.exportedThrough = last
        state.pendingClocks.removeAll { $0.transaction <= last }
        try file.save(state)
        try Self.hold(container, after: last)
    }

    /// Sends every object as it is now, at one new clock: when the history no longer reaches the last export.
    private mutating func exportBaseline(through last: UInt64) throws {
        let clock = state.clock.tick(at: Date())
        try file.save(state)
        for entity in plan.entities.values.sorted(by: { $0.name < $1.name }) {
            let ids: [PersistentIdentifier]
            do {
                ids = try container.store.fetch(StoreFetchRequest(entity: entity.name, resultType: .identifiers))
                    .identifiers
            } catch {
                throw MirrorError.storeFailed(operation: "list \(entity.name) objects", reason: "\(error)")
            }
            for chunk in stride(from: 0, to: ids.count, by: 1000) {
                let part = Array(ids[chunk..<min(chunk + 1000, ids.count)])
                let snapshots = container.store.snapshots(for: part)
                try connection.transaction(purpose: "send the store's baseline") { () throws(MirrorError) in
                    try lockZone()
                    for snapshot in snapshots.compactMap({ $0 }) {
                        try merge(snapshot, entity: entity, attributes: entity.attributes, toOnes: entity.toOnes,
                                  clock: clock, created: true)
                        try pushLinks(snapshot, links: entity.links, clock: clock, seq: nil, created: true)
                    }
                    try flushMerges()
                    try flushLinks()
                    try resolveUniqueKeys()
                }
            }
        }
        // Recorded once every object is on the server, so that no device reads a baseline half sent: a sync cut
        // off before this sends the whole baseline again, which merges to the same rows.
        try connection.transaction(purpose: "record the store's baseline") { () throws(MirrorError) in
            try lockZone()
            try connection.execute("""
                INSERT INTO \(ns)."changes" (zone, device, token, author, body)
                VALUES ($1, $2::uuid, $3::bigint, NULL, $4::jsonb) ON CONFLICT DO NOTHING
                """, [zone, state.device.uuidString, String(last), #"{"baseline": true}"#],
                purpose: "record the baseline")
            try connection.execute("""
                UPDATE \(ns)."devices" SET exported_token = $3::bigint WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the export")
        }
        report.exportedBaseline = true
        state.exportedThrough = last
        state.pendingClocks.removeAll { $0.transaction <= last }
        try file.save(state)
        try Self.hold(container, after: last)
    }

    /// Pushes are serialized per zone, so that `changes.seq` grows in commit order and a reader that has read
    /// through a number never sees a smaller one appear later.
    private func lockZone() throws(MirrorError) {
        try connection.execute("SELECT pg_advisory_xact_lock(19019, hashtext($1))", [zone],
                               purpose: "lock the zone")
    }

    /// Queues the merge of `attributes` and `toOnes` of `snapshot` into the object's server row at `clock`: each column
    /// takes the value with the later clock (equal clocks: the greater JSON text, so every server decides alike).
    private mutating func merge(_ snapshot: ModelSnapshot, entity: MirrorPlan.Entity,
                                attributes: [MirrorPlan.Attribute], toOnes: [MirrorPlan.ToOne], clock: UInt64,
                                created: Bool) throws(MirrorError) {
        var values: [String?] = [created ? String(clock) : "0"]
        for attribute in attributes {
            values += [try encodedValue(snapshot.attributes[attribute.slot], attribute), String(clock)]
        }
        for toOne in toOnes {
            if case .toOne(let id?) = snapshot.relationships[toOne.slot] {
                values += [Self.key(id), String(clock)]
            } else {
                values += [nil, String(clock)]
            }
        }
        try queue(MergeShape(entity: entity, attributes: attributes, toOnes: toOnes,
                             kind: created ? .insert : .update), key: Self.key(snapshot.id), values: values)
        touched[entity.name, default: []].insert(Self.key(snapshot.id))
    }

    /// The form of one merge statement: which table and columns, and whether it inserts (a creation clock),
    /// updates, or records a deletion.
    struct MergeShape: Hashable {
        enum Kind: Hashable { case insert, update, deletion }
        let table: String
        let name: String
        let columns: [(value: String, clock: String, cast: String)]
        let kind: Kind

        init(entity: MirrorPlan.Entity, attributes: [MirrorPlan.Attribute], toOnes: [MirrorPlan.ToOne], kind: Kind) {
            table = entity.table
            name = entity.name
            columns = attributes.map { ($0.value, $0.clock, "jsonb") } + toOnes.map { ($0.target, $0.clock, "text") }
            self.kind = kind
        }

        static func == (lhs: MergeShape, rhs: MergeShape) -> Bool {
            lhs.table == rhs.table && lhs.kind == rhs.kind && lhs.columns.map(\.value) == rhs.columns.map(\.value)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(table)
            hasher.combine(kind)
            hasher.combine(columns.map(\.value))
        }
    }

    /// Merges waiting to be sent, by shape: each shape goes as one statement over arrays (`INSERT … SELECT FROM
    /// unnest(…)`) of up to 1,000 objects. Merges commute (a column keeps its latest clock, a deletion its latest),
    /// so their order does not matter; an object twice in one statement would, so it sends the first one before.
    struct MergeGroup {
        var keys: [String] = []
        var seen: Set<String> = []
        var values: [[String?]] = []
    }

    mutating func queue(_ shape: MergeShape, key: String, values: [String?]) throws(MirrorError) {
        if merges[shape]?.seen.contains(key) == true || (merges[shape]?.keys.count ?? 0) >= 1000 {
            try send(shape)
        }
        merges[shape, default: MergeGroup()].keys.append(key)
        merges[shape, default: MergeGroup()].seen.insert(key)
        merges[shape, default: MergeGroup()].values.append(values)
    }

    /// Sends every queued merge.
    private mutating func flushMerges() throws(MirrorError) {
        for shape in Array(merges.keys) { try send(shape) }
    }

    private mutating func send(_ shape: MergeShape) throws(MirrorError) {
        guard let group = merges.removeValue(forKey: shape), !group.keys.isEmpty else { return }
        var columns = ["zone", "id"]
        var casts = ["text"]
        var updates: [String] = []
        switch shape.kind {
        case .deletion:
            columns += ["created_clock", "deleted_clock"]
            casts.append("bigint")
            updates.append("deleted_clock = GREATEST(t.deleted_clock, EXCLUDED.deleted_clock)")
        case .insert, .update:
            columns.append("created_clock")
            if shape.kind == .insert {
                updates.append("created_clock = GREATEST(t.created_clock, EXCLUDED.created_clock)")
            }
            casts.append("bigint")
        }
        for column in shape.columns {
            columns += [column.value, column.clock]
            casts += [column.cast, "bigint"]
            let (value, clock) = (column.value, column.clock)
            let wins = "t.\(clock) IS NULL OR EXCLUDED.\(clock) > t.\(clock) OR "
                + "(EXCLUDED.\(clock) = t.\(clock) AND EXCLUDED.\(value)::text > t.\(value)::text)"
            updates.append("\(value) = CASE WHEN \(wins) THEN EXCLUDED.\(value) ELSE t.\(value) END")
            updates.append("\(clock) = GREATEST(t.\(clock), EXCLUDED.\(clock))")
        }
        // One array parameter a column: the keys, then each column's values in order.
        var parameters: [String?] = [zone, Self.arrayLiteral(group.keys)]
        let width = group.values.first?.count ?? 0
        for position in 0..<width {
            parameters.append(Self.arrayLiteral(group.values.map { $0[position] }))
        }
        let arrays = casts.enumerated().map { "$\($0.offset + 2)::\($0.element)[]" }
        let selected = shape.kind == .deletion ? "$1::text, u.c1, 0, u.c2" : "$1::text, u.*"
        let names = (1...casts.count).map { "c\($0)" }.joined(separator: ", ")
        let conflict = updates.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + updates.joined(separator: ", ")
        try connection.execute("""
            INSERT INTO \(shape.table) AS t (\(columns.joined(separator: ", ")))
            SELECT \(selected) FROM unnest(\(arrays.joined(separator: ", "))) AS u(\(names))
            ON CONFLICT (zone, id) \(conflict)
            """, parameters, purpose: shape.kind == .deletion ? "record \(shape.name) deletions" : "merge \(shape.name) objects")
    }

    /// A PostgreSQL array literal of text elements (`{"a","b\\"c",NULL}`), for one parameter: every element quoted,
    /// backslashes and quotes escaped, so that any text passes as it is.
    static func arrayLiteral(_ elements: [String?]) -> String {
        var text = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { text += "," }
            guard let element else {
                text += "NULL"
                continue
            }
            text += "\""
            for character in element.unicodeScalars {
                if character == "\\" || character == "\"" { text.unicodeScalars.append("\\") }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }

    /// The JSON a value column holds; external-storage bytes go to `blobs` first.
    func encodedValue(_ value: StoredValue, _ attribute: MirrorPlan.Attribute) throws(MirrorError) -> String {
        do {
            var bytes: Data?
            switch value {
            case .external(let external):
                // Named by its SHA-256 already: a blob the server has (one an import brought and nothing here
                // read) is not read, nor fetched, to be sent.
                let reference = #"{"blob":"\#(external.name)"}"#
                if !external.isLoaded, try serverHasBlob(external.name) { return reference }
                do { bytes = try external.load() } catch MirrorError.blobNotOnServer {
                    // Promised here and lost on the server (a zone restored without its blobs): no copy is left to
                    // send. The row names it as before, and the device's other changes still go out.
                    return reference
                }
            case .data(let data) where attribute.isExternal: bytes = data
            default: bytes = nil
            }
            if let bytes {
                let name = SHA256Digest.hexString(bytes)
                try connection.execute("""
                    INSERT INTO \(ns)."blobs" (zone, hash, bytes) VALUES ($1, $2, decode($3, 'hex'))
                    ON CONFLICT DO NOTHING
                    """, [zone, name, Self.hex(bytes)], purpose: "store a blob")
                return #"{"blob":"\#(name)"}"#
            }
            return try coding.encode(value)
        } catch let error as MirrorError {
            throw error
        } catch {
            throw .storeFailed(operation: "read \(attribute.name)", reason: "\(error)")
        }
    }

    /// Whether the zone has blob `name` (a SHA-256) already; false for a name that is not one.
    private func serverHasBlob(_ name: String) throws -> Bool {
        guard name.utf8.count == 64 else { return false }
        return try MirrorBlobFetcher.size(of: name, zone: zone, namespace: ns, on: connection) != nil
    }

    // MARK: Import

    private mutating func importChanges() throws {
        while true {
            var batch = try readBatch()
            guard batch.lastSequence != nil else { return }
            if !batch.rows.isEmpty || !batch.deleted.isEmpty {
                var unsent = try apply(batch)
                // This store holds unique keys, or edits of merged objects, that the server has not seen: they are
                // sent, so the server merges them, and the batch is read again.
                for _ in 0..<2 where !unsent.isEmpty {
                    try export()
                    batch = try readBatch()
                    unsent = try apply(batch)
                }
                // Still not: a save came in again between the export and the import. The batch waits for the next
                // sync (which sends first), rather than be applied in part; the cursor stays where it is.
                if !unsent.isEmpty { return }
            }
            guard let last = batch.lastSequence else { return }
            report.importedChanges += batch.changeCount
            state.importedSequence = last
            try file.save(state)
            try connection.execute("""
                UPDATE \(ns)."devices" SET imported_seq = $3::bigint WHERE zone = $1 AND device = $2::uuid
                """, [zone, state.device.uuidString, String(last)], purpose: "record the import")
            if batch.changeRows < Self.importBatch { return }
        }
    }

    /// One server object as a sync read it: its clocks and the values of this schema's columns.
    struct ServerRow {
        var id: PersistentIdentifier
        var created: Int64
        var deleted: Int64?
        var attributes: [String: (value: StoredValue, clock: UInt64)] = [:]
        var toOnes: [String: (target: PersistentIdentifier?, clock: UInt64)] = [:]
        /// The object a unique-key collision merged this one into (then it is not alive).
        var mergedInto: PersistentIdentifier?
        /// The present targets of each to-many relationship kept in a link table, by name.
        var links: [String: [PersistentIdentifier]] = [:]
        var isAlive: Bool { mergedInto == nil && (deleted.map { created > $0 } ?? true) }
    }

    struct Batch {
        var lastSequence: Int64?
        var changeRows = 0
        var changeCount = 0
        var rows: [ServerRow] = []
        var deleted: [ServerRow] = []
        /// The attributes other devices' changes in the batch named, by object (for entities with a resolver).
        var changedElsewhere: [PersistentIdentifier: Set<String>] = [:]
    }

    /// The next changes after the cursor and, for those of other devices, the merged rows of the objects they name,
    /// read in one snapshot of the server.
    private mutating func readBatch() throws -> Batch {
        var batch = Batch()
        try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", purpose: "read changes")
        defer { _ = try? connection.execute("COMMIT", purpose: "read changes") }
        let changes = try connection.execute("""
            SELECT seq, device::text, CASE WHEN device = $3::uuid AND token >= 0 THEN NULL ELSE body END
            FROM \(ns)."changes" WHERE zone = $1 AND seq > $2::bigint
            ORDER BY seq LIMIT \(Self.importBatch)
            """, [zone, String(state.importedSequence), state.device.uuidString], purpose: "read changes").values
        batch.changeRows = changes.count
        var keys: [String: Set<String>] = [:]
        let me = state.device.uuidString.lowercased()
        for row in changes {
            guard let sequence = row[0].flatMap(Int64.init) else { continue }
            batch.lastSequence = sequence
            // A device skips its own changes (the server does not even send their bodies), except the merges and
            // resolutions its pushes made, recorded with negative tokens, which every store applies alike.
            guard let body = row[2] else { continue }
            batch.changeCount += 1
            let parsed = Self.parse(body)
            if parsed.isBaseline {
                // Another device sent everything: read every object of the zone.
                for entity in plan.entities.keys { keys[entity] = nil }
                for entity in plan.entities.values {
                    let ids = try connection.execute("SELECT id FROM \(entity.table) WHERE zone = $1", [zone],
                                                     purpose: "read a baseline").values.compactMap { $0[0] }
                    keys[entity.name, default: []].formUnion(ids)
                }
                continue
            }
            let fromOther = row[1]?.lowercased() != me
            for object in parsed.objects {
                guard let entity = plan.entities[object.entity], let uuid = UUID(uuidString: object.id) else { continue }
                keys[object.entity, default: []].insert(object.id)
                // What another device changed, unseen by any local edit not sent yet: a conflict for a resolver.
                if fromOther, resolvers[object.entity] != nil {
                    batch.changedElsewhere[PersistentIdentifier(entityName: object.entity, primaryKey: uuid),
                                           default: []].formUnion(object.properties ?? entity.attributes.map(\.name))
                }
            }
        }
        // The rows are the objects' state now, which may point at objects whose own changes come after this batch:
        // those targets are read too (and theirs, a few levels deep), so that a target missing here means one the
        // server has deleted, not one this device has not heard of yet.
        var read: Set<PersistentIdentifier> = []
        for _ in 0..<8 where !keys.isEmpty {
            var pointedAt: Set<PersistentIdentifier> = []
            var survivors: Set<PersistentIdentifier> = []
            for (name, ids) in keys.sorted(by: { $0.key < $1.key }) {
                guard let entity = plan.entities[name] else { continue }
                let sorted = ids.sorted()
                for start in stride(from: 0, to: sorted.count, by: 1000) {
                    let part = sorted[start..<min(start + 1000, sorted.count)]
                    for row in try readRows(entity, ids: Array(part)) where read.insert(row.id).inserted {
                        if row.isAlive { batch.rows.append(row) } else { batch.deleted.append(row) }
                        // The survivor of a merge is read with its loser, whatever this store has of it.
                        if let survivor = row.mergedInto { survivors.insert(survivor) }
                        guard row.isAlive else { continue }
                        for (_, field) in row.toOnes { if let target = field.target { pointedAt.insert(target) } }
                        for (_, targets) in row.links { pointedAt.formUnion(targets) }
                        // So is the object that holds the row's unique key here, if it is another: the server's
                        // state of it says whether the two can both be applied.
                        for holder in localHolders(of: row, entity: entity) { survivors.insert(holder) }
                    }
                }
            }
            // One look-up in the store for all of them, not one a relationship of a row.
            let unread = pointedAt.subtracting(read).sorted()
            var targets: [String: Set<String>] = [:]
            for (target, snapshot) in zip(unread, container.store.snapshots(for: unread)) where snapshot == nil {
                targets[target.entityName, default: []].insert(Self.key(target))
            }
            for survivor in survivors.subtracting(read) {
                targets[survivor.entityName, default: []].insert(Self.key(survivor))
            }
            keys = targets
        }
        return batch
    }

    private mutating func readRows(_ entity: MirrorPlan.Entity, ids: [String]) throws -> [ServerRow] {
        var select = ["id", "created_clock", "deleted_clock", "\"merged_into\""]
        for attribute in entity.attributes { select += [attribute.value + "::text", attribute.clock] }
        for toOne in entity.toOnes { select += [toOne.target, toOne.clock] }
        let rows = try connection.execute("""
            SELECT \(select.joined(separator: ", ")) FROM \(entity.table) WHERE zone = $1 AND id = ANY($2::text[])
            """, [zone, Self.arrayLiteral(ids)], purpose: "read \(entity.name) objects").values
        var result: [ServerRow] = []
        for row in rows {
            let key = row[0] ?? ""
            do {
                result.append(try decode(row, entity: entity))
            } catch {
                report.skippedRows.append(MirrorSkippedRow(zone: zone, entity: entity.name, id: key,
                                                           reason: "\(error)"))
            }
        }
        if !entity.links.isEmpty {
            let links = try readLinks(entity, ids: result.filter(\.isAlive).map { Self.key($0.id) })
            for index in result.indices { result[index].links = links[Self.key(result[index].id)] ?? [:] }
        }
        return result
    }

    /// A server row as values of this schema, or why it cannot be applied.
    private mutating func decode(_ row: [String?], entity: MirrorPlan.Entity) throws -> ServerRow {
        guard let key = row[0], let uuid = UUID(uuidString: key) else {
            throw MirrorRowProblem("the key \(row[0] ?? "NULL") is not a UUID")
        }
        guard let created = row[1].flatMap(Int64.init) else { throw MirrorRowProblem("created_clock is missing") }
        let deleted = row[2].flatMap(Int64.init)
        var result = ServerRow(id: PersistentIdentifier(entityName: entity.name, primaryKey: uuid), created: created,
                               deleted: deleted)
        if let survivor = row[3] {
            guard let uuid = UUID(uuidString: survivor) else {
                throw MirrorRowProblem("merged_into \(survivor) is not a UUID")
            }
            result.mergedInto = PersistentIdentifier(entityName: entity.name, primaryKey: uuid)
        }
        state.clock.receive(UInt64(max(0, max(created, deleted ?? 0))))
        var column = 4
        for attribute in entity.attributes {
            defer { column += 2 }
            guard let text = row[column], let clock = row[column + 1].flatMap(UInt64.init) else { continue }
            state.clock.receive(clock)
            let value: StoredValue
            if attribute.isExternal, let name = MirrorValueCoding.blobName(text) {
                value = try remoteBlob(name)
            } else {
                value = try coding.decode(text, as: attribute.type)
            }
            result.attributes[attribute.name] = (value, clock)
        }
        for toOne in entity.toOnes {
            defer { column += 2 }
            guard let clock = row[column + 1].flatMap(UInt64.init) else { continue }
            state.clock.receive(clock)
            var target: PersistentIdentifier?
            if let text = row[column] {
                guard let uuid = UUID(uuidString: text) else {
                    throw MirrorRowProblem("\(toOne.name) points at \(text), which is not a UUID")
                }
                target = PersistentIdentifier(entityName: toOne.destination, primaryKey: uuid)
            }
            result.toOnes[toOne.name] = (target, clock)
        }
        return result
    }

    /// A reference to blob `name` on the server, whose bytes are read the first time the store reads the value
    /// (the store checks them against the size and the name then): the import reads only its length.
    private func remoteBlob(_ name: String) throws -> StoredValue {
        guard let size = try MirrorBlobFetcher.size(of: name, zone: zone, namespace: ns, on: connection) else {
            throw MirrorRowProblem("its blob \(name) is not on the server")
        }
        let fetcher = blobFetcher
        return .external(ExternalData(remoteName: name, size: size) {
            let bytes = try fetcher.fetchBlob(named: name, size: size)
            guard bytes.count == size, SHA256Digest.hexString(bytes) == name else {
                throw StoredValueError.externalDataUnreadable(
                    name: name, reason: "the mirror's server gave bytes that are not the blob's")
            }
            return bytes
        })
    }

    /// The local clocks of what local transactions not exported yet changed, by object.
    struct LocalPending {
        var fields: [String: UInt64] = [:]
        var inserted: UInt64?
        var deleted: UInt64?
    }

    /// Applies a batch as one local transaction, committed only if no other transaction came in between (it is
    /// then computed again), so that an import never overwrites a local save it has not weighed.
    /// - Returns: the objects of this store that must be sent before the batch can be applied (nothing was
    ///   applied then): local changes the server has not merged with the batch's unique-key merges.
    private mutating func apply(_ batch: Batch) throws -> [PersistentIdentifier] {
        for attempt in 1...20 {
            let (generation, log) = try generationAndHistory()
            try assignClocks(log, through: generation)
            let pending = Self.pending(log, after: state.exportedThrough, clocks: state.pendingClocks,
                                       schema: container.schema)
            var objects: [ReplicaObject] = []
            var unsent: [PersistentIdentifier] = []
            for row in batch.rows {
                let local = pending[row.id]
                if let deleted = local?.deleted, deleted > UInt64(max(0, row.created)) { continue }
                // A local edit not sent yet of what another device changed: sent first, so that the push hands the
                // conflict to the entity's resolver, before this batch is read again.
                if hasConflict(row, local: local, changedElsewhere: batch.changedElsewhere[row.id]) {
                    unsent.append(row.id)
                }
                var incoming = ReplicaObject(id: row.id)
                for (name, field) in row.attributes where (local?.fields[name] ?? 0) < field.clock {
                    incoming.attributes[name] = field.value
                }
                for (name, field) in row.toOnes where (local?.fields[name] ?? 0) < field.clock {
                    incoming.toOne[name] = field.target
                }
                for (name, targets) in row.links {
                    // A local change of the links not sent yet is sent first: links merge one by one on the server.
                    if local?.fields[name] != nil, local?.inserted == nil { unsent.append(row.id) }
                    incoming.toMany[name] = targets
                }
                objects.append(incoming)
            }
            var deletions: [PersistentIdentifier] = []
            var merging: [PersistentIdentifier: PersistentIdentifier] = [:]
            let mergedInto = Dictionary(batch.deleted.compactMap { row in row.mergedInto.map { (row.id, $0) } },
                                        uniquingKeysWith: { first, _ in first })
            for row in batch.deleted {
                if let inserted = pending[row.id]?.inserted, inserted > UInt64(max(0, row.deleted ?? 0)) { continue }
                guard var survivor = row.mergedInto else {
                    deletions.append(row.id)
                    continue
                }
                // A local edit of a merged object not sent yet would be lost with it: sent first (and carried over).
                if pending[row.id] != nil { unsent.append(row.id) }
                for _ in 0..<8 { if let next = mergedInto[survivor] { survivor = next } }
                merging[row.id] = survivor
            }
            unsent += uniqueKeyConflicts(objects, deleting: Set(deletions).union(merging.keys))
            if !unsent.isEmpty { return unsent }
            let context = ModelContext(container)
            context.author = StoreMirror.author
            context.expectedStoreGeneration = generation
            let outcome = try context.applyReplicaChanges(objects, deleting: deletions, merging: merging)
            guard context.hasChanges else { return [] }
            do {
                try context.save()
            } catch is StoreGenerationMoved where attempt < 20 {
                continue
            }
            if let token = context.currentHistoryToken() { report.importTransactions.append(token) }
            report.deniedDeletions += outcome.deniedDeletions
            // The import's own transaction is never sent.
            let (after, afterLog) = try generationAndHistory()
            try assignClocks(afterLog, through: after)
            return []
        }
        return []
    }

    /// The objects of `objects` whose unique key another object holds here, and keeps after this import: one this
    /// store has not sent yet (or changed to that key since), which the server has therefore not merged. Sending
    /// it first lets the server merge the two (docs/MIRROR.md, *Unique keys*).
    private func uniqueKeyConflicts(_ objects: [ReplicaObject], deleting gone: Set<PersistentIdentifier>)
        -> [PersistentIdentifier] {
        let incoming = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var snapshots: [PersistentIdentifier: ModelSnapshot] = [:]
        func snapshot(_ id: PersistentIdentifier) -> ModelSnapshot? {
            if let known = snapshots[id] { return known }
            let found = container.store.snapshots(for: [id]).first ?? nil
            snapshots[id] = found
            return found
        }
        /// The key an object will have after the import: the incoming value where one is written, else its own.
        func key(_ id: PersistentIdentifier, _ attributes: [MirrorPlan.Attribute]) -> [StoredValue]? {
            var values: [StoredValue] = []
            for attribute in attributes {
                if let value = incoming[id]?.attributes[attribute.name] {
                    values.append(value)
                } else if let local = snapshot(id) {
                    values.append(local.attributes[attribute.slot])
                } else {
                    return nil
                }
            }
            return values
        }
        var conflicts: [PersistentIdentifier] = []
        for object in objects {
            guard let entity = plan.entities[object.id.entityName], !entity.uniqueKeys.isEmpty else { continue }
            for unique in entity.uniqueKeys {
                guard let values = key(object.id, unique.attributes), !values.contains(where: \.isNull),
                      let holder = container.store.identifier(entity: entity.name, uniqueConstraint: unique.number,
                                                              key: values),
                      holder != object.id, !gone.contains(holder), key(holder, unique.attributes) == values
                else { continue }
                conflicts.append(holder)
            }
        }
        return conflicts
    }

    /// The objects this store holds with the unique key of `row` (another device's object), when they are others.
    private func localHolders(of row: ServerRow, entity: MirrorPlan.Entity) -> [PersistentIdentifier] {
        var holders: [PersistentIdentifier] = []
        for unique in entity.uniqueKeys {
            let values = unique.attributes.compactMap { row.attributes[$0.name]?.value }
            guard values.count == unique.attributes.count, !values.contains(where: \.isNull),
                  let holder = container.store.identifier(entity: entity.name, uniqueConstraint: unique.number,
                                                          key: values), holder != row.id else { continue }
            holders.append(holder)
        }
        return holders
    }

    private static func pending(_ log: HistoryLog, after exported: UInt64, clocks: [MirrorState.Pending],
                                schema: Schema) -> [PersistentIdentifier: LocalPending] {
        let byNumber = Dictionary(clocks.map { ($0.transaction, $0.clock) }, uniquingKeysWith: max)
        var result: [PersistentIdentifier: LocalPending] = [:]
        for record in log.records where record.number > exported {
            guard let clock = byNumber[record.number] else { continue }
            for id in record.inserted {
                result[id, default: .init()].inserted = clock
                if let entity = schema.entity(named: id.entityName) {
                    for name in entity.attributes.map(\.name) + entity.relationships.map(\.name) {
                        result[id, default: .init()].fields[name] = clock
                    }
                }
            }
            for update in record.updated {
                for name in update.properties { result[update.id, default: .init()].fields[name] = clock }
            }
            for deletion in record.deleted { result[deletion.id, default: .init()].deleted = clock }
        }
        return result
    }

    // MARK: Encoding

    /// A change row's body: which objects the transaction touched and how (`{"objects": [{"e": "Note", "id": …,
    /// "op": "update", "p": ["title"]}]}`). Values are in the entity tables.
    static func body(of record: HistoryRecord) -> String {
        var objects: [[String: Any]] = []
        for id in record.inserted { objects.append(["e": id.entityName, "id": key(id), "op": "insert"]) }
        for update in record.updated {
            objects.append(["e": update.id.entityName, "id": key(update.id), "op": "update", "p": update.properties])
        }
        for deletion in record.deleted { objects.append(["e": deletion.id.entityName, "id": key(deletion.id), "op": "delete"]) }
        let data = (try? JSONSerialization.data(withJSONObject: ["objects": objects], options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// An object's key on the server: its UUID in lower case.
    static func key(_ id: PersistentIdentifier) -> String { id.primaryKey.uuidString.lowercased() }

    /// Lowercase hex of `bytes`: how a blob's bytes travel as a text parameter (`decode($n, 'hex')`).
    static func hex(_ bytes: Data) -> String { SHA256Digest.hexEncoded(Array(bytes)) }

    static func bytes(hex: String) -> Data? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x61...0x66: c - 0x61 + 10
            case 0x41...0x46: c - 0x41 + 10
            default: nil
            }
        }
        var data = Data(capacity: utf8.count / 2)
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            data.append(high << 4 | low)
        }
        return data
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
            let rows = try connection.execute("SELECT coalesce(max(seq), 0) FROM \(namespace).\"changes\" WHERE zone = $1",
                                              [configuration.zone], purpose: "read the newest change").values
            return rows.first?.first.flatMap { $0 }.flatMap(Int64.init) ?? 0
        } catch MirrorError.serverError(_, _, "42P01", _) {
            throw .schemaNotInitialized(zone: configuration.zone, namespace: configuration.namespace)
        }
    }
}
