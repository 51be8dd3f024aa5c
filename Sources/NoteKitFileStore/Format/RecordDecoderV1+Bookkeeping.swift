#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Version 1's bookkeeping records: a segment's header, the manifest, schema, migration and snapshot records.
extension RecordDecoderV1 {
    func decodeSegment(_ reader: inout JSONReader) throws -> SegmentHeader {
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

    func decodeManifest(_ reader: inout JSONReader) throws -> Manifest {
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

    func decodeSchema(_ reader: inout JSONReader) throws -> Schema {
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

    func decodeMigration(_ reader: inout JSONReader) throws -> MigrationRecord {
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

    func decodeSnapshot(_ reader: inout JSONReader) throws -> StoreRecord {
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
        return .snapshot(lastTransactionNumber: last, rowCount: count)
    }
}
