#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The content of one record, decoded.
enum StoreRecord {
    case segment(SegmentHeader)
    case schema(Schema)
    case transaction(Transaction)
    case snapshot(lastTransactionNumber: UInt64, rowCount: Int)
    case rows(entity: String, rows: [ModelSnapshot])
    case manifest(Manifest)
    case migration(MigrationRecord)
    /// Part of a compacted store's history: these records, with the transactions in `deleted` gone.
    case history(records: [HistoryRecord], deleted: [ClosedRange<UInt64>])
    /// Transactions deleted from history: every deleted range so far, not only the new ones.
    case trim(deleted: [ClosedRange<UInt64>])
}

extension StoreRecord {
    /// The record's kind, as its `"k"` names it.
    var kind: String {
        switch self {
        case .segment: "segment"
        case .schema: "schema"
        case .transaction: "tx"
        case .snapshot: "snapshot"
        case .rows: "rows"
        case .manifest: "manifest"
        case .migration: "migration"
        case .history: "history"
        case .trim: "trim"
        }
    }
}

/// A segment's identity, from its first record.
struct SegmentHeader: Equatable {
    var store: UUID
    var number: Int
    var created: Date
}

/// One committed save.
struct Transaction {
    var number: UInt64
    var time: Date
    var changes: ChangeSet
}

/// A lightweight migration, recorded as one transaction: the new schema, and the values of new attributes whose
/// defaults are generated per object (constant defaults need no record: replay recomputes them).
struct MigrationRecord {
    var number: UInt64
    var time: Date
    /// The content hash of the schema migrated from.
    var fromHash: String
    var schema: Schema
    var fills: [ModelUpdate]

    init(number: UInt64, time: Date, from: Schema, schema: Schema, fills: [ModelUpdate]) {
        self.number = number
        self.time = time
        fromHash = from.contentHash
        self.schema = schema
        self.fills = fills
    }

    init(number: UInt64, time: Date, fromHash: String, schema: Schema, fills: [ModelUpdate]) {
        self.number = number
        self.time = time
        self.fromHash = fromHash
        self.schema = schema
        self.fills = fills
    }

    /// How the migration appears in history: a transaction by ``HistoryRecord/migrationAuthor`` updating the
    /// objects whose generated defaults it filled.
    var historyRecord: HistoryRecord {
        HistoryRecord(number: number, timestamp: time, changes: ChangeSet(updated: fills,
                                                                          author: HistoryRecord.migrationAuthor),
                      schema: schema)
    }
}

/// What the manifest says: the store's identity, its segments in replay order and (format version 2) its copy of
/// the schema history.
struct Manifest: Equatable {
    var store: UUID
    var segments: [Int]
    var nextSegment: Int
    var created: Date
    /// The schema history, oldest first, as a second copy of the segments' `schema` and `migration` records
    /// (docs/FORMAT.md, *Version 2*); nil for a version 1 manifest, which has none. Every manifest written has it.
    var schemas: [ManifestSchema]?
}

/// One schema of the manifest's copy of the schema history: its content hash and its `Codable` form, exactly as
/// a `schema` record holds them. The form is kept as bytes and decoded only when it is used (a salvage whose
/// segments lost the schema record): an open or refresh reads the manifest often and needs only to compare it.
struct ManifestSchema: Equatable {
    /// The content hash the manifest gives.
    var hash: String
    /// The schema's `Codable` form, as JSON.
    var body: [UInt8]

    init(hash: String, body: [UInt8]) {
        self.hash = hash
        self.body = body
    }

    /// The copy of `schema` a manifest holds.
    init(_ schema: Schema) {
        hash = schema.contentHash
        body = [UInt8](RecordEncoder.schemaBody(schema))
    }

    /// The schema, when its form decodes and matches its hash; nil otherwise (the copy is then no copy).
    var schema: Schema? {
        guard let schema = try? JSONDecoder().decode(Schema.self, from: Data(body)), schema.contentHash == hash
        else { return nil }
        return schema
    }

    /// The history `schemas` as a manifest copies it.
    static func copies(of schemas: [Schema]) -> [ManifestSchema] { schemas.map(ManifestSchema.init) }

    /// Whether `copies` is a copy of the history `schemas`: the same schemas in the same order. Members may come in
    /// any order (docs/FORMAT.md, *The payload JSON*), so a copy whose bytes are not the writer's is decoded and
    /// compared; one the writer wrote is told by its bytes.
    static func copies(_ copies: [ManifestSchema]?, match schemas: [Schema]) -> Bool {
        guard let copies, copies.count == schemas.count else { return false }
        return zip(copies, schemas).allSatisfy { copy, schema in
            copy.hash == schema.contentHash && (copy.body == ManifestSchema(schema).body || copy.schema == schema)
        }
    }
}

/// Turns records into framed JSON lines, ready to append, in the current format version (docs/FORMAT.md). One encoder writes
/// the current version; the decoder registry (``RecordDecoding``) holds one decoder per version read. Each method
/// returns the whole record (header, payload, newline), written in place so that a large payload is never copied.
struct RecordEncoder {
    /// Writes dates as ISO 8601 text with milliseconds (`notekit dump`, for people) instead of seconds since 2001
    /// (the stored form, which keeps every bit). Only inspection output sets it; nothing reads that output back.
    var datesAsISO8601 = false

    func segment(_ header: SegmentHeader) -> [UInt8] {
        var writer = RecordFrame.writer(reservingCapacity: 128)
        writer.beginObject()
        writer.key("k"); writer.string("segment")
        writer.key("store"); writer.uuid(header.store)
        writer.key("number"); writer.int(Int64(header.number))
        writer.key("created"); writer.double(header.created.timeIntervalSinceReferenceDate)
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    func manifest(_ manifest: Manifest) -> [UInt8] {
        let schemaBytes = (manifest.schemas ?? []).reduce(0) { $0 + $1.body.count + 96 }
        var writer = RecordFrame.writer(reservingCapacity: 128 + manifest.segments.count * 8 + schemaBytes)
        writer.beginObject()
        writer.key("k"); writer.string("manifest")
        writer.key("store"); writer.uuid(manifest.store)
        writer.key("segments")
        writer.beginArray()
        for number in manifest.segments { writer.int(Int64(number)) }
        writer.endArray()
        writer.key("nextSegment"); writer.int(Int64(manifest.nextSegment))
        writer.key("created"); writer.double(manifest.created.timeIntervalSinceReferenceDate)
        // Version 2 requires the schema history: a writer that has none to give (no caller) writes an empty one,
        // which the next writable open completes from the segments.
        writer.key("schemas")
        writer.beginArray()
        for schema in manifest.schemas ?? [] {
            writer.beginObject()
            writer.key("hash"); writer.string(schema.hash)
            writer.key("schema"); writer.raw(schema.body)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// The schema record: the `Codable` form of the schema, with a `"k"` and the content hash.
    func schema(_ schema: Schema) -> [UInt8] {
        let body = Self.schemaBody(schema)
        var writer = RecordFrame.writer(reservingCapacity: body.count + 128)
        writer.beginObject()
        writer.key("k"); writer.string("schema")
        writer.key("hash"); writer.string(schema.contentHash)
        writer.key("schema"); writer.raw(body)
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// The migration record: like a transaction (it has the next number), with the schema migrated to and the
    /// values filled in for new attributes with generated defaults, in the new schema's layout.
    func migration(_ migration: MigrationRecord) -> [UInt8] {
        let body = Self.schemaBody(migration.schema)
        var writer = RecordFrame.writer(reservingCapacity: body.count + 256 + migration.fills.count * 96)
        writer.beginObject()
        writer.key("k"); writer.string("migration")
        writer.key("tx"); writer.uint(migration.number)
        writer.key("time"); writer.double(migration.time.timeIntervalSinceReferenceDate)
        writer.key("from"); writer.string(migration.fromHash)
        writer.key("hash"); writer.string(migration.schema.contentHash)
        writer.key("schema"); writer.raw(body)
        writer.key("update")
        writer.beginArray()
        for update in migration.fills { writeUpdate(update, schema: migration.schema, to: &writer) }
        writer.endArray()
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// The schema's `Codable` form as a record holds it (``Schema/storedForm``, kept once encoded).
    static func schemaBody(_ schema: Schema) -> Data { schema.storedForm }

    func snapshot(lastTransactionNumber: UInt64, rowCount: Int) -> [UInt8] {
        var writer = RecordFrame.writer(reservingCapacity: 64)
        writer.beginObject()
        writer.key("k"); writer.string("snapshot")
        writer.key("lastTx"); writer.uint(lastTransactionNumber)
        writer.key("rows"); writer.int(Int64(rowCount))
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    func rows(entity: Schema.Entity, _ rows: ArraySlice<ModelSnapshot>) -> [UInt8] {
        var spans: [Range<Int>]? = nil
        return self.rows(entity: entity, rows, spans: &spans)
    }

    /// A `rows` record, and with `spans` non-nil each row object's bytes in it (from its `{` to after its `}`, as
    /// offsets in the framed record returned): what a checkpoint's `rowTable` lists, found while encoding.
    func rows(entity: Schema.Entity, _ rows: ArraySlice<ModelSnapshot>, spans: inout [Range<Int>]?) -> [UInt8] {
        var writer = RecordFrame.writer(reservingCapacity: rows.count * 256 + 64)
        writer.beginObject()
        writer.key("k"); writer.string("rows")
        writer.key("e"); writer.string(entity.name)
        writer.key("rows")
        writer.beginArray()
        for row in rows {
            writer.beginObject()
            let start = writer.bytes.count - 1
            writer.key("id"); writer.uuid(row.id.primaryKey)
            writeWholeRow(row, of: entity, to: &writer)
            writer.endObject()
            if spans != nil { spans!.append(start..<writer.bytes.count) }
        }
        writer.endArray()
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// A transaction record. External data in `changes` must already be `.external` (its blob written).
    func transaction(_ transaction: Transaction, schema: Schema) -> [UInt8] {
        let changes = transaction.changes
        // A large insert is measured first: a record that outgrows its room is copied into one twice as large, and a
        // bulk insert's 61 MB record would hold the old and the new buffer at once, at the save's peak.
        let inserts = changes.inserted.count >= 1024
            ? Self.estimatedBytes(of: changes.inserted, in: schema) : changes.inserted.count * 320
        var writer = RecordFrame.writer(reservingCapacity: 256 + inserts + changes.updated.count * 128)
        writer.beginObject()
        writer.key("k"); writer.string("tx")
        writer.key("tx"); writer.uint(transaction.number)
        writer.key("time"); writer.double(transaction.time.timeIntervalSinceReferenceDate)
        if let author = changes.author { writer.key("author"); writer.string(author) }
        if !changes.inserted.isEmpty {
            writer.key("insert")
            writer.beginArray()
            for row in changes.inserted {
                let entity = beginObject(for: row.id, in: schema, to: &writer)
                writeWholeRow(row, of: entity, to: &writer)
                writer.endObject()
            }
            writer.endArray()
        }
        if !changes.updated.isEmpty {
            writer.key("update")
            writer.beginArray()
            for update in changes.updated { writeUpdate(update, schema: schema, to: &writer) }
            writer.endArray()
        }
        if !changes.deleted.isEmpty {
            writer.key("delete")
            writer.beginArray()
            for deletion in changes.deleted {
                let entity = beginObject(for: deletion.id, in: schema, to: &writer)
                if !deletion.tombstone.isEmpty {
                    writer.key("tombstone")
                    writer.beginObject()
                    for attribute in entity.attributes {
                        guard let value = deletion.tombstone[attribute.name] else { continue }
                        writer.key(attribute.name)
                        writeValue(value, type: attribute.type, to: &writer)
                    }
                    writer.endObject()
                }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    // MARK: History

    /// A `history` record: `records` (a slice of the history kept, in order) and, in the first such record of a
    /// compacted segment, every deleted range.
    func history(_ records: ArraySlice<HistoryRecord>, deleted: [ClosedRange<UInt64>]) -> [UInt8] {
        let changes = records.reduce(0) { $0 + $1.changeCount }
        var writer = RecordFrame.writer(reservingCapacity: 128 + records.count * 96 + changes * 48)
        writer.beginObject()
        writer.key("k"); writer.string("history")
        if !deleted.isEmpty { writer.key("deleted"); writeRanges(deleted, to: &writer) }
        writer.key("tx")
        writer.beginArray()
        for record in records { writeHistoryRecord(record, to: &writer) }
        writer.endArray()
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// A `trim` record: every transaction number deleted from history so far.
    func trim(deleted: [ClosedRange<UInt64>]) -> [UInt8] {
        var writer = RecordFrame.writer(reservingCapacity: 64 + deleted.count * 24)
        writer.beginObject()
        writer.key("k"); writer.string("trim")
        writer.key("deleted"); writeRanges(deleted, to: &writer)
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    private func writeRanges(_ ranges: [ClosedRange<UInt64>], to writer: inout JSONWriter) {
        writer.beginArray()
        for range in ranges {
            writer.beginArray()
            writer.uint(range.lowerBound)
            writer.uint(range.upperBound)
            writer.endArray()
        }
        writer.endArray()
    }

    /// `{"tx":…,"time":…,"author":…,"insert":[["Entity",id,…],…],"update":[{"e","id","p":[names]}],
    /// "delete":[{"e","id","tombstone":{name: tagged value}}]}`. Inserts are written as runs of one entity, in
    /// order; tombstone values are tagged because the entity may since have changed or gone.
    private func writeHistoryRecord(_ record: HistoryRecord, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("tx"); writer.uint(record.number)
        writer.key("time"); writer.double(record.timestamp.timeIntervalSinceReferenceDate)
        if let author = record.author { writer.key("author"); writer.string(author) }
        if !record.inserted.isEmpty {
            writer.key("insert")
            writer.beginArray()
            var runEntity: String?
            for id in record.inserted {
                if id.entityName != runEntity {
                    if runEntity != nil { writer.endArray() }
                    writer.beginArray()
                    writer.string(id.entityName)
                    runEntity = id.entityName
                }
                writer.uuid(id.primaryKey)
            }
            writer.endArray()
            writer.endArray()
        }
        if !record.updated.isEmpty {
            writer.key("update")
            writer.beginArray()
            for update in record.updated {
                writer.beginObject()
                writer.key("e"); writer.string(update.id.entityName)
                writer.key("id"); writer.uuid(update.id.primaryKey)
                writer.key("p")
                writer.beginArray()
                for name in update.properties { writer.string(name) }
                writer.endArray()
                writer.endObject()
            }
            writer.endArray()
        }
        if !record.deleted.isEmpty {
            writer.key("delete")
            writer.beginArray()
            for deletion in record.deleted {
                writer.beginObject()
                writer.key("e"); writer.string(deletion.id.entityName)
                writer.key("id"); writer.uuid(deletion.id.primaryKey)
                if !deletion.tombstone.isEmpty {
                    writer.key("tombstone")
                    writer.beginObject()
                    for name in deletion.tombstone.keys.sorted() {
                        writer.key(name)
                        writeTagged(deletion.tombstone[name]!, to: &writer)
                    }
                    writer.endObject()
                }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
    }

    // MARK: Values

    /// `{"e":…,"id":…,"a":{changed attributes},"r":{changed relationships}}`.
    private func writeUpdate(_ update: ModelUpdate, schema: Schema, to writer: inout JSONWriter) {
        let entity = beginObject(for: update.id, in: schema, to: &writer)
        if !update.attributes.isEmpty {
            writer.key("a")
            writer.beginObject()
            for change in update.attributes {
                let attribute = entity.attributes[change.index]
                writer.key(attribute.name)
                writeValue(change.value, type: attribute.type, to: &writer)
            }
            writer.endObject()
        }
        if !update.relationships.isEmpty {
            writer.key("r")
            writer.beginObject()
            for change in update.relationships {
                writer.key(entity.relationships[change.index].name)
                switch change.kind {
                case .toOne(let target):
                    if let target { writer.uuid(target.primaryKey) } else { writer.null() }
                case let .toMany(added, removed):
                    writer.beginObject()
                    writer.key("add"); writeKeys(added, to: &writer)
                    writer.key("remove"); writeKeys(removed, to: &writer)
                    writer.endObject()
                }
            }
            writer.endObject()
        }
        writer.endObject()
    }

    /// Begins the object of one inserted, updated or deleted model: `{"e":…,"id":…`.
    private func beginObject(for id: PersistentIdentifier, in schema: Schema, to writer: inout JSONWriter)
        -> Schema.Entity {
        // The context saves only objects of the container's schema, which the store was opened with.
        let entity = schema.entity(named: id.entityName)!
        writer.beginObject()
        writer.key("e"); writer.string(entity.name)
        writer.key("id"); writer.uuid(id.primaryKey)
        return entity
    }

    private func writeWholeRow(_ row: ModelSnapshot, of entity: Schema.Entity, to writer: inout JSONWriter) {
        writer.key("a")
        writer.beginObject()
        for (index, attribute) in entity.attributes.enumerated() {
            writer.key(attribute.name)
            // Text is written from a packed row's bytes, with no `String` made of it.
            switch attribute.type.nonOptional {
            case .string, .url:
                if row.attributes.withStringBytes(at: index, { writer.string(utf8: $0) }) != nil { continue }
            default:
                break
            }
            writeValue(row.attributes[index], type: attribute.type, to: &writer)
        }
        writer.endObject()
        writer.key("r")
        writer.beginObject()
        for (index, relationship) in entity.relationships.enumerated() {
            writer.key(relationship.name)
            switch row.relationships[index] {
            case .toOne(let target):
                if let target { writer.uuid(target.primaryKey) } else { writer.null() }
            case .toMany(let targets):
                writeKeys(targets, to: &writer)
            }
        }
        writer.endObject()
    }

    /// About as many bytes as `rows` take as inserted objects of a record, somewhat more rather than less (strings
    /// are counted unescaped: one with many characters to escape makes the record grow once, as before).
    ///
    /// - Complexity: O(values), without encoding any.
    static func estimatedBytes(of rows: [ModelSnapshot], in schema: Schema) -> Int {
        var total = 0
        var entity: Schema.Entity?
        var names = 0
        for row in rows {
            if entity?.name != row.id.entityName {
                entity = schema.entity(named: row.id.entityName)
                names = (entity?.attributes.reduce(0) { $0 + $1.name.utf8.count + 4 } ?? 0)
                    + (entity?.relationships.reduce(0) { $0 + $1.name.utf8.count + 4 } ?? 0)
                    + row.id.entityName.utf8.count
            }
            // {"e":"…","id":"…","a":{…},"r":{…}}, and the names.
            total += 72 + names
            for value in row.attributes { total += estimatedBytes(of: value) }
            for targets in row.relationships {
                switch targets {
                case .toOne(let target): total += target == nil ? 4 : 38
                case .toMany(let targets): total += 2 + 39 * targets.count
                }
            }
        }
        return total + total / 16
    }

    /// About as many bytes as `value` takes in a record, tagged or not.
    private static func estimatedBytes(of value: StoredValue) -> Int {
        switch value {
        case .null: 4
        case .bool: 16
        case .int, .uint, .double, .date: 32
        case .string(let v): v.utf8.count + 14
        case .data(let v): v.count / 3 * 4 + 16
        case .uuid: 48
        case .decimal: 64
        case .array(let items): items.reduce(12) { $0 + estimatedBytes(of: $1) + 1 }
        case .dictionary(let items): items.reduce(16) { $0 + $1.key.utf8.count + 4 + estimatedBytes(of: $1.value) }
        case .external(let blob): blob.name.utf8.count + 40
        }
    }

    private func writeKeys(_ ids: [PersistentIdentifier], to writer: inout JSONWriter) {
        writer.beginArray()
        for id in ids { writer.uuid(id.primaryKey) }
        writer.endArray()
    }

    /// Writes a value in the JSON form its attribute type calls for.
    func writeValue(_ value: StoredValue, type: Schema.AttributeType, to writer: inout JSONWriter) {
        if case .codable = type.nonOptional, !value.isNull {
            writeTagged(value, to: &writer)
            return
        }
        switch value {
        case .null: writer.null()
        case .bool(let v): writer.bool(v)
        case .int(let v): writer.int(v)
        case .uint(let v): writer.uint(v)
        case .double(let v): writer.double(v)
        case .string(let v): writer.string(v)
        case .date(let v):
            if datesAsISO8601 {
                writer.string(v.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            } else {
                writer.double(v.timeIntervalSinceReferenceDate)
            }
        case .data(let v): writer.string(v.base64EncodedString())
        case .uuid(let v): writer.uuid(v)
        case .decimal(let v): writer.string(v.description)
        case .array(let items):
            let element: Schema.AttributeType = if case .array(let e) = type.nonOptional { e } else { .codable(typeName: "") }
            writer.beginArray()
            for item in items { writeValue(item, type: element, to: &writer) }
            writer.endArray()
        case .dictionary(let items):
            let element: Schema.AttributeType = if case .dictionary(let e) = type.nonOptional { e } else { .codable(typeName: "") }
            writer.beginObject()
            for key in items.keys.sorted() {
                writer.key(key)
                writeValue(items[key]!, type: element, to: &writer)
            }
            writer.endObject()
        case .external(let blob):
            writer.beginObject()
            writer.key("blob"); writer.string(blob.name)
            writer.key("size"); writer.int(Int64(blob.size))
            writer.endObject()
        }
    }

    /// The tagged form of a stored value (`{"string":"x"}`), for `Codable` attributes whose shape the schema does
    /// not describe.
    private func writeTagged(_ value: StoredValue, to writer: inout JSONWriter) {
        if case .null = value {
            writer.null()
            return
        }
        writer.beginObject()
        switch value {
        case .null: break
        case .bool(let v): writer.key("bool"); writer.bool(v)
        case .int(let v): writer.key("int"); writer.int(v)
        case .uint(let v): writer.key("uint"); writer.uint(v)
        case .double(let v): writer.key("double"); writer.double(v)
        case .string(let v): writer.key("string"); writer.string(v)
        case .date(let v): writer.key("date"); writer.double(v.timeIntervalSinceReferenceDate)
        case .data(let v): writer.key("data"); writer.string(v.base64EncodedString())
        case .uuid(let v): writer.key("uuid"); writer.uuid(v)
        case .decimal(let v): writer.key("decimal"); writer.string(v.description)
        case .array(let items):
            writer.key("array")
            writer.beginArray()
            for item in items { writeTagged(item, to: &writer) }
            writer.endArray()
        case .dictionary(let items):
            writer.key("dictionary")
            writer.beginObject()
            for key in items.keys.sorted() {
                writer.key(key)
                writeTagged(items[key]!, to: &writer)
            }
            writer.endObject()
        case .external(let blob):
            writer.key("blob"); writer.string(blob.name)
            writer.key("size"); writer.int(Int64(blob.size))
        }
        writer.endObject()
    }
}
