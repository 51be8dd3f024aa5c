import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// The room a bulk insert's record is encoded in is measured first, so that the record is not copied into a buffer
/// twice as large as it grows (issue 17, W1's peak memory): the measure must cover what is encoded.
@Suite("Record encoding: a bulk insert's room is measured")
struct RecordRoomTests {
    @Test("The measured room of inserted rows of every attribute type covers their encoded bytes, within twice")
    func measuredRoomCovers() throws {
        let schema = try Schema([EveryType.self])
        let rows = (0..<2_000).map { variant in
            let sample = EveryType.sample(variant)
            return ModelSnapshot(id: sample.persistentModelID, attributes: sample.storedValues,
                                 relationships: schema.entities[0].relationships.map { $0.isToMany ? .toMany([]) : .toOne(nil) })
        }
        let record = RecordEncoder().transaction(Transaction(number: 1, time: Date(timeIntervalSinceReferenceDate: 0),
                                                             changes: ChangeSet(inserted: rows)), schema: schema)
        let measured = RecordEncoder.estimatedBytes(of: rows, in: schema)
        #expect(measured >= record.count, "measured \(measured) for a \(record.count)-byte record")
        #expect(measured <= 2 * record.count, "measured \(measured) for a \(record.count)-byte record")
    }
}

/// Every identifier a record holds is read by `UUIDText.parse`: it must take exactly the 36-character form, in
/// either case, and nothing else.
@Suite("UUID text: the one form records hold")
struct UUIDTextTests {
    private func parse(_ text: String) -> UUID? {
        Array(text.utf8).withUnsafeBytes { UUIDText.parse($0) }
    }

    @Test("A UUID reads back from its text in upper and lower case; any other character at any place is refused")
    func exactForm() throws {
        var generator = SeededGenerator(seed: 20_261_202)
        for _ in 0..<200 {
            let uuid = UUID(uuid: (0..<16).reduce(into: [UInt8]()) { bytes, _ in bytes.append(.random(in: 0...255, using: &generator)) }
                .withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
            let text = uuid.uuidString
            #expect(parse(text) == uuid)
            #expect(parse(text.lowercased()) == uuid)
            for place in text.indices {
                for replacement in ["g", "G", "-", " ", "\u{0}", "/", ":", "@", "`", "é"] where String(text[place]) != replacement {
                    var damaged = text
                    damaged.replaceSubrange(place...place, with: replacement)
                    #expect(parse(damaged) == nil, "\(damaged)")
                }
            }
        }
        #expect(parse("") == nil)
        #expect(parse("E621E1F8C36C495A93FC0C247A3E6E5F") == nil)
        #expect(parse("E621E1F8-C36C-495A-93FC-0C247A3E6E5F0") == nil)
        #expect(parse("{E621E1F8-C36C-495A-93FC-0C247A3E6E5}") == nil)
    }

    @Test("A UUID is written as Foundation's uuidString spells it, after the bytes already there")
    func writtenForm() {
        var generator = SeededGenerator(seed: 20_261_207)
        var bytes = Array("[".utf8)
        var expected = "["
        for _ in 0..<200 {
            let uuid = UUID(uuid: (0..<16).reduce(into: [UInt8]()) { bytes, _ in bytes.append(.random(in: 0...255, using: &generator)) }
                .withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
            UUIDText.append(uuid, to: &bytes)
            expected += uuid.uuidString
        }
        UUIDText.append(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), to: &bytes)
        UUIDText.append(UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)), to: &bytes)
        expected += "00000000-0000-0000-0000-000000000000FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }
}

/// A decoder keeps what it worked out for each entity (its decoding plan) and trusts it for the rest of a record; a
/// row decoded on its own is a record of its own, so another description of the same entity gets its own plan.
@Suite("Record decoding: an entity's plan follows its description")
struct DecodingPlanTests {
    private static func thing(_ attributes: [Schema.Attribute]) -> Schema.Entity {
        Schema.Entity(name: "Thing", attributes: attributes, relationships: [])
    }

    @Test("One decoder reading rows of two descriptions of an entity decodes each in its own layout")
    func planPerDescription() throws {
        let narrow = Self.thing([.init(name: "title", type: .string, defaultValue: .string(""))])
        let wide = Self.thing([.init(name: "title", type: .string, defaultValue: .string("")),
                               .init(name: "size", type: .int, defaultValue: .int(0))])
        let decoder = RecordDecoderV1(blobs: nil)
        func decode(_ json: String, as entity: Schema.Entity) throws -> ModelSnapshot {
            var decoded = 0
            return try Array(json.utf8).withUnsafeBytes {
                try decoder.decodeRow($0, offset: 0, file: "test", entity: entity, decoded: &decoded)
            }
        }
        let id = "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
        let first = try decode(#"{"id":"\#(id)","a":{"title":"a"},"r":{}}"#, as: narrow)
        #expect(first.attributes == [.string("a")])
        let second = try decode(#"{"id":"\#(id)","a":{"title":"b","size":7},"r":{}}"#, as: wide)
        #expect(second.attributes == [.string("b"), .int(7)])
        // And back: the narrow description refuses the wide row's extra attribute.
        #expect(throws: FileStoreError.self) {
            try decode(#"{"id":"\#(id)","a":{"title":"c","size":7},"r":{}}"#, as: narrow)
        }
    }
}
