#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Writing: a save appends one transaction record (its blobs first) and flushes it as the durability policy says;
/// a history deletion appends a trim record (docs/FORMAT.md, *Writing, rotation and compaction*).
extension FileStore {
    /// Appends `changes` as one transaction record and, with ``FileStoreConfiguration/Durability/everySave``,
    /// flushes it before returning; only then are the changes applied in memory. The result carries the rows of the
    /// objects it updated as the store then holds them (`SaveResult.updatedRows`).
    ///
    /// External-storage bytes are written to blob files (and flushed) before the record that names them.
    ///
    /// Reads do not wait for the flush: it runs outside the lock over the store's state, so a fetch of another
    /// context (or actor) meanwhile answers from the last commit, without this save, as a reader of SQLite in WAL
    /// mode does. An automatic compaction the save calls for runs after it committed, also beside reads, which
    /// wait only while it takes the rows. Saves of one open run one at a time; an open shared per save holds the
    /// store's lock from its catching up to the end of the flush (and of the compaction).
    ///
    /// - Throws: `SaveError` (nothing written), ``FileStoreError/writesStopped(kind:reason:)``, or an I/O error. After
    ///   a failed flush the record is cut off again and the store accepts no more writes until reopened: retrying
    ///   the flush could report success for data the kernel already dropped.
    public func save(_ changes: ChangeSet) throws -> SaveResult {
        try writing.withLock { closed in
            // Refused before the store's lock is taken, without the state's lock, which a read may hold: writes that
            // stopped are refused once the lock is held (prepareWrite).
            if configuration.mode == .readOnly || closed { throw noLogRefusal() }
            let lock = try acquireSharedWriteLock()
            defer { lock?.unlock() }
            let written = try state.withLock { state in
                let log = try prepareWrite(&state)
                do {
                    return try appendTransaction(changes, to: log, &state)
                } catch {
                    settlePosition(&state)
                    throw error
                }
            }
            let outcome = finishWithoutStateLock(written)
            let (result, compacting) = try state.withLock { state in
                state.writeInFlight = false
                defer { settlePosition(&state) }
                if let closed = outcome.rotatedFrom { state.closedSegmentBytes += closed }
                if let failure = outcome.failure { try recordingStop(&state) { throw failure } }
                if let flushError = outcome.flushError {
                    state.writesStopped = (.flush, "flushing transaction \(written.transaction.number) failed: \(flushError)")
                    throw flushError
                }
                let result = commit(written.transaction, changes: changes, &state)
                return (result, !state.migrationHeld && compactionIsWorthIt(&state))
            }
            // Committed and announced; the compaction it calls for runs beside reads, before the next save.
            if compacting { compactAutomatically() }
            return result
        }
    }

    /// A transaction appended to the log and not applied yet: flushed outside the state's lock when `needsFlush`.
    /// When the active segment is full, its record (`afterNewSegment`) is appended there too, after a new segment is
    /// started: the new file, its flushes and the new manifest keep reads waiting no more than a flush does.
    private struct WrittenTransaction {
        let log: SegmentLog
        let transaction: Transaction
        let needsFlush: Bool
        var afterNewSegment: [UInt8]?
    }

    /// What a save did without the state's lock: the size of the segment it closed, if it started a new one, and
    /// what failed.
    private struct UnlockedOutcome {
        var rotatedFrom: Int?
        var failure: (any Error)?
        var flushError: (any Error)?
    }

    /// Starts a new segment and appends the record there when the segment was full, then flushes as the policy
    /// asked: all of it under the writer lock alone (the record is in flight, so reads keep to the last commit and
    /// nothing reads the log).
    private func finishWithoutStateLock(_ written: WrittenTransaction) -> UnlockedOutcome {
        var outcome = UnlockedOutcome()
        if let payload = written.afterNewSegment {
            do {
                let closedSize = written.log.activeSize
                try written.log.startSegment(with: [], replacingAll: false, now: configuration.clocks.wall())
                outcome.rotatedFrom = closedSize
                try written.log.append(payload)
            } catch {
                outcome.failure = error
                return outcome
            }
        }
        if written.needsFlush {
            do { try written.log.sync() } catch { outcome.flushError = error }
        }
        return outcome
    }

    /// Validates `changes`, writes their blobs and appends their transaction record (starting a new segment first
    /// when the active one is full), without the flush the durability policy asks for; marks the write in flight,
    /// so that reads keep to the last commit until it is applied.
    private func appendTransaction(_ changes: ChangeSet, to log: SegmentLog, _ state: inout State) throws
        -> WrittenTransaction {
        // After catching up with other processes, under their lock: a conditional save sees every commit.
        try changes.checkExpectedTransactionNumber(state.lastTransactionNumber)
        try readingRows(&state, lockHeld: true) { try $0.validate(changes) }
        let stored = try recordingStop(&state) { try writeBlobs(changes) }
        let transaction = Transaction(number: state.lastTransactionNumber + 1, time: configuration.clocks.wall(),
                                      changes: stored)
        guard !state.migrationHeld else {
            return WrittenTransaction(log: log, transaction: transaction, needsFlush: false)
        }
        let payload = encoder.transaction(transaction, schema: schema)
        let full = log.activeSize > configuration.maximumSegmentSize
        if !full { try recordingStop(&state) { try log.append(payload) } }
        // Until the transaction is applied, the log holds a record the rows do not (or is about to), flushed or not.
        state.writeInFlight = true
        return WrittenTransaction(log: log, transaction: transaction, needsFlush: flushIsDue(&state, forced: false),
                                  afterNewSegment: full ? payload : nil)
    }

    /// Applies a written (and, as the policy asks, flushed) transaction in memory and announces it.
    private func commit(_ transaction: Transaction, changes: ChangeSet, _ state: inout State) -> SaveResult {
        let record = state.rows.apply(transaction.changes, timestamp: transaction.time)
        if case .latest(let count) = configuration.historyRetention, state.historyPrefix == nil {
            state.rows.history.keepLatest(count, slack: max(64, count / 4), holding: historyHold)
        }
        broadcaster.publish([record])
        state.lastTransactionNumber = transaction.number
        state.operationsLogged += changes.inserted.count + changes.updated.count + changes.deleted.count
        // Read under this lock, before anything else can commit: the context need not take it again to read them.
        // The updated rows are the ones just applied, in memory; should reading one fail, the context reads them.
        let updated = changes.updated.isEmpty ? [] : try? state.rows.rows(for: changes.updated.map(\.id))
        return SaveResult(transactionNumber: transaction.number, updatedRows: updated)
    }

    /// Runs `body`; a ``FileStoreError/writesStopped(kind:reason:)`` it throws (the files are in doubt) is recorded, so
    /// that the store refuses writes until it is reopened.
    @discardableResult
    func recordingStop<Result>(_ state: inout State, _ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch FileStoreError.writesStopped(let kind, let reason) {
            state.writesStopped = (kind, reason)
            throw FileStoreError.writesStopped(kind: kind, reason: reason)
        }
    }

    /// Appends one framed record and flushes it as the durability policy asks. A failed append that leaves the
    /// segment in doubt, or any failed flush, stops writes until the store is reopened.
    private func appendDurably(_ record: [UInt8], what: String, to log: SegmentLog, _ state: inout State) throws {
        try recordingStop(&state) { try log.append(record) }
        do {
            try flush(log, &state, forced: false)
        } catch {
            state.writesStopped = (.flush, "flushing \(what) failed: \(error)")
            throw error
        }
    }

    /// Writes a migration held in memory, and every save since, by compacting: one new segment and an atomic
    /// replacement of the manifest, so the store has either its old schema and data or all of it.
    ///
    /// - Throws: the compaction's errors; nothing of the migration is written then.
    func commitHeldMigration() throws {
        try writing.withLock { _ in
            try state.withLock { state in
                guard state.migrationHeld else { return }
                try compact(&state)
                state.migrationHeld = false
            }
        }
    }

    /// Flushes the active segment when the durability policy calls for it.
    private func flush(_ log: SegmentLog, _ state: inout State, forced: Bool) throws {
        if flushIsDue(&state, forced: forced) { try log.sync() }
    }

    /// Whether the durability policy calls for a flush of what was just appended; with deferred durability, a
    /// flush due starts the next interval and one not due yet notes when the first unflushed write was made.
    private func flushIsDue(_ state: inout State, forced: Bool) -> Bool {
        switch configuration.durability {
        case .everySave:
            return true
        case .deferred(let interval):
            // Measured by the monotonic clock: with the wall clock, a step back would stop every flush.
            let now = configuration.clocks.monotonic()
            if forced || state.unsyncedSince.map({ now - $0 >= .seconds(interval) }) == true {
                state.unsyncedSince = nil
                return true
            }
            if state.unsyncedSince == nil { state.unsyncedSince = now }
            return false
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

    /// What a record holds for an external-storage value: bytes become a blob file; a reference to bytes elsewhere
    /// (`ExternalData.isRemote`: another replica's, not read yet) becomes a promise of the blob, unless its
    /// bytes are here already (docs/FORMAT.md, *Promised blobs*).
    private func storedExternal(_ value: StoredValue) throws -> StoredValue {
        switch value {
        case .data(let data):
            return .external(try blobs.write(data))
        case .external(let external) where external.isRemote:
            if external.isLoaded { return .external(try blobs.write(try external.load())) }
            try blobs.promise(name: external.name, size: external.size)
            // The store's own lazy reference: it reads the blob once here, and fetches it through the blob source
            // attached to this store while it is not.
            return .external(blobs.reference(name: external.name, size: external.size))
        default:
            return value
        }
    }

    /// Deletes the transactions in `ranges` from the history by appending a `trim` record (flushed as a save is);
    /// the space is reclaimed at the next compaction.
    ///
    /// - Throws: `SaveError.readOnly(reason:)`, ``FileStoreError/writesStopped(kind:reason:)`` or an I/O error; the
    ///   history is then unchanged.
    public func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws {
        try writing.withLock { _ in try state.withLock { state in try withWriteAccess(&state) { log, state in
            try loadHistoryPrefix(&state)
            var history = state.rows.history
            history.delete(ranges, committedThrough: state.lastTransactionNumber, holding: historyHold())
            guard history.deleted != state.rows.history.deleted else { return }
            if state.migrationHeld {
                state.rows.history = history
                return
            }
            try appendDurably(encoder.trim(deleted: history.deleted), what: "a history deletion", to: log, &state)
            state.rows.history = history
        } } }
    }

    /// Flushes every written record to disk (meaningful with deferred durability). Shared per save, it takes the
    /// store's lock and catches up first, as a save does, so that the log it flushes ends where the file ends.
    ///
    /// - Throws: the flush's error; the store then accepts no more writes until reopened. Shared per save, what
    ///   catching up throws too.
    public func sync() throws {
        try writing.withLock { _ in try state.withLock { state in
            guard state.log != nil else { return }
            // A stale log (another writer appended after it) must not be flushed: a failed flush cuts the segment
            // back to where this log last flushed, past the other writer's records.
            try withWriteAccess(&state) { log, state in
                do { try flush(log, &state, forced: true) } catch {
                    state.writesStopped = (.flush, "flushing failed: \(error)")
                    throw error
                }
            }
        } }
    }
}
