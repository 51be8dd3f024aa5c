#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// Reads what other processes committed since this store was opened or last refreshed, and applies it: the
    /// new objects and values become visible to every context, and the transactions join ``history()`` and are
    /// published to ``transactions()``.
    ///
    /// A read-only open, and a writable one shared per save (``FileStoreConfiguration/Sharing/perSave``), can fall
    /// behind; an exclusive writable open holds the store's lock, so no other process can commit while it is open,
    /// and `refresh()` returns at once. A refresh normally reads only the records appended since the last read;
    /// when another process compacted the store (or migrated it), it reloads the whole store. A record being
    /// appended while it reads is left for the next refresh.
    ///
    /// By default (``FileStoreConfiguration/automaticRefreshInterval`` 0) every read refreshes by itself first, so
    /// calling this is needed only with automatic refresh turned off, or to learn which transactions were new.
    ///
    /// It takes no lock: it reads over a pinned manifest (docs/FORMAT.md, *Reading while another process
    /// writes*), so another process compacting while it reads makes it read again, not report damage.
    ///
    /// - Returns: the records of the transactions picked up, oldest first.
    /// - Throws: ``FileStoreError`` when what was appended is damaged or inconsistent (seen twice over an unchanged
    ///   manifest), ``FileStoreError/storeKeptChanging(path:attempts:seconds:)`` after
    ///   ``FileStoreConfiguration/readRetryTimeout`` of other processes replacing the manifest, an I/O error, or
    ///   (for a reload) the `MigrationError` an open would throw, when another process moved the store to a schema
    ///   this open's is older than; the store then keeps the state it had.
    /// - Complexity: O(bytes appended) when only appends happened; O(store) after a compaction.
    @discardableResult
    public func refresh() throws -> [HistoryRecord] {
        try state.withLock { state in try refresh(&state) }
    }

    /// Refreshes when the configuration asks for it and the interval has passed. A failure is kept in
    /// ``statistics`` and the store keeps the state it had.
    func refreshAutomatically(_ state: inout State) {
        guard let interval = configuration.automaticRefreshInterval, state.position != nil else { return }
        let now = configuration.clocks.monotonic()
        if let last = state.lastRefreshCheck, now - last < .seconds(interval) { return }
        state.lastRefreshCheck = now
        do {
            _ = try refresh(&state)
            state.lastRefreshError = nil
        } catch {
            state.lastRefreshError = error
        }
    }

    /// Segment `number` (the one the position stands in) open for reading, kept in `state` from one refresh to the
    /// next; nil when it cannot be opened (missing), which the caller's full read reports. Its length and the byte
    /// after the last record are read through the descriptor, never by a `stat` of the path: on Linux 6.13 and later
    /// a `stat` makes the file's next write take a fine-grained time, and on ext4 without a journal every durable
    /// save then writes the segment's inode as well as its data (16% of a shared writer's samples in `notekit-bench
    /// readwrite` were that inode's write, 2.9% after).
    func tailFile(_ number: Int, _ state: inout State) -> (any StoreReadableFile)? {
        if let tail = state.tail, tail.segment == number { return tail.file }
        state.tail = nil
        guard let file = try? fileSystem.openForReading(layout.segment(number)) else { return nil }
        state.tail = (number, file)
        return file
    }

    /// - Parameter lockHeld: whether this process holds the store's lock (a save shared per save catching up), so a
    ///   reload must not take it again.
    func refresh(_ state: inout State, lockHeld: Bool = false) throws -> [HistoryRecord] {
        // This open's own save is being flushed, under the store's lock: no other process can have committed, and
        // the record past the position is that save's, which it applies itself.
        guard !state.writeInFlight, var position = state.position else { return [] }
        state.lastTailLook = nil
        let current = try fileSystem.status(layout.manifest)
        if current != nil, current == position.manifestStatus,
           position.manifest.segments.last == position.segment,
           let tail = tailFile(position.segment, &state), let size = try? tail.size() {
            // Nothing appended, or a zero byte where the next record would begin: space the writer reserved, not
            // written yet (a record never begins with zero; one being written is not committed yet either).
            let zeroAfter = try size > position.offset && tail.read(from: position.offset, count: 1) == [0]
            if size == position.offset || zeroAfter {
                state.lastTailLook = (position.segment, position.offset, size, zeroAfter)
                return []
            }
        }

        // First decode everything appended, changing nothing, over a pinned manifest; then apply it record by record.
        let read = PinnedRead(layout: layout, fileSystem: fileSystem, timeout: configuration.readRetryTimeout,
                              clocks: configuration.clocks)
        let appended = try read.run { pin -> (manifest: Manifest, status: StoreFileStatus?, records: [PendingRecord])? in
            // Segments added (rotation) are read on; segments replaced (compaction, migration) need a reload.
            let manifest = try pin.manifest
            guard manifest.store == position.manifest.store,
                  let index = position.manifest.segments.firstIndex(of: position.segment),
                  manifest.segments.starts(with: position.manifest.segments[...index]),
                  let records = try Self.decodeAppended(after: position, in: manifest, stored: state.schemas.last,
                                                        schema: schema, layout: layout, fileSystem: fileSystem,
                                                        blobs: blobs) else {
                return nil
            }
            return (manifest, pin.status, records)
        }
        guard let appended else { return try reload(&state, lockHeld: lockHeld) }
        let pending = appended.records
        position.manifest = appended.manifest
        position.manifestStatus = appended.status
        var picked: [HistoryRecord] = []
        var baseFailed = false
        do {
            defer {
                state.position = position
                state.releaseTail(unlessIn: position.segment)
                broadcaster.publish(picked)
            }
            for entry in pending {
                let applied: HistoryRecord?
                do {
                    applied = try Self.apply(entry, to: state.rows, lastTransactionNumber: &state.lastTransactionNumber,
                                             operationsLogged: &state.operationsLogged, layout: layout)
                } catch is RowBaseFailure {
                    baseFailed = true
                    break
                }
                if let record = applied { picked.append(record) }
                position.segment = entry.segment
                position.offset = entry.end
                position.version = entry.version
            }
        }
        if baseFailed {
            // The checkpoint's rows failed to read: the store is replayed without it, and what follows read then.
            return picked + (try reload(&state, lockHeld: lockHeld, useCheckpoint: false))
        }
        return picked
    }

    /// Applies one record read after a position: a transaction (which must be the next one, and must apply to the
    /// rows: validated first, so that nothing changes when it does not), or a trim of the history.
    ///
    /// - Returns: the history record of an applied transaction.
    /// - Throws: ``FileStoreError/danglingReference(file:offset:kind:reason:)`` for a transaction out of sequence or
    ///   one that does not apply; what reading a row of a checkpoint throws.
    static func apply(_ entry: PendingRecord, to rows: RowStorage, lastTransactionNumber: inout UInt64,
                      operationsLogged: inout Int, layout: StoreLayout) throws -> HistoryRecord? {
        switch entry.record {
        case .transaction(let transaction):
            let path = layout.segment(entry.segment)
            guard transaction.number == lastTransactionNumber + 1 else {
                let conflict = TransactionConflict.outOfSequence(number: transaction.number,
                                                                 last: lastTransactionNumber)
                throw FileStoreError.danglingReference(file: path, offset: entry.offset, kind: conflict.kind,
                                                       reason: conflict.description)
            }
            // Checked as a save checks it (types and unique keys too), and said as a replay says it.
            if let conflict = try rows.conflict(in: transaction.changes) {
                let conflict = TransactionConflict.changes(number: transaction.number, conflict)
                throw FileStoreError.danglingReference(file: path, offset: entry.offset, kind: conflict.kind,
                                                       reason: conflict.description)
            }
            let changes = transaction.changes
            let record = rows.apply(changes, timestamp: transaction.time)
            lastTransactionNumber = transaction.number
            operationsLogged += changes.changeCount
            return record
        case .trim(let deleted):
            rows.history.delete(deleted, committedThrough: lastTransactionNumber)
            return nil
        default:
            return nil
        }
    }

    /// A record appended since the read position, with where it is and where it ends.
    struct PendingRecord {
        var segment: Int
        var version: Int
        var offset: Int
        var end: Int
        var record: StoreRecord
    }

    /// Decodes the intact records after `position`, through the last segment of `manifest`.
    ///
    /// - Returns: the records (a segment's header included, so that the position can move past it), or nil when one
    ///   calls for a full reload: a schema, a migration, a snapshot, which only a compaction or a migration writes,
    ///   or a transaction in a stored schema this open converted from.
    ///
    /// - Parameter lastScan: given the last segment's scan (its torn tail, its end, its size), for an open that
    ///   recovers what follows the last intact record without reading it again.
    static func decodeAppended(after position: ReadPosition, in manifest: Manifest, stored: Schema?, schema: Schema,
                               layout: StoreLayout, fileSystem: any StoreFileSystem, blobs: BlobStore?,
                               lastScan: (SegmentScan) -> Void = { _ in }) throws -> [PendingRecord]? {
        guard let first = manifest.segments.firstIndex(of: position.segment) else { return nil }
        let storedSchemaMatches = stored?.contentHash == schema.contentHash
        var pending: [PendingRecord] = []
        for (index, number) in manifest.segments[first...].enumerated() {
            let path = layout.segment(number)
            let isLast = first + index == manifest.segments.count - 1
            let continuing = index == 0
            // Read in bounded pieces from where this open stopped (docs/FORMAT.md, *Reading*).
            let scan = try SegmentScan.read(path, number: number, fileSystem: fileSystem,
                                            from: continuing ? (position.offset, position.version) : nil)
            // Records that only a reload can apply end what appending can pick up.
            var complete = true
            var expectsHeader = !continuing
            try scan.forEachRecord(blobs: blobs) { entry in
                guard complete else { return }
                let record = try entry.decode(schema: stored)
                if expectsHeader {
                    guard case .segment(let header) = record, header.number == number,
                          header.store == manifest.store else {
                        throw FileStoreError.inconsistentSegments(
                            file: path, kind: .segmentRecordMissing,
                            reason: "it does not begin with its own segment record")
                    }
                    expectsHeader = false
                } else {
                    switch record {
                    case .transaction where !storedSchemaMatches:
                        complete = false
                        return
                    case .transaction, .trim: break
                    case .schema, .migration, .snapshot, .rows, .history:
                        complete = false
                        return
                    case .segment, .manifest:
                        throw FileStoreError.undecodableRecord(
                            file: path, offset: entry.recordOffset,
                            reason: "a bookkeeping record in the middle of a segment")
                    }
                }
                pending.append(PendingRecord(segment: number, version: scan.version, offset: entry.recordOffset,
                                             end: entry.next, record: record))
            }
            if !complete { return nil }
            // In the last segment, a record being appended (or torn) is not committed as far as this reader can
            // tell, so it waits; anywhere else it is damage.
            if let error = scan.endingDamage(isLast: isLast) { throw error }
            if isLast { lastScan(scan) }
        }
        return pending
    }

    /// Reads the store anew (``StoreOpener``, as an open does) and takes over the state it reads; returns the
    /// transactions that are new. The rows it reads name this open's blobs, and so fetch promised ones through the
    /// source attached to it.
    ///
    /// - Parameters:
    ///   - lockHeld: whether this process holds the store's lock (an exclusive open, a save shared per save), so
    ///     the open must not take it.
    ///   - useCheckpoint: false to replay the segments even when a checkpoint describes them (its rows failed to
    ///     read).
    func reload(_ state: inout State, lockHeld: Bool, useCheckpoint: Bool = true) throws -> [HistoryRecord] {
        let opened = try StoreOpener(configuration: configuration, schema: schema, layout: layout, blobs: blobs)
            .open(lockSource: lockHeld ? .heldBySession : .acquire, holdingMigration: false,
                  useCheckpoint: useCheckpoint)
        var refreshed = opened.state
        let before = state.lastTransactionNumber
        // The transactions this open has not seen may be in the history a checkpoint left unread.
        if let prefix = refreshed.historyPrefix, prefix.lastTransactionNumber > before {
            try loadHistoryPrefix(&refreshed)
        }
        // Another writer moved past this open's log (shared per save): let it go without flushing or cutting it.
        state.log?.abandon()
        let picked = refreshed.rows.history.records.filter { $0.number > before }
        // An exclusive open keeps the lock it holds (the open took none).
        let held = state.lock
        state = refreshed
        if state.lock == nil { state.lock = held }
        broadcaster.publish(picked)
        return picked
    }
}
