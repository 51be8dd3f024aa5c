import FoundationEssentials
import NoteKit

/// The frames of one segment file: where its intact records are, and what, if anything, follows the last one.
struct SegmentScan {
    let number: Int
    let path: String
    let bytes: [UInt8]
    let version: Int
    /// The payload ranges of the intact records, in order.
    var records: [Range<Int>] = []
    /// The offset just past the last intact record.
    var end: Int
    /// What stands after the last intact record, when anything does (reserved space is not a tail).
    var tail: Tail?
    /// How many zero bytes of reserved space follow the last intact record.
    var reserved = 0

    struct Tail: Equatable {
        let offset: Int
        let reason: String
        /// True when no intact record follows: a torn tail if this is the last segment.
        let isTorn: Bool
    }

    /// Reads the file and finds its records, without decoding any payload.
    ///
    /// - Throws: an I/O error, or ``FileStoreError`` when the magic line is not a segment's of a known version.
    static func read(_ path: String, number: Int, fileSystem: any StoreFileSystem) throws -> SegmentScan {
        let bytes: [UInt8]
        do { bytes = try fileSystem.read(path) } catch let error as StoreIOError where error.code == 2 {
            throw FileStoreError.inconsistentSegments(file: path, reason: "the manifest lists it but it does not exist")
        }
        return try bytes.withUnsafeBytes { buffer in
            let (version, start) = try MagicLine.parse(buffer, expecting: .segment, file: path)
            var scan = SegmentScan(number: number, path: path, bytes: bytes, version: version, end: start)
            var offset = start
            while offset < buffer.count {
                switch RecordFrame.scan(buffer, at: offset) {
                case let .record(payload, next):
                    scan.records.append(payload)
                    offset = next
                    scan.end = next
                case .truncated where RecordFrame.isReservedSpace(buffer, from: offset),
                     .invalid where RecordFrame.isReservedSpace(buffer, from: offset):
                    scan.reserved = buffer.count - offset
                    return scan
                case let .truncated(reason):
                    // A length that runs past the end may itself be the damage: intact records after it say so.
                    let resumes = RecordFrame.nextIntactRecord(in: buffer, after: offset)
                    scan.tail = Tail(offset: offset, reason: reason, isTorn: resumes == nil)
                    return scan
                case let .invalid(reason):
                    let resumes = RecordFrame.nextIntactRecord(in: buffer, after: offset)
                    scan.tail = Tail(offset: offset, reason: reason, isTorn: resumes == nil)
                    return scan
                }
            }
            return scan
        }
    }
}

/// The state a store's log describes, replayed from its manifest's segments (docs/FORMAT.md, *Recovery*).
struct LogReplay {
    /// Every schema the store was written with, oldest first; the last is the current one.
    var schemas: [Schema] = []
    /// The objects, rebuilt.
    private var objects = ReplayedObjects()
    /// The number of the last transaction applied.
    var lastTransaction: UInt64 { objects.lastTransaction }
    /// Writes since the last snapshot, and rows in it: what automatic compaction weighs.
    var operationsLogged = 0
    /// Bytes of each segment up to its last intact record.
    var segmentSizes: [Int: Int] = [:]
    /// The format version of each segment.
    var segmentVersions: [Int: Int] = [:]
    /// The torn tail found at the end of the last segment, not yet cut off.
    var tornTail: (segment: Int, path: String, offset: Int, length: Int, reason: String)?
    /// The first damage met, when the policy lets replay stop there instead of failing.
    var damage: FileStoreError?
    /// The history the log records: compacted history, then a record per transaction, less what was trimmed.
    var history = HistoryLog()

    enum Policy {
        /// Refuse any damage but a torn tail of the last segment.
        case strict
        /// Stop at the first damage, keeping everything before it.
        case pointInTime
    }

    /// The live objects in the order they were inserted.
    var rows: [ModelSnapshot] { objects.rows }

    var rowCount: Int { objects.count }

    /// Replays `manifest`'s segments.
    ///
    /// - Throws: ``FileStoreError`` for damage the policy does not tolerate; nothing is written.
    static func replay(_ manifest: Manifest, layout: StoreLayout, fileSystem: any StoreFileSystem, blobs: BlobStore?,
                       policy: Policy) throws -> LogReplay {
        var replay = LogReplay()
        var seen = Set<Int>()
        for (position, number) in manifest.segments.enumerated() {
            guard seen.insert(number).inserted else {
                throw FileStoreError.inconsistentSegments(file: layout.manifest,
                                                          reason: "segment \(number) is listed twice")
            }
            let isLast = position == manifest.segments.count - 1
            do {
                let scan = try SegmentScan.read(layout.segment(number), number: number, fileSystem: fileSystem)
                try replay.apply(scan, manifest: manifest, isFirst: position == 0, isLast: isLast, blobs: blobs)
            } catch let error as FileStoreError where policy == .pointInTime {
                replay.damage = error
                return replay
            }
            if replay.damage != nil { return replay }
        }
        return replay
    }

    /// The records a segment was created with, before any save appended to it: its `segment` record and, in the
    /// store's first segment only, a new store's `schema` record or a compaction's schemas, history, snapshot and
    /// rows. The writer flushes them all before the manifest names the segment, so an opening that stops short is
    /// damage, never an interrupted save, and a torn tail can only follow a whole opening.
    private struct Opening {
        var isOpen = true
        var schemas = 0
        var history = false
        var snapshot: (offset: Int, rows: Int)?
        var rowsRead = 0

        /// Takes `record` into the opening, or throws when it cannot be part of one here.
        mutating func take(_ record: StoreRecord, at offset: Int, file: String, isFirst: Bool) throws {
            func refuse(_ reason: String) -> FileStoreError {
                FileStoreError.undecodableRecord(file: file, offset: offset, reason: reason)
            }
            switch record {
            case .transaction, .migration, .trim:
                isOpen = false
                return
            case .segment, .manifest:
                return
            case .schema, .history, .snapshot, .rows:
                guard isFirst, isOpen else {
                    throw refuse("a \(record.kind) record is written only when the store's first segment is created, "
                                 + "before any save")
                }
            }
            switch record {
            case .schema:
                guard !history, snapshot == nil else { throw refuse("a schema record after a compaction's history") }
                schemas += 1
            case .history:
                guard snapshot == nil else { throw refuse("a history record after the snapshot") }
                history = true
            case .snapshot(_, let rows):
                guard snapshot == nil else { throw refuse("a second snapshot") }
                snapshot = (offset, rows)
            case .rows(_, let rows):
                guard let snapshot else { throw refuse("rows without a snapshot before them") }
                rowsRead += rows.count
                if rowsRead > snapshot.rows {
                    throw refuse("the snapshot at byte \(snapshot.offset) lists \(snapshot.rows) rows; more follow it")
                }
            default:
                break
            }
        }

        /// Why the store's first segment's opening is not whole, if it is not.
        func incompleteness(segment number: Int) -> String? {
            if let snapshot {
                return rowsRead == snapshot.rows ? nil
                    : "the snapshot at byte \(snapshot.offset) lists \(snapshot.rows) rows and \(rowsRead) follow it"
            }
            if history { return "a compaction's history is not followed by its snapshot" }
            if schemas == 0 { return "the store's first segment records no schema" }
            // A new store's segment is number 1 and holds one schema; any other is a compaction without its snapshot.
            if schemas > 1 || number != 1 { return "a compaction's schemas are not followed by its snapshot" }
            return nil
        }
    }

    private mutating func apply(_ scan: SegmentScan, manifest: Manifest, isFirst: Bool, isLast: Bool,
                                blobs: BlobStore?) throws {
        guard let decoder = RecordDecoders.decoder(for: scan.version, blobs: blobs) else {
            throw FileStoreError.unsupportedFormatVersion(file: scan.path, found: scan.version,
                                                          supported: MagicLine.supportedVersions)
        }
        var opening = Opening()
        /// Loads nothing of a first segment whose opening is not whole: a partial snapshot is no committed state.
        func refuseOpening(_ error: FileStoreError) -> FileStoreError {
            objects = ReplayedObjects()
            history = HistoryLog()
            return error
        }
        try scan.bytes.withUnsafeBytes { buffer in
            for (index, range) in scan.records.enumerated() {
                let payload = UnsafeRawBufferPointer(rebasing: buffer[range])
                let record = try decoder.decode(payload, offset: range.lowerBound, file: scan.path,
                                                schema: schemas.last)
                if index == 0 {
                    guard case .segment(let header) = record else {
                        throw FileStoreError.undecodableRecord(file: scan.path, offset: range.lowerBound,
                                                               reason: "a segment must begin with a segment record")
                    }
                    guard header.store == manifest.store else {
                        throw FileStoreError.inconsistentSegments(
                            file: scan.path, reason: "it belongs to store \(header.store), not \(manifest.store)")
                    }
                    guard header.number == scan.number else {
                        throw FileStoreError.inconsistentSegments(
                            file: scan.path, reason: "it says it is segment \(header.number)")
                    }
                    continue
                }
                let wasOpen = opening.isOpen
                try opening.take(record, at: range.lowerBound, file: scan.path, isFirst: isFirst)
                if isFirst, wasOpen, !opening.isOpen, let reason = opening.incompleteness(segment: scan.number) {
                    throw refuseOpening(FileStoreError.undecodableRecord(file: scan.path, offset: range.lowerBound,
                                                                         reason: reason))
                }
                try apply(record, at: range.lowerBound, file: scan.path)
            }
        }
        if scan.records.isEmpty {
            throw FileStoreError.damagedRecord(file: scan.path, offset: scan.tail?.offset ?? scan.end,
                                               reason: "the segment has no segment record"
                                                   + (scan.tail.map { ": \($0.reason)" } ?? ""))
        }
        if scan.reserved > 0, !isLast {
            // The writer cuts reserved space off before a segment stops being the last one.
            throw FileStoreError.damagedRecord(file: scan.path, offset: scan.end,
                                               reason: "\(scan.reserved) zero bytes follow the last record of a "
                                                   + "segment that is not the last")
        }
        if let tail = scan.tail, !(tail.isTorn && isLast) {
            let error = FileStoreError.damagedRecord(
                file: scan.path, offset: tail.offset,
                reason: tail.reason + (tail.isTorn ? " (in a segment that is not the last)"
                                       : " (intact records follow, so this is not a torn tail)"))
            let partOfOpening = isFirst && opening.isOpen && opening.incompleteness(segment: scan.number) != nil
            throw partOfOpening ? refuseOpening(error) : error
        }
        if isFirst, opening.isOpen, let reason = opening.incompleteness(segment: scan.number) {
            throw refuseOpening(FileStoreError.damagedRecord(
                file: scan.path, offset: scan.tail?.offset ?? scan.end,
                reason: reason + (scan.tail.map { " (\($0.reason)): the segment's opening is written whole, so this "
                                                  + "is damage, not a torn tail" } ?? "")))
        }
        segmentSizes[scan.number] = scan.end
        segmentVersions[scan.number] = scan.version
        if let tail = scan.tail {
            tornTail = (scan.number, scan.path, tail.offset, scan.bytes.count - tail.offset, tail.reason)
        }
    }

    private mutating func apply(_ record: StoreRecord, at offset: Int, file: String) throws {
        switch record {
        case .segment:
            throw FileStoreError.undecodableRecord(file: file, offset: offset,
                                                   reason: "a segment record in the middle of a segment")
        case .manifest:
            throw FileStoreError.undecodableRecord(file: file, offset: offset, reason: "a manifest record in a segment")
        case .schema(let schema):
            schemas.append(schema)
            objects.schemaInForce(schema)
        case .migration(let migration):
            try apply(migration, at: offset, file: file)
            objects.schemaInForce(migration.schema)
        case let .snapshot(last, _):
            objects.beginSnapshot(after: last)
            operationsLogged = 0
        case let .rows(_, rows):
            if let reason = objects.addSnapshotRows(rows) {
                throw FileStoreError.undecodableRecord(file: file, offset: offset, reason: reason)
            }
            operationsLogged += rows.count
        case .transaction(let transaction):
            if let reason = objects.apply(transaction) {
                throw FileStoreError.danglingReference(file: file, offset: offset, reason: reason)
            }
            let changes = transaction.changes
            operationsLogged += changes.inserted.count + changes.updated.count + changes.deleted.count
            if let schema = schemas.last {
                history.append(HistoryRecord(number: transaction.number, timestamp: transaction.time,
                                             changes: changes, schema: schema))
            }
        case let .history(records, deleted):
            if let last = history.records.last, let first = records.first, first.number <= last.number {
                throw FileStoreError.undecodableRecord(
                    file: file, offset: offset, reason: "history transaction \(first.number) follows \(last.number)")
            }
            for record in records { history.append(record) }
            history.delete(deleted)
        case .trim(let deleted):
            history.delete(deleted)
        }
    }

    /// Converts the objects to the migration's schema (constant defaults are recomputed), then applies the
    /// values the migration recorded for generated defaults.
    private mutating func apply(_ migration: MigrationRecord, at offset: Int, file: String) throws {
        guard let previous = schemas.last, previous.contentHash == migration.fromHash else {
            throw FileStoreError.undecodableRecord(file: file, offset: offset,
                                                   reason: "a migration from a schema that is not the current one")
        }
        if let reason = objects.migrate(from: previous, by: migration) {
            throw FileStoreError.undecodableRecord(file: file, offset: offset, reason: reason)
        }
        schemas.append(migration.schema)
        operationsLogged += migration.fills.count
        history.append(migration.historyRecord)
    }
}
