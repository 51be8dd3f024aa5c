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
    /// Reads wait only while the rows are taken: the new segment, its flushes, the manifest's replacement and the
    /// checkpoint are written without the lock over the store's state, and a fetch meanwhile answers from the rows
    /// as they were (the same rows: a compaction changes files, not content).
    ///
    /// - Throws: `SaveError.readOnly(reason:)`, ``FileStoreError/writesStopped(kind:reason:)``, or an I/O error (the
    ///   store is then unchanged).
    /// - Complexity: O(objects); writes the whole state once.
    @discardableResult
    public func compact() throws -> CompactionReport {
        try writing.withLock { closed in
            if configuration.mode == .readOnly || closed { throw noLogRefusal() }
            try state.withLock { try checkWritable($0) }
            let lock = try acquireSharedWriteLock()
            defer { lock?.unlock() }
            return try compactBesideReads()
        }
    }

    /// A compaction in three steps, so that reads go on while it writes: the rows taken under the state's lock, the
    /// files written without it (the write marked in flight: a refresh skips, a reload waits), the outcome recorded
    /// under it again. The caller holds ``writing`` and, shared per save, the store's lock.
    func compactBesideReads() throws -> CompactionReport {
        let taken = try state.withLock { state in
            do {
                _ = try prepareWrite(&state)
                let taken = try compactionRows(&state)
                state.writeInFlight = true
                return taken
            } catch {
                settlePosition(&state)
                throw error
            }
        }
        let written = writeCompaction(taken)
        return try state.withLock { state in
            state.writeInFlight = false
            defer { settlePosition(&state) }
            return try finishCompaction(taken, written, &state)
        }
    }

    /// Compacts with the state's lock held throughout (a held migration's commit, which nothing reads beside).
    @discardableResult
    func compact(_ state: inout State) throws -> CompactionReport {
        let taken = try compactionRows(&state)
        return try finishCompaction(taken, writeCompaction(taken), &state)
    }

    /// What a compaction writes, taken from the state under its lock.
    struct CompactionRows {
        let log: SegmentLog
        let bytesBefore: Int
        let schemas: [Schema]
        let entityRows: [[ModelSnapshot]]
        let history: HistoryLog
        let lastTransactionNumber: UInt64
        /// Per entity, the attributes each index is keyed by (``RowStorage/indexSlots(of:)``), and each index
        /// when the entity's rows are all in memory (walked without the lock; over a checkpoint, the entries are made
        /// from the rows taken).
        let indexSlots: [[[Int]]]
        let inMemoryIndexes: [[IndexSnapshot?]]
    }

    /// What a compaction did without the state's lock.
    struct CompactionWrite {
        var opening: SegmentOpening?
        var failure: (any Error)?
        var removedSegments: [String] = []
        var reclaimed = BlobStore.Reclaimed()
        var checkpointError: (any Error)?
    }

    /// Under the state's lock: every row, the history kept, and what the checkpoint's indexes need.
    private func compactionRows(_ state: inout State) throws -> CompactionRows {
        guard let log = state.log else { throw noLogRefusal() }
        if let stop = state.writesStopped { throw FileStoreError.writesStopped(kind: stop.kind, reason: stop.reason) }
        try loadHistoryPrefix(&state)
        var entityRows: [[ModelSnapshot]] = []
        for entity in schema.entities {
            entityRows.append(try readingRows(&state, lockHeld: true) { try $0.rows(of: entity.name) })
        }
        if case .latest(let count) = configuration.historyRetention {
            state.rows.history.keepLatest(count, slack: 0, holding: historyHold)
        }
        let rows = state.rows
        return CompactionRows(log: log, bytesBefore: state.closedSegmentBytes + log.activeSize, schemas: state.schemas,
                              entityRows: entityRows, history: rows.history,
                              lastTransactionNumber: state.lastTransactionNumber,
                              indexSlots: schema.entities.map { rows.indexSlots(of: $0.name) },
                              inMemoryIndexes: schema.entities.map { entity in
                                  entity.indexes.indices.map { rows.inMemoryIndex(of: entity.name, index: $0) }
                              })
    }

    /// Without the state's lock: encodes and writes the new segment, replaces the manifest, deletes the old segments,
    /// reclaims blobs and writes the checkpoint. Reads only what `taken` holds.
    private func writeCompaction(_ taken: CompactionRows) -> CompactionWrite {
        var written = CompactionWrite()
        let opening = SegmentOpening(schemas: taken.schemas, schema: schema, entityRows: taken.entityRows,
                                     history: taken.history, lastTransactionNumber: taken.lastTransactionNumber,
                                     rowsPerRecord: configuration.rowsPerRecord)
        let dropped: [Int]
        do {
            dropped = try taken.log.startSegment(with: opening.records, replacingAll: true, schemas: taken.schemas,
                                                 now: configuration.clocks.wall(), recorded: opening.places.written)
        } catch {
            written.failure = error
            return written
        }
        written.opening = opening
        // The new state is committed; what follows only reclaims space, and a crash here is cleaned up at open.
        for number in dropped {
            let path = layout.segment(number)
            if (try? Self.removeStoreFile(path, fileSystem: fileSystem)) == true { written.removedSegments.append(path) }
        }
        // Readers in other processes may hold objects naming the blobs no object names now: those are retired,
        // and deleted by a later compaction or writable open once past their grace period.
        let referenced = Set(opening.referencedExternalData.keys)
        written.reclaimed = (try? blobs.reclaim(keeping: referenced, now: configuration.clocks.wall(),
                                                gracePeriod: configuration.retiredBlobGracePeriod, tolerant: true))
            ?? BlobStore.Reclaimed()
        try? fileSystem.syncDirectory(layout.segments)
        // Derived data, written once the manifest names its segment: a failure fails nothing (docs/FORMAT.md,
        // *The checkpoint file*).
        do {
            let numbers = Dictionary(schema.entities.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
            let file = try opening.checkpoint(store: taken.log.manifest.store, segment: taken.log.activeSegment) {
                guard let number = numbers[$0], $1 < taken.indexSlots[number].count else { return [] }
                if $1 < taken.inMemoryIndexes[number].count, let index = taken.inMemoryIndexes[number][$1] {
                    return index.entries
                }
                return RowStorage.indexEntries(taken.entityRows[number], slots: taken.indexSlots[number][$1])
            }
            try Checkpoint.write(file, layout: layout, fileSystem: fileSystem)
        } catch {
            written.checkpointError = error
        }
        return written
    }

    /// Under the state's lock again: the counters after a compaction, or its failure.
    private func finishCompaction(_ taken: CompactionRows, _ written: CompactionWrite, _ state: inout State) throws
        -> CompactionReport {
        if let failure = written.failure { try recordingStop(&state) { throw failure } }
        guard let opening = written.opening else { throw noLogRefusal() }
        let log = taken.log
        state.lastCheckpointError = written.checkpointError
        state.closedSegmentBytes = 0
        state.operationsLogged = opening.rowCount
        state.bytesAfterCompaction = log.activeSize
        state.compactedBytes = log.activeSize
        state.compactionRetryBytes = nil
        return CompactionReport(bytesBefore: taken.bytesBefore, bytesAfter: log.activeSize,
                                segmentsRemoved: written.removedSegments, blobsRemoved: written.reclaimed.unreferenced,
                                retiredBlobsDeleted: written.reclaimed.expired)
    }

    /// Whether a save should now compact, by the configuration's thresholds (``FileStoreConfiguration/
    /// AutomaticCompaction``); the save then compacts with ``compactAutomatically()``, after it committed.
    func compactionIsWorthIt(_ state: inout State) -> Bool {
        guard let policy = configuration.automaticCompaction, let log = state.log else { return false }
        let logBytes = state.closedSegmentBytes + log.activeSize
        guard logBytes >= policy.minimumLogSize, logBytes >= state.compactionRetryBytes ?? 0,
              state.operationsLogged > 0 else { return false }
        let live = schema.entities.reduce(0) { $0 + state.rows.count(of: $1.name) }
        let garbage = 1 - Double(live) / Double(state.operationsLogged)
        // Kept history cannot be reclaimed: the log must also have doubled since the last compaction, so that
        // rewriting what is kept costs at most as much as what was appended since.
        let superseded = garbage > policy.garbageRatio && logBytes >= 2 * state.bytesAfterCompaction
        // What every open replays: the log after the compaction its checkpoint describes. Compacting for it only
        // once that part is as large as the compaction's keeps the bytes rewritten proportional to those appended.
        let replayed = logBytes - state.compactedBytes
        let longReplay = policy.replayLimit.map { replayed >= $0 } == true && replayed >= state.compactedBytes
        return superseded || longReplay
    }

    /// Compacts after a save that found it worth it, beside reads (``compactBesideReads()``). A failure does not fail
    /// the save that triggered it (that save is committed); it is kept in ``statistics``, and the next attempt waits
    /// until the log has grown by half again: a compaction that failed for lack of space would fail again at once,
    /// and rewriting the store on every save would make each save cost as much as a compaction. The caller holds
    /// ``writing`` and, shared per save, the store's lock.
    func compactAutomatically() {
        do {
            _ = try compactBesideReads()
            state.withLock { $0.lastCompactionError = nil }
        } catch {
            state.withLock { state in
                state.lastCompactionError = error
                let logBytes = state.closedSegmentBytes + (state.log?.activeSize ?? 0)
                state.compactionRetryBytes = logBytes + max(logBytes / 2, 1)
            }
        }
    }
}
