#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// What a compaction did.
    public struct CompactionReport: Sendable, Hashable {
        /// The bytes of the segments before the compaction.
        public var bytesBefore: Int
        /// The bytes of the one segment written, holding the state and the history kept.
        public var bytesAfter: Int
        /// The paths of the segments deleted because the new manifest no longer lists them.
        public var segmentsRemoved: [String]
        /// The blobs no object names any more, taken out of the store: retired (kept for readers for
        /// ``FileStoreConfiguration/retiredBlobGracePeriod``), or deleted at once when that is 0.
        public var blobsRemoved: [String]
        /// The files of retired blobs deleted because they had been retired longer than the grace period.
        public var retiredBlobsDeleted: [String]
    }

    /// Rewrites the store as one segment holding its current state, then deletes the old segments, retires the
    /// blobs no object references, and deletes the retired blobs past their grace period (docs/FORMAT.md, *Writing,
    /// rotation and compaction* and *External storage*). A crash at any step leaves the old or the new state whole.
    ///
    /// - Throws: `SaveError.readOnly(reason:)`, ``FileStoreError/writesStopped(kind:reason:)``, or an I/O error (the
    ///   store is then unchanged).
    /// - Complexity: O(objects); writes the whole state once.
    @discardableResult
    public func compact() throws -> CompactionReport {
        try writing.withLock { _ in
            try state.withLock { state in try withWriteAccess(&state) { _, state in try compact(&state) } }
        }
    }

    @discardableResult
    func compact(_ state: inout State) throws -> CompactionReport {
        guard let log = state.log else { throw noLogRefusal() }
        if let stop = state.writesStopped { throw FileStoreError.writesStopped(kind: stop.kind, reason: stop.reason) }
        let bytesBefore = state.closedSegmentBytes + log.activeSize
        try loadHistoryPrefix(&state)
        var entityRows: [[ModelSnapshot]] = []
        for entity in schema.entities {
            entityRows.append(try readingRows(&state, lockHeld: true) { try $0.rows(of: entity.name) })
        }
        if case .latest(let count) = configuration.historyRetention {
            state.rows.history.keepLatest(count, slack: 0, holding: historyHold)
        }
        let opening = SegmentOpening(schemas: state.schemas, schema: schema, entityRows: entityRows,
                                     history: state.rows.history, lastTransactionNumber: state.lastTransactionNumber,
                                     rowsPerRecord: configuration.rowsPerRecord)
        let schemas = state.schemas
        let dropped = try recordingStop(&state) {
            try log.startSegment(with: opening.records, replacingAll: true, schemas: schemas,
                                 now: configuration.clocks.wall(), recorded: opening.places.written)
        }
        // The new state is committed; what follows only reclaims space, and a crash here is cleaned up at open.
        var removedSegments: [String] = []
        for number in dropped {
            let path = layout.segment(number)
            if (try? Self.removeStoreFile(path, fileSystem: fileSystem)) == true { removedSegments.append(path) }
        }
        // Readers in other processes may hold objects naming the blobs no object names now: those are retired,
        // and deleted by a later compaction or writable open once past their grace period.
        let referenced = Set(opening.referencedExternalData.keys)
        let reclaimed = (try? blobs.reclaim(keeping: referenced,
                                            now: configuration.clocks.wall(),
                                            gracePeriod: configuration.retiredBlobGracePeriod, tolerant: true))
            ?? BlobStore.Reclaimed()
        try? fileSystem.syncDirectory(layout.segments)
        // Derived data, written once the manifest names its segment: a failure fails nothing (docs/FORMAT.md,
        // *The checkpoint file*).
        do {
            let rows = state.rows
            let file = try opening.checkpoint(store: log.manifest.store, segment: log.activeSegment) {
                try rows.indexEntries(of: $0, index: $1)
            }
            try Checkpoint.write(file, layout: layout, fileSystem: fileSystem)
            state.lastCheckpointError = nil
        } catch {
            state.lastCheckpointError = error
        }
        state.closedSegmentBytes = 0
        state.operationsLogged = opening.rowCount
        state.bytesAfterCompaction = log.activeSize
        state.compactedBytes = log.activeSize
        state.compactionRetryBytes = nil
        return CompactionReport(bytesBefore: bytesBefore, bytesAfter: log.activeSize, segmentsRemoved: removedSegments,
                                blobsRemoved: reclaimed.unreferenced, retiredBlobsDeleted: reclaimed.expired)
    }

    /// Compacts after a save when the configuration's thresholds are passed (``FileStoreConfiguration/
    /// AutomaticCompaction``). A failure does not fail the save that triggered it (that save is committed); it is
    /// kept in ``statistics``, and the next attempt waits until the log has grown by half again: a compaction that
    /// failed for lack of space would fail again at once, and rewriting the store on every save would make each save
    /// cost as much as a compaction.
    func compactIfWorthIt(_ state: inout State) {
        guard let policy = configuration.automaticCompaction, let log = state.log else { return }
        let logBytes = state.closedSegmentBytes + log.activeSize
        guard logBytes >= policy.minimumLogSize, logBytes >= state.compactionRetryBytes ?? 0,
              state.operationsLogged > 0 else { return }
        let live = schema.entities.reduce(0) { $0 + state.rows.count(of: $1.name) }
        let garbage = 1 - Double(live) / Double(state.operationsLogged)
        // Kept history cannot be reclaimed: the log must also have doubled since the last compaction, so that
        // rewriting what is kept costs at most as much as what was appended since.
        let superseded = garbage > policy.garbageRatio && logBytes >= 2 * state.bytesAfterCompaction
        // What every open replays: the log after the compaction its checkpoint describes. Compacting for it only
        // once that part is as large as the compaction's keeps the bytes rewritten proportional to those appended.
        let replayed = logBytes - state.compactedBytes
        let longReplay = policy.replayLimit.map { replayed >= $0 } == true && replayed >= state.compactedBytes
        guard superseded || longReplay else { return }
        do {
            try compact(&state)
            state.lastCompactionError = nil
        } catch {
            state.lastCompactionError = error
            state.compactionRetryBytes = logBytes + max(logBytes / 2, 1)
        }
    }
}
