#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A torn tail as a read found it: the segment, its path, where the excluded bytes begin, how many, and why.
typealias TornTailFound = (segment: Int, path: String, offset: Int, length: Int, reason: String)

extension FileStore {
    /// What an open read of a store, through its checkpoint or by replaying its segments, before anything is
    /// written: the one state both sources produce, which a writable open then prepares for writing
    /// (``StoreOpener/prepareForWriting(_:holdingMigration:report:)``).
    struct OpenedLog {
        var manifest: Manifest
        /// The manifest's status when it was read (for a read-only open's refreshes).
        var manifestStatus: StoreFileStatus?
        /// The schema history the segments hold.
        var schemas: [Schema]
        /// The rows, in the schema this open uses (the one a migration of this open converted them to).
        var rows: RowStorage
        var lastTransactionNumber: UInt64
        var operationsLogged: Int
        /// The last segment, where its last intact record ends, and its format version.
        var segment: Int
        var end: Int
        var version: Int
        /// The bytes of the segments before the last.
        var closedSegmentBytes: Int
        /// What follows the last intact record of the last segment, when it is not reserved space.
        var tornTail: TornTailFound?
        /// For a writable open, the blobs live rows name (what its cleanup keeps); empty for a read-only one.
        var referencedBlobs: Set<String>
        /// The history a checkpointed open left unread; nil after a replay, which read it all.
        var historyPrefix: HistoryPrefix?
        /// Where the first segment's opening ends: the log's size right after the compaction that wrote it (0 for a
        /// store never compacted).
        var compactedBytes: Int
        /// In `.pointInTime` mode, the damage where a replay stopped.
        var damage: FileStoreError?
        /// The lightweight migration this open applies to the stored rows, recorded when the open prepares to write.
        var migration: MigrationRecord?
        /// After a replay: what the checkpoint of the first segment needs (a writable open writes a missing, stale
        /// or damaged one); nil after an open through the checkpoint.
        var checkpoint: (compacted: Bool, schema: Schema, rewrite: Bool)?

        /// The schema history once this open's migration, if any, is written.
        var schemasAfterMigration: [Schema] { schemas + (migration.map { [$0.schema] } ?? []) }
    }
}

/// Opens a store: creates it when missing, reads one ``FileStore/OpenedLog`` from the checkpoint or by replaying the
/// segments, and for a writable open prepares it for writing (the torn tail set aside, leftovers removed, the log
/// reopened at its end and made durable, the manifest's schema copy repaired, a migration recorded, a missing
/// checkpoint written). What ``FileStore/init(configuration:schema:lockSource:holdingMigration:useCheckpoint:)``
/// and a reload (``FileStore/reload(_:lockHeld:useCheckpoint:)``) both run.
struct StoreOpener {
    let configuration: FileStoreConfiguration
    /// The schema the caller opens with.
    let schema: Schema
    let layout: StoreLayout
    /// The store's blobs: the rows read hold references to them (and fetch promised ones through its source).
    let blobs: BlobStore

    var fileSystem: any StoreFileSystem { configuration.fileSystem }
    var readOnly: Bool { configuration.mode == .readOnly }

    /// What an open produced: the store's state, the schema it uses, and what it recovered.
    struct Opened {
        var state: FileStore.State
        var schema: Schema
        var recovery: FileStore.RecoveryReport
    }

    /// Opens or creates the store (see ``FileStore``'s initializer).
    ///
    /// - Throws: what reading, migrating, recovering or creating the store throws; the lock this open took is
    ///   released then.
    func open(lockSource: FileStore.LockSource, holdingMigration: Bool, useCheckpoint: Bool) throws -> Opened {
        var lock: (any StoreLockHandle)?
        if case .adopt(let held) = lockSource { lock = held }
        do {
            if let created = try createIfMissing(lockSource: lockSource, lock: &lock) { return created }
            // The entries a writable open uses, checked before anything is taken or written (the rule `verify`
            // reports).
            if !readOnly { try layout.checkEntries(writing: true, fileSystem: fileSystem) }
            if !readOnly, case .acquire = lockSource, lock == nil {
                lock = try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.busyTimeout,
                                             clocks: configuration.clocks)
            }
            let found = try read(useCheckpoint: useCheckpoint)
            var report = FileStore.RecoveryReport()
            report.damage = found.damage
            var log: SegmentLog?
            var checkpointError: (any Error)?
            if !readOnly {
                (log, checkpointError) = try prepareForWriting(found, holdingMigration: holdingMigration,
                                                               report: &report)
            } else if let torn = found.tornTail {
                report.tornTail = .init(segment: torn.path, offset: torn.offset, length: torn.length,
                                        reason: torn.reason, quarantinedAt: nil)
            }
            var position: FileStore.ReadPosition?
            if readOnly, found.damage == nil {
                position = .init(manifest: found.manifest, manifestStatus: found.manifestStatus,
                                 segment: found.segment, offset: found.end, version: found.version)
            }
            var state = FileStore.State(rows: found.rows, log: log, lock: lock, schemas: found.schemasAfterMigration,
                                        lastTransactionNumber: found.lastTransactionNumber,
                                        operationsLogged: found.operationsLogged,
                                        closedSegmentBytes: found.closedSegmentBytes, position: position,
                                        migrationHeld: holdingMigration && found.migration != nil && !readOnly,
                                        historyPrefix: found.historyPrefix)
            state.lastCheckpointError = checkpointError
            state.compactedBytes = found.compactedBytes
            try FileStore.shareIfAsked(&state, configuration: configuration, lockSource: lockSource, layout: layout,
                                       version: found.version)
            return Opened(state: state, schema: found.rows.schema, recovery: report)
        } catch {
            if case .acquire = lockSource { lock?.unlock() }
            throw error
        }
    }

    /// Creates the store when it has no manifest and the configuration asks for it; nil when there is a store to
    /// open (one another process may have created meanwhile).
    ///
    /// - Throws: ``FileStoreError/storeNotFound(path:)`` when there is none and none may be created;
    ///   ``FileStoreError/inconsistentSegments(file:kind:reason:)`` for segments without a manifest that a creation
    ///   cannot have left; what taking the lock or writing throws.
    private func createIfMissing(lockSource: FileStore.LockSource,
                                 lock: inout (any StoreLockHandle)?) throws -> Opened? {
        guard !fileSystem.exists(layout.manifest) else { return nil }
        // Segments without a manifest are what a creation writes before its first manifest, or damage. Another
        // process may be creating the store, or may have finished (and saved) since the manifest was looked for:
        // what it created then opens as any store does.
        do {
            _ = try FileStore.interruptedCreation(layout: layout, fileSystem: fileSystem)
        } catch FileStoreError.inconsistentSegments where fileSystem.exists(layout.manifest) {
            return nil
        }
        guard case .readWrite(createIfMissing: true) = configuration.mode else {
            // A creation not finished yet (or killed before its manifest) holds nothing to read.
            if fileSystem.exists(layout.manifest) { return nil }
            throw FileStoreError.storeNotFound(path: layout.root)
        }
        // Checked above before anything is written, so that a refused open writes nothing, and again here under the
        // lock, where it decides.
        try fileSystem.makeDirectory(layout.root)
        if case .acquire = lockSource {
            lock = try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.busyTimeout,
                                         clocks: configuration.clocks)
        }
        // Another process created the store while this open waited for the lock (several writers started at once on
        // a new store): this one opens what it created, with the lock it holds.
        if fileSystem.exists(layout.manifest) { return nil }
        var report = FileStore.RecoveryReport()
        for leftover in try FileStore.interruptedCreation(layout: layout, fileSystem: fileSystem) {
            try fileSystem.remove(leftover)
            report.removedLeftovers.append(leftover)
        }
        let log = try SegmentLog.create(layout: layout, fileSystem: fileSystem, store: UUID(),
                                        now: configuration.clocks.wall(), records: [RecordEncoder().schema(schema)],
                                        schemas: [schema])
        log.reservation = configuration.effectiveSegmentReservation
        var created = FileStore.State(rows: RowStorage(schema: schema), log: log, lock: lock, schemas: [schema],
                                      lastTransactionNumber: 0, operationsLogged: 0, closedSegmentBytes: 0)
        try FileStore.shareIfAsked(&created, configuration: configuration, lockSource: lockSource, layout: layout,
                                   version: MagicLine.currentVersion)
        return Opened(state: created, schema: schema, recovery: report)
    }

    /// Reads the store through its checkpoint when one describes the manifest's first segment (docs/FORMAT.md, *Using
    /// a checkpoint*) and this open does not migrate, and otherwise by replaying the segments (when `useCheckpoint`
    /// is false, whatever the checkpoint: its rows failed to read).
    private func read(useCheckpoint: Bool) throws -> FileStore.OpenedLog {
        // Whether the checkpoint was found damaged (then a writable open writes it anew, whatever its header says).
        var checkpointDamaged = !useCheckpoint
        if useCheckpoint, fileSystem.exists(layout.checkpoint) {
            switch FileStore.openThroughCheckpoint(layout: layout, configuration: configuration, schema: schema,
                                                   blobs: blobs) {
            case .opened(let found): return found
            case .inapplicable: break
            case .damaged: checkpointDamaged = true
            }
        }
        return try replay(rewriteCheckpoint: checkpointDamaged)
    }

    /// Replays the segments over a pinned manifest, and converts the rows when this open migrates the store (a
    /// schema change is checked, and refused, before anything is written).
    private func replay(rewriteCheckpoint: Bool) throws -> FileStore.OpenedLog {
        let policy: LogReplay.Policy = configuration.recovery == .pointInTime && readOnly ? .pointInTime : .strict
        let read = PinnedRead(layout: layout, fileSystem: fileSystem, timeout: configuration.readRetryTimeout,
                              clocks: configuration.clocks)
        // Damage a point-in-time replay stops at is damage too: seen once, it is looked at again.
        let (manifest, manifestStatus, replayed) = try read.run(damage: { $0.2.damage.map(AnyHashable.init) }) { pin in
            let manifest = try pin.manifest
            return (manifest, pin.status, try LogReplay.replay(manifest, layout: layout, fileSystem: fileSystem,
                                                               blobs: blobs, policy: policy))
        }
        var replay = replayed
        guard let stored = replay.schemas.last else {
            throw FileStoreError.undecodableRecord(file: layout.segment(manifest.segments[0]), offset: 0,
                                                   reason: "the store records no schema")
        }
        let decision = try SchemaVersioning.decide(schema, history: replay.schemas)
        // The replay's tables become the store's own (no row copied) unless a migration converts the rows.
        let tables = replay.takeTables()
        let referenced = readOnly ? [] : FileStore.referencedBlobs(tables, schema: stored)
        let rows: RowStorage
        var migration: MigrationRecord?
        switch decision {
        case .current(let recorded):
            rows = RowStorage(schema: recorded, adopting: tables, transactionNumber: replay.lastTransactionNumber)
        case .migrate(let target):
            let lightweight = try LightweightMigration(from: stored, to: target)
            var converted = try lightweight.convert(stored.entities.flatMap { tables[$0.name]?.rows ?? [] })
            let fills = lightweight.fillUpdates(for: converted) { entity, attribute in
                target.generatedDefault(entity: entity, attribute: attribute) ?? .null
            }
            converted = ReplayedRows.applying(fills, to: converted,
                                                 transactionNumber: replay.lastTransactionNumber + 1)
            let record = MigrationRecord(number: replay.lastTransactionNumber + 1, time: configuration.clocks.wall(),
                                         from: stored, schema: target, fills: fills)
            rows = RowStorage(schema: target)
            rows.load(converted, transactionNumber: record.number)
            migration = record
        }
        rows.history = replay.history
        if let migration { rows.history.append(migration.historyRecord) }
        if case .latest(let count) = configuration.historyRetention {
            let holdLayout = layout, holdFileSystem = fileSystem
            rows.history.keepLatest(count, slack: 0) {
                FileStore.readHistoryHold(layout: holdLayout, fileSystem: holdFileSystem, cache: nil)
            }
        }
        let active = manifest.segments.last
        return FileStore.OpenedLog(
            // Taken before the manifest was read: a manifest replaced after that makes the next refresh look again.
            manifest: manifest, manifestStatus: readOnly ? manifestStatus : nil, schemas: replay.schemas, rows: rows,
            lastTransactionNumber: replay.lastTransactionNumber + (migration == nil ? 0 : 1),
            operationsLogged: replay.operationsLogged + (migration?.fills.count ?? 0),
            segment: active ?? 0, end: active.flatMap { replay.segmentSizes[$0] } ?? 0,
            version: active.flatMap { replay.segmentVersions[$0] } ?? MagicLine.currentVersion,
            closedSegmentBytes: manifest.segments.dropLast().reduce(0) { $0 + (replay.segmentSizes[$1] ?? 0) },
            tornTail: replay.tornTail, referencedBlobs: referenced, historyPrefix: nil,
            compactedBytes: replay.hasSnapshot ? replay.openingEnd : 0, damage: replay.damage, migration: migration,
            checkpoint: (replay.hasSnapshot, stored, rewriteCheckpoint))
    }

    /// What a writable open does before its first write, whichever way it read the store: sets the torn tail
    /// aside, removes leftovers (keeping the blobs live rows name), reopens the log at its end and makes what it read
    /// durable, repairs the manifest's copy of the schema history, records this open's migration (unless it is
    /// held), and writes the checkpoint a replay found missing, stale or damaged.
    ///
    /// - Returns: the log, and why the checkpoint could not be written (derived data: no failure of the open).
    /// - Throws: what setting the tail aside, removing leftovers, flushing or appending throws.
    func prepareForWriting(_ found: FileStore.OpenedLog, holdingMigration: Bool,
                           report: inout FileStore.RecoveryReport) throws -> (SegmentLog, (any Error)?) {
        if let torn = found.tornTail {
            report.tornTail = try FileStore.quarantine(torn, limit: configuration.maximumSegmentSize, layout: layout,
                                                       fileSystem: fileSystem)
        }
        report.removedLeftovers = try FileStore.removeLeftovers(manifest: found.manifest,
                                                                referenced: found.referencedBlobs, layout: layout,
                                                                fileSystem: fileSystem, now: configuration.clocks.wall(),
                                                                gracePeriod: configuration.retiredBlobGracePeriod)
        let log = try SegmentLog.open(layout: layout, fileSystem: fileSystem, manifest: found.manifest, end: found.end)
        log.reservation = configuration.effectiveSegmentReservation
        // Reading sees the page cache, not the disk: an earlier process may have died between a write and its flush,
        // or between renaming the manifest and flushing its directory (or, creating the store, the directory holding
        // it). This open builds on what it read, so it makes that durable first. (Segments and blobs are flushed,
        // with their directory, before anything names them.)
        try log.sync()
        try fileSystem.syncDirectory(layout.root)
        try fileSystem.syncDirectory(layout.parent)
        // The segments' schema history is the truth: a manifest whose copy of it is missing (version 1), short (a
        // crash between a migration's record and its manifest) or different gets theirs.
        try log.replaceSchemas(with: found.schemas)
        if let migration = found.migration {
            guard !holdingMigration else { return (log, nil) }
            try log.append(RecordEncoder().migration(migration))
            try log.sync()
            // Only once the record is on disk: until then the new schema is not the store's. A crash between the two
            // leaves the manifest one schema short, which the next writable open completes.
            try log.replaceSchemas(with: found.schemasAfterMigration)
            return (log, nil)
        }
        guard let checkpoint = found.checkpoint else { return (log, nil) }
        return (log, FileStore.writeCheckpointIfMissing(found.manifest, compacted: checkpoint.compacted,
                                                        schema: checkpoint.schema, layout: layout,
                                                        fileSystem: fileSystem, blobs: blobs,
                                                        rewrite: checkpoint.rewrite))
    }
}
