#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// One intact record of a segment, as every walk over a segment's records meets it (replay, refresh, the schema
/// history, stats, the check for an interrupted creation, verify, salvage, the fuzz target): where it is, its kind
/// read from its JSON, and its decoding in the schema in force. Its payload is valid during the visit only.
struct SegmentRecord {
    /// The segment file.
    let file: String
    /// The payload's offset in the file (the record's header starts ``RecordFrame/headerLength`` bytes before).
    let offset: Int
    /// The offset of the next record.
    let next: Int
    let payload: UnsafeRawBufferPointer
    let decoder: any RecordDecoding

    /// The record whose payload is `range` of `file` (the next record starts after the newline that ends it),
    /// holding `payload`, its bytes.
    init(file: String, payload range: Range<Int>, bytes payload: UnsafeRawBufferPointer, decoder: any RecordDecoding) {
        self.file = file
        offset = range.lowerBound
        next = range.upperBound + 1
        self.payload = payload
        self.decoder = decoder
    }

    /// The offset of the record's header: where problems with the record as a whole are reported.
    var recordOffset: Int { offset - RecordFrame.headerLength }

    /// The record's kind (and transaction number), read ahead of the rest, whatever the order of its members.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)`` when it names no kind the format has.
    var peek: RecordPeek { get throws { try decoder.peek(payload, offset: offset, file: file) } }

    /// The record, decoded in `schema`, the one in force at this point of the log.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``.
    func decode(schema: Schema?) throws -> StoreRecord {
        try decoder.decode(payload, offset: offset, file: file, schema: schema)
    }

    /// The record, decoded in `schema`, giving the memory of the payload's bytes back to the system as the decoder
    /// reads past them, a ``SegmentScan/releaseStep`` at a time (whole pages only, on Linux): a replay that must
    /// hold a 61 MB record to decode it then holds little more than the rows it makes. The payload's bytes are not
    /// valid after this call; adds the bytes given back to `givenBack`.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``.
    func decode(schema: Schema?, givingBack givenBack: inout Int) throws -> StoreRecord {
        guard payload.count > SegmentScan.releaseStep, let base = payload.baseAddress else {
            return try decode(schema: schema)
        }
        let release = PayloadRelease(payload: base, offset: offset)
        defer { givenBack += release.given }
        return try decoder.decode(payload, offset: offset, file: file, schema: schema) { release.give($0) }
    }
}

/// Gives back the memory of a payload's pages that a decoder has read past (see
/// ``SegmentRecord/decode(schema:givingBack:)``).
private final class PayloadRelease {
    /// The payload's first byte, and its offset in the file.
    private let payload: UnsafeRawPointer
    private let offset: Int
    /// The address up to which pages were given back (page-aligned once set).
    private var givenUpTo: UInt?
    /// Bytes given back so far.
    private(set) var given = 0
    private static let pageSize = UInt(max(4096, sysconf(Int32(_SC_PAGESIZE))))

    init(payload: UnsafeRawPointer, offset: Int) {
        self.payload = payload
        self.offset = offset
    }

    /// Gives back the whole pages of `read` (file offsets) not given back yet, once they make a release step.
    func give(_ read: Range<Int>) {
        #if os(Linux)
        let start = UInt(bitPattern: payload) + UInt(read.lowerBound - offset)
        let end = UInt(bitPattern: payload) + UInt(read.upperBound - offset)
        let page = Self.pageSize
        let from = max(givenUpTo ?? 0, (start + page - 1) & ~(page - 1))
        let to = end & ~(page - 1)
        guard to > from, to - from >= UInt(SegmentScan.releaseStep) else { return }
        // The decoder never reads these bytes again; they read as zeros if anything did.
        if madvise(UnsafeMutableRawPointer(bitPattern: from), Int(to - from), MADV_DONTNEED) == 0 {
            given += Int(to - from)
        }
        givenUpTo = to
        #endif
    }
}

extension RecordDecoders {
    /// The decoder of a segment's format version.
    ///
    /// - Throws: ``FileStoreError/unsupportedFormatVersion(file:found:supported:)`` for a version this build does not
    ///   read.
    static func decoder(for version: Int, file: String, blobs: BlobStore?) throws -> any RecordDecoding {
        guard let decoder = decoder(for: version, blobs: blobs) else {
            throw FileStoreError.unsupportedFormatVersion(file: file, found: version,
                                                          supported: MagicLine.supportedVersions)
        }
        return decoder
    }
}

extension SegmentScan {
    /// Visits the intact records this scan found, in order, stopping at the first error `body` throws.
    ///
    /// - Parameter blobs: where decoded rows read their external data; nil when decoding without a store.
    /// - Throws: what `body` throws, or ``FileStoreError/unsupportedFormatVersion(file:found:supported:)``.
    func forEachRecord(blobs: BlobStore?, _ body: (SegmentRecord) throws -> Void) throws {
        let decoder = try RecordDecoders.decoder(for: version, file: path, blobs: blobs)
        try bytes.withUnsafeBytes { buffer in
            for range in records {
                try body(SegmentRecord(file: path, payload: range, bytes: payload(range, in: buffer), decoder: decoder))
            }
        }
    }
}

extension SegmentScan {
    /// A stretch of a segment's bytes that holds no intact record: where it is, what kind of damage, why.
    struct Damage: Equatable {
        let file: String
        let offset: Int
        /// To the next intact record, or to the end of the file.
        let length: Int
        let kind: RecordDamage
        /// What was found, as a sentence.
        let reason: String
        /// Whether no intact record follows it: a torn tail, if the segment is the last.
        let isTorn: Bool
    }

    /// Visits the intact records of the segment at `path` and the damaged stretches between them, reading the
    /// file in bounded pieces (as ``read(_:number:fileSystem:from:)`` does, resuming after each damaged stretch):
    /// `record` gets each intact record (``SegmentRecord``, decoding with `blobs`); `undecodable` an intact record
    /// that cannot be decoded (a zero byte in it); `damaged` each damaged stretch (``Damage``). Zeros after the last
    /// record are reserved space, not damage: `reserved` gets their offset and length.
    ///
    /// - Returns: the segment's format version.
    /// - Throws: what reading the segment throws: a missing file, a magic line not a segment's of a known version.
    @discardableResult
    static func walk(_ path: String, number: Int, fileSystem: any StoreFileSystem, blobs: BlobStore?,
                     record: (_ record: SegmentRecord) -> Void,
                     undecodable: (_ offset: Int, _ length: Int, _ reason: String) -> Void,
                     damaged: (_ damage: Damage) -> Void,
                     reserved: (_ offset: Int, _ length: Int) -> Void = { _, _ in }) throws -> Int {
        var scan = try read(path, number: number, fileSystem: fileSystem)
        let version = scan.version
        while true {
            try scan.forEachRecord(blobs: blobs, record)
            var resume: Int?
            if let bad = scan.undecodable {
                undecodable(bad.offset, bad.end - bad.offset, bad.reason)
                resume = bad.end
            } else if let tail = scan.tail {
                damaged(Damage(file: path, offset: tail.offset, length: (tail.resumes ?? scan.fileSize) - tail.offset,
                               kind: tail.damage, reason: tail.reason, isTorn: tail.isTorn))
                resume = tail.resumes
            } else if scan.reserved > 0 {
                reserved(scan.end, scan.reserved)
            }
            guard let resume, resume < scan.fileSize else { return version }
            scan = try read(path, number: number, fileSystem: fileSystem, from: (resume, version))
        }
    }
}
