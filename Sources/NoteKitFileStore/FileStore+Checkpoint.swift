#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// The history records of a compaction's opening that an open through a checkpoint has not read yet: history is
    /// read when first asked for (``history()``, deleting history, compacting, a retention that drops the oldest),
    /// not by the open, which must not read more than the checkpoint's header and the log after it.
    struct HistoryPrefix {
        /// The segment holding them, and its format version.
        var segment: Int
        var version: Int
        /// The segment as the open found it, held open: a compaction in another process may delete it before the
        /// history is read, and its bytes stay readable through this handle.
        var file: any StoreReadableFile
        /// The byte range of its `history` records.
        var range: Range<Int>
        /// The number of the last transaction the opening's state includes (the snapshot's).
        var lastTransactionNumber: UInt64
    }

    /// Reads the history a checkpointed open left unread and puts it before the history of the transactions applied
    /// since; what those deleted (`trim` records after the checkpoint list every deletion so far) is deleted from it.
    ///
    /// - Throws: what reading and decoding the segment's `history` records throws; the history is then unchanged,
    ///   and the next call tries again.
    /// - Complexity: O(the history records' bytes), once per open.
    func loadHistoryPrefix(_ state: inout State) throws {
        guard let prefix = state.historyPrefix else { return }
        let path = prefix.file.path
        let bounded = HeldFileSystem(base: fileSystem, file: prefix.file, limit: prefix.range.upperBound)
        var older = HistoryLog()
        if !prefix.range.isEmpty {
            let scan = try SegmentScan.read(path, number: prefix.segment, fileSystem: bounded,
                                            from: (prefix.range.lowerBound, prefix.version))
            try scan.forEachRecord(blobs: nil) { entry in
                guard case let .history(records, deleted) = try entry.decode(schema: state.schemas.last) else {
                    throw FileStoreError.undecodableRecord(file: path, offset: entry.recordOffset,
                                                           reason: "the checkpoint's history range holds a record "
                                                               + "that is not a history record")
                }
                if let last = older.records.last, let first = records.first, first.number <= last.number {
                    throw FileStoreError.undecodableRecord(
                        file: path, offset: entry.recordOffset,
                        reason: "history transaction \(first.number) follows \(last.number)")
                }
                for record in records { older.append(record) }
                older.delete(deleted)
            }
            // The range ends where the checkpoint says: nothing in it may be torn.
            if let error = scan.endingDamage(isLast: false) { throw error }
            guard scan.end == prefix.range.upperBound else {
                throw FileStoreError.damagedRecord(file: path, offset: scan.end, kind: .truncated,
                                                   reason: "the history records end at byte \(scan.end), not at "
                                                       + "\(prefix.range.upperBound) as the checkpoint says")
            }
        }
        let newer = state.rows.history
        for record in newer.records { older.append(record) }
        older.delete(newer.deleted)
        if case .latest(let count) = configuration.historyRetention {
            older.keepLatest(count, slack: 0, holding: historyHold)
        }
        state.rows.history = older
        state.historyPrefix = nil
    }
}

/// A file system that shows `file`, a file opened earlier, at its path, cut at `limit` bytes: a scan over it reads
/// the file that was opened (another process's compaction may have deleted the path since) and stops where the
/// caller's range ends, whatever follows in the file. Every other path goes to `base`.
struct HeldFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem
    let file: any StoreReadableFile
    let limit: Int

    func read(_ path: String) throws -> [UInt8] { try read(path, from: 0, count: .max) }
    func read(_ path: String, from offset: Int) throws -> [UInt8] { try read(path, from: offset, count: .max) }
    func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        guard path == file.path else { return try base.read(path, from: offset, count: count) }
        guard offset < limit else { return [] }
        return try file.read(from: offset, count: min(count, limit - offset))
    }
    func status(_ path: String) throws -> StoreFileStatus? {
        guard path == file.path else { return try base.status(path) }
        return StoreFileStatus(size: min(try file.size(), limit), identity: [])
    }
}
/// Why an open did not go through the checkpoint although it is sound: the rows it describes are not the state
/// this open needs (a migration, by this open or in the log after the checkpoint).
struct CheckpointInapplicable: Error, Hashable {
    var reason: String
}

extension FileStore {
    /// What trying to open through the checkpoint came to.
    enum CheckpointOutcome {
        /// Opened: the state, read through it.
        case opened(OpenedLog)
        /// Not usable for this open, but not damaged either.
        case inapplicable(String)
        /// Missing, stale, or damaged where it was read: a writable open writes it anew.
        case damaged(CheckpointDamage)
    }

    /// Opens the store through its checkpoint (docs/FORMAT.md, *Using a checkpoint*), reading the manifest, the
    /// checkpoint's header, the opening's `segment` and `schema` records and the log after the opening, over a pinned
    /// manifest.
    ///
    /// - Returns: the state; or why the store must be replayed instead: `.inapplicable` for a schema this open
    ///   migrates or a migration in the log after the checkpoint, `.damaged` for a checkpoint that does not describe
    ///   the manifest's first segment or is damaged wherever it was read (a writable open then writes it anew), and
    ///   for damage in the log after it. Never throws: whatever went wrong here, replaying the segments decides (and
    ///   reports damage, if there is any).
    static func openThroughCheckpoint(layout: StoreLayout, configuration: FileStoreConfiguration, schema: Schema,
                                      blobs: BlobStore) -> CheckpointOutcome {
        let fileSystem = configuration.fileSystem
        let read = PinnedRead(layout: layout, fileSystem: fileSystem, timeout: configuration.readRetryTimeout,
                              clocks: configuration.clocks)
        do {
            // Not applicable is an answer, not an error: a pinned read tries a failed read again.
            let found = try read.run { pin -> Result<OpenedLog, CheckpointInapplicable> in
                do {
                    return .success(try openThroughCheckpoint(pin: pin, layout: layout, schema: schema, blobs: blobs,
                                                              fileSystem: fileSystem,
                                                              writable: configuration.mode != .readOnly))
                } catch let skipped as CheckpointInapplicable {
                    return .failure(skipped)
                }
            }
            switch found {
            case .success(let opened): return .opened(opened)
            case .failure(let skipped): return .inapplicable(skipped.reason)
            }
        } catch let damage as CheckpointDamage {
            return .damaged(damage)
        } catch {
            return .damaged(CheckpointDamage(file: layout.checkpoint, offset: 0, reason: "\(error)"))
        }
    }

    private static func openThroughCheckpoint(pin: PinnedRead.Pin, layout: StoreLayout, schema: Schema,
                                              blobs: BlobStore, fileSystem: any StoreFileSystem,
                                              writable: Bool) throws
        -> OpenedLog {
        let manifest = try pin.manifest
        guard let first = manifest.segments.first else {
            throw CheckpointDamage(file: layout.manifest, offset: 0, reason: "the manifest lists no segment")
        }
        // The opening's schema history, from the byte range the header gives. The checkpoint and the first segment
        // are read through these handles from here on (the rows, the history when first asked for), so what is
        // checked here is what is read later, whatever other processes' compactions delete or replace meanwhile.
        let checkpoint = try CheckpointReader.openFile(layout.checkpoint, fileSystem: fileSystem)
        let header = try CheckpointReader.readHeader(checkpoint)
        let segmentPath = layout.segment(first)
        let segmentFile = try fileSystem.openForReading(segmentPath)
        let bounded = HeldFileSystem(base: fileSystem, file: segmentFile, limit: header.schemas.upperBound)
        let (schemas, segmentVersion) = try readOpeningSchemas(segmentPath, number: first, through: bounded,
                                                               range: header.schemas)
        guard let stored = schemas.last else {
            throw CheckpointDamage(file: segmentPath, offset: header.schemas.upperBound,
                                   reason: "the segment's schema records do not fill the checkpoint's schema range")
        }
        guard case .current(let recorded) = try SchemaVersioning.decide(schema, history: schemas) else {
            throw CheckpointInapplicable(reason: "this open migrates the store")
        }
        let reader = try CheckpointReader.open(checkpoint, header: header, segment: first, file: segmentFile,
                                               store: manifest.store, schema: stored, blobs: blobs).get()
        let rows = RowStorage(schema: recorded, bases: reader.bases, transactionNumber: header.lastTransactionNumber)
        var lastTransactionNumber = header.lastTransactionNumber
        var operationsLogged = header.rowCount
        let start = ReadPosition(manifest: manifest, manifestStatus: pin.status, segment: first, offset: header.end,
                                 version: segmentVersion)
        var last: (end: Int, size: Int, tail: SegmentScan.Tail?)?
        guard let pending = try decodeAppended(after: start, in: manifest, stored: stored, schema: schema,
                                               layout: layout, fileSystem: fileSystem, blobs: blobs,
                                               lastScan: { last = ($0.end, $0.fileSize, $0.tail) }) else {
            throw CheckpointInapplicable(reason: "the log after the checkpoint changes the schema (a migration)")
        }
        var tailBlobs = Set<String>()
        var mayReleaseBlobs = false
        let external = externalAttributes(of: recorded)
        var (segment, end, version) = (first, header.end, segmentVersion)
        for entry in pending {
            if case .transaction(let transaction) = entry.record {
                let changes = transaction.changes
                tailBlobs.formUnion(referencedBlobs(changes, schema: recorded))
                mayReleaseBlobs = mayReleaseBlobs || mayRelease(changes, external: external)
            }
            _ = try apply(entry, to: rows, lastTransactionNumber: &lastTransactionNumber,
                          operationsLogged: &operationsLogged, layout: layout)
            (segment, end, version) = (entry.segment, entry.end, entry.version)
        }
        if let last = manifest.segments.last, last != segment {
            // The last segment holds no record yet past its header (a rotation's segment is never empty, so this is
            // a segment whose header was not decoded: damage, for the replay to report).
            throw CheckpointDamage(file: layout.segment(last), offset: 0, reason: "the last segment was not read")
        }
        // What follows the last intact record of the last segment: a torn tail (a save cut short), reserved space
        // (zeros), or nothing; the scan that read the log saw it.
        var tornTail: TornTailFound?
        guard let last, last.end == end else {
            throw CheckpointDamage(file: layout.segment(segment), offset: end, reason: "the log's end was not read")
        }
        if let tail = last.tail {
            tornTail = (segment, layout.segment(segment), tail.offset, last.size - tail.offset, tail.reason)
        }
        let referenced = writable ? try blobsNamed(by: rows, schema: recorded, reader: reader, tailBlobs: tailBlobs,
                                                   mayReleaseBlobs: mayReleaseBlobs) : []
        var closed = 0
        for number in manifest.segments.dropLast() { closed += try fileSystem.status(layout.segment(number))?.size ?? 0 }
        return OpenedLog(manifest: manifest, manifestStatus: pin.status, schemas: schemas,
                         rows: rows, lastTransactionNumber: lastTransactionNumber, operationsLogged: operationsLogged,
                         segment: segment, end: end, version: version, closedSegmentBytes: closed,
                         tornTail: tornTail, referencedBlobs: referenced,
                         historyPrefix: HistoryPrefix(segment: first, version: segmentVersion, file: segmentFile,
                                                      range: header.history,
                                                      lastTransactionNumber: header.lastTransactionNumber),
                         compactedBytes: header.end, damage: nil, migration: nil, checkpoint: nil)
    }

    /// The schema records of segment `number`'s opening, which must fill the checkpoint's schema `range` exactly
    /// (after the segment's own record), and the segment's format version.
    ///
    /// - Throws: ``CheckpointDamage`` when a record before or in the range is not what the range says.
    private static func readOpeningSchemas(_ segmentPath: String, number: Int, through bounded: HeldFileSystem,
                                           range: Range<Int>) throws -> (schemas: [Schema], version: Int) {
        let head = try SegmentScan.read(segmentPath, number: number, fileSystem: bounded)
        var schemas: [Schema] = []
        var sawHeader = false
        try head.forEachRecord(blobs: nil) { entry in
            guard entry.offset >= range.lowerBound || !sawHeader else {
                throw CheckpointDamage(file: segmentPath, offset: entry.recordOffset,
                                       reason: "a record before the checkpoint's schema range")
            }
            switch try entry.decode(schema: nil) {
            case .segment where !sawHeader: sawHeader = true
            case .schema(let stored) where entry.recordOffset >= range.lowerBound: schemas.append(stored)
            default:
                throw CheckpointDamage(file: segmentPath, offset: entry.recordOffset,
                                       reason: "the checkpoint's schema range holds a record that is not a schema")
            }
        }
        guard head.tail == nil, head.undecodable == nil, head.end == range.upperBound, !schemas.isEmpty else {
            throw CheckpointDamage(file: segmentPath, offset: head.end,
                                   reason: "the segment's schema records do not fill the checkpoint's schema range")
        }
        return (schemas, head.version)
    }

    /// The positions of each entity's attributes stored externally, by entity name.
    private static func externalAttributes(of schema: Schema) -> [String: Set<Int>] {
        Dictionary(uniqueKeysWithValues: schema.entities.map { entity in
            (entity.name, Set(entity.attributes.indices.filter { entity.attributes[$0].has(.externalStorage) }))
        })
    }

    /// Whether `changes` may leave a blob named by no row: they delete an object of an entity with external
    /// attributes, or change an external value.
    private static func mayRelease(_ changes: ChangeSet, external: [String: Set<Int>]) -> Bool {
        changes.deleted.contains { !(external[$0.id.entityName]?.isEmpty ?? true) }
            || changes.updated.contains { update in
                update.attributes.contains { external[update.id.entityName]?.contains($0.index) ?? false }
            }
    }

    /// The blobs the rows opened name, for a writable open's reclaiming: the checkpoint's list and those the log
    /// after it adds, unless that log deleted or changed an external value, when a listed blob may be named by no
    /// row now and only reading every row tells.
    private static func blobsNamed(by rows: RowStorage, schema recorded: Schema, reader: CheckpointReader,
                                   tailBlobs: Set<String>, mayReleaseBlobs: Bool) throws -> Set<String> {
        guard mayReleaseBlobs else { return try reader.blobNames().union(tailBlobs) }
        var all: [ModelSnapshot] = []
        for entity in recorded.entities { all += try rows.rows(of: entity.name) }
        return referencedBlobs(all, schema: recorded)
    }

    /// The blobs a change set's inserted rows and updated attributes name.
    static func referencedBlobs(_ changes: ChangeSet, schema: Schema) -> Set<String> {
        var names = Set(referencedExternalData(changes.inserted, schema: schema).keys)
        for update in changes.updated {
            for change in update.attributes {
                if case .external(let blob) = change.value { names.insert(blob.name) }
            }
        }
        return names
    }
}

extension FileStore {
    /// Runs `read` over the rows. When a checkpoint's rows fail to read (a page or a row that fails its checksum,
    /// keys out of order, an I/O error), the store stops using the checkpoint: it replays its segments, as an open
    /// without one does, and reads again. A checkpoint is never a reason to fail a read the segments can answer.
    ///
    /// - Parameter lockHeld: whether this process holds the store's lock now (a save shared per save).
    /// - Throws: what `read` throws, or what replaying the segments throws (damage).
    func readingRows<Result>(_ state: inout State, lockHeld: Bool = false,
                             _ read: (RowStorage) throws -> Result) throws -> Result {
        do {
            return try read(state.rows)
        } catch is RowBaseFailure {
            // A replay now would read this open's save in flight as committed; the reader waits for it instead.
            if state.writeInFlight { throw WaitForWrite() }
            _ = try reload(&state, lockHeld: lockHeld || state.lock != nil || lockHeldBySession, useCheckpoint: false)
            return try read(state.rows)
        }
    }

    /// Thrown by a read under the state's lock that must replay the log while this open's save is being flushed
    /// (``State/writeInFlight``): ``reading(_:)`` waits for the save and reads again.
    struct WaitForWrite: Error {}

    /// Runs `body` under the state's lock; when it must wait for this open's save in flight (``WaitForWrite``), waits
    /// for the save to end, without the lock, and runs it again.
    func reading<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        while true {
            do {
                return try state.withLock(body)
            } catch is WaitForWrite {
                writing.withLock { _ in }
            }
        }
    }

    /// ``reading(_:)`` for a read the `DataStore` protocol gives no way to fail.
    func readingAlways<Result>(_ body: (inout State) throws(WaitForWrite) -> Result) -> Result {
        while true {
            do {
                return try state.withLock { state in try body(&state) }
            } catch {
                writing.withLock { _ in }
            }
        }
    }

    /// ``readingRows(_:lockHeld:_:)`` for a read the `DataStore` protocol gives no way to fail: when even the
    /// segments cannot be replayed (damaged since the open), it answers `fallback` and records why in
    /// ``Statistics/lastRefreshError``.
    func readingRows<Result>(_ state: inout State, otherwise fallback: Result,
                             _ read: (RowStorage) throws -> Result) throws(WaitForWrite) -> Result {
        do {
            return try readingRows(&state, read)
        } catch let wait as WaitForWrite {
            throw wait
        } catch {
            state.lastRefreshError = error
            return fallback
        }
    }
}

extension FileStore {
    /// After a writable open replayed the store: writes the checkpoint of the first segment when it is a
    /// compaction's and no usable checkpoint describes it (missing, stale, damaged), and deletes a `CHECKPOINT` that
    /// describes no segment of the store. Best effort, as at compaction: the checkpoint is derived data.
    ///
    /// - Returns: why the checkpoint could not be written (the error), or nil.
    ///
    /// - Parameter rewrite: write it even when its header and ties check out (its pages or rows failed to read).
    static func writeCheckpointIfMissing(_ manifest: Manifest, compacted: Bool, schema: Schema, layout: StoreLayout,
                                         fileSystem: any StoreFileSystem, blobs: BlobStore,
                                         rewrite: Bool = false) -> (any Error)? {
        guard let first = manifest.segments.first else { return nil }
        do {
            guard compacted else {
                _ = try removeStoreFile(layout.checkpoint, fileSystem: fileSystem)
                return nil
            }
            if !rewrite, case .success = CheckpointReader.open(layout: layout, fileSystem: fileSystem,
                                                               store: manifest.store, segment: first, schema: schema,
                                                               blobs: blobs) {
                return nil
            }
            if let found = try fileSystem.kind(of: layout.checkpoint), found != .regularFile {
                // Not the store's to replace: no open writes over, or deletes, anything but a regular file there.
                return FileStoreError.unexpectedFileType(path: layout.checkpoint, found: found, expected: .regularFile)
            }
            let bytes = try Checkpoint.build(segment: layout.segment(first), number: first, store: manifest.store,
                                             fileSystem: fileSystem)
            try Checkpoint.write(bytes, layout: layout, fileSystem: fileSystem)
            return nil
        } catch {
            return error
        }
    }
}
