import Foundation
import NoteKit
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
