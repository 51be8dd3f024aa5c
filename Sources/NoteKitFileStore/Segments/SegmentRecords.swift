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
                try body(SegmentRecord(file: path, offset: range.lowerBound, next: range.upperBound + 1,
                                       payload: payload(range, in: buffer), decoder: decoder))
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
