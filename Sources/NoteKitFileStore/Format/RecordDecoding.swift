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
struct RecordDecoderV1: RecordDecoding {
    static let version = 1
    /// Where external data lives, so that decoded rows can read blobs lazily; nil when decoding without a store.
    let blobs: BlobStore?
    /// What decoding needs of each entity, worked out once instead of per value.
    private let plans = DecodingPlans()
    /// Whom the decode under way tells how far it has read (see ``decode(_:offset:file:schema:readPast:)``).
    private let progress = DecodeProgress()
    /// Whether a manifest has the schema history: refused in version 1, required in version 2.
    private let manifestSchemas: ManifestSchemas

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

    private func fail(_ reader: JSONReader, _ reason: String) -> DecodingFailure {
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
    private func recordKind(_ reader: JSONReader, readingNumber: Bool) throws
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

    // MARK: Bookkeeping records

    private func decodeSegment(_ reader: inout JSONReader) throws -> SegmentHeader {
        var store: UUID?, number: Int?, created: Date?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "store": store = try readUUID(&member)
            case "number": number = Int(try member.readInt64())
            case "created": created = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a segment record")
            }
        }
        guard let store, let number, let created else { throw fail(start, "a segment record lacks store, number or created") }
        return SegmentHeader(store: store, number: number, created: created)
    }

    private func decodeManifest(_ reader: inout JSONReader) throws -> Manifest {
        var store: UUID?, segments: [Int]?, next: Int?, created: Date?, schemas: [ManifestSchema]?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "store": store = try readUUID(&member)
            case "segments":
                var numbers: [Int] = []
                try member.readArray { numbers.append(Int(try $0.readInt64())) }
                segments = numbers
            case "nextSegment": next = Int(try member.readInt64())
            case "created": created = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "schemas" where manifestSchemas == .required: schemas = try readManifestSchemas(&member, record: start)
            case "schemas":
                throw fail(member, "a version 1 manifest has no \"schemas\": the schema history is version 2's")
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in the manifest")
            }
        }
        guard let store, let segments, let next, let created else {
            throw fail(start, "the manifest lacks store, segments, nextSegment or created")
        }
        if manifestSchemas == .required && schemas == nil {
            throw fail(start, "a version 2 manifest lacks \"schemas\", the schema history")
        }
        return Manifest(store: store, segments: segments, nextSegment: next, created: created, schemas: schemas)
    }

    /// The manifest's copy of the schema history: `[{"hash": …, "schema": {…}}, …]`. Each schema's form is kept as
    /// its bytes (checked to be one JSON object) and decoded only when used: see ``ManifestSchema``. `record` is the
    /// record's reader, whose buffer holds the bytes.
    private func readManifestSchemas(_ reader: inout JSONReader, record: JSONReader) throws -> [ManifestSchema] {
        var schemas: [ManifestSchema] = []
        try reader.readArray { element in
            var hash: String?, body: [UInt8]?
            let entry = element
            try element.readObject { member, key in
                switch key {
                case "hash": hash = try member.readString()
                case "schema":
                    guard try member.peek() == .object else { throw fail(member, "a schema in the manifest is an object") }
                    let from = member.offset - record.offset
                    try member.skipValue()
                    body = [UInt8](UnsafeRawBufferPointer(rebasing: record.buffer[from..<(member.offset - record.offset)]))
                default: throw fail(member, "unknown key \(String(reflecting: key.string)) in the manifest's schemas")
                }
            }
            guard let hash, let body else { throw fail(entry, "a schema in the manifest lacks hash or schema") }
            schemas.append(ManifestSchema(hash: hash, body: body))
        }
        return schemas
    }

    private func decodeSchema(_ reader: inout JSONReader) throws -> Schema {
        var hash: String?, schema: Schema?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "hash": hash = try member.readString()
            case "schema": schema = try decodeSchemaBody(&member, start: start)
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a schema record")
            }
        }
        guard let schema else { throw fail(start, "a schema record has no schema") }
        if let hash, hash != schema.contentHash {
            throw fail(start, "the schema's content hash is \(schema.contentHash), the record says \(hash)")
        }
        return schema
    }

    /// Decodes a schema's `Codable` form (validated by decoding) from the value at `member`; `start` is the
    /// record's reader, whose buffer holds the value's bytes.
    private func decodeSchemaBody(_ member: inout JSONReader, start: JSONReader) throws -> Schema {
        let valueStart = member.offset - start.offset
        try member.skipValue()
        let valueEnd = member.offset - start.offset
        let bytes = Data(UnsafeRawBufferPointer(rebasing: start.buffer[valueStart..<valueEnd]))
        do {
            return try JSONDecoder().decode(Schema.self, from: bytes)
        } catch {
            throw fail(member, "the schema does not decode: \(error)")
        }
    }

    private func decodeMigration(_ reader: inout JSONReader) throws -> MigrationRecord {
        var number: UInt64?, time: Date?, from: String?, hash: String?
        var fills: [ModelUpdate] = []
        let start = reader
        // The updates are in the new schema: it is read first, wherever it stands (the writer puts it before them).
        let schema = try lookAhead("schema", inObjectAt: reader) { try decodeSchemaBody(&$0, start: start) }
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "tx": number = try readTransactionNumber(&member)
            case "time": time = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "from": from = try member.readString()
            case "hash": hash = try member.readString()
            case "schema": try member.skipValue()
            case "update":
                guard let schema else { throw fail(member, "a migration record with updates has no schema") }
                try member.readArray { element in fills.append(try readUpdate(&element, schema: schema)) }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a migration record")
            }
        }
        guard let number, let time, let from, let schema else {
            throw fail(start, "a migration record lacks tx, time, from or schema")
        }
        if let hash, hash != schema.contentHash {
            throw fail(start, "the schema's content hash is \(schema.contentHash), the record says \(hash)")
        }
        return MigrationRecord(number: number, time: time, fromHash: from, schema: schema, fills: fills)
    }

    private func decodeSnapshot(_ reader: inout JSONReader) throws -> StoreRecord {
        var last: UInt64?, count: Int?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "lastTx": last = try readTransactionNumber(&member)
            case "rows": count = Int(try member.readInt64())
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a snapshot record")
            }
        }
        guard let last, let count else { throw fail(start, "a snapshot record lacks lastTx or rows") }
        return .snapshot(lastTransaction: last, rowCount: count)
    }

    // MARK: History records

    private func decodeHistory(_ reader: inout JSONReader) throws -> StoreRecord {
        var records: [HistoryRecord] = []
        var deleted: [ClosedRange<UInt64>] = []
        var sawTransactions = false
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "deleted": deleted = try readRanges(&member)
            case "tx":
                sawTransactions = true
                try member.readArray { element in
                    let record = try readHistoryRecord(&element)
                    if let last = records.last, record.number <= last.number {
                        throw fail(element, "history transaction \(record.number) follows transaction \(last.number)")
                    }
                    records.append(record)
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a history record")
            }
        }
        guard sawTransactions else { throw fail(start, "a history record lacks tx") }
        return .history(records: records, deleted: deleted)
    }

    private func decodeTrim(_ reader: inout JSONReader) throws -> StoreRecord {
        var deleted: [ClosedRange<UInt64>]?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "deleted": deleted = try readRanges(&member)
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a trim record")
            }
        }
        guard let deleted else { throw fail(start, "a trim record lacks deleted") }
        return .trim(deleted: deleted)
    }

    /// `[[low, high], …]`, each range with low ≤ high, in increasing order.
    private func readRanges(_ reader: inout JSONReader) throws -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        try reader.readArray { element in
            var bounds: [UInt64] = []
            let at = element
            try element.readArray { bounds.append(try $0.readUInt64()) }
            guard bounds.count == 2, bounds[0] <= bounds[1] else {
                throw fail(at, "a range of transactions is [low, high] with low ≤ high")
            }
            if let last = ranges.last, bounds[0] <= last.upperBound {
                throw fail(at, "ranges of transactions must increase")
            }
            ranges.append(bounds[0]...bounds[1])
        }
        return ranges
    }

    private func readHistoryRecord(_ reader: inout JSONReader) throws -> HistoryRecord {
        var number: UInt64?, time: Date?, author: String?
        var inserted: [PersistentIdentifier] = []
        var updated: [HistoryRecord.Update] = []
        var deleted: [ModelDeletion] = []
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "tx": number = try readTransactionNumber(&member)
            case "time": time = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "author": author = try member.readString()
            case "insert":
                try member.readArray { run in
                    var entity: String?
                    try run.readArray { element in
                        guard let entity else {
                            entity = try element.readString()
                            return
                        }
                        inserted.append(PersistentIdentifier(entityName: entity, primaryKey: try element.readUUID()))
                    }
                    if entity == nil { throw fail(run, "a run of inserted objects names no entity") }
                }
            case "update":
                try member.readArray { element in
                    var entity: String?, id: UUID?, properties: [String] = []
                    let at = element
                    try element.readObject { field, name in
                        switch name {
                        case "e": entity = try field.readString()
                        case "id": id = try field.readUUID()
                        case "p": try field.readArray { properties.append(try $0.readString()) }
                        default: throw fail(field, "unknown key \(String(reflecting: name.string)) in a history update")
                        }
                    }
                    guard let entity, let id else { throw fail(at, "a history update lacks e or id") }
                    updated.append(.init(id: PersistentIdentifier(entityName: entity, primaryKey: id), properties: properties))
                }
            case "delete":
                try member.readArray { element in
                    var entity: String?, id: UUID?, tombstone: [String: StoredValue] = [:]
                    let at = element
                    try element.readObject { field, name in
                        switch name {
                        case "e": entity = try field.readString()
                        case "id": id = try field.readUUID()
                        case "tombstone":
                            try field.readObject { value, attribute in tombstone[attribute.string] = try readTagged(&value) }
                        default: throw fail(field, "unknown key \(String(reflecting: name.string)) in a history delete")
                        }
                    }
                    guard let entity, let id else { throw fail(at, "a history delete lacks e or id") }
                    deleted.append(ModelDeletion(id: PersistentIdentifier(entityName: entity, primaryKey: id),
                                                 tombstone: tombstone))
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a history transaction")
            }
        }
        guard let number, let time else { throw fail(start, "a history transaction lacks tx or time") }
        return HistoryRecord(number: number, timestamp: time, author: author, inserted: inserted, updated: updated,
                             deleted: deleted)
    }

    // MARK: Data records

    /// A `rows` record's entity, rows, and each row object's bytes (from its `{` to after its `}`, as offsets in
    /// `file`): what a checkpoint built from a segment lists. Rows decode the same in every format version.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``, also when the record is not `rows`.
    func decodeRows(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema) throws
        -> (entity: String, rows: [ModelSnapshot], spans: [Range<Int>]) {
        var reader = JSONReader(payload, baseOffset: offset)
        plans.beginRecord()
        do {
            guard try recordKind(reader, readingNumber: false).kind == .rows else {
                throw fail(reader, "the record is not a rows record")
            }
            var spans: [Range<Int>]? = []
            guard case let .rows(entity, rows) = try decodeRows(&reader, schema: schema, spans: &spans) else {
                throw fail(reader, "the record is not a rows record")
            }
            try reader.finish()
            return (entity, rows, spans ?? [])
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    /// One row object of `entity` as a `rows` record holds it (`{"id":…,"a":{…},"r":{…}}`), alone in `bytes`, whose
    /// first byte is at `offset` in `file`: how a checkpoint's rows are read back.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``.
    ///
    /// - Parameters:
    ///   - only: which attributes to decode (by position); the others are checked to be present, skipped, and left
    ///     `.null` in the row. Nil decodes every attribute.
    ///   - decoded: incremented by the number of attribute values decoded (what a partial read saves, for tests).
    func decodeRow(_ bytes: UnsafeRawBufferPointer, offset: Int, file: String, entity: Schema.Entity,
                   only: [Bool]? = nil, decoded: inout Int) throws -> ModelSnapshot {
        var reader = JSONReader(bytes, baseOffset: offset)
        // Each row is a record of its own here: the caller may pass another description of an entity of the same
        // name, so its plan is checked again.
        plans.beginRecord()
        do {
            let row = try readWholeRow(&reader, entity: entity, withEntityKey: false, only: only, decoded: &decoded)
            try reader.finish()
            return row
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    private func decodeRows(_ reader: inout JSONReader, schema: Schema, spans: inout [Range<Int>]?) throws
        -> StoreRecord {
        // The rows are in the entity's layout: `"e"` is read first, wherever it stands (the writer puts it second).
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "a rows record")
        var rows: [ModelSnapshot] = []
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "e": try member.skipValue()
            case "rows":
                try member.readArray { element in
                    let start = element.offset
                    rows.append(try readWholeRow(&element, entity: entity, withEntityKey: false))
                    if spans != nil { spans!.append(start..<element.offset) }
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a rows record")
            }
        }
        return .rows(entity: entity.name, rows: rows)
    }

    private func decodeTransaction(_ reader: inout JSONReader, schema: Schema) throws -> Transaction {
        var number: UInt64?, time: Date?
        var changes = ChangeSet()
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "tx": number = try readTransactionNumber(&member)
            case "time": time = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "author": changes.author = try member.readString()
            case "insert":
                let readPast = progress.readPast
                var first: Int?
                try member.readArray { element in
                    if first == nil { first = element.offset }
                    changes.inserted.append(try readInsert(&element, schema: schema))
                    if let readPast, let first { readPast(first..<element.offset) }
                }
            case "update":
                try member.readArray { element in changes.updated.append(try readUpdate(&element, schema: schema)) }
            case "delete":
                try member.readArray { element in changes.deleted.append(try readDeletion(&element, schema: schema)) }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a transaction record")
            }
        }
        guard let number, let time else { throw fail(start, "a transaction record lacks tx or time") }
        return Transaction(number: number, time: time, changes: changes)
    }

    private func readInsert(_ reader: inout JSONReader, schema: Schema) throws -> ModelSnapshot {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "an inserted object")
        return try readWholeRow(&reader, entity: entity, withEntityKey: true)
    }

    /// Reads `{"id":…, "a":{…}, "r":{…}}` (with `"e"` too when `withEntityKey`), requiring every attribute and
    /// relationship of the entity.
    private func readWholeRow(_ reader: inout JSONReader, entity: Schema.Entity, withEntityKey: Bool) throws -> ModelSnapshot {
        var decoded = 0
        return try readWholeRow(&reader, entity: entity, withEntityKey: withEntityKey, only: nil, decoded: &decoded)
    }

    /// As above, decoding only the attributes `only` selects (nil: all), counting those decoded in `decoded`.
    private func readWholeRow(_ reader: inout JSONReader, entity: Schema.Entity, withEntityKey: Bool, only: [Bool]?,
                              decoded: inout Int) throws -> ModelSnapshot {
        let plan = plans.plan(for: entity)
        var id: PersistentIdentifier?
        let attributeCount = plan.attributeTypes.count
        plans.packer.begin(count: attributeCount)
        var relationships = [RelationshipTargets](repeating: .toOne(nil), count: plan.toMany.count)
        var seenAttributes = PresenceSet(count: attributeCount), seenRelationships = PresenceSet(count: relationships.count)
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e" where withEntityKey: try member.skipValue()
            case "id": id = PersistentIdentifier(plan.interned, primaryKey: try member.readUUID())
            case "a":
                var expected = 0
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, names: plan.attributeNames, value,
                                                   expected: &expected)
                    guard seenAttributes.insert(index) else { throw fail(value, "attribute \(name.string) appears twice") }
                    if let only, !only[index] { return try value.skipValue() }
                    decoded += 1
                    if plan.text[index] {
                        // Text goes into the row as it is read, with no `String` made of it.
                        if value.readNullIfPresent() { return plans.packer.set(.null, at: index) }
                        try value.readStringBytes { plans.packer.setString(utf8: $0, at: index) }
                    } else {
                        plans.packer.set(plan.external[index] ? try readExternal(&value)
                                            : try readValue(&value, type: plan.attributeTypes[index]), at: index)
                    }
                }
            case "r":
                var expected = 0
                try member.readObject { value, name in
                    let index = try relationshipIndex(name, in: entity, names: plan.relationshipNames, value,
                                                      expected: &expected)
                    guard seenRelationships.insert(index) else { throw fail(value, "relationship \(name.string) appears twice") }
                    relationships[index] = try readTargets(&value, toMany: plan.toMany[index],
                                                           destination: plan.destinations[index])
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in an object of \(entity.name)")
            }
        }
        guard let id else { throw fail(start, "an object of \(entity.name) has no id") }
        if let missing = seenAttributes.firstMissing {
            throw fail(start, "\(id) lacks attribute \(entity.attributes[missing].name)")
        }
        if let missing = seenRelationships.firstMissing {
            throw fail(start, "\(id) lacks relationship \(entity.relationships[missing].name)")
        }
        let packed = plans.packer.finish(relationships: relationships)
        return ModelSnapshot(id: id, attributes: packed.attributes, relationships: packed.relationships)
    }

    private func readUpdate(_ reader: inout JSONReader, schema: Schema) throws -> ModelUpdate {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "an updated object")
        var id: PersistentIdentifier?
        var attributes: [AttributeChange] = []
        var relationships: [RelationshipChange] = []
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e": try member.skipValue()
            case "id": id = PersistentIdentifier(entityName: entity.name, primaryKey: try readUUID(&member))
            case "a":
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, value)
                    attributes.append(AttributeChange(index: index,
                                                      value: try readValue(&value, attribute: entity.attributes[index])))
                }
            case "r":
                try member.readObject { value, name in
                    let index = try relationshipIndex(name, in: entity, value)
                    let relationship = entity.relationships[index]
                    let destination = relationship.destination
                    if relationship.isToMany {
                        var added: [PersistentIdentifier] = [], removed: [PersistentIdentifier] = []
                        try value.readObject { list, listKey in
                            switch listKey {
                            case "add": added = try readKeyArray(&list, destination: destination)
                            case "remove": removed = try readKeyArray(&list, destination: destination)
                            default: throw fail(list, "a to-many change has only \"add\" and \"remove\"")
                            }
                        }
                        relationships.append(RelationshipChange(index: index, kind: .toMany(added: added, removed: removed)))
                    } else {
                        let target = value.readNullIfPresent()
                            ? nil : PersistentIdentifier(entityName: destination, primaryKey: try readUUID(&value))
                        relationships.append(RelationshipChange(index: index, kind: .toOne(target)))
                    }
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in an update")
            }
        }
        guard let id else { throw fail(start, "an updated object of \(entity.name) has no id") }
        return ModelUpdate(id: id, attributes: attributes, relationships: relationships)
    }

    private func readDeletion(_ reader: inout JSONReader, schema: Schema) throws -> ModelDeletion {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "a deleted object")
        var id: PersistentIdentifier?
        var tombstone: [String: StoredValue] = [:]
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e": try member.skipValue()
            case "id": id = PersistentIdentifier(entityName: entity.name, primaryKey: try readUUID(&member))
            case "tombstone":
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, value)
                    tombstone[entity.attributes[index].name] = try readValue(&value, attribute: entity.attributes[index])
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a deletion")
            }
        }
        guard let id else { throw fail(start, "a deleted object of \(entity.name) has no id") }
        return ModelDeletion(id: id, tombstone: tombstone)
    }

    // MARK: Pieces

    /// Stops a look-ahead as soon as it has what it wants.
    private struct FoundAhead: Error {}

    /// The value of member `key` of the object at `reader`, read by `read` ahead on a copy of the reader, or nil
    /// when the object has no such member. The look-ahead stops at that member: for one the writer puts first, it
    /// reads one member.
    private func lookAhead<T>(_ key: String, inObjectAt reader: JSONReader,
                              _ read: (inout JSONReader) throws -> T) throws -> T? {
        var probe = reader
        var value: T?
        do {
            try probe.readObject { member, name in
                guard name == key else { return try member.skipValue() }
                value = try read(&member)
                throw FoundAhead()
            }
        } catch is FoundAhead {}
        return value
    }

    /// The entity named by the `"e"` member of the object at `reader`, read ahead (``lookAhead(_:inObjectAt:_:)``).
    private func entity(ofObjectAt reader: JSONReader, schema: Schema, role: String) throws -> Schema.Entity {
        guard let entity = try lookAhead("e", inObjectAt: reader, { try readEntity(&$0, schema: schema) }) else {
            throw fail(reader, "\(role) has no entity")
        }
        return entity
    }

    private func readEntity(_ reader: inout JSONReader, schema: Schema) throws -> Schema.Entity {
        let name = try reader.readString()
        guard let entity = schema.entity(named: name) else {
            throw fail(reader, "the schema has no entity \(String(reflecting: name))")
        }
        return entity
    }

    private func schema(for relationship: Schema.Relationship, in entity: Schema.Entity) -> String? {
        relationship.destination
    }

    /// The attribute `key` names. Writers list attributes in declaration order, so the one after the previous key
    /// (`expected`) is tried first, without making a `String`.
    private func attributeIndex(_ key: JSONKey, in entity: Schema.Entity, names: [[UInt8]], _ reader: JSONReader,
                                expected: inout Int) throws -> Int {
        if expected < names.count, key.isUTF8(names[expected]) {
            expected += 1
            return expected - 1
        }
        let index = try attributeIndex(key, in: entity, reader)
        expected = index + 1
        return index
    }

    private func relationshipIndex(_ key: JSONKey, in entity: Schema.Entity, names: [[UInt8]], _ reader: JSONReader,
                                   expected: inout Int) throws -> Int {
        if expected < names.count, key.isUTF8(names[expected]) {
            expected += 1
            return expected - 1
        }
        let index = try relationshipIndex(key, in: entity, reader)
        expected = index + 1
        return index
    }

    private func attributeIndex(_ key: JSONKey, in entity: Schema.Entity, _ reader: JSONReader) throws -> Int {
        let name = key.string
        guard let index = entity.attributeIndex(named: name) else {
            throw fail(reader, "\(entity.name) has no attribute \(String(reflecting: name))")
        }
        return index
    }

    private func relationshipIndex(_ key: JSONKey, in entity: Schema.Entity, _ reader: JSONReader) throws -> Int {
        let name = key.string
        guard let index = entity.relationshipIndex(named: name) else {
            throw fail(reader, "\(entity.name) has no relationship \(String(reflecting: name))")
        }
        return index
    }

    private func readTargets(_ reader: inout JSONReader, toMany: Bool, destination: InternedEntityName) throws
        -> RelationshipTargets {
        if toMany { return .toMany(try readKeyArray(&reader, destination: destination)) }
        if reader.readNullIfPresent() { return .toOne(nil) }
        return .toOne(PersistentIdentifier(destination, primaryKey: try readUUID(&reader)))
    }

    private func readKeyArray(_ reader: inout JSONReader, destination: String) throws -> [PersistentIdentifier] {
        try readKeyArray(&reader, destination: InternedEntityName(destination))
    }

    private func readKeyArray(_ reader: inout JSONReader, destination: InternedEntityName) throws
        -> [PersistentIdentifier] {
        var ids: [PersistentIdentifier] = []
        try reader.readArray { element in
            ids.append(PersistentIdentifier(destination, primaryKey: try readUUID(&element)))
        }
        return ids
    }

    private func readUUID(_ reader: inout JSONReader) throws -> UUID {
        try reader.readUUID()
    }

    /// Reads a transaction number. Numbers stop at 2^63 − 1, which no store reaches, so that the next number always
    /// exists: replaying or saving after a larger one would overflow.
    private func readTransactionNumber(_ reader: inout JSONReader) throws -> UInt64 {
        let start = reader
        let number = try reader.readUInt64()
        guard number <= UInt64(Int64.max) else {
            throw fail(start, "transaction number \(number) is past the largest, 2^63 − 1")
        }
        return number
    }

    /// Reads a value in the JSON form its attribute's type calls for.
    private func readValue(_ reader: inout JSONReader, attribute: Schema.Attribute) throws -> StoredValue {
        attribute.has(.externalStorage) ? try readExternal(&reader) : try readValue(&reader, type: attribute.type)
    }

    /// Reads an external-storage value: `null`, or `{"blob":…,"size":…}` made into a lazy reference.
    private func readExternal(_ reader: inout JSONReader) throws -> StoredValue {
        if reader.readNullIfPresent() { return .null }
        var name: String?, size: Int?
        try reader.readObject { member, key in
            switch key {
            case "blob": name = try member.readString()
            case "size": size = Int(try member.readInt64())
            default: throw fail(member, "external data has only \"blob\" and \"size\"")
            }
        }
        guard let name, let size, size >= 0 else { throw fail(reader, "external data lacks blob or size") }
        // The name becomes a file name in blobs/: only a SHA-256 in lowercase hex, never a path.
        guard StoreLayout.isBlobName(name) else {
            throw fail(reader, "external data names blob \(String(reflecting: name)), which is not a SHA-256 in hex")
        }
        guard let blobs else {
            return .external(ExternalData(name: name, size: size) {
                throw StoredValueError.externalDataUnreadable(name: name, reason: "no store to read it from")
            })
        }
        return .external(blobs.reference(name: name, size: size))
    }

    private func readValue(_ reader: inout JSONReader, type: Schema.AttributeType) throws -> StoredValue {
        switch type {
        case .optional(let wrapped):
            return reader.readNullIfPresent() ? .null : try readValue(&reader, type: wrapped)
        case .bool:
            return .bool(try reader.readBool())
        case .int, .int64:
            return .int(try reader.readInt64())
        case .int8, .int16, .int32, .uint8, .uint16, .uint32:
            let value = try reader.readInt64()
            guard Self.range(of: type).contains(value) else {
                throw fail(reader, "\(value) does not fit \(type)")
            }
            return .int(value)
        case .uint, .uint64:
            return .uint(try reader.readUInt64())
        case .double, .float:
            return .double(try reader.readDouble())
        case .string, .url:
            return .string(try reader.readString())
        case .date:
            return .date(Date(timeIntervalSinceReferenceDate: try reader.readDouble()))
        case .data:
            let text = try reader.readString()
            guard let data = Data(base64Encoded: text) else { throw fail(reader, "invalid base64 data") }
            return .data(data)
        case .uuid:
            return .uuid(try readUUID(&reader))
        case .decimal:
            let text = try reader.readString()
            guard let decimal = Decimal(string: text) else { throw fail(reader, "\(String(reflecting: text)) is not a decimal") }
            return .decimal(decimal)
        case .array(let element):
            var items: [StoredValue] = []
            try reader.readArray { items.append(try readValue(&$0, type: element)) }
            return .array(items)
        case .dictionary(let element):
            var items: [String: StoredValue] = [:]
            try reader.readObject { member, key in items[key.string] = try readValue(&member, type: element) }
            return .dictionary(items)
        case .rawRepresentable(_, let raw):
            return try readValue(&reader, type: raw)
        case .codable:
            return try readTagged(&reader)
        }
    }

    private static func range(of type: Schema.AttributeType) -> ClosedRange<Int64> {
        switch type {
        case .int8: Int64(Int8.min)...Int64(Int8.max)
        case .int16: Int64(Int16.min)...Int64(Int16.max)
        case .int32: Int64(Int32.min)...Int64(Int32.max)
        case .uint8: 0...Int64(UInt8.max)
        case .uint16: 0...Int64(UInt16.max)
        case .uint32: 0...Int64(UInt32.max)
        default: Int64.min...Int64.max
        }
    }

    /// Reads the tagged form of a stored value (`{"string":"x"}`), used by `Codable` attributes and tombstones. Its
    /// null is `null`, the one spelling a record has for it.
    private func readTagged(_ reader: inout JSONReader) throws -> StoredValue {
        if reader.readNullIfPresent() { return .null }
        var result: StoredValue?
        try reader.readObject { member, key in
            guard result == nil else { throw fail(member, "a tagged value has exactly one kind") }
            switch key {
            case "bool": result = .bool(try member.readBool())
            case "int": result = .int(try member.readInt64())
            case "uint": result = .uint(try member.readUInt64())
            case "double": result = .double(try member.readDouble())
            case "string": result = .string(try member.readString())
            case "date": result = .date(Date(timeIntervalSinceReferenceDate: try member.readDouble()))
            case "data":
                guard let data = Data(base64Encoded: try member.readString()) else { throw fail(member, "invalid base64") }
                result = .data(data)
            case "uuid": result = .uuid(try readUUID(&member))
            case "decimal":
                let text = try member.readString()
                guard let decimal = Decimal(string: text) else { throw fail(member, "invalid decimal") }
                result = .decimal(decimal)
            case "array":
                var items: [StoredValue] = []
                try member.readArray { items.append(try readTagged(&$0)) }
                result = .array(items)
            case "dictionary":
                var items: [String: StoredValue] = [:]
                try member.readObject { value, name in items[name.string] = try readTagged(&value) }
                result = .dictionary(items)
            case "null":
                // The schema's `Codable` form spells a nil default so (docs/FORMAT.md, *Attribute values*); a
                // record's values never do.
                throw fail(member, #"a null is written null in a record, not {"null":…}"#)
            default: throw fail(member, "unknown value kind \(String(reflecting: key.string))")
            }
        }
        guard let result else { throw fail(reader, "a tagged value has no kind") }
        return result
    }
}

/// The listener of a decode under way, told how far the decoder has read (see
/// ``RecordDecoding/decode(_:offset:file:schema:readPast:)``); a decoder decodes one record at a time.
final class DecodeProgress {
    var readPast: ((Range<Int>) -> Void)?
}

/// What decoding an entity's rows needs, taken out of the schema once: reading `entity.attributes[i]` for every value
/// would copy the attribute's description (its name, options, default) each time.
final class EntityDecodingPlan {
    let name: String
    /// The entity's name and its relationships' destinations, interned once for the identifiers decoded.
    let interned: InternedEntityName
    /// The attributes' and relationships' names in UTF-8, as rows' keys are compared with them.
    let attributeNames: [[UInt8]]
    let relationshipNames: [[UInt8]]
    let attributeTypes: [Schema.AttributeType]
    let external: [Bool]
    /// Whether each attribute is text (a string or URL, optional or not), whose bytes a row packs as read.
    let text: [Bool]
    let toMany: [Bool]
    let destinations: [InternedEntityName]

    init(_ entity: Schema.Entity) {
        name = entity.name
        interned = InternedEntityName(entity.name)
        attributeNames = entity.attributes.map { Array($0.name.utf8) }
        relationshipNames = entity.relationships.map { Array($0.name.utf8) }
        attributeTypes = entity.attributes.map(\.type)
        external = entity.attributes.map { $0.has(.externalStorage) }
        text = entity.attributes.map { attribute in
            guard !attribute.has(.externalStorage) else { return false }
            switch attribute.type {
            case .string, .url, .optional(.string), .optional(.url): return true
            default: return false
            }
        }
        toMany = entity.relationships.map(\.isToMany)
        destinations = entity.relationships.map { InternedEntityName($0.destination) }
    }
}

/// The decoding plans of the entities met so far, by entity description (a stored schema can change mid-log).
///
/// Within one record the schema does not change, so a plan checked against its entity once in a record
/// (``beginRecord()`` starts one) is taken by name for the rest of it: comparing entity descriptions for every
/// row of a 100,000-row record would compare their attributes 100,000 times. Every entry point of a decoder begins
/// a record, so a decoder that meets another description of an entity (a migration later in the log, a caller's
/// other schema) checks its plan again.
final class DecodingPlans {
    private var plans: [String: (entity: Schema.Entity, plan: EntityDecodingPlan, record: Int)] = [:]
    private var record = 0
    /// The plan last handed out in this record: rows of one entity come in runs.
    private var last: EntityDecodingPlan?

    /// Where rows are packed as they are read (``AttributePacker``), its room kept from row to row.
    var packer = AttributePacker()

    /// Starts the decoding of a record.
    func beginRecord() {
        record &+= 1
        last = nil
    }

    func plan(for entity: Schema.Entity) -> EntityDecodingPlan {
        if let last, last.name == entity.name { return last }
        let plan: EntityDecodingPlan
        if let known = plans[entity.name], known.record == record || known.entity == entity {
            plans[entity.name]!.record = record
            plan = known.plan
        } else {
            plan = EntityDecodingPlan(entity)
            plans[entity.name] = (entity, plan, record)
        }
        last = plan
        return plan
    }
}

/// Which of `count` positions were seen, without allocating for up to 64.
struct PresenceSet {
    private var bits: UInt64 = 0
    private var overflow: [Bool]
    let count: Int

    init(count: Int) {
        self.count = count
        overflow = count > 64 ? [Bool](repeating: false, count: count) : []
    }

    /// Marks `index`; false when it was marked already.
    mutating func insert(_ index: Int) -> Bool {
        if count > 64 {
            if overflow[index] { return false }
            overflow[index] = true
            return true
        }
        let bit: UInt64 = 1 << UInt64(index)
        if bits & bit != 0 { return false }
        bits |= bit
        return true
    }

    /// The first position not marked.
    var firstMissing: Int? {
        if count > 64 { return overflow.firstIndex(of: false) }
        let all: UInt64 = count == 64 ? .max : (1 << UInt64(count)) - 1
        let missing = ~bits & all
        return missing == 0 ? nil : missing.trailingZeroBitCount
    }
}
