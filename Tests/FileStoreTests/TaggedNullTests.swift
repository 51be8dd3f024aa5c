import Foundation
import NoteKit
@testable import NoteKitFileStore
import Testing

/// docs/FORMAT.md, *Attribute values*: a null has one spelling in each place it can stand. In a record's values,
/// tagged (`Codable` attributes, tombstones) or not, it is `null`; a schema's nil default, in the schema's `Codable`
/// form, is `{"null":true}`.
@Suite("Tagged null: one spelling in records, one in a schema")
struct TaggedNullTests {
    /// A `tx` record inserting a box whose `Codable` label is `label`.
    static func insert(label: String) -> [UInt8] {
        Array(("{\"k\":\"tx\",\"tx\":1,\"time\":0,\"insert\":[{\"e\":\"Box\",\"id\":\"E621E1F8-C36C-495A-93FC-0C247A3E6E5F\","
            + "\"a\":{\"code\":\"\",\"count\":0,\"label\":\(label),\"photo\":null},\"r\":{\"shelf\":null}}]}").utf8)
    }

    static func decode(_ payload: [UInt8]) throws -> StoreRecord {
        let schema = try Schema(versionedSchema: PermutedV1.self)
        return try payload.withUnsafeBytes {
            try RecordDecoderV1(blobs: nil).decode($0, offset: 100, file: "segment", schema: schema)
        }
    }

    @Test("A record's tagged null is null; the schema's spelling there is refused with a message naming the right one")
    func recordSpelling() throws {
        let written = #"{"dictionary":{"printed":null,"tags":{"array":[null]},"text":{"string":"x"}}}"#
        guard case .transaction(let transaction) = try Self.decode(Self.insert(label: written)) else {
            Issue.record("not a transaction")
            return
        }
        #expect(transaction.changes.inserted[0].attributes[2]
                    == .dictionary(["printed": .null, "tags": .array([.null]), "text": .string("x")]))
        let other = #"{"dictionary":{"printed":{"null":true},"tags":{"array":[]},"text":{"string":"x"}}}"#
        #expect {
            try Self.decode(Self.insert(label: other))
        } throws: { error in
            "\(error)".contains(#"a null is written null in a record, not {"null":…}"#)
        }
    }

    @Test("A schema's nil default is {\"null\":true}: {\"null\":false} or any other value is refused")
    func schemaSpelling() throws {
        #expect(try JSONDecoder().decode(StoredValue.self, from: Data(#"{"null":true}"#.utf8)) == .null)
        for wrong in [#"{"null":false}"#, #"{"null":0}"#, #"{"null":"yes"}"#] {
            #expect(throws: DecodingError.self, "\(wrong)") {
                try JSONDecoder().decode(StoredValue.self, from: Data(wrong.utf8))
            }
        }
    }
}
