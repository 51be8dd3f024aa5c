#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The frames of one segment file: where its intact records are, and what, if anything, follows the last one.
///
/// The file is read in pieces of at most 8 MiB, never by its length: memory holds the records up to the last
/// intact one (which a replay decodes anyway) and one piece, or one record's claimed length when that is larger
/// (at most ``RecordFrame/maximumPayloadLength``, and only as far as the bytes hold no zero). Zeros after the last
/// record are read a piece at a time and not kept, and only up to ``RecordFrame/maximumReservedSpace``: a hole of any
/// size (`truncate -s +8G`) costs one piece of memory. A replay streams the file instead
/// (``stream(_:number:fileSystem:blobs:_:)``): it hands each record out as it is found and lets its bytes go, so it
/// holds at most one piece or one record, whichever is larger.
struct SegmentScan {
    let number: Int
    let path: String
    /// The file's bytes from `base` to the end of the last intact record (nothing after it is kept).
    private(set) var bytes: [UInt8] = []
    /// The file offset of `bytes[0]`: 0, or the offset a scan resumed at.
    let base: Int
    let version: Int
    /// The payload ranges of the intact records, in order, as offsets in the file (none for a streamed scan, which
    /// handed them out as it found them).
    var records: [Range<Int>] = []
    /// The offset just past the last intact record.
    var end: Int
    /// What stands after the last intact record, when anything does (reserved space is not a tail).
    var tail: Tail?
    /// How many zero bytes of reserved space follow the last intact record.
    var reserved = 0
    /// Whether the intact records are followed by reserved space (zeros) and nothing else.
    var endsInReservedSpace: Bool { tail == nil && undecodable == nil && reserved > 0 }
    /// The file's length when it was read.
    private(set) var fileSize: Int
    /// An intact record (checksum and all) whose payload holds a zero byte: it cannot be decoded (JSON text has no
    /// zero byte), and its bytes were not kept. The scan stops there: its offset, where it ends, and why.
    var undecodable: (offset: Int, end: Int, reason: String)?
    /// The most bytes of the file the scan held in memory at once.
    private(set) var heldBytes = 0

    struct Tail: Equatable {
        let offset: Int
        /// What kind of damage it is; `reason` says exactly what was found.
        let damage: RecordDamage
        let reason: String
        /// True when no intact record follows: a torn tail if this is the last segment.
        let isTorn: Bool
        /// Where the next intact record begins, when one follows.
        var resumes: Int? = nil
    }

    /// Bytes read at a time.
    static let piece = 8 << 20
    /// How much of a record being decoded a replay gives back at a time (``SegmentRecord/decode(schema:givingBack:)``).
    static let releaseStep = 4 << 20

    /// What a reader must refuse in what ends this scan, or nil when the segment ends as a healthy one does: an
    /// intact record that cannot be decoded; damage, unless it is a torn tail (no intact record after it) and the
    /// segment is the last (`isLast`), where a record being appended may stand; zero bytes after the last record of
    /// a segment that is not the last (the writer cuts its reserved space off before it starts another segment).
    /// Replay, refresh's catch-up and the read of a checkpoint's history range all decide with this one rule.
    func endingDamage(isLast: Bool) -> FileStoreError? {
        if let undecodable {
            return .undecodableRecord(file: path, offset: undecodable.offset, reason: undecodable.reason)
        }
        if let tail, !(tail.isTorn && isLast) {
            return .damagedRecord(file: path, offset: tail.offset, kind: tail.damage,
                                  reason: tail.reason + (tail.isTorn ? " (in a segment that is not the last)"
                                                         : " (intact records follow, so this is not a torn tail)"))
        }
        if reserved > 0, !isLast {
            return .damagedRecord(file: path, offset: end, kind: .malformed,
                                  reason: "\(reserved) zero bytes follow the last record of a segment that is not "
                                      + "the last")
        }
        return nil
    }

    /// The bytes of the record payload at `range` (file offsets), in `buffer`, the scan's ``bytes``.
    func payload(_ range: Range<Int>, in buffer: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: buffer[(range.lowerBound - base)..<(range.upperBound - base)])
    }

    /// Reads the file and finds its records, without decoding any payload: from its start (checking the magic
    /// line), or from `resume`, the offset of a record in a segment of format `version`.
    ///
    /// - Throws: an I/O error, or ``FileStoreError`` when the file is missing or the magic line is not a segment's
    ///   of a known version.
    /// - Complexity: O(bytes of the file up to what decides its tail); memory as the type says.
    static func read(_ path: String, number: Int, fileSystem: any StoreFileSystem,
                     from resume: (offset: Int, version: Int)? = nil) throws -> SegmentScan {
        var (scan, reader) = try begin(path, number: number, fileSystem: fileSystem, from: resume)
        var records: [Range<Int>] = []
        try scan.scanRecords(from: scan.end, with: &reader) { range, _ in
            records.append(range)
            return false
        }
        // Keep the records, not the piece read past them.
        reader.bytes.removeSubrange(min(reader.bytes.count, scan.end - reader.base)...)
        scan.records = records
        scan.bytes = reader.bytes
        return scan
    }

    /// Reads the file from its start and hands each intact record to `body` as soon as it is found, decoding with
    /// `blobs` (see ``forEachRecord(blobs:_:)``), then lets the record's bytes go: what ``read(_:number:fileSystem:from:)``
    /// and ``forEachRecord(blobs:_:)`` do, in the same order and with the same scan returned (its tail, reserved
    /// space, undecodable record, end), but holding at most one piece or one record of the file at a time. The
    /// returned scan keeps no bytes and no ``records``. A record's payload is valid during its visit only.
    ///
    /// - Throws: what `body` throws (the scan stops there), what reading the file throws (as
    ///   ``read(_:number:fileSystem:from:)``), or ``FileStoreError/unsupportedFormatVersion(file:found:supported:)``.
    /// - Complexity: O(bytes of the file up to what decides its tail).
    static func stream(_ path: String, number: Int, fileSystem: any StoreFileSystem, blobs: BlobStore?,
                       _ body: (SegmentRecord) throws -> Void) throws -> SegmentScan {
        var (scan, reader) = try begin(path, number: number, fileSystem: fileSystem, from: nil)
        let decoder = try RecordDecoders.decoder(for: scan.version, file: path, blobs: blobs)
        try scan.scanRecords(from: scan.end, with: &reader) { range, payload in
            try body(SegmentRecord(file: path, payload: range, bytes: payload, decoder: decoder))
            return true
        }
        return scan
    }

    /// The scan of a file before its records: its magic line read (unless it resumes at a record), `end` at the
    /// first record, and the reader positioned there.
    private static func begin(_ path: String, number: Int, fileSystem: any StoreFileSystem,
                              from resume: (offset: Int, version: Int)?) throws -> (SegmentScan, PieceReader) {
        guard let status = try fileSystem.status(path) else {
            throw FileStoreError.inconsistentSegments(file: path, kind: .segmentMissing,
                                                      reason: "the manifest lists it but it does not exist")
        }
        var reader = PieceReader(path: path, fileSystem: fileSystem, size: status.size, base: resume?.offset ?? 0)
        let version: Int, start: Int
        if let resume {
            (version, start) = (resume.version, resume.offset)
        } else {
            _ = try reader.load(through: min(64, reader.size))
            (version, start) = try reader.bytes.withUnsafeBytes {
                try MagicLine.parse($0, expecting: .segment, file: path)
            }
        }
        let scan = SegmentScan(number: number, path: path, base: reader.base, version: version, end: start,
                               fileSize: reader.size)
        return (scan, reader)
    }

    /// Finds the records from `start`, passing each intact one to `visit` (its payload's range in the file and its
    /// bytes, valid during the call), which returns whether the reader may let the record's bytes go; sets the
    /// scan's end, tail, reserved space and undecodable record, its file size and ``heldBytes``.
    private mutating func scanRecords(from start: Int, with reader: inout PieceReader,
                                      visit: (_ payload: Range<Int>, _ bytes: UnsafeRawBufferPointer) throws -> Bool)
        throws {
        defer {
            fileSize = reader.size
            heldBytes = max(heldBytes, reader.heldBytes)
        }
        var offset = start
        while offset < reader.size {
            guard try reader.load(through: offset + 1) else { break }   // the file shrank
            if reader.byte(at: offset) == 0 {
                let zeros = try reader.zeroRun(from: offset, limit: RecordFrame.maximumReservedSpace + 1)
                if zeros > RecordFrame.maximumReservedSpace {
                    tail = Tail(offset: offset + RecordFrame.maximumReservedSpace, damage: .malformed,
                                reason: "more than \(RecordFrame.maximumReservedSpace) zero bytes follow the last "
                                    + "record at byte \(offset); reserved space is at most "
                                    + "\(RecordFrame.maximumReservedSpace) bytes", isTorn: false)
                } else if offset + zeros >= reader.size {
                    reserved = reader.size - offset
                } else {
                    let resumes = try reader.nextIntactRecord(after: offset)
                    tail = Tail(offset: offset, damage: .malformed,
                                reason: "\(zeros) zero bytes where a record should begin",
                                isTorn: resumes == nil, resumes: resumes)
                }
                return
            }
            let left = reader.size - offset
            guard left >= RecordFrame.headerLength else {
                tail = Tail(offset: offset, damage: .truncated, reason: "\(left) bytes left, fewer than a record header",
                            isTorn: true)
                return
            }
            _ = try reader.load(through: offset + RecordFrame.headerLength)
            let header = reader.bytes.withUnsafeBytes { RecordFrame.parseHeader($0, at: offset - reader.base) }
            if let header, header.length <= RecordFrame.maximumPayloadLength,
               offset + RecordFrame.headerLength + header.length + 1 <= reader.size {
                let payloadStart = offset + RecordFrame.headerLength
                let recordEnd = payloadStart + header.length + 1
                if let zero = try reader.loadPayload(from: payloadStart, through: recordEnd) {
                    // Not kept, nor loaded further: checked as it streams by.
                    if let (damage, reason) = try reader.streamedFrameProblem(payload: payloadStart..<(recordEnd - 1),
                                                                             checksum: header.checksum) {
                        let resumes = try reader.nextIntactRecord(after: offset)
                        tail = Tail(offset: offset, damage: damage, reason: reason, isTorn: resumes == nil,
                                    resumes: resumes)
                    } else {
                        undecodable = (payloadStart, recordEnd,
                                       "a zero byte at byte \(zero) of the payload (JSON text has none)")
                    }
                    return
                }
            }
            // The whole claimed record is in memory (or the header says it cannot be one): the frame decides.
            let scanned = reader.bytes.withUnsafeBytes { RecordFrame.scan($0, at: offset - reader.base) }
            switch scanned {
            case let .record(payload, next):
                let range = (payload.lowerBound + reader.base)..<(payload.upperBound + reader.base)
                offset = next + reader.base
                end = offset
                let release = try reader.bytes.withUnsafeBytes {
                    try visit(range, UnsafeRawBufferPointer(rebasing: $0[payload]))
                }
                if release { reader.release(before: offset) }
            case .truncated(let reason):
                // A length that runs past the end may itself be the damage: intact records after it say so.
                let resumes = try reader.nextIntactRecord(after: offset)
                tail = Tail(offset: offset, damage: .truncated,
                            reason: Self.pastTheEnd(header, at: offset, size: reader.size) ?? reason,
                            isTorn: resumes == nil, resumes: resumes)
                return
            case .invalid(let damage, let reason):
                let resumes = try reader.nextIntactRecord(after: offset)
                tail = Tail(offset: offset, damage: damage, reason: reason, isTorn: resumes == nil, resumes: resumes)
                return
            }
        }
    }

    /// The reason for a record whose claimed length runs past the file's end (as ``RecordFrame/scan(_:at:)`` words
    /// it for a whole file in memory).
    private static func pastTheEnd(_ header: (length: Int, checksum: UInt32)?, at offset: Int, size: Int) -> String? {
        guard let header, header.length <= RecordFrame.maximumPayloadLength else { return nil }
        let end = offset + RecordFrame.headerLength + header.length + 1
        guard end > size else { return nil }
        return "record of \(header.length) bytes ends \(end - size) bytes past the end of the file"
    }
}

/// Reads a file in pieces: the bytes kept so far (`bytes`, from `base`), and reads of what follows that keep
/// nothing (runs of zeros, a search for the next intact record, a payload's checksum). Bytes a reader is done with
/// (``release(before:)``) are dropped before the next piece is read, and `base` moves past them.
private struct PieceReader {
    let path: String
    let fileSystem: any StoreFileSystem
    /// The file's length; lowered when a read finds the file shorter.
    var size: Int
    /// The file offset of `bytes[0]`.
    private(set) var base: Int
    var bytes: [UInt8] = [] {
        didSet { heldBytes = max(heldBytes, bytes.count) }
    }
    /// Bytes before this offset are no longer needed.
    private var released: Int
    /// The most bytes `bytes` held at once.
    private(set) var heldBytes = 0

    init(path: String, fileSystem: any StoreFileSystem, size: Int, base: Int) {
        self.path = path
        self.fileSystem = fileSystem
        self.size = size
        self.base = base
        released = base
    }

    /// Lets the bytes before `offset` go: the next read of a piece drops them.
    mutating func release(before offset: Int) { released = max(released, offset) }

    /// Drops the released bytes ahead of reading `incoming` more, keeping the rest in an array with room for them.
    private mutating func dropReleased(making incoming: Int) {
        let drop = min(released, loadedEnd) - base
        guard drop > 0 else { return }
        var kept: [UInt8] = []
        kept.reserveCapacity(bytes.count - drop + incoming)
        kept += bytes[drop...]
        base += drop
        bytes = kept
    }

    private var loadedEnd: Int { base + bytes.count }

    func byte(at offset: Int) -> UInt8 { bytes[offset - base] }

    /// Reads at most `count` bytes at `offset`, noting a file that turned out shorter.
    private mutating func read(at offset: Int, count: Int) throws -> [UInt8] {
        let piece = try fileSystem.read(path, from: offset, count: count)
        if piece.count < count { size = offset + piece.count }
        return piece
    }

    /// Keeps the bytes up to `target` (in one read when it is far); returns whether the file reaches it.
    mutating func load(through target: Int) throws -> Bool {
        while loadedEnd < min(target, size) {
            let count = min(size, max(target, loadedEnd + SegmentScan.piece)) - loadedEnd
            dropReleased(making: count)
            let piece = try read(at: loadedEnd, count: count)
            if piece.isEmpty { break }
            bytes += piece
        }
        return loadedEnd >= target
    }

    /// Keeps a record's bytes through `end`, a piece at a time, stopping at the first zero byte of its payload:
    /// returns that zero's offset in the payload, or nil when the record is in memory without one.
    mutating func loadPayload(from start: Int, through end: Int) throws -> Int? {
        var checked = start
        if end - loadedEnd > SegmentScan.piece {
            // Room for the whole record at once: growing a piece at a time would copy it at each doubling, holding
            // the old and the new buffer together (W1's 61 MB record: 96 MB at the peak). The room asked for is at
            // most the file's size and the longest payload a header may claim, and it is address space, not memory,
            // until read: the loading still stops at the first zero byte.
            dropReleased(making: min(end, size) - loadedEnd)
            bytes.reserveCapacity(min(end, size) - base)
        }
        while true {
            if checked < min(loadedEnd, end) {
                let found = bytes.withUnsafeBytes { buffer -> Int? in
                    let from = checked - base, count = min(loadedEnd, end) - checked
                    return memchr(buffer.baseAddress! + from, 0, count).map { UnsafeRawPointer($0) - buffer.baseAddress! + base }
                }
                if let found { return found - start }
                checked = min(loadedEnd, end)
            }
            guard loadedEnd < end, loadedEnd < size else { return nil }
            let count = min(end, size, loadedEnd + SegmentScan.piece) - loadedEnd
            dropReleased(making: count)
            let piece = try read(at: loadedEnd, count: count)
            if piece.isEmpty { return nil }
            bytes += piece
        }
    }

    /// Checks a payload that is not all in memory as it streams by: its checksum against `checksum`, no newline in
    /// it, and one after it. Returns what is wrong, or nil when the frame is intact.
    mutating func streamedFrameProblem(payload: Range<Int>, checksum: UInt32) throws
        -> (damage: RecordDamage, reason: String)? {
        var crc: UInt32 = 0
        var position = payload.lowerBound
        while position < payload.upperBound {
            let chunk: [UInt8]
            if position < loadedEnd {
                chunk = Array(bytes[(position - base)..<(min(loadedEnd, payload.upperBound) - base)])
            } else {
                chunk = try read(at: position, count: min(1 << 20, payload.upperBound - position))
                if chunk.isEmpty { return (.truncated, "the file ended inside the record") }
            }
            let newline = chunk.withUnsafeBytes { memchr($0.baseAddress!, 0x0A, $0.count) != nil }
            if newline { return (.malformed, "a newline inside the record's payload") }
            crc = chunk.withUnsafeBytes { CRC32C.checksum($0, seed: crc) }
            position += chunk.count
        }
        guard try read(at: payload.upperBound, count: 1) == [0x0A] else {
            return (.malformed, "record does not end with a newline")
        }
        return CRC32C.masked(crc) == checksum ? nil : (.checksumMismatch, "checksum mismatch")
    }

    /// How many zero bytes begin at `offset`, counting at most `limit`; reads a piece at a time and keeps none.
    mutating func zeroRun(from offset: Int, limit: Int) throws -> Int {
        var position = offset
        while position < size, position - offset < limit {
            let chunk: [UInt8]
            if position < loadedEnd {
                chunk = Array(bytes[(position - base)..<(loadedEnd - base)])
            } else {
                chunk = try read(at: position, count: min(size - position, limit - (position - offset), 1 << 20))
                if chunk.isEmpty { break }
            }
            if let nonZero = chunk.withUnsafeBytes({ RecordFrame.firstNonZero($0) }) {
                return min(limit, position - offset + nonZero)
            }
            position += chunk.count
        }
        return min(limit, position - offset)
    }

    /// The offset of the next intact record after `offset`, if any, read a piece at a time. A record holds no zero
    /// byte that matters here (one with a zero cannot be decoded): the search keeps only the current stretch of
    /// bytes without zeros, and skips runs of zeros (a hole) without keeping them.
    mutating func nextIntactRecord(after offset: Int) throws -> Int? {
        var stretch: [UInt8] = [], stretchStart = offset
        func search() -> Int? {
            stretch.isEmpty ? nil : stretch.withUnsafeBytes { RecordFrame.nextIntactRecord(in: $0, after: 0) }
                .map { stretchStart + $0 }
        }
        var position = offset
        while position < size {
            let chunk = try read(at: position, count: min(size - position, 1 << 20))
            if chunk.isEmpty { break }
            var index = 0
            while index < chunk.count {
                let zero = chunk.withUnsafeBytes { buffer in
                    memchr(buffer.baseAddress! + index, 0, chunk.count - index).map { UnsafeRawPointer($0) - buffer.baseAddress! }
                }
                guard let zero else {
                    stretch += chunk[index...]
                    break
                }
                stretch += chunk[index..<zero]
                if let found = search() { return found }
                stretch.removeAll(keepingCapacity: true)
                let next = chunk.withUnsafeBytes {
                    RecordFrame.firstNonZero(UnsafeRawBufferPointer(rebasing: $0[zero...])).map { zero + $0 }
                }
                index = next ?? chunk.count
                stretchStart = position + index
            }
            position += chunk.count
        }
        return search()
    }
}

/// The state a store's log describes, replayed from its manifest's segments (docs/FORMAT.md, *Recovery*).
struct LogReplay {
    /// Every schema the store was written with, oldest first; the last is the current one.
    var schemas: [Schema] = []
    /// The objects, rebuilt.
    private var objects = ReplayedRows()
    /// The number of the last transaction applied.
    var lastTransactionNumber: UInt64 { objects.lastTransactionNumber }
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
    /// Whether the store's first segment opens with a compaction's snapshot (so a checkpoint can describe it).
    var hasSnapshot = false
    /// The offset just past the last record of the first segment's opening (its `segment` and `schema` records, and
    /// a compaction's history, snapshot and rows): the log's size right after the compaction that wrote it.
    var openingEnd = 0
    /// The most bytes of a segment the replay held in memory at once (it decodes each record as its scan finds it).
    var heldSegmentBytes = 0
    /// The bytes of records given back to the system while they were decoded (a record's pages read past).
    var givenBackRecordBytes = 0

    enum Policy {
        /// Refuse any damage but a torn tail of the last segment.
        case strict
        /// Stop at the first damage, keeping everything before it.
        case pointInTime
    }

    /// The live objects in the order they were inserted.
    var rows: [ModelSnapshot] { objects.rows }

    var rowCount: Int { objects.count }

    /// Hands over the live objects as tables per entity name, and keeps none (``ReplayedRows/takeTables()``):
    /// what an open adopts as its store's rows.
    mutating func takeTables() -> [String: OrderedRows] { objects.takeTables() }

    /// Replays `manifest`'s segments.
    ///
    /// - Throws: ``FileStoreError`` for damage the policy does not tolerate; nothing is written.
    static func replay(_ manifest: Manifest, layout: StoreLayout, fileSystem: any StoreFileSystem, blobs: BlobStore?,
                       policy: Policy) throws -> LogReplay {
        var replay = LogReplay()
        var seen = Set<Int>()
        for (position, number) in manifest.segments.enumerated() {
            guard seen.insert(number).inserted else {
                throw FileStoreError.inconsistentSegments(file: layout.manifest, kind: .segmentListedTwice,
                                                          reason: "segment \(number) is listed twice")
            }
            let isLast = position == manifest.segments.count - 1
            do {
                try replay.applySegment(layout.segment(number), number: number, fileSystem: fileSystem,
                                        manifest: manifest, isFirst: position == 0, isLast: isLast, blobs: blobs)
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

    /// Applies the records of the segment at `path` as its scan finds them (``SegmentScan/stream(_:number:fileSystem:blobs:_:)``),
    /// then decides what ends it. What was applied of a segment that throws goes with the failed replay (or, for a
    /// point-in-time replay, stays: everything before the damage).
    private mutating func applySegment(_ path: String, number: Int, fileSystem: any StoreFileSystem,
                                       manifest: Manifest, isFirst: Bool, isLast: Bool, blobs: BlobStore?) throws {
        var opening = Opening()
        /// Loads nothing of a first segment whose opening is not whole: a partial snapshot is no committed state.
        func refuseOpening(_ error: FileStoreError) -> FileStoreError {
            objects = ReplayedRows()
            history = HistoryLog()
            return error
        }
        var isHeader = true
        let scan = try SegmentScan.stream(path, number: number, fileSystem: fileSystem, blobs: blobs) { entry in
            let record = try entry.decode(schema: schemas.last, givingBack: &givenBackRecordBytes)
            if isHeader {
                isHeader = false
                guard case .segment(let header) = record else {
                    throw FileStoreError.undecodableRecord(file: path, offset: entry.offset,
                                                           reason: "a segment must begin with a segment record")
                }
                guard header.store == manifest.store else {
                    throw FileStoreError.inconsistentSegments(
                        file: path, kind: .segmentOfAnotherStore,
                        reason: "it belongs to store \(header.store), not \(manifest.store)")
                }
                guard header.number == number else {
                    throw FileStoreError.inconsistentSegments(
                        file: path, kind: .segmentNumberMismatch, reason: "it says it is segment \(header.number)")
                }
                return
            }
            let wasOpen = opening.isOpen
            try opening.take(record, at: entry.offset, file: path, isFirst: isFirst)
            if isFirst, wasOpen, !opening.isOpen, let reason = opening.incompleteness(segment: number) {
                throw refuseOpening(FileStoreError.undecodableRecord(file: path, offset: entry.offset,
                                                                     reason: reason))
            }
            try apply(record, at: entry.offset, file: path)
            if isFirst, opening.isOpen { openingEnd = entry.next }
        }
        heldSegmentBytes = max(heldSegmentBytes, scan.heldBytes)
        if scan.undecodable == nil, isHeader {   // no record at all
            throw FileStoreError.damagedRecord(file: path, offset: scan.tail?.offset ?? scan.end,
                                               kind: scan.tail?.damage ?? .truncated,
                                               reason: "the segment has no segment record"
                                                   + (scan.tail.map { ": \($0.reason)" } ?? ""))
        }
        if let error = scan.endingDamage(isLast: isLast) {
            let inOpening = scan.undecodable == nil && scan.tail != nil && isFirst && opening.isOpen
                && opening.incompleteness(segment: scan.number) != nil
            throw inOpening ? refuseOpening(error) : error
        }
        if isFirst, opening.isOpen, let reason = opening.incompleteness(segment: scan.number) {
            throw refuseOpening(FileStoreError.damagedRecord(
                file: scan.path, offset: scan.tail?.offset ?? scan.end, kind: scan.tail?.damage ?? .truncated,
                reason: reason + (scan.tail.map { " (\($0.reason)): the segment's opening is written whole, so this "
                                                  + "is damage, not a torn tail" } ?? "")))
        }
        segmentSizes[scan.number] = scan.end
        segmentVersions[scan.number] = scan.version
        if let tail = scan.tail {
            tornTail = (scan.number, scan.path, tail.offset, scan.fileSize - tail.offset, tail.reason)
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
            hasSnapshot = true
            objects.beginSnapshot(after: last)
            operationsLogged = 0
        case let .rows(_, rows):
            if let reason = objects.addSnapshotRows(rows) {
                throw FileStoreError.undecodableRecord(file: file, offset: offset, reason: reason)
            }
            operationsLogged += rows.count
        case .transaction(let transaction):
            if let conflict = objects.apply(transaction) {
                throw FileStoreError.danglingReference(file: file, offset: offset, kind: conflict.kind,
                                                       reason: conflict.description)
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
