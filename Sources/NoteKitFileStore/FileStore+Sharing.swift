#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// Runs `body`, which writes to the log, with the right to write: for an exclusive open, which holds the
    /// store's lock from open to close, at once; for an open shared per save, under the store's lock (taken here,
    /// or held by the migration session the open belongs to), after catching up with what other processes
    /// committed, and then records where the log now ends.
    ///
    /// - Throws: ``SaveError/readOnly(reason:)``, ``FileStoreError/writesStopped(kind:reason:)``,
    ///   ``FileStoreError/locked(path:holder:timeout:)`` when another process keeps the lock past the busy timeout,
    ///   what catching up throws (damage, a store migrated by a newer schema), or what `body` throws.
    func withWriteAccess<Result>(_ state: inout State, _ body: (SegmentLog, inout State) throws -> Result) throws -> Result {
        try checkWritable(state)
        let lock = try acquireSharedWriteLock()
        defer { lock?.unlock() }
        let log = try prepareWrite(&state)
        defer { settlePosition(&state) }
        return try body(log, &state)
    }

    /// Throws when this open may not write: read-only, closed, or writes stopped after a write whose outcome is
    /// unknown.
    func checkWritable(_ state: State) throws {
        guard state.log != nil else { throw noLogRefusal() }
        if let stop = state.writesStopped { throw FileStoreError.writesStopped(kind: stop.kind, reason: stop.reason) }
    }

    /// The store's lock for one write of an open shared per save, taken here (nil for an exclusive open, which holds
    /// it from open to close, or one whose migration session holds it: a second flock of this process would wait
    /// for the session's, and time out).
    ///
    /// `LOCK` is kept open from the first save to the close, so that a save's lock is a `flock` and no more.
    ///
    /// - Throws: ``FileStoreError/locked(path:holder:timeout:)`` when another process keeps it past the busy timeout.
    func acquireSharedWriteLock() throws -> (any StoreLockHandle)? {
        guard configuration.sharing == .perSave, !lockHeldBySession else { return nil }
        let kept = try keptLockFile.withLock { kept in
            if kept == nil { kept = try KeptLockFile(layout, fileSystem: fileSystem) }
            return kept
        }
        return try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.busyTimeout,
                                     clocks: configuration.clocks, through: kept)
    }

    /// With the right to write: for an open shared per save, catches up with what other processes committed;
    /// returns the log to append to.
    func prepareWrite(_ state: inout State) throws -> SegmentLog {
        try checkWritable(state)
        guard configuration.sharing == .perSave else { return state.log! }
        try catchUp(&state)
        guard let log = state.log else { throw noLogRefusal() }
        return log
    }

    /// Why an open without a log refuses a write: it was opened read-only, or it was closed since.
    func noLogRefusal() -> SaveError {
        SaveError.readOnly(reason: "\(layout.root) was \(configuration.mode == .readOnly ? "opened read-only" : "closed")")
    }

    /// After a write of an open shared per save, whatever it did (appended, rotated, compacted, or failed): the
    /// position is where the log ends.
    func settlePosition(_ state: inout State) {
        guard configuration.sharing == .perSave, let log = state.log else { return }
        // The MANIFEST's status the position holds is still its status when this write did not change the manifest
        // (the catching up read it under the store's lock, and no other writer has written since).
        let unchanged = state.position.flatMap { $0.manifest == log.manifest ? $0.manifestStatus : nil }
        guard let status = unchanged ?? (try? fileSystem.status(layout.manifest)) else { return }
        state.releaseTail(unlessIn: log.activeSegment)
        let version = state.position?.segment == log.activeSegment ? state.position?.version : nil
        state.position = ReadPosition(manifest: log.manifest, manifestStatus: status, segment: log.activeSegment,
                                      offset: log.activeSize, version: version ?? MagicLine.currentVersion)
    }

    /// After a writer shared per save closed its log: when the store's lock is free at once, cuts off the zeros
    /// reserved after the last record of the last segment (this writer's or another's), so that a store nobody has
    /// open ends with its last record. Best effort: when another writer holds the lock, it is open and the zeros
    /// are allowed (docs/FORMAT.md, *Reserved space*); when the scan from `position` finds anything but records and
    /// zeros, the next writable open deals with it.
    func cutSharedReservedSpace(after position: ReadPosition?) {
        guard let position, !lockHeldBySession,
              let lock = try? StoreLock.acquire(layout, fileSystem: fileSystem, timeout: nil,
                                                clocks: configuration.clocks) else { return }
        defer { lock.unlock() }
        guard let manifest = try? SegmentLog.readManifest(layout: layout, fileSystem: fileSystem),
              manifest.segments.last == position.segment else { return }
        let path = layout.segment(position.segment)
        guard let scan = try? SegmentScan.read(path, number: position.segment, fileSystem: fileSystem,
                                               from: (position.offset, position.version)),
              scan.endsInReservedSpace else { return }
        try? fileSystem.truncate(path, to: scan.end)
    }

    /// With the lock held: applies what others committed, cuts off what a writer that died mid-append left at the
    /// end of the log, and reopens the log at its true end when others wrote to it. Zeros after the last record
    /// (space this writer or another reserved) stay: the next append writes into them.
    private func catchUp(_ state: inout State) throws {
        let picked = try refresh(&state, lockHeld: true)
        guard let position = state.position, position.manifest.segments.last == position.segment else { return }
        let path = layout.segment(position.segment)
        var length = position.offset
        let tail = tailFile(position.segment, &state)
        // What the refresh just saw at the position, if it found nothing new: nobody appended since (the lock).
        let look = state.lastTailLook.flatMap { $0.segment == position.segment && $0.offset == position.offset ? $0 : nil }
        state.lastTailLook = nil
        if let size = try look?.size ?? tail?.size() ?? fileSystem.status(path)?.size, size > position.offset {
            // Nobody appends while this process holds the lock. This log's own reservation, untouched since (the
            // file as long as it made it, and a zero byte where the next record would begin: a record never begins
            // with zero), stays without a look at the rest. Anything else is read: zeros alone are space another
            // writer reserved, which stays too; anything more is a torn tail, a writer's that stopped in the
            // middle of an append, quarantined and cut off with the zeros after it.
            let ownReservation = state.log.map {
                $0.manifest == position.manifest && $0.activeSize == position.offset && $0.reservedEnd == size
            } ?? false
            if ownReservation, let tail, try look?.zeroAfter ?? (tail.read(from: position.offset, count: 1) == [0]) {
                length = size
            } else {
                let after = try SegmentScan.read(path, number: position.segment, fileSystem: fileSystem,
                                                 from: (position.offset, position.version))
                if after.records.isEmpty, after.endsInReservedSpace {
                    length = size
                } else {
                    _ = try Self.quarantine((position.segment, path, position.offset, size - position.offset,
                                             "a writer stopped in the middle of an append"),
                                            limit: configuration.maximumSegmentSize, layout: layout,
                                            fileSystem: fileSystem)
                }
            }
        }
        if let log = state.log, log.manifest == position.manifest, log.activeSize == position.offset {
            log.adoptLength(length)
        } else if let log = state.log {
            // Stale: closing it would flush it, and a failed flush would cut the segment back to where this log
            // last stood, past the others' records.
            log.abandon()
            state.log = try SegmentLog.open(layout: layout, fileSystem: fileSystem, manifest: position.manifest,
                                            end: position.offset, keepingZerosUpTo: length)
            state.log?.reservation = configuration.effectiveSegmentReservation
            var closed = 0
            for number in position.manifest.segments.dropLast() {
                closed += try fileSystem.status(layout.segment(number))?.size ?? 0
            }
            state.closedSegmentBytes = closed
        }
        _ = picked
    }
}
