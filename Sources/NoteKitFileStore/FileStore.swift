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
/// - ``salvage(from:to:mode:fileSystem:)``
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
/// - ``snapshots(for:)``
/// - ``fetch(_:)``
/// - ``identifier(entity:uniqueConstraint:key:)``
/// - ``identifiers(entity:relationship:referencing:)``
/// - ``save(_:)``
/// - ``generation``
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
    private let encoder = RecordEncoder()
    let state: Locked<State>
    let broadcaster = HistoryBroadcaster()
    /// Whether a migration session holds the store's lock for this open's whole life (a custom stage's store):
    /// its writes then take no lock of their own, which would wait for the session's.
    let lockHeldBySession: Bool
    let follower = Follower()
    /// The last `HISTORY-HOLD` read, by the file's status, so that a check costs a `stat` while it is unchanged.
    let holdCache = Locked<(status: StoreFileStatus, hold: UInt64)?>(nil)

    struct State {
        var rows: RowStorage
        var log: SegmentLog?
        var lock: (any StoreLockHandle)?
        var schemas: [Schema]
        var lastTransaction: UInt64
        /// Writes logged since the last snapshot, counting the snapshot's rows: against live rows, the garbage.
        var operationsLogged: Int
        var closedSegmentBytes: Int
        var writesStopped: String?
        /// When the first save not flushed yet was written, by the monotonic clock.
        var unsyncedSince: ContinuousClock.Instant?
        var lastCompactionError: String?
        /// Why the last compaction's checkpoint was not written (the compaction itself succeeded).
        var lastCheckpointError: String?
        /// How far a read-only open has read the log, for ``refresh()``; nil for a writable open.
        var position: ReadPosition?
        var lastRefreshCheck: ContinuousClock.Instant?
        var lastRefreshError: String?
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

    /// Opens or creates the store. With `holdingMigration`, a lightweight migration is applied in memory and not
    /// written: see ``commitHeldMigration()``.
    ///
    /// Whether the store opens with `schema`, migrates to it, or is refused follows NoteKit's versioning rule
    /// (``SchemaVersioning``); ``schema`` is `schema` at the version the store records.
    ///
    /// With `useCheckpoint` (the default) an open reads the store through its checkpoint when one describes the
    /// manifest's first segment (docs/FORMAT.md, *Using a checkpoint*), and otherwise replays the segments; false
    /// replays them whatever the checkpoint (its rows failed to read).
    ///
    /// `remoteBlobs` is where promised blobs are fetched from: a reload passes the slot of the open it refreshes, so
    /// that the rows it reads fetch through the source attached there (a new slot otherwise).
    init(configuration: FileStoreConfiguration, schema: Schema, lockSource: LockSource = .acquire,
         holdingMigration: Bool = false, useCheckpoint: Bool = true, remoteBlobs: RemoteBlobSlot? = nil) throws {
        self.configuration = configuration
        fileSystem = configuration.fileSystem
        layout = StoreLayout(root: configuration.url.path)
        blobs = BlobStore(directory: layout.blobs, fileSystem: fileSystem, remote: remoteBlobs ?? RemoteBlobSlot())
        if case .heldBySession = lockSource { lockHeldBySession = true } else { lockHeldBySession = false }
        let readOnly = configuration.mode == .readOnly

        var lock: (any StoreLockHandle)?
        if case .adopt(let held) = lockSource { lock = held }
        var report = RecoveryReport()
        do {
            creation: if !fileSystem.exists(layout.manifest) {
                // Segments without a manifest are what a creation writes before its first manifest, or damage.
                // Another process may be creating the store, or may have finished (and saved) since the manifest
                // was looked for: what it created then opens as any store does.
                do {
                    _ = try Self.interruptedCreation(layout: layout, fileSystem: fileSystem)
                } catch FileStoreError.inconsistentSegments(_, _) where fileSystem.exists(layout.manifest) {
                    break creation
                }
                guard case .readWrite(createIfMissing: true) = configuration.mode else {
                    // A creation not finished yet (or killed before its manifest) holds nothing to read.
                    if fileSystem.exists(layout.manifest) { break creation }
                    throw FileStoreError.storeNotFound(path: layout.root)
                }
                // Checked above before anything is written, so that a refused open writes nothing, and again here
                // under the lock, where it decides.
                try fileSystem.makeDirectory(layout.root)
                if case .acquire = lockSource {
                    lock = try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.busyTimeout,
                                                 clocks: configuration.clocks)
                }
                // Another process created the store while this open waited for the lock (several writers started
                // at once on a new store): this one opens what it created, with the lock it holds.
                if fileSystem.exists(layout.manifest) { break creation }
                for leftover in try Self.interruptedCreation(layout: layout, fileSystem: fileSystem) {
                    try fileSystem.remove(leftover)
                    report.removedLeftovers.append(leftover)
                }
                let log = try SegmentLog.create(layout: layout, fileSystem: fileSystem, store: UUID(),
                                                now: configuration.clocks.wall(), records: [encoder.schema(schema)],
                                                schemas: [schema])
                log.reservation = configuration.effectiveSegmentReservation
                recovery = report
                var created = State(rows: RowStorage(schema: schema), log: log, lock: lock, schemas: [schema],
                                    lastTransaction: 0, operationsLogged: 0, closedSegmentBytes: 0)
                try Self.shareIfAsked(&created, configuration: configuration, lockSource: lockSource, layout: layout,
                                      version: MagicLine.currentVersion)
                self.schema = schema
                state = Locked(created)
                return
            }

            // The entries a writable open uses, checked before anything is taken or written (the rule `verify` reports).
            if !readOnly { try layout.checkEntries(writing: true, fileSystem: fileSystem) }
            if !readOnly, case .acquire = lockSource, lock == nil {
                lock = try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.busyTimeout,
                                             clocks: configuration.clocks)
            }
            // Whether the checkpoint was found damaged (then a writable open writes it anew, whatever its header says).
            var checkpointDamaged = !useCheckpoint
            if useCheckpoint, fileSystem.exists(layout.checkpoint) {
                switch Self.openThroughCheckpoint(layout: layout, configuration: configuration, schema: schema,
                                                  blobs: blobs) {
                case .opened(let found):
                    let opened = try Self.finishOpen(found, configuration: configuration, layout: layout, lock: lock,
                                                     lockSource: lockSource, report: &report)
                    recovery = report
                    self.schema = found.rows.schema
                    state = Locked(opened)
                    return
                case .inapplicable: break
                case .damaged: checkpointDamaged = true
                }
            }
            var replay = try Self.replay(layout: layout, configuration: configuration, blobs: blobs,
                                         policy: configuration.recovery == .pointInTime && readOnly ? .pointInTime : .strict)
            // Taken before the manifest was read: a manifest replaced after that makes the next refresh look again.
            let manifestStatus = readOnly ? replay.manifestStatus : nil
            guard let stored = replay.log.schemas.last else {
                throw FileStoreError.undecodableRecord(file: layout.segment(replay.manifest.segments[0]), offset: 0,
                                                       reason: "the store records no schema")
            }
            // A schema change is checked (and refused) before anything is written.
            let decision = try SchemaVersioning.decide(schema, history: replay.log.schemas)
            // The replay's tables become the store's own (no row copied) unless a migration converts the rows.
            let replayed = replay.log.takeTables()
            // What a migration makes of the rows, in the stored schema's entity order.
            var migrated: [ModelSnapshot]?
            var migration: MigrationRecord?
            let effective: Schema
            switch decision {
            case .current(let recorded):
                effective = recorded
            case .migrate(let target):
                effective = target
                let lightweight = try LightweightMigration(from: stored, to: target)
                var rows = try lightweight.convert(stored.entities.flatMap { replayed[$0.name]?.rows ?? [] })
                let fills = lightweight.fillUpdates(for: rows) { entity, attribute in
                    target.generatedDefault(entity: entity, attribute: attribute) ?? .null
                }
                rows = ReplayedObjects.applying(fills, to: rows, version: replay.log.lastTransaction + 1)
                migrated = rows
                migration = MigrationRecord(number: replay.log.lastTransaction + 1, time: configuration.clocks.wall(),
                                            from: stored, schema: target, fills: fills)
            }
            report.damage = replay.log.damage
            // Nothing has been written so far. A writable open now recovers (torn tail, leftovers), then records
            // the migration, if any, as one more record.
            var log: SegmentLog?
            var lastCheckpointError: String?
            if !readOnly {
                if let torn = replay.log.tornTail {
                    report.tornTail = try Self.quarantine(torn, limit: configuration.maximumSegmentSize, layout: layout,
                                                          fileSystem: fileSystem)
                }
                report.removedLeftovers = try Self.removeLeftovers(manifest: replay.manifest,
                                                                   referenced: Self.referencedBlobs(replayed,
                                                                                                    schema: stored),
                                                                   layout: layout,
                                                                   fileSystem: fileSystem,
                                                                   now: configuration.clocks.wall(),
                                                                   gracePeriod: configuration.retiredBlobGracePeriod)
                let opened = try SegmentLog.open(layout: layout, fileSystem: fileSystem, manifest: replay.manifest,
                                                 end: replay.manifest.segments.last.flatMap {
                                                     replay.log.segmentSizes[$0] } ?? 0)
                opened.reservation = configuration.effectiveSegmentReservation
                // Reading sees the page cache, not the disk: an earlier process may have died between a write and
                // its flush, or between renaming the manifest and flushing its directory (or, creating the store,
                // the directory holding it). This open builds on what it read, so it makes that durable first.
                // (Segments and blobs are flushed, with their directory, before anything names them.)
                try opened.sync()
                try fileSystem.syncDirectory(layout.root)
                try fileSystem.syncDirectory(layout.parent)
                log = opened
                // The segments' schema history is the truth: a manifest whose copy of it is missing (version 1),
                // short (a crash between a migration's record and its manifest) or different gets theirs.
                try opened.replaceSchemas(with: replay.log.schemas)
                if let migration, !holdingMigration {
                    try opened.append(encoder.migration(migration))
                    try opened.sync()
                    // Only once the record is on disk: until then the new schema is not the store's. A crash
                    // between the two leaves the manifest one schema short, which the next writable open completes.
                    try opened.replaceSchemas(with: replay.log.schemas + [effective])
                }
                if migration == nil {
                    lastCheckpointError = Self.writeCheckpointIfMissing(replay.manifest, compacted: replay.log.hasSnapshot,
                                                                        schema: stored, layout: layout,
                                                                        fileSystem: fileSystem, blobs: blobs,
                                                                        rewrite: checkpointDamaged)
                }
            } else if let torn = replay.log.tornTail {
                report.tornTail = .init(segment: torn.path, offset: torn.offset, length: torn.length,
                                        reason: torn.reason, quarantinedAt: nil)
            }
            let lastTransaction = replay.log.lastTransaction + (migration == nil ? 0 : 1)
            let storage: RowStorage
            if let migrated {
                storage = RowStorage(schema: effective)
                storage.load(migrated, generation: lastTransaction)
            } else {
                storage = RowStorage(schema: effective, adopting: replayed, generation: lastTransaction)
            }
            storage.history = replay.log.history
            if let migration { storage.history.append(migration.historyRecord) }
            if case .latest(let count) = configuration.historyRetention {
                let holdLayout = layout, holdFileSystem = fileSystem
                storage.history.keepLatest(count, slack: 0) {
                    Self.readHistoryHold(layout: holdLayout, fileSystem: holdFileSystem, cache: nil)
                }
            }
            var position: ReadPosition?
            if readOnly, replay.log.damage == nil, let active = replay.manifest.segments.last {
                position = ReadPosition(manifest: replay.manifest, manifestStatus: manifestStatus, segment: active,
                                        offset: replay.log.segmentSizes[active] ?? 0,
                                        version: replay.log.segmentVersions[active] ?? MagicLine.currentVersion)
            }
            let closedBytes = replay.manifest.segments.dropLast().reduce(0) { $0 + (replay.log.segmentSizes[$1] ?? 0) }
            recovery = report
            var opened = State(rows: storage, log: log, lock: lock,
                               schemas: replay.log.schemas + (migration == nil ? [] : [effective]),
                               lastTransaction: lastTransaction,
                               operationsLogged: replay.log.operationsLogged + (migration?.fills.count ?? 0),
                               closedSegmentBytes: closedBytes, position: position,
                               migrationHeld: holdingMigration && migration != nil && !readOnly)
            opened.lastCheckpointError = lastCheckpointError
            opened.compactedBytes = replay.log.hasSnapshot ? replay.log.openingEnd : 0
            try Self.shareIfAsked(&opened, configuration: configuration, lockSource: lockSource, layout: layout,
                                  version: replay.manifest.segments.last.flatMap { replay.log.segmentVersions[$0] }
                                      ?? MagicLine.currentVersion)
            self.schema = effective
            state = Locked(opened)
        } catch {
            if case .acquire = lockSource { lock?.unlock() }
            throw error
        }
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

    /// Reads the manifest and replays its segments, pinned (``PinnedRead``): a reader racing a compaction in
    /// another process may find a segment gone, and reads the new manifest.
    private static func replay(layout: StoreLayout, configuration: FileStoreConfiguration, blobs: BlobStore,
                               policy: LogReplay.Policy) throws
        -> (manifest: Manifest, manifestStatus: StoreFileStatus?, log: LogReplay) {
        let read = PinnedRead(layout: layout, fileSystem: configuration.fileSystem,
                              timeout: configuration.readRetryTimeout, clocks: configuration.clocks)
        // Damage a point-in-time replay stops at is damage too: seen once, it is looked at again.
        return try read.run(damage: { $0.log.damage.map(AnyHashable.init) }) { pin in
            let manifest = try pin.manifest
            return (manifest, pin.status, try LogReplay.replay(manifest, layout: layout,
                                                               fileSystem: configuration.fileSystem,
                                                               blobs: blobs, policy: policy))
        }
    }

    /// Moves a torn tail's bytes to `quarantine/` and cuts the segment back to its last intact record.
    ///
    /// `quarantine/` must be a directory of the store, not a link: the torn bytes go nowhere else. A quarantine
    /// file that already holds the same bytes from the same offset (a process died between keeping them and
    /// cutting the segment) is used again rather than copied once more. If keeping the bytes or cutting the
    /// segment fails, the copy made here is deleted again (unless the cut happened after all), so a refused open
    /// leaves no file behind.
    ///
    /// At most `limit` bytes of the tail are copied: a tail longer than a segment may be (a hole, garbage) would
    /// otherwise fill the disk with a copy; the report says how many bytes were left out.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` when `quarantine/` is not a directory,
    ///   or an I/O error.
    static func quarantine(_ torn: (segment: Int, path: String, offset: Int, length: Int, reason: String),
                           limit: Int, layout: StoreLayout,
                           fileSystem: any StoreFileSystem) throws -> RecoveryReport.TornTail {
        if let found = try fileSystem.kind(of: layout.quarantine), found != .directory {
            throw FileStoreError.unexpectedFileType(path: layout.quarantine, found: found, expected: .directory)
        }
        try fileSystem.makeDirectory(layout.quarantine)
        let base = layout.quarantine + "/" + StoreLayout.segmentName(torn.segment) + ".at-\(torn.offset)"
        var name = base + ".torn"
        var earlier: [String] = []
        var suffix = 1
        while fileSystem.exists(name) {
            if try fileSystem.kind(of: name) == .regularFile { earlier.append(name) }
            suffix += 1
            name = base + "-\(suffix).torn"
        }
        // The tail is copied in pieces (it may be large, or sparse), then compared with earlier copies of the same
        // offset: one that holds the same bytes is kept instead.
        let file = try fileSystem.create(name)
        let copied = min(torn.length, max(limit, 1))
        var omitted = 0
        do {
            try copyTail(of: torn.path, from: torn.offset, length: copied, to: file, fileSystem: fileSystem)
            // Beyond the copy, only what is not zeros counts as left out (reserved space is not part of a tail).
            if copied < torn.length {
                omitted = try nonZeroExtent(of: torn.path, from: torn.offset + copied, to: torn.offset + torn.length,
                                            fileSystem: fileSystem)
            }
            try file.sync()
            try file.close()
        } catch {
            try? file.close()
            try? fileSystem.remove(name)
            throw error
        }
        var kept = name
        if let same = try earlier.first(where: { try sameContents(name, $0, fileSystem: fileSystem) }) {
            try? fileSystem.remove(name)
            kept = same
        } else {
            do { try fileSystem.syncDirectory(layout.quarantine) } catch {
                try? fileSystem.remove(name)
                throw error
            }
        }
        do {
            try fileSystem.truncate(torn.path, to: torn.offset)
        } catch {
            // The segment still holding the tail, the copy is not needed: the next open makes it again.
            if kept == name, let size = try? fileSystem.status(torn.path)?.size, size > torn.offset {
                try? fileSystem.remove(name)
            }
            throw error
        }
        return .init(segment: torn.path, offset: torn.offset, length: torn.length, reason: torn.reason,
                     quarantinedAt: kept, omittedLength: omitted)
    }

    /// How many bytes of `path` from `start` up to `end` are left once the zeros at their end are taken off: what a
    /// quarantine that stops at `start` leaves out. Read backwards in pieces from the last byte, so that a hole of
    /// any size before a last byte costs one piece.
    private static func nonZeroExtent(of path: String, from start: Int, to end: Int,
                                      fileSystem: any StoreFileSystem) throws -> Int {
        var position = end
        while position > start {
            let count = min(position - start, SegmentScan.piece)
            let piece = try fileSystem.read(path, from: position - count, count: count)
            if let last = piece.lastIndex(where: { $0 != 0 }) { return position - count + last + 1 - start }
            position -= count
        }
        return 0
    }

    /// Whether two regular files hold the same bytes, compared in pieces.
    private static func sameContents(_ first: String, _ second: String,
                                     fileSystem: any StoreFileSystem) throws -> Bool {
        guard let size = try fileSystem.status(first)?.size, try fileSystem.status(second)?.size == size else {
            return false
        }
        var position = 0
        while position < size {
            let count = min(size - position, SegmentScan.piece)
            let a = try fileSystem.read(first, from: position, count: count)
            guard !a.isEmpty, try fileSystem.read(second, from: position, count: count) == a else { return false }
            position += a.count
        }
        return true
    }

    /// Copies `length` bytes of `path` from `offset` to `file`, a piece at a time, without the zeros at their end
    /// (reserved space after a torn record is not part of it; the first byte is always copied).
    private static func copyTail(of path: String, from offset: Int, length: Int, to file: any StoreFile,
                                 fileSystem: any StoreFileSystem) throws {
        var position = offset, pendingZeros = 0
        let end = offset + length
        let zeros = [UInt8](repeating: 0, count: 1 << 16)
        while position < end {
            let piece = try fileSystem.read(path, from: position, count: min(end - position, SegmentScan.piece))
            if piece.isEmpty { break }
            var last = piece.count
            while last > 0, piece[last - 1] == 0, position + last - 1 > offset { last -= 1 }
            if last > 0 {
                // Zeros followed by more bytes are part of the tail.
                while pendingZeros > 0 {
                    let count = min(pendingZeros, zeros.count)
                    try zeros.withUnsafeBytes { try file.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                    pendingZeros -= count
                }
                try piece.withUnsafeBytes { try file.append(UnsafeRawBufferPointer(rebasing: $0[..<last])) }
            }
            pendingZeros += piece.count - last
            position += piece.count
        }
    }

    /// What a creation of the store that was interrupted before its first manifest left: nothing when `segments/`
    /// is missing or empty, else segment 1 (and `MANIFEST.tmp`) when segment 1 holds nothing but (a part of) what
    /// creating a store writes first, its `segment` and `schema` records, and `blobs/` is empty. A store has a
    /// manifest before it commits anything, so these files hold nothing to lose.
    ///
    /// - Throws: ``FileStoreError/inconsistentSegments(file:reason:)`` when segments exist that a creation cannot
    ///   have left: a store that lost its manifest, which is damage.
    private static func interruptedCreation(layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> [String] {
        guard fileSystem.exists(layout.segments) else { return [] }
        let names = try fileSystem.contentsOfDirectory(layout.segments)
        guard !names.isEmpty else { return [] }
        let refusal = FileStoreError.inconsistentSegments(file: layout.manifest,
                                                          reason: "the manifest is missing but segments exist")
        let blobs = fileSystem.exists(layout.blobs) ? try fileSystem.contentsOfDirectory(layout.blobs) : []
        guard names == [StoreLayout.segmentName(1)], blobs.isEmpty else { throw refusal }
        let path = layout.segment(1)
        let magic = MagicLine.bytes(.segment)
        let bytes = try fileSystem.read(path, from: 0, count: magic.count)
        if bytes.count >= magic.count || !magic.starts(with: bytes) {
            guard let scan = try? SegmentScan.read(path, number: 1, fileSystem: fileSystem),
                  scan.tail?.isTorn ?? true, scan.undecodable == nil else { throw refusal }
            // Segment 1 is deleted when this says it holds only a creation's records: a record it cannot read,
            // or a segment it cannot walk, says otherwise.
            var onlyCreation = true
            do {
                try scan.forEachRecord(blobs: nil) { record in
                    let kind = try? record.peek.kind
                    if kind != .segment && kind != .schema { onlyCreation = false }
                }
            } catch { throw refusal }
            guard onlyCreation else { throw refusal }
        }
        return [path] + (fileSystem.exists(layout.temporaryManifest) ? [layout.temporaryManifest] : [])
    }

    /// Deletes what no manifest reaches: a temporary manifest, segments not listed, partial blobs, and retired
    /// blobs past their grace period; retires the blobs no object references (``BlobStore/reclaim(keeping:now:gracePeriod:tolerant:)``).
    /// Only regular files of names the format produces are deleted: `blobs/` or `segments/` may be a link to a
    /// directory the user shares with other files, and anything else there is left alone (`verify` lists it).
    static func removeLeftovers(manifest: Manifest, referenced: Set<String>, layout: StoreLayout,
                                fileSystem: any StoreFileSystem, now: Date, gracePeriod: Double) throws -> [String] {
        var removed: [String] = []
        func remove(_ path: String) throws {
            if try removeStoreFile(path, fileSystem: fileSystem) { removed.append(path) }
        }
        try remove(layout.temporaryManifest)
        try remove(layout.temporaryCheckpoint)
        let listed = Set(manifest.segments)
        for name in try fileSystem.contentsOfDirectory(layout.segments) {
            guard let number = StoreLayout.segmentNumber(name), !listed.contains(number) else { continue }
            try remove(layout.segments + "/" + name)
        }
        if fileSystem.exists(layout.blobs) {
            let store = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
            // A reader in another process may be writing a fetched blob under its own temporary name right now.
            for file in try store.inventory().leftovers where !StoreLayout.isPartialBlobInFlight(file, now: now) {
                try remove(layout.blobs + "/" + file)
            }
            // Not deleted at once: a reader in another process may hold an object naming one (see `compact`).
            removed += try store.reclaim(keeping: referenced, now: now, gracePeriod: gracePeriod, tolerant: false).removed
        }
        if !removed.isEmpty {
            try fileSystem.syncDirectory(layout.segments)
            if fileSystem.exists(layout.blobs) { try fileSystem.syncDirectory(layout.blobs) }
        }
        return removed
    }

    /// Deletes the store file at `path` if it is a regular file; anything else there (a directory, a link, a FIFO)
    /// is not the store's to delete.
    ///
    /// - Returns: whether a file was deleted.
    static func removeStoreFile(_ path: String, fileSystem: any StoreFileSystem) throws -> Bool {
        guard try fileSystem.kind(of: path) == .regularFile else { return false }
        do { try fileSystem.remove(path) } catch let error as StoreIOError where error.code == ENOENT {
            // Gone between the look and the deletion: a reader in another process that fetched a promised blob
            // deletes its promise without the store's lock.
            return false
        }
        return true
    }

    /// The blob names live rows reference.
    static func referencedBlobs(_ rows: [ModelSnapshot], schema: Schema) -> Set<String> {
        Set(referencedExternalData(rows, schema: schema).keys)
    }

    /// The blob names the rows of `tables` (per entity name, as a replay built them) reference: only the tables
    /// of entities with an external-storage attribute are read.
    static func referencedBlobs(_ tables: [String: OrderedRows], schema: Schema) -> Set<String> {
        let holding = schema.entities.filter { $0.attributes.contains { $0.has(.externalStorage) } }
        return referencedBlobs(holding.flatMap { tables[$0.name]?.rows ?? [] }, schema: schema)
    }

    /// The blobs live rows reference, by name, with the size their records give.
    static func referencedExternalData(_ rows: [ModelSnapshot], schema: Schema) -> [String: ExternalData] {
        var blobs: [String: ExternalData] = [:]
        var externalSlots: [String: [Int]] = [:]
        for entity in schema.entities {
            let slots = entity.attributes.indices.filter { entity.attributes[$0].has(.externalStorage) }
            if !slots.isEmpty { externalSlots[entity.name] = slots }
        }
        guard !externalSlots.isEmpty else { return [:] }
        for row in rows {
            for slot in externalSlots[row.id.entityName] ?? [] {
                if case .external(let blob) = row.attributes[slot] { blobs[blob.name] = blob }
            }
        }
        return blobs
    }

    // MARK: DataStore

    /// The saved snapshots of `ids`, in order; nil for an identifier the store does not have.
    ///
    /// An open that can fall behind (read-only, or shared per save) first picks up what other processes committed,
    /// as ``FileStoreConfiguration/automaticRefreshInterval`` says.
    ///
    /// - Complexity: O(`ids.count`), from memory; no file is read (external-storage bytes load on first use).
    public func snapshots(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        state.withLock { state in
            refreshAutomatically(&state)
            return readingRows(&state, otherwise: ids.map { _ in nil }) { try $0.snapshots(for: ids) }
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
        try state.withLock { state in
            refreshAutomatically(&state)
            return try readingRows(&state) { try $0.fetch(request) }
        }
    }

    /// The identifier of the saved object of `entity` whose unique constraint number `constraint` has the values
    /// `key`, if there is one; used by a context to upsert on save.
    ///
    /// - Complexity: O(1) on average: every unique constraint is indexed in memory.
    public func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        state.withLock { state in
            refreshAutomatically(&state)
            return readingRows(&state, otherwise: nil) {
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
        state.withLock { state in
            refreshAutomatically(&state)
            return readingRows(&state, otherwise: []) {
                try $0.identifiers(entity: entity, relationship: relationship, referencing: target)
            }
        }
    }

    /// The number of the last committed transaction, which every save (of any process, once picked up) increases;
    /// contexts compare it to skip work.
    public var generation: UInt64 {
        state.withLock { state in
            refreshAutomatically(&state)
            return state.lastTransaction
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

    /// Deletes the transactions in `ranges` from the history by appending a `trim` record (flushed as a save is);
    /// the space is reclaimed at the next compaction.
    ///
    /// - Throws: `SaveError.readOnly(reason:)`, ``FileStoreError/writesStopped(reason:)`` or an I/O error; the
    ///   history is then unchanged.
    public func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws {
        try state.withLock { state in try withWriteAccess(&state) { log, state in
            try loadHistoryPrefix(&state)
            var history = state.rows.history
            history.delete(ranges, committedThrough: state.lastTransaction, holding: historyHold())
            guard history.deleted != state.rows.history.deleted else { return }
            if state.migrationHeld {
                state.rows.history = history
                return
            }
            try appendDurably(encoder.trim(deleted: history.deleted), what: "a history deletion", to: log, &state)
            state.rows.history = history
        } }
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

    /// Appends `changes` as one transaction record and, with ``FileStoreConfiguration/Durability/everySave``,
    /// flushes it before returning; only then are the changes applied in memory.
    ///
    /// External-storage bytes are written to blob files (and flushed) before the record that names them.
    ///
    /// - Throws: `SaveError` (nothing written), ``FileStoreError/writesStopped(reason:)``, or an I/O error. After
    ///   a failed flush the record is cut off again and the store accepts no more writes until reopened: retrying
    ///   the flush could report success for data the kernel already dropped.
    public func save(_ changes: ChangeSet) throws -> SaveResult {
        try state.withLock { state in try withWriteAccess(&state) { log, state in
            // After catching up with other processes, under their lock: a conditional save sees every commit.
            try changes.checkExpectedGeneration(state.lastTransaction)
            try readingRows(&state, lockHeld: true) { try $0.validate(changes) }
            let stored = try recordingStop(&state) { try writeBlobs(changes) }
            let transaction = Transaction(number: state.lastTransaction + 1, time: configuration.clocks.wall(),
                                          changes: stored)
            if !state.migrationHeld {
                try write(transaction, to: log, &state)
            }
            let record = state.rows.apply(stored, timestamp: transaction.time)
            if case .latest(let count) = configuration.historyRetention, state.historyPrefix == nil {
                state.rows.history.keepLatest(count, slack: max(64, count / 4), holding: historyHold)
            }
            broadcaster.publish([record])
            state.lastTransaction = transaction.number
            state.operationsLogged += changes.inserted.count + changes.updated.count + changes.deleted.count
            if !state.migrationHeld { compactIfWorthIt(&state) }
            return SaveResult(generation: transaction.number)
        } }
    }

    /// Runs `body`; a ``FileStoreError/writesStopped(reason:)`` it throws (the files are in doubt) is recorded, so
    /// that the store refuses writes until it is reopened.
    @discardableResult
    func recordingStop<Result>(_ state: inout State, _ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch FileStoreError.writesStopped(let reason) {
            state.writesStopped = reason
            throw FileStoreError.writesStopped(reason: reason)
        }
    }

    /// Appends one framed record and flushes it as the durability policy asks. A failed append that leaves the
    /// segment in doubt, or any failed flush, stops writes until the store is reopened.
    private func appendDurably(_ record: [UInt8], what: String, to log: SegmentLog, _ state: inout State) throws {
        try recordingStop(&state) { try log.append(record) }
        do {
            try flush(log, &state, forced: false)
        } catch {
            state.writesStopped = "flushing \(what) failed: \(error)"
            throw error
        }
    }

    /// Appends a transaction's record (starting a new segment first when the active one is full) and flushes it
    /// as the durability policy says.
    private func write(_ transaction: Transaction, to log: SegmentLog, _ state: inout State) throws {
        let payload = encoder.transaction(transaction, schema: schema)
        if log.activeSize > configuration.maximumSegmentSize {
            let closedSize = log.activeSize
            try recordingStop(&state) {
                try log.startSegment(with: [], replacingAll: false, now: configuration.clocks.wall())
            }
            state.closedSegmentBytes += closedSize
        }
        try appendDurably(payload, what: "transaction \(transaction.number)", to: log, &state)
    }

    /// Writes a migration held in memory, and every save since, by compacting: one new segment and an atomic
    /// replacement of the manifest, so the store has either its old schema and data or all of it.
    ///
    /// - Throws: the compaction's errors; nothing of the migration is written then.
    func commitHeldMigration() throws {
        try state.withLock { state in
            guard state.migrationHeld else { return }
            try compact(&state)
            state.migrationHeld = false
        }
    }

    /// Flushes the active segment when the durability policy calls for it.
    private func flush(_ log: SegmentLog, _ state: inout State, forced: Bool) throws {
        switch configuration.durability {
        case .everySave:
            try log.sync()
        case .deferred(let interval):
            // Measured by the monotonic clock: with the wall clock, a step back would stop every flush.
            let now = configuration.clocks.monotonic()
            if forced || state.unsyncedSince.map({ now - $0 >= .seconds(interval) }) == true {
                try log.sync()
                state.unsyncedSince = nil
            } else if state.unsyncedSince == nil {
                state.unsyncedSince = now
            }
        }
    }

    /// Writes the bytes of external-storage attributes to blob files and returns the changes naming them instead.
    private func writeBlobs(_ changes: ChangeSet) throws -> ChangeSet {
        var externalSlots: [String: Set<Int>] = [:]
        for entity in schema.entities {
            let slots = entity.attributes.indices.filter { entity.attributes[$0].has(.externalStorage) }
            if !slots.isEmpty { externalSlots[entity.name] = Set(slots) }
        }
        guard !externalSlots.isEmpty else { return changes }
        var stored = changes
        for (position, row) in changes.inserted.enumerated() {
            for slot in externalSlots[row.id.entityName] ?? [] {
                stored.inserted[position].attributes[slot] = try storedExternal(row.attributes[slot])
            }
        }
        for (position, update) in changes.updated.enumerated() {
            guard let slots = externalSlots[update.id.entityName] else { continue }
            for (index, change) in update.attributes.enumerated() where slots.contains(change.index) {
                stored.updated[position].attributes[index].value = try storedExternal(change.value)
            }
        }
        return stored
    }

    /// What a record holds for an external-storage value: bytes become a blob file; a reference to bytes on the
    /// mirror's server (an import's, not read yet) becomes a promise of the blob, unless its bytes are here already
    /// (docs/FORMAT.md, *Blobs on a mirror's server*).
    private func storedExternal(_ value: StoredValue) throws -> StoredValue {
        switch value {
        case .data(let data):
            return .external(try blobs.write(data))
        case .external(let external) where external.isRemote:
            if external.isLoaded { return .external(try blobs.write(try external.load())) }
            try blobs.promise(name: external.name, size: external.size)
            // The store's own lazy reference: it reads the blob once here, and fetches it through the mirror
            // attached to this store while it is not.
            return .external(blobs.reference(name: external.name, size: external.size))
        default:
            return value
        }
    }

    /// Makes `source` the place this open fetches promised blobs from (a mirror attaches its server); nil
    /// detaches it, and a read of a blob not fetched yet then throws ``FileStoreError/blobNotFetched(name:path:)``.
    package func attachRemoteBlobSource(_ source: (any RemoteBlobSource)?) {
        blobs.remote?.source = source
    }

    /// The names of the blobs promised in this store and not fetched yet (docs/FORMAT.md, *Blobs on a mirror's
    /// server*): the rows' current values name them, and `blobs/` has their promise but not their bytes.
    ///
    /// - Throws: the I/O error of listing `blobs/`.
    package func promisedBlobs() throws -> [(name: String, size: Int)] {
        guard fileSystem.exists(layout.blobs) else { return [] }
        let inventory = try blobs.inventory()
        let promised = Set(inventory.promised).subtracting(inventory.blobs)
        guard !promised.isEmpty else { return [] }
        var rows: [ModelSnapshot] = []
        for entity in schema.entities where entity.attributes.contains(where: { $0.has(.externalStorage) }) {
            let ids = try fetch(StoreFetchRequest(entity: entity.name, resultType: .identifiers)).identifiers
            rows += snapshots(for: ids).compactMap { $0 }
        }
        return Self.referencedExternalData(rows, schema: schema).values
            .filter { promised.contains($0.name) }
            .map { ($0.name, $0.size) }
            .sorted { $0.name < $1.name }
    }

    /// Fetches the promised blob `name` now, through the attached source, unless its bytes are here already.
    ///
    /// - Returns: whether its bytes are on disk now and were not before.
    /// - Throws: as ``BlobStore/fetch(name:size:)``.
    @discardableResult
    package func fetchPromisedBlob(name: String, size: Int) throws -> Bool {
        guard try blobs.isPromised(name), try fileSystem.kind(of: blobs.path(of: name)) == nil else { return false }
        _ = try blobs.fetch(name: name, size: size)
        return try fileSystem.kind(of: blobs.path(of: name)) == .regularFile
    }

    // MARK: Maintenance

    /// Flushes every written record to disk (meaningful with deferred durability). Shared per save, it takes the
    /// store's lock and catches up first, as a save does, so that the log it flushes ends where the file ends.
    ///
    /// - Throws: the flush's error; the store then accepts no more writes until reopened. Shared per save, what
    ///   catching up throws too.
    public func sync() throws {
        try state.withLock { state in
            guard state.log != nil else { return }
            // A stale log (another writer appended after it) must not be flushed: a failed flush cuts the segment
            // back to where this log last flushed, past the other writer's records.
            try withWriteAccess(&state) { log, state in
                do { try flush(log, &state, forced: true) } catch {
                    state.writesStopped = "flushing failed: \(error)"
                    throw error
                }
            }
        }
    }

    /// Flushes, closes the active segment and releases the lock. Saving afterwards is refused.
    public func close() throws {
        broadcaster.finish()
        try state.withLock { state in
            guard let log = state.log else { return }
            state.log = nil
            defer {
                state.lock?.unlock()
                state.lock = nil
            }
            try closeLog(log)
        }
    }

    /// Closes the log. Shared per save, the lock is not held and the log may be stale (others appended after
    /// it): a failed flush must not cut the segment back.
    private func closeLog(_ log: SegmentLog) throws {
        if configuration.sharing == .perSave { try log.closeShared() } else { try log.close() }
    }

    deinit {
        broadcaster.finish()
        state.withLock { state in
            if let log = state.log { try? closeLog(log) }
            state.lock?.unlock()
        }
    }

    /// Sizes and counts, for tools and for deciding when to compact.
    public struct Statistics: Sendable, Hashable {
        /// The number of the last committed transaction.
        public var lastTransaction: UInt64
        /// Live objects per entity.
        public var objectsPerEntity: [String: Int]
        /// The segments the manifest lists.
        public var segments: [Int]
        /// Bytes of the segments.
        public var logBytes: Int
        /// Writes logged since the last compaction (the rows of a snapshot count as one write each).
        public var operationsLogged: Int
        /// The fraction of logged writes that no longer describe a live object.
        public var garbageRatio: Double
        /// The error of the last automatic compaction, if it failed (the save that triggered it had succeeded).
        public var lastCompactionError: String?
        /// The error of the last automatic refresh (a read's check for other processes' commits, or the background
        /// check for ``FileStore/transactions()`` listeners), if it failed: the reads went on with the state the store
        /// had, so they may be missing those commits. Nil once a refresh succeeds again. ``FileStore/refresh()``
        /// throws the error itself.
        public var lastRefreshError: String?
        /// Why the last compaction of this open wrote no `CHECKPOINT` (docs/FORMAT.md, *Version 2*), if it failed
        /// to: the compaction succeeded (the checkpoint is derived data, and the store opens by replaying without
        /// it). Nil when it was written, and before any compaction.
        public var lastCheckpointError: String?
    }

    /// The store's current statistics.
    public var statistics: Statistics {
        state.withLock { state in
            let live = schema.entities.reduce(0) { $0 + state.rows.count(of: $1.name) }
            let logBytes = state.closedSegmentBytes + (state.log?.activeSize ?? 0)
            return Statistics(
                lastTransaction: state.lastTransaction,
                objectsPerEntity: Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, state.rows.count(of: $0.name)) }),
                segments: state.log?.manifest.segments ?? [],
                logBytes: logBytes, operationsLogged: state.operationsLogged,
                garbageRatio: state.operationsLogged == 0 ? 0 : max(0, 1 - Double(live) / Double(state.operationsLogged)),
                lastCompactionError: state.lastCompactionError, lastRefreshError: state.lastRefreshError,
                lastCheckpointError: state.lastCheckpointError)
        }
    }
}
