#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The configuration of a store kept on disk in NoteKit's append-only JSON format (docs/FORMAT.md).
///
/// ```swift
/// let url = URL(fileURLWithPath: "Notes.notekit")
/// let container = try ModelContainer(for: Note.self, configurations: FileStoreConfiguration(url: url))
/// ```
///
/// Everything a context does behaves as on the in-memory store; in addition, every `save()` is on disk when it
/// returns (see ``Durability``).
public struct FileStoreConfiguration: DataStoreConfiguration {
    /// Whether the store may be written.
    public enum Mode: Sendable, Hashable {
        /// Open for writing, taking the store's lock; `createIfMissing` creates an empty store when none exists.
        case readWrite(createIfMissing: Bool)
        /// Open for reading only: no lock, nothing written (not even recovery of a torn tail), saves refused.
        case readOnly
    }

    /// What an open does with damage (docs/FORMAT.md, *Recovery*).
    public enum RecoveryMode: Sendable, Hashable {
        /// A torn tail (an incomplete last record) is excluded and kept aside; any other damage refuses the open.
        case tolerateTornTail
        /// Read-only opens only: load every transaction before the first damage, report it, ignore the rest.
        case pointInTime
    }

    /// When a committed save reaches the disk.
    public enum Durability: Sendable, Hashable {
        /// Each `save()` flushes its record (`fdatasync`) before it returns: a save that returned survives a crash
        /// of the process or of the machine.
        case everySave
        /// Each `save()` writes its record at once but flushes at most every `interval` seconds (and on
        /// ``FileStore/sync()`` and ``FileStore/close()``). A process crash loses nothing; a machine crash or power
        /// loss can lose the saves of the last `interval`, whole, never part of one and never an earlier one. So can
        /// a failed flush: those saves are cut off, and the store accepts no more writes until reopened. The interval
        /// is measured by a monotonic clock, so a wall clock stepped back or ahead does not change it.
        case deferred(interval: Double)
    }

    /// When compaction runs by itself, after a save: when most of the log is superseded (to reclaim space), or when
    /// an open would replay too much of it (to write a new `CHECKPOINT`: an open reads a checkpoint and the log
    /// written after the last compaction, so a log that only grows, with nothing superseded, would otherwise be
    /// replayed whole by every open). Either way only once the log has doubled since that compaction, so that over a
    /// store's life compaction rewrites fewer bytes than twice those the saves appended (a store growing from
    /// 16 MiB to 1 GiB by inserts alone is compacted 7 times). The compaction runs inside the save that passes the
    /// threshold, under the store's lock: that save takes as long as a ``FileStore/compact()``.
    public struct AutomaticCompaction: Sendable, Hashable {
        /// The log must be at least this many bytes.
        public var minimumLogSize: Int
        /// Compact when more than this fraction of what the log holds is superseded (0…1), and the log is twice its
        /// size right after this open's last compaction (kept history cannot be reclaimed, so it is not rewritten
        /// more often than the log doubles).
        public var garbageRatio: Double
        /// Compact when the log written after the last compaction (by any open), which every open replays, is at
        /// least this many bytes and at least as large as what that compaction wrote; nil compacts for superseded
        /// records only (an append-only log is then replayed whole by every open).
        public var replayLimit: Int?

        /// A policy that compacts once the log is at least `minimumLogSize` bytes (16 MiB by default) and twice its
        /// size after the last compaction, and either more than `garbageRatio` of it (half, by default) is
        /// superseded or the part written after the last compaction is at least `replayLimit` bytes (16 MiB by
        /// default).
        public init(minimumLogSize: Int = 16 << 20, garbageRatio: Double = 0.5, replayLimit: Int? = 16 << 20) {
            self.minimumLogSize = minimumLogSize
            self.garbageRatio = garbageRatio
            self.replayLimit = replayLimit
        }
    }

    /// How much history (``FileStore/history()``) the store keeps.
    public enum HistoryRetention: Sendable, Hashable {
        /// Every transaction, until `ModelContext.deleteHistory(_:)` deletes it (SwiftData's behaviour).
        /// Compaction cannot reclaim history that is kept: delete what every consumer has processed.
        case untilDeleted
        /// At least the latest `count` transactions; older ones are deleted as new ones are committed (a consumer
        /// whose token is older gets `HistoryError.historyTokenExpired(oldestRetained:)`). `latest(0)`
        /// keeps no history past the next compaction. Transactions after a history hold (`HISTORY-HOLD` in the
        /// store's directory, written by a client that reads history as its queue, such as NoteKitMirror) are kept
        /// whatever the count.
        case latest(Int)
    }

    /// How writable opens in several processes share the store.
    ///
    /// ```swift
    /// // The default: an app, its extensions, a CLI and a cron job may all write the store.
    /// let shared = FileStoreConfiguration(url: url)
    /// // A single long-running process that wants the last microseconds of each save.
    /// let alone = FileStoreConfiguration(url: url, sharing: .exclusive)
    /// ```
    public enum Sharing: Sendable, Hashable {
        /// One writable open at a time: it holds the store's lock from open to close. What it gains: a save takes
        /// no lock and reads nothing first, reads need no check for other processes' commits, and the open
        /// reserves disk space ahead of its appends (``FileStoreConfiguration/segmentReservation``), which makes a
        /// durable save on ext4 about a third faster. What it gives up: any other writable open, in any process
        /// (`notekit compact` included), waits ``FileStoreConfiguration/lockTimeout`` and is then refused with
        /// ``FileStoreError/locked(path:holder:timeout:)``, for as long as this open lives. Readers
        /// still open alongside.
        case exclusive
        /// The default. Several processes may have the store open for writing (an app and its extensions, short
        /// command-line runs next to a service), as with SQLite. Each save, history deletion and compaction takes
        /// the store's lock, first reads what the others committed since (as ``FileStore/refresh()`` does), then
        /// writes, and releases the lock; the open itself holds it only while it recovers and migrates. Anything
        /// that finds the lock taken waits up to ``FileStoreConfiguration/lockTimeout`` (5 seconds when nil) for
        /// it. Reads pick up the others' commits (``FileStoreConfiguration/automaticRefreshInterval``). An
        /// exclusive open elsewhere keeps these writers out.
        case perSave
    }

    /// How long anything that needs the store's lock waits for it when nil is configured: 5 seconds, as a
    /// SQLite busy timeout an application sets.
    public static let defaultLockTimeout: Double = 5

    /// A name for the store, used in error messages and as the history's store identifier; the directory's last
    /// path component unless given.
    public var name: String
    /// The store's directory.
    public var url: URL
    /// Whether the store may be written, and whether a writable open creates a missing store;
    /// ``Mode/readWrite(createIfMissing:)`` with `true` by default.
    public var mode: Mode
    /// What an open does with damage; ``RecoveryMode/tolerateTornTail`` by default.
    public var recovery: RecoveryMode
    /// When a committed save reaches the disk; ``Durability/everySave`` by default.
    public var durability: Durability
    /// A segment past this size is closed and a new one started at the next save.
    public var maximumSegmentSize: Int
    /// Nil turns automatic compaction off.
    public var automaticCompaction: AutomaticCompaction?
    /// The busy timeout: how long a writer that finds the store's lock taken waits for it before throwing
    /// ``FileStoreError/locked(path:holder:timeout:)``, in seconds, like SQLite's `busy_timeout`. It bounds every
    /// wait for the lock: a writable open's (recovery and migration; an exclusive open's whole life), and, shared
    /// per save, each save's, history deletion's, compaction's and `sync()`'s. Nil (the default) waits
    /// ``defaultLockTimeout`` (5 s), and a migration plan's wait for another process migrating 30 s; 0 refuses at
    /// once. Measured by a monotonic clock, as every wait of the store is: a wall clock stepped back or ahead
    /// neither prolongs nor cuts it.
    public var lockTimeout: Double?
    /// How often reads (`fetch`, `fetchCount`, identifier lookups, `model(for:)`, history) check whether another
    /// process committed, and pick it up (``FileStore/refresh()``), in seconds, for an open that can fall behind:
    /// a read-only one, or a writable one shared per save. 0 (the default) checks on every read, so that a read
    /// sees every commit made before it started: one `stat` of the manifest and one of the active segment (and a
    /// one-byte read while another writer has space reserved), then only the records appended since. Nil
    /// refreshes only when asked. An exclusive writable open never checks: nobody else can commit.
    public var automaticRefreshInterval: Double?
    /// How much history the store keeps; ``HistoryRetention/untilDeleted`` by default.
    public var historyRetention: HistoryRetention
    /// How writable opens in several processes share the store; ``Sharing/perSave`` by default.
    public var sharing: Sharing
    /// How many bytes of disk space a writable open reserves ahead at the end of the last segment (256 KiB by
    /// default; 0 reserves none). A save that writes into reserved space leaves the file's length alone, so its
    /// flush writes no metadata: on ext4 a durable save takes about a third less time. The space shows as zeros at
    /// the end of the last segment while the store is open (and after a crash), and is cut off when the segment is
    /// closed (docs/FORMAT.md, *Reserved space*). At most 64 MiB is reserved (a larger value counts as 64 MiB):
    /// readers take more zeros than that for damage. Writers shared ``Sharing/perSave`` reserve too: one that takes
    /// the log's end over from another writes into the space the other reserved, and closing cuts the zeros off
    /// when the store's lock is free. Writers on Apple platforms, which have no `posix_fallocate`, reserve nothing.
    public var segmentReservation: Int = 256 << 10
    /// How long a read keeps trying, in seconds, while other processes keep replacing the manifest under it (5 by
    /// default): an open, a refresh, a reload. A reader takes no lock; it reads the manifest and what it lists, and
    /// reads again when the manifest changed meanwhile (docs/FORMAT.md, *Reading while another process writes*).
    /// Past this it throws ``FileStoreError/storeKeptChanging(path:attempts:seconds:)``, never a damage error.
    public var readRetryTimeout: Double = FileStoreConfiguration.defaultReadRetryTimeout
    /// How long, in seconds, a blob no object names any more is kept for readers that read an object naming it
    /// before (300, five minutes, by default; 0 deletes it at once, as a store without readers in other processes
    /// can afford). A compaction or a writable open's cleanup does not delete such a blob but *retires* it: renames
    /// it to `retired-<time>-<hash>` in `blobs/`, where a read-only open (or another writer) that fetched the
    /// object earlier still loads the bytes. A later compaction or writable open deletes it once it has been
    /// retired this long, by the wall clock (a retirement time ahead of the clock counts as now). A load after that
    /// throws ``FileStoreError/blobRemoved(name:path:)``: fetch again. The cost is disk space: a replaced drawing's
    /// bytes stay on disk until the first compaction or writable open past this period (docs/FORMAT.md,
    /// *External storage*).
    public var retiredBlobGracePeriod: Double = 300
    /// The file operations used; tests substitute one that fails on purpose.
    package var fileSystem: any StoreFileSystem = POSIXFileSystem()
    /// How many rows a compaction writes in one `rows` record (docs/FORMAT.md): 4,096. Tests lower it to make a
    /// snapshot of several `rows` records from a few hundred rows instead of thousands.
    package var rowsPerRecord = SegmentOpening.defaultRowsPerRecord
    /// The clocks used; tests substitute a wall clock that steps.
    var clocks: StoreClocks = .system

    /// A store at `url`, created when missing, durable on every save, shared with other writers per save.
    ///
    /// Nothing is opened or checked here: the container's `ModelContainer(for:configurations:)` opens the store
    /// (``makeStore(schema:)``) and throws what the open finds. Each parameter sets the property of the same name.
    public init(url: URL, name: String? = nil, mode: Mode = .readWrite(createIfMissing: true),
                recovery: RecoveryMode = .tolerateTornTail, durability: Durability = .everySave,
                maximumSegmentSize: Int = 64 << 20, automaticCompaction: AutomaticCompaction? = AutomaticCompaction(),
                lockTimeout: Double? = nil, automaticRefreshInterval: Double? = 0,
                historyRetention: HistoryRetention = .untilDeleted, sharing: Sharing = .perSave) {
        self.name = name ?? url.lastPathComponent
        self.url = url
        self.mode = mode
        self.recovery = recovery
        self.durability = durability
        self.maximumSegmentSize = maximumSegmentSize
        self.automaticCompaction = automaticCompaction
        self.lockTimeout = lockTimeout
        self.automaticRefreshInterval = automaticRefreshInterval
        self.historyRetention = historyRetention
        self.sharing = sharing
    }

    /// A store at `url` whose files are reached through `fileSystem` (tests pass one that fails on purpose); the
    /// other parameters as in the public initializer.
    package init(url: URL, name: String? = nil, mode: Mode = .readWrite(createIfMissing: true),
                 recovery: RecoveryMode = .tolerateTornTail, durability: Durability = .everySave,
                 maximumSegmentSize: Int = 64 << 20, automaticCompaction: AutomaticCompaction? = AutomaticCompaction(),
                 lockTimeout: Double? = nil, automaticRefreshInterval: Double? = 0,
                 historyRetention: HistoryRetention = .untilDeleted, sharing: Sharing = .perSave,
                 fileSystem: any StoreFileSystem) {
        self.init(url: url, name: name, mode: mode, recovery: recovery, durability: durability,
                  maximumSegmentSize: maximumSegmentSize, automaticCompaction: automaticCompaction,
                  lockTimeout: lockTimeout, automaticRefreshInterval: automaticRefreshInterval,
                  historyRetention: historyRetention, sharing: sharing)
        self.fileSystem = fileSystem
    }

    /// The ``readRetryTimeout`` of a configuration, and of the tools' reads (`StoreVerifier`, `StoreInspector`).
    static let defaultReadRetryTimeout = 5.0

    /// How long a wait for the store's lock lasts (``lockTimeout``, or its default).
    var busyTimeout: Double { lockTimeout ?? Self.defaultLockTimeout }

    /// The reservation writable opens with these settings make.
    var effectiveSegmentReservation: Int {
        min(max(0, segmentReservation), RecordFrame.maximumReservedSpace)
    }

    /// Opens (or creates) the store.
    ///
    /// - Throws: ``FileStoreError`` (damage, an unknown format version, a lock held elsewhere, a schema that does not
    ///   fit) or an I/O error; nothing is written when the open is refused.
    public func makeStore(schema: Schema) throws -> any DataStore {
        try FileStore(configuration: self, schema: schema)
    }
}
