import Foundation
import NoteKit
import NoteKitStressSupport
import Testing

/// Issue 17, item 2 (compact storage per row): a row's relationship targets packed after its attribute values, in
/// their allocation, answer every read, comparison and hash exactly as the same targets in an array.
///
/// A failure of the randomized test names its seed. Replay it with
/// `NOTEKIT_RELATIONSHIPVALUES_SEED=<seed> swift test --filter RelationshipValuesTests`.
@Suite("Packed relationship targets")
struct RelationshipValuesTests {
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["NOTEKIT_RELATIONSHIPVALUES_SEED"], let seed = UInt64(text) {
            return [seed]
        }
        return [0x7A6_6E75, UInt64.random(in: 0...UInt64.max)]
    }()

    static let values: [StoredValue] = [.uuid(UUID()), .string("Note 1"), .string(String(repeating: "b", count: 300)),
                                        .int(7), .null]

    static func id(_ entity: String, _ n: Int) -> PersistentIdentifier {
        PersistentIdentifier(entityName: entity,
                             primaryKey: UUID(uuidString: String(format: "00000000-0000-8000-8000-%012x", n))!)
    }

    /// Targets of every shape: none, one, to-many of 0, 1 and 8 targets, and identifiers of two entities.
    static let everyShape: [RelationshipTargets] = [
        .toOne(nil), .toOne(id("Folder", 1)), .toMany([]), .toMany([id("Photo", 2)]),
        .toMany((10..<18).map { id("Photo", $0) }), .toOne(id("Note", 3)), .toOne(nil),
    ]

    @Test("Packed targets read back every shape, and the values before them are untouched")
    func roundTrip() {
        let (attributes, relationships) = AttributeValues.packing(Self.values, relationships: Self.everyShape)
        #expect(relationships.isPacked(with: attributes))
        #expect(attributes.isPacked)
        #expect(attributes == AttributeValues(Self.values))
        #expect(relationships.count == Self.everyShape.count)
        for (index, targets) in Self.everyShape.enumerated() {
            #expect(relationships[index] == targets, "relationship \(index)")
        }
        #expect(relationships.array == Self.everyShape)
        #expect(Array(relationships) == Self.everyShape)
        #expect(relationships[1].identifiers.first?.entityName == "Folder")
        #expect(relationships[4].identifiers.map(\.entityName) == Array(repeating: "Photo", count: 8))
        #expect(relationships.heldBytes == 0)
    }

    @Test("A to-many of more than 8 targets keeps the row's targets in an array")
    func longListsStayArrays() {
        var shapes = Self.everyShape
        shapes[2] = .toMany((100..<109).map { Self.id("Photo", $0) })
        let (attributes, relationships) = AttributeValues.packing(Self.values, relationships: shapes)
        #expect(attributes.isPacked)
        #expect(!relationships.isPacked)
        #expect(relationships.array == shapes)
        // No relationships at all: nothing to pack after the values.
        let (alone, none) = AttributeValues.packing(Self.values, relationships: [])
        #expect(alone.isPacked && none.isEmpty && !none.isPacked)
    }

    @Test("Packed and array-held targets are equal, and hash alike, exactly when their targets are", arguments: seeds)
    func equalityAcrossStorage(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        func randomShapes() -> [RelationshipTargets] {
            (0..<Int.random(in: 0...5, using: &rng)).map { _ in
                if rng.chance(0.5) {
                    return .toOne(rng.chance(0.3) ? nil : Self.id(rng.pick(["Folder", "Note"]), Int.random(in: 0..<4, using: &rng)))
                }
                return .toMany((0..<Int.random(in: 0...8, using: &rng)).map { _ in Self.id("Photo", Int.random(in: 0..<6, using: &rng)) })
            }
        }
        for round in 0..<400 {
            let a = randomShapes(), b = rng.chance(0.3) ? a : randomShapes()
            let packedA = AttributeValues.packing(Self.values, relationships: a).relationships
            let packedB = AttributeValues.packing(Self.values, relationships: b).relationships
            let heldA = RelationshipValues(a), heldB = RelationshipValues(b)
            let same = a == b
            #expect((packedA == packedB) == same, "seed \(seed), round \(round): \(a) / \(b)")
            #expect((packedA == heldB) == same && (heldA == packedB) == same, "seed \(seed), round \(round)")
            #expect(packedA == heldA && packedA.hashValue == heldA.hashValue, "seed \(seed), round \(round)")
            #expect(packedA.description == a.description)
        }
    }

    @Test("Writing a packed relationship's targets unpacks them once and changes only that one")
    func writeUnpacks() {
        let (attributes, packed) = AttributeValues.packing(Self.values, relationships: Self.everyShape)
        var written = packed
        written[1] = .toOne(Self.id("Folder", 9))
        #expect(!written.isPacked)
        #expect(packed.isPacked(with: attributes), "the original is unchanged")
        var expected = Self.everyShape
        expected[1] = .toOne(Self.id("Folder", 9))
        #expect(written.array == expected)
        #expect(packed.array == Self.everyShape)
    }

    @Test("An update of a row packed with its targets answers as on arrays; values stay packed, and shared when only targets change")
    func updateKeepsRowsPacked() {
        let (attributes, relationships) = AttributeValues.packing(Self.values, relationships: Self.everyShape)
        let id = Self.id("Note", 42)
        let packedRow = ModelSnapshot(id: id, attributes: attributes, relationships: relationships,
                                      transactionNumber: 3)
        let heldRow = ModelSnapshot(id: id, attributes: Self.values, relationships: Self.everyShape,
                                    transactionNumber: 3)
        // An attribute changes, with or without targets: values and targets are packed anew, together.
        let withAttributes = [
            ModelUpdate(id: id, attributes: [AttributeChange(index: 3, value: .int(8))], relationships: []),
            ModelUpdate(id: id, attributes: [AttributeChange(index: 1, value: .string("renamed"))],
                        relationships: [RelationshipChange(index: 0, kind: .toOne(Self.id("Folder", 4)))]),
        ]
        for update in withAttributes {
            let fromPacked = packedRow.applying(update, transactionNumber: 4)
            let fromHeld = heldRow.applying(update, transactionNumber: 4)
            #expect(fromPacked == fromHeld, "\(update)")
            #expect(fromPacked.relationships.isPacked(with: fromPacked.attributes), "\(update)")
            #expect(fromPacked.transactionNumber == 4)
        }
        // Only targets change (a delete rule nullifying): the values keep their allocation, which the objects that
        // read the row share, and the targets become an array.
        let targetsOnly = ModelUpdate(id: id, attributes: [], relationships: [
            RelationshipChange(index: 1, kind: .toOne(nil)),
            RelationshipChange(index: 3, kind: .toMany(added: [Self.id("Photo", 5)], removed: [Self.id("Photo", 2)])),
        ])
        let moved = packedRow.applying(targetsOnly, transactionNumber: 4)
        #expect(moved == heldRow.applying(targetsOnly, transactionNumber: 4))
        #expect(relationships.isPacked(with: moved.attributes), "the values are the same allocation")
        #expect(!moved.relationships.isPacked)
        #expect(moved.relationships[1] == .toOne(nil) && moved.relationships[3] == .toMany([Self.id("Photo", 5)]))
        // A later attribute change packs them together again.
        let again = moved.applying(withAttributes[0], transactionNumber: 5)
        #expect(again.relationships.isPacked(with: again.attributes))
        #expect(again == heldRow.applying(targetsOnly, transactionNumber: 4)
            .applying(withAttributes[0], transactionNumber: 5))
        // An update that makes a to-many longer than 8 leaves the values packed and the targets in an array.
        let grow = ModelUpdate(id: id, attributes: [], relationships: [
            RelationshipChange(index: 4, kind: .toMany(added: [Self.id("Photo", 99)], removed: [])),
        ])
        let grown = packedRow.applying(grow, transactionNumber: 5)
        #expect(grown == heldRow.applying(grow, transactionNumber: 5))
        #expect(grown.attributes.isPacked && !grown.relationships.isPacked)
        #expect(grown.relationships[4].count == 9)
    }
}
