import Foundation
import NoteKit
import NoteKitFileStore

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

    /// Registers the device, sends what the server lacks, runs the test hook, then applies the other devices'
    /// changes; the state is saved after each step that moves it.
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

    // MARK: The store's history, shared by export and import

    /// The store's transaction number and its history through at least that number: read in this order (after a file
    /// store has picked up other processes' commits), so that a save landing in between is never counted in the
    /// transaction number while missing from the history (an import computed against such a history could overwrite
    /// it).
    func transactionNumberAndHistory() throws -> (UInt64, HistoryLog) {
        if let fileStore = container.store as? FileStore { _ = try fileStore.refresh() }
        let transactionNumber = container.store.transactionNumber
        return (transactionNumber, try container.store.history())
    }

    /// Gives each local transaction not clocked yet its clock: the next tick at its commit time.
    mutating func assignClocks(_ log: HistoryLog, through last: UInt64) throws(MirrorError) {
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
}
