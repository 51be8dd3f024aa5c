#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// Sizes and counts, for tools and for deciding when to compact, and the errors of the work a store does on its
    /// own (automatic compaction, checkpoint, refresh), as the errors themselves: a ``FileStoreError``, a
    /// ``StoreIOError``, or what else that work threw, to branch on as where it is thrown.
    public struct Statistics: Sendable {
        /// The number of the last committed transaction.
        public var lastTransactionNumber: UInt64
        /// Rows (live objects) per entity.
        public var rowsPerEntity: [String: Int]
        /// The segments the manifest lists.
        public var segments: [Int]
        /// Bytes of the segments.
        public var logBytes: Int
        /// Writes logged since the last compaction (the rows of a snapshot count as one write each).
        public var operationsLogged: Int
        /// The fraction of logged writes that no longer describe a live object.
        public var garbageRatio: Double
        /// The error of the last automatic compaction, if it failed (the save that triggered it had succeeded).
        public var lastCompactionError: (any Error)?
        /// The error of the last automatic refresh (a read's check for other processes' commits, or the background
        /// check for ``FileStore/transactions()`` listeners), if it failed: the reads went on with the state the store
        /// had, so they may be missing those commits. Nil once a refresh succeeds again. ``FileStore/refresh()``
        /// throws the error itself.
        public var lastRefreshError: (any Error)?
        /// Why the last compaction of this open wrote no `CHECKPOINT` (docs/FORMAT.md, *Version 2*), if it failed
        /// to: the compaction succeeded (the checkpoint is derived data, and the store opens by replaying without
        /// it): a ``FileStoreError/unexpectedFileType(path:found:expected:)`` when something else than a regular file
        /// is where the checkpoint belongs (it is left as it is). Nil when it was written, and before any compaction.
        public var lastCheckpointError: (any Error)?
    }

    /// The store's current statistics.
    ///
    /// Waits for a save being flushed: the sizes it reports are the log's, which the flush may change.
    public var statistics: Statistics {
        writing.withLock { _ in state.withLock { state in
            let live = schema.entities.reduce(0) { $0 + state.rows.count(of: $1.name) }
            let logBytes = state.closedSegmentBytes + (state.log?.activeSize ?? 0)
            return Statistics(
                lastTransactionNumber: state.lastTransactionNumber,
                rowsPerEntity: Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, state.rows.count(of: $0.name)) }),
                segments: state.log?.manifest.segments ?? [],
                logBytes: logBytes, operationsLogged: state.operationsLogged,
                garbageRatio: state.operationsLogged == 0 ? 0 : max(0, 1 - Double(live) / Double(state.operationsLogged)),
                lastCompactionError: state.lastCompactionError, lastRefreshError: state.lastRefreshError,
                lastCheckpointError: state.lastCheckpointError)
        } }
    }
}
