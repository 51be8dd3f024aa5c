#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// NoteKit's store on disk: append-only JSON segments replayed into memory at open (docs/FORMAT.md).
///
/// Created by ``FileStoreConfiguration``; a context never sees the difference from the in-memory store except that
/// saves survive. Reads are answered from memory; each save appends one record and, by default, flushes it before
/// returning.
///
/// You rarely hold a `FileStore` yourself: `ModelContainer` creates it from a ``FileStoreConfiguration`` and
/// contexts use it through NoteKit's `DataStore` protocol. Reach it (as `container.store as? FileStore`) for what
/// only a store on disk has: ``compact()``, ``sync()``, ``refresh()``, ``recovery`` and ``statistics``.
///
/// ## Topics
///
/// ### Maintenance
/// - ``compact()``
/// - ``CompactionReport``
/// - ``backup(to:)``
/// - ``BackupReport``
/// - ``sync()``
/// - ``close()``
///
/// ### What the open found
/// - ``recovery``
/// - ``RecoveryReport``
/// - ``statistics``
/// - ``Statistics``
///
/// ### Several processes
/// - ``refresh()``
/// - ``transactions()``
///
/// ### Salvage
/// - ``salvage(from:to:mode:)``
/// - ``SalvageMode``
/// - ``SalvageReport``
///
/// ### History
/// - ``history()``
/// - ``deleteHistory(_:)``
///
/// ### The store protocol
/// - ``schema``
/// - ``configuration``
/// - ``rows(for:)``
/// - ``fetch(_:)``
/// - ``identifier(entity:uniqueConstraint:key:)``
/// - ``identifiers(entity:relationship:referencing:)``
/// - ``save(_:)``
/// - ``transactionNumber``
public final class FileStore: DataStore {
    /// The schema the store's rows follow: the container's schema, at the version the store records (after a
    /// lightweight migration, the version migrated to).
    public let schema: Schema
    /// The configuration the store was opened with.
    public let configuration: FileStoreConfiguration
    /// What the open did to recover: a torn tail excluded, leftovers removed, damage reported in `.pointInTime`.
    public let recovery: RecoveryReport

    let layout: StoreLayout
    let fileSystem: any StoreFileSystem
    let blobs: BlobStore
    let encoder = RecordEncoder()
    let state: Locked<State>
    /// Taken by every write of this open (save, history deletion, flush, compaction, close) before ``state``, never
    /// after it: writes run one at a time, and a save can flush without the state's lock, so that reads go on.
    /// It holds whether ``close()`` has run, which a save checks without taking the state's lock.
    let writing = Locked(false)
    let broadcaster = HistoryBroadcaster()
    /// Whether a migration session holds the store's lock for this open's whole life (a custom stage's store):
    /// its writes then take no lock of their own, which would wait for the session's.
    let lockHeldBySession: Bool
    let follower = Follower()
    /// The last `HISTORY-HOLD` read, by the file's status, so that a check costs a `stat` while it is unchanged.
    let holdCache = Locked<(status: StoreFileStatus, hold: UInt64)?>(nil)
    /// `LOCK`, kept open by a writer shared per save from its first save to its close (``acquireSharedWriteLock()``).
    let keptLockFile = Locked<KeptLockFile?>(nil)

    struct State {
        var rows: RowStorage
        var log: SegmentLog?
        var lock: (any StoreLockHandle)?
        var schemas: [Schema]
        var lastTransactionNumber: UInt64
        /// Writes logged since the last snapshot, counting the snapshot's rows: against live rows, the garbage.
        var operationsLogged: Int
        var closedSegmentBytes: Int
        /// Why writes stopped, once a write whose outcome on disk is unknown failed: nil while they go on.
        var writesStopped: (kind: InterruptedWrite, reason: String)?
        /// When the first save not flushed yet was written, by the monotonic clock.
        var unsyncedSince: ContinuousClock.Instant?
        var lastCompactionError: (any Error)?
        /// Why the last compaction's checkpoint was not written (the compaction itself succeeded).
        var lastCheckpointError: (any Error)?
        /// How far a read-only open has read the log, for ``refresh()``; nil for a writable open.
        var position: ReadPosition?
        var lastRefreshCheck: ContinuousClock.Instant?
        var lastRefreshError: (any Error)?
        /// The log's size right after the last compaction of this open (0 before one).
        var bytesAfterCompaction = 0
        /// The log's size right after the last compaction, whichever open made it (found by the open: the
        /// checkpoint's covered bytes, or where the first segment's opening ends; 0 for a store never compacted):
        /// what a checkpoint describes, the rest being what an open replays.
        var compactedBytes = 0
        /// After an automatic compaction failed: the log size at which to try again (nil: no failure pending).
        var compactionRetryBytes: Int?
        /// A migration applied in memory and not written yet (a custom stage's `didMigrate` is running): saves stay
        /// in memory until ``commitHeldMigration()`` writes everything at once.
        var migrationHeld = false
        /// The history an open through a checkpoint has not read yet (see ``loadHistoryPrefix(_:)``).
        var historyPrefix: HistoryPrefix?
        /// A save's record is in the log and being flushed, not applied yet: the log holds a transaction the rows
        /// do not, so nothing may read the log meanwhile (a refresh skips, a reload waits for the save).
        var writeInFlight = false
        /// The segment ``position`` stands in, held open for reading: a refresh reads its length and the byte after
        /// the last record through it (see ``FileStore/tailFile(_:_:)``).
        var tail: (segment: Int, file: any StoreReadableFile)?
        /// What the last refresh that found nothing new saw at the end of the log: the position's segment and offset,
        /// the segment's length, and whether a zero byte follows the last record. Under the store's lock nobody
        /// appends, so catching up right after that refresh uses it instead of reading the length and the byte again.
        var lastTailLook: (segment: Int, offset: Int, size: Int, zeroAfter: Bool)?

        /// Lets go of the held segment unless it is `segment`, the one the position now stands in: a segment left
        /// behind (rotated, or compacted away and deleted) is not kept open, since a deleted one would keep its space.
        mutating func releaseTail(unlessIn segment: Int) {
            if let tail, tail.segment != segment { self.tail = nil }
        }
    }

    /// Where a read-only open stands in the log: the manifest it read, and the segment and offset after the last
    /// record it applied.
    struct ReadPosition {
        var manifest: Manifest
        var manifestStatus: StoreFileStatus?
        var segment: Int
        var offset: Int
        var version: Int
    }

    /// What an open found and did.
    public struct RecoveryReport: Sendable, Hashable {
        /// A torn tail that was excluded: its segment, offset, length, and where its bytes were kept.
        public var tornTail: TornTail?
        /// Files deleted because no manifest reached them (left by an interrupted operation), and retired blobs
        /// past their grace period (``FileStoreConfiguration/retiredBlobGracePeriod``).
        public var removedLeftovers: [String] = []
        /// In `.pointInTime` mode, the damage where loading stopped.
        public var damage: FileStoreError?

        /// An incomplete or damaged last record of the last segment, which the open excluded: a save cut short by
        /// a crash, never one that was acknowledged (docs/FORMAT.md, *Recovery*).
        public struct TornTail: Sendable, Hashable {
            /// The segment's path.
            public var segment: String
            /// The byte offset in the segment where the excluded bytes begin (the end of the last intact record).
            public var offset: Int
            /// How many bytes were excluded.
            public var length: Int
            /// Why the bytes are not a record: cut short, a checksum mismatch, a header that does not parse.
            public var reason: String
            /// The quarantine file holding the bytes (nil when opened read-only: nothing was moved).
            public var quarantinedAt: String?
            /// How many of the excluded bytes the quarantine file does not hold: a quarantine copies at most
            /// ``FileStoreConfiguration/maximumSegmentSize`` bytes of a tail (one past that is no record a save could
            /// have been writing: a hole or garbage, which would fill the disk), and the rest is cut off with it. 0
            /// when the whole tail was kept (zeros at its end, space reserved for appends, are not counted).
            public var omittedLength: Int = 0
        }
    }

    // MARK: Opening

    /// Where the open's write lock comes from.
    enum LockSource {
        /// Take the store's lock (a writable open).
        case acquire
        /// Use this one, already held (a migration session handing its lock over), and release it at close.
        case adopt(any StoreLockHandle)
        /// A migration session holds the lock and keeps it.
        case heldBySession
    }

    /// Opens or creates the store (``StoreOpener``). With `holdingMigration`, a lightweight migration is applied in
    /// memory and not written: see ``commitHeldMigration()``.
    ///
    /// Whether the store opens with `schema`, migrates to it, or is refused follows NoteKit's versioning rule
    /// (``SchemaVersioning``); ``schema`` is `schema` at the version the store records.
    ///
    /// With `useCheckpoint` (the default) an open reads the store through its checkpoint when one describes the
    /// manifest's first segment (docs/FORMAT.md, *Using a checkpoint*), and otherwise replays the segments; false
    /// replays them whatever the checkpoint (its rows failed to read).
    init(configuration: FileStoreConfiguration, schema: Schema, lockSource: LockSource = .acquire,
         holdingMigration: Bool = false, useCheckpoint: Bool = true) throws {
        self.configuration = configuration
        fileSystem = configuration.fileSystem
        layout = StoreLayout(root: configuration.url.path)
        blobs = BlobStore(directory: layout.blobs, fileSystem: fileSystem, remote: RemoteBlobSlot())
        if case .heldBySession = lockSource { lockHeldBySession = true } else { lockHeldBySession = false }
        let opened = try StoreOpener(configuration: configuration, schema: schema, layout: layout, blobs: blobs)
            .open(lockSource: lockSource, holdingMigration: holdingMigration, useCheckpoint: useCheckpoint)
        self.schema = opened.schema
        recovery = opened.recovery
        state = Locked(opened.state)
    }

    /// For a writable open shared per save: records where the open stands in the log (so that saves can catch up
    /// with other writers) and releases the lock the open took for recovery and migration. An exclusive open keeps
    /// its lock until it closes, and marks it so (a migration session of this process then refuses at once).
    static func shareIfAsked(_ state: inout State, configuration: FileStoreConfiguration,
                                     lockSource: LockSource, layout: StoreLayout, version: Int) throws {
        guard configuration.sharing == .perSave, let log = state.log else {
            (state.lock as? HeldStoreLock)?.keepUntilClose()
            return
        }
        state.position = ReadPosition(manifest: log.manifest,
                                      manifestStatus: try configuration.fileSystem.status(layout.manifest),
                                      segment: log.activeSegment, offset: log.activeSize, version: version)
        // A migration session that keeps its lock releases it itself.
        if case .heldBySession = lockSource { return }
        state.lock?.unlock()
        state.lock = nil
    }

    // MARK: DataStore

    /// The saved rows of `ids`, in order; nil for an identifier the store does not have.
    ///
    /// An open that can fall behind (read-only, or shared per save) first picks up what other processes committed,
    /// as ``FileStoreConfiguration/automaticRefreshInterval`` says.
    ///
    /// - Complexity: O(`ids.count`), from memory; no file is read (external-storage bytes load on first use).
    public func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        readingAlways { state throws(WaitForWrite) in
            refreshAutomatically(&state)
            return try readingRows(&state, otherwise: ids.map { _ in nil }) { try $0.rows(for: ids) }
        }
    }

    /// Aggregates of the saved rows (see `DataStore.aggregate(_:)`): counts per to-one target from the stored
    /// references, anything else folded over the matching rows, as a fetch reads them.
    ///
    /// - Throws: NoteKit's `FetchError`.
    public func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult {
        try reading { state in
            refreshAutomatically(&state)
            return try readingRows(&state) { try $0.aggregate(request) }
        }
    }

    /// Which of `ids` the store holds, by look-up: over a checkpoint, its keys are searched and no row is read.
    ///
    /// - Complexity: a hash look-up per identifier, or a search of the checkpoint's keys.
    public func containedIdentifiers(_ ids: [PersistentIdentifier]) -> [Bool] {
        readingAlways { state throws(WaitForWrite) in
            refreshAutomatically(&state)
            return try readingRows(&state, otherwise: ids.map { _ in false }) { try $0.contains(ids) }
        }
    }

    /// Runs a fetch over the saved rows, in memory, with the same planner as the in-memory store (declared indexes,
    /// filters run in the store).
    ///
    /// An open that can fall behind first picks up other processes' commits
    /// (``FileStoreConfiguration/automaticRefreshInterval``); a failed refresh is recorded in
    /// ``Statistics/lastRefreshError`` and the fetch runs on the state the store had.
    ///
    /// - Throws: NoteKit's `FetchError` when the filter cannot be evaluated.
    public func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        try reading { state in
            refreshAutomatically(&state)
            return try readingRows(&state) { try $0.fetch(request) }
        }
    }

    /// The identifier of the saved object of `entity` whose unique constraint number `constraint` has the values
    /// `key`, if there is one; used by a context to upsert on save.
    ///
    /// - Complexity: O(1) on average: every unique constraint is indexed in memory.
    public func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        readingAlways { state throws(WaitForWrite) in
            refreshAutomatically(&state)
            return try readingRows(&state, otherwise: nil) {
                try $0.identifier(entity: entity, uniqueConstraint: constraint, key: key)
            }
        }
    }

    /// The identifiers of saved objects of `entity` whose relationship number `relationship` points at `target`;
    /// used by delete rules for relationships without an inverse.
    ///
    /// - Complexity: O(objects of `entity`).
    public func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier)
        -> [PersistentIdentifier] {
        readingAlways { state throws(WaitForWrite) in
            refreshAutomatically(&state)
            return try readingRows(&state, otherwise: []) {
                try $0.identifiers(entity: entity, relationship: relationship, referencing: target)
            }
        }
    }

    /// The number of the last committed transaction, which every save (of any process, once picked up) increases;
    /// contexts compare it to skip work.
    public var transactionNumber: UInt64 {
        state.withLock { state in
            refreshAutomatically(&state)
            return state.lastTransactionNumber
        }
    }

    // MARK: History

    /// The history the store keeps: every transaction since the store was created, across reopening and
    /// compaction, less what ``deleteHistory(_:)`` deleted.
    public func history() throws -> HistoryLog {
        try state.withLock { state in
            refreshAutomatically(&state)
            try loadHistoryPrefix(&state)
            return state.rows.history
        }
    }

    /// Every transaction committed from now on: this open's saves, and other processes' commits as reads pick
    /// them up, and, while the stream is listened to, a background check every 0.2 seconds (for
    /// an open that can fall behind), so that a listener learns of them without reading. The stream ends when the
    /// store closes.
    public func transactions() -> AsyncStream<HistoryRecord> {
        let stream = broadcaster.subscribe()
        followWhileListened()
        return stream
    }

    // MARK: Maintenance

    /// Flushes, closes the active segment and releases the lock. Saving afterwards is refused.
    public func close() throws {
        broadcaster.finish()
        try writing.withLock { closed in try state.withLock { state in
            closed = true
            guard let log = state.log else { return }
            state.log = nil
            defer {
                state.lock?.unlock()
                state.lock = nil
            }
            try closeLog(log, at: state.position)
        } }
    }

    /// Closes the log. Shared per save, the lock is not held and the log may be stale (others appended after
    /// it): a failed flush must not cut the segment back; the reserved space is cut off when the lock is free.
    private func closeLog(_ log: SegmentLog, at position: ReadPosition?) throws {
        guard configuration.sharing == .perSave else { return try log.close() }
        keptLockFile.withLock { kept in
            kept?.file.close()
            kept = nil
        }
        try log.closeShared()
        cutSharedReservedSpace(after: position)
    }

    deinit {
        broadcaster.finish()
        state.withLock { state in
            if let log = state.log { try? closeLog(log, at: state.position) }
            state.lock?.unlock()
        }
    }
}
