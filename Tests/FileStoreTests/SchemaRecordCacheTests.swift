import Foundation
import NoteKit
import Testing

@testable import NoteKitFileStore

/// Every manifest written or compared encodes the schema history, and every open hashes the schemas it reads; a
/// schema keeps its hash and its stored form once computed (issue 36, item 8: encoding them was a tenth of the test
/// suite's time). What is kept must never stand in for a schema that differs in its bytes, however equal the values.
@Suite("Schema records: a schema's hash and stored form are kept only for its own bytes and version")
struct SchemaRecordCacheTests {
    /// A one-entity schema whose single attribute is named `name`.
    private static func schema(_ name: String, version: Schema.Version = Schema.Version(1, 0, 0)) throws -> Schema {
        try Schema(version: version, entities: [Schema.Entity(
            name: "Accent", attributes: [Schema.Attribute(name: name, type: .string, defaultValue: .string(""))],
            relationships: [])])
    }

    /// Decodes the schema record `record` (a framed line, as `RecordEncoder` writes it).
    private static func decode(_ record: [UInt8]) throws -> Schema {
        let payload = record[RecordFrame.headerLength..<(record.count - 1)]
        let decoded = try Array(payload).withUnsafeBytes {
            try RecordDecoderV1(blobs: nil).decode($0, offset: 0, file: "segment", schema: nil)
        }
        guard case .schema(let schema) = decoded else { throw CacheTestFailure.notASchema }
        return schema
    }

    private enum CacheTestFailure: Error { case notASchema }

    @Test("Schema records whose strings are equal as Swift values but differ in bytes each decode to their own schema")
    func equivalentStringsDecodeApart() throws {
        let composed = try Self.schema("caf\u{E9}"), decomposed = try Self.schema("cafe\u{301}")
        #expect(composed == decomposed, "equal as Swift values, so only their bytes tell them apart")
        for _ in 0..<2 {
            for original in [composed, decomposed, composed] {
                let decoded = try Self.decode(RecordEncoder().schema(original))
                #expect(decoded.contentHash == original.contentHash)
                #expect(Array(decoded.entities[0].attributes[0].name.unicodeScalars)
                        == Array(original.entities[0].attributes[0].name.unicodeScalars))
            }
        }
    }

    @Test("A schema record whose hash does not match is refused, though the same schema decoded before")
    func wrongHashRefusedAfterAGoodDecode() throws {
        let schema = try Self.schema("title")
        let good = RecordEncoder().schema(schema)
        _ = try Self.decode(good)
        let other = try Self.schema("subtitle").contentHash
        var payload = String(decoding: good[RecordFrame.headerLength..<(good.count - 1)], as: UTF8.self)
        payload = payload.replacingOccurrences(of: schema.contentHash, with: other)
        var writer = RecordFrame.writer(reservingCapacity: payload.utf8.count)
        writer.raw(Array(payload.utf8))
        let error = #expect(throws: FileStoreError.self) { try Self.decode(RecordFrame.seal(writer)) }
        guard case .undecodableRecord(_, _, let reason)? = error else {
            Issue.record("expected an undecodable record, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("content hash"))
    }

    @Test("The stored form of a schema is of its version now: a copy given another version encodes that version")
    func storedFormFollowsTheVersion() throws {
        let original = try Self.schema("title")
        let first = try JSONDecoder().decode(Schema.self, from: RecordEncoder.schemaBody(original))
        #expect(first.version == Schema.Version(1, 0, 0))
        var copy = original
        copy.version = Schema.Version(2, 0, 0)
        let second = try JSONDecoder().decode(Schema.self, from: RecordEncoder.schemaBody(copy))
        #expect(second.version == Schema.Version(2, 0, 0))
        #expect(try JSONDecoder().decode(Schema.self, from: RecordEncoder.schemaBody(original)).version
                == Schema.Version(1, 0, 0))
        copy.entities[0].attributes[0].name = "heading"
        let third = try JSONDecoder().decode(Schema.self, from: RecordEncoder.schemaBody(copy))
        #expect(third.entities[0].attributes[0].name == "heading")
    }
}
