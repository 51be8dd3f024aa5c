#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Decodes the payloads of one format version. The registry maps each version a file may name to its decoder;
/// a version with no decoder is refused before any of its records is read.
protocol RecordDecoding {
    /// The format version this decoder reads.
    static var version: Int { get }

    /// Decodes one record's payload.
    ///
    /// - Parameters:
    ///   - payload: the payload bytes.
    ///   - offset: the payload's offset in its file, for error messages.
    ///   - schema: the schema in effect at this point of the log (rows are decoded in its layout); nil before
    ///     the first schema record.
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``.
    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?) throws -> StoreRecord

    /// Decodes one record's payload as ``decode(_:offset:file:schema:)`` does, telling `readPast`, after each
    /// object of a transaction's inserts, the file offsets of the inserts read so far: the decoder never reads
    /// those bytes again (an object's keys are checked for duplicates only while it is read), so the caller may
    /// give their memory back while the rest of a large record is decoded.
    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?,
                readPast: @escaping (Range<Int>) -> Void) throws -> StoreRecord

    /// The kind a record's payload names and, for a `tx` or `migration` record, its transaction number, read
    /// without decoding the rest (nor checking it: ``decode(_:offset:file:schema:)`` does). The members may come in
    /// any order; the writer puts `"k"` and then `"tx"` first, so a record it wrote costs one or two members.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)`` when the payload is not a JSON object
    ///   naming a kind of record the format has, or its transaction number is not one.
    func peek(_ payload: UnsafeRawBufferPointer, offset: Int, file: String) throws -> RecordPeek
}

/// The kinds of record a store file holds: the values of a payload's `"k"` (docs/FORMAT.md, *The payload JSON*).
enum RecordKind: String, CaseIterable, Sendable {
    case segment, manifest, schema, migration, snapshot, rows, history, trim
    case transaction = "tx"
}

/// What ``RecordDecoding/peek(_:offset:file:)`` reads of a record.
struct RecordPeek: Equatable {
    var kind: RecordKind
    /// The number of a `tx` or `migration` record; nil for the other kinds.
    var transaction: UInt64?
}

enum RecordDecoders {
    /// The decoder for `version`, if this build reads it.
    static func decoder(for version: Int, blobs: BlobStore?) -> (any RecordDecoding)? {
        switch version {
        case RecordDecoderV1.version: RecordDecoderV1(blobs: blobs)
        case RecordDecoderV2.version: RecordDecoderV2(blobs: blobs)
        default: nil
        }
    }
}

/// The decoder of format version 2 (docs/FORMAT.md, *Version 2*): version 1's records, and a manifest that must
/// carry the schema history.
struct RecordDecoderV2: RecordDecoding {
    static let version = 2
    private let records: RecordDecoderV1

    init(blobs: BlobStore?) { records = RecordDecoderV1(blobs: blobs, manifestSchemas: .required) }

    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?) throws -> StoreRecord {
        try records.decode(payload, offset: offset, file: file, schema: schema)
    }

    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?,
                readPast: @escaping (Range<Int>) -> Void) throws -> StoreRecord {
        try records.decode(payload, offset: offset, file: file, schema: schema, readPast: readPast)
    }

    func peek(_ payload: UnsafeRawBufferPointer, offset: Int, file: String) throws -> RecordPeek {
        try records.peek(payload, offset: offset, file: file)
    }
}

/// The decoder of format version 1 (docs/FORMAT.md). Strict: unknown keys, missing keys and values of the wrong
/// type are errors, never skipped.
///
/// This file holds its entry points; it decodes bookkeeping records in `RecordDecoderV1+Bookkeeping.swift`, history
/// records in `+History`, `rows` and `tx` records in `+Rows`, and the pieces they share (entities, keys, values) in
/// `+Values`, with what it works out once per entity in `DecodingPlans.swift`.
struct RecordDecoderV1: RecordDecoding {
    static let version = 1
    /// Where external data lives, so that decoded rows can read blobs lazily; nil when decoding without a store.
    let blobs: BlobStore?
    /// What decoding needs of each entity, worked out once instead of per value.
    let plans = DecodingPlans()
    /// Whom the decode under way tells how far it has read (see ``decode(_:offset:file:schema:readPast:)``).
    let progress = DecodeProgress()
    /// Whether a manifest has the schema history: refused in version 1, required in version 2.
    let manifestSchemas: ManifestSchemas

    enum ManifestSchemas {
        case refused, required
    }

    init(blobs: BlobStore?) { self.init(blobs: blobs, manifestSchemas: .refused) }

    init(blobs: BlobStore?, manifestSchemas: ManifestSchemas) {
        self.blobs = blobs
        self.manifestSchemas = manifestSchemas
    }

    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?,
                readPast: @escaping (Range<Int>) -> Void) throws -> StoreRecord {
        progress.readPast = readPast
        defer { progress.readPast = nil }
        return try decode(payload, offset: offset, file: file, schema: schema)
    }

    func decode(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema?) throws -> StoreRecord {
        var reader = JSONReader(payload, baseOffset: offset)
        plans.beginRecord()
        do {
            let record = try decodeRecord(&reader, schema: schema)
            try reader.finish()
            return record
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    /// A record whose JSON is well formed but whose content the format does not allow.
    struct DecodingFailure: Error {
        let offset: Int
        let reason: String
    }

    func fail(_ reader: JSONReader, _ reason: String) -> DecodingFailure {
        DecodingFailure(offset: reader.offset, reason: reason)
    }

    func peek(_ payload: UnsafeRawBufferPointer, offset: Int, file: String) throws -> RecordPeek {
        let reader = JSONReader(payload, baseOffset: offset)
        do {
            let kind = try recordKind(reader, readingNumber: true)
            return RecordPeek(kind: kind.kind, transaction: kind.number)
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    /// The record's kind, from its `"k"` read ahead on a copy of `reader`, and with `readingNumber` its `"tx"` (of a
    /// `tx` or `migration` record). The members may come in any order: the look-ahead stops once it has what it
    /// wants, after one or two members for a record the writer wrote (`"k"` and `"tx"` first).
    func recordKind(_ reader: JSONReader, readingNumber: Bool) throws
        -> (kind: RecordKind, number: UInt64?) {
        var probe = reader
        // What `"tx"` holds depends on the kind (a history record's is an array): it is read once the kind is known.
        var name: String?, numberAt: JSONReader?
        do {
            try probe.readObject { member, key in
                switch key {
                case "k": name = try member.readString()
                case "tx" where readingNumber:
                    numberAt = member
                    try member.skipValue()
                default: try member.skipValue()
                }
                if let name, !readingNumber || numberAt != nil || (name != "tx" && name != "migration") {
                    throw FoundAhead()
                }
            }
        } catch is FoundAhead {}
        guard let name else { throw fail(reader, "the record has no \"k\"") }
        guard let kind = RecordKind(rawValue: name) else {
            throw fail(reader, "unknown record kind \(String(reflecting: name))")
        }
        guard kind == .transaction || kind == .migration, var numberAt else { return (kind, nil) }
        return (kind, try readTransactionNumber(&numberAt))
    }

    /// Reads the record's `"k"` ahead (``recordKind(_:readingNumber:)``), then decodes the record as that kind.
    private func decodeRecord(_ reader: inout JSONReader, schema: Schema?) throws -> StoreRecord {
        switch try recordKind(reader, readingNumber: false).kind {
        case .segment: return .segment(try decodeSegment(&reader))
        case .manifest: return .manifest(try decodeManifest(&reader))
        case .schema: return .schema(try decodeSchema(&reader))
        case .snapshot: return try decodeSnapshot(&reader)
        case .rows:
            var spans: [Range<Int>]? = nil
            return try decodeRows(&reader, schema: try require(schema, reader), spans: &spans)
        case .transaction: return .transaction(try decodeTransaction(&reader, schema: try require(schema, reader)))
        case .migration: return .migration(try decodeMigration(&reader))
        case .history: return try decodeHistory(&reader)
        case .trim: return try decodeTrim(&reader)
        }
    }

    private func require(_ schema: Schema?, _ reader: JSONReader) throws -> Schema {
        guard let schema else { throw fail(reader, "a data record comes before any schema record") }
        return schema
    }
}

/// The listener of a decode under way, told how far the decoder has read (see
/// ``RecordDecoding/decode(_:offset:file:schema:readPast:)``); a decoder decodes one record at a time.
final class DecodeProgress {
    var readPast: ((Range<Int>) -> Void)?
}
