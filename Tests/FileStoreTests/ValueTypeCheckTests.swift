import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 34, item 4: a save never writes a value its attribute's type does not admit. Typed models cannot make one;
/// any other writer of change sets (dynamic models, a custom `DataStore` client, a bug) can, and a file store would
/// then hold a record it cannot read back. The check runs before anything is written, on both stores.
@Suite("A save refuses values its attribute's type does not admit")
struct ValueTypeCheckTests {
    /// A saved `EveryType`, the store it is in, and the position of attribute `name`.
    static func saved(_ kind: StoreKind) throws -> (ModelContainer, PersistentIdentifier) {
        let container = try kind.makeContainer([EveryType.self])
        let context = ModelContext(container)
        let object = EveryType.sample(1)
        context.insert(object)
        try context.save()
        return (container, object.persistentModelID)
    }

    static func slot(_ name: String, in container: ModelContainer) throws -> Int {
        try #require(container.schema.entity(named: "EveryType")?.attributeIndex(named: name))
    }

    @Test("Item 4: the refusal names the entity's object, the attribute, the type expected and the value found; nothing is written",
          arguments: StoreKind.allCases)
    func refusedWithTheTypes(kind: StoreKind) throws {
        let (container, id) = try Self.saved(kind)
        let store = container.store
        let transactionNumber = store.transactionNumber
        let cases: [(attribute: String, value: StoredValue, expected: String, found: String)] = [
            ("url", .null, "URL", "null"),                       // what the first dynamic models wrote
            ("level", .string("high"), "Level(Int)?", "string"),  // a raw value of the wrong kind
            ("int8", .int(300), "Int8", "int 300"),
            ("int", .uint(5), "Int", "uint 5"),
            ("strings", .array([.string("a"), .int(1)]), "[String]", "array of 2"),
            ("blob", .string("bytes"), "Data in external storage", "string"),
        ]
        for item in cases {
            let slot = try Self.slot(item.attribute, in: container)
            let update = ChangeSet(updated: [ModelUpdate(id: id, attributes: [AttributeChange(index: slot, value: item.value)],
                                                         relationships: [])])
            #expect(throws: SaveError.valueDoesNotMatchType(model: id, property: item.attribute,
                                                            expected: item.expected, found: item.found)) {
                try store.save(update)
            }
            var row = try #require(store.rows(for: [id]).first ?? nil)
            row.id = PersistentIdentifier(entityName: "EveryType", primaryKey: UUID())
            row.attributes[slot] = item.value
            #expect(throws: SaveError.valueDoesNotMatchType(model: row.id, property: item.attribute,
                                                            expected: item.expected, found: item.found)) {
                try store.save(ChangeSet(inserted: [row]))
            }
        }
        var short = try #require(store.rows(for: [id]).first ?? nil)
        short.id = PersistentIdentifier(entityName: "EveryType", primaryKey: UUID())
        short.attributes = AttributeValues(Array(short.attributes.dropLast()))
        #expect(throws: SaveError.self) { try store.save(ChangeSet(inserted: [short])) }
        #expect(store.transactionNumber == transactionNumber)

        guard kind == .file, let url = (store as? FileStore)?.configuration.url else { return }
        try container.close()
        #expect(try StoreVerifier.verify(at: url).problems.isEmpty)
        let reopened = try ModelContainer(for: Schema([EveryType.self]), configurations: [FileStoreConfiguration(url: url)])
        defer { try? reopened.close() }
        #expect(try ModelContext(reopened).fetchCount(FetchDescriptor<EveryType>()) == 1)
    }

    @Test("Item 4: what the check admits, a file store reads back exactly, and what it refuses is not written (random types and values)")
    func admittedValuesReadBack() throws {
        var random = SeededGenerator(seed: UInt64(ProcessInfo.processInfo.environment["NOTEKIT_TYPECHECK_SEED"] ?? "") ?? 34_004)
        var attributes: [Schema.Attribute] = []
        for index in 0..<24 {
            attributes.append(Schema.Attribute(name: "a\(index)", type: Self.randomType(&random, depth: 0),
                                               defaultValue: nil))
        }
        let schema = try Schema(version: .init(1, 0, 0), entities: [
            Schema.Entity(name: "Probe", attributes: attributes, relationships: []),
        ])
        let url = TemporaryStores.newURL("typecheck")
        var configuration = FileStoreConfiguration(url: url, durability: .deferred(interval: 60))
        configuration.automaticCompaction = nil
        var kept: [PersistentIdentifier: [StoredValue]] = [:]
        var admitted = 0, refused = 0
        do {
            let store = try FileStore(configuration: configuration, schema: schema)
            for _ in 0..<300 {
                // Values of each attribute's type, and one of any kind in one attribute half the time.
                var values = attributes.map { Self.value(of: $0.type, &random, depth: 0) }
                if Bool.random(using: &random) {
                    values[Int.random(in: 0..<values.count, using: &random)] = Self.randomValue(&random, depth: 0)
                }
                let admits = zip(attributes, values).allSatisfy { $0.type.admits($1) }
                let id = PersistentIdentifier(entityName: "Probe", primaryKey: UUID())
                do {
                    _ = try store.save(ChangeSet(inserted: [ModelSnapshot(id: id, attributes: values, relationships: [])]))
                    #expect(admits, "saved \(values)")
                    kept[id] = values
                    admitted += 1
                } catch SaveError.valueDoesNotMatchType {
                    #expect(!admits, "refused \(values)")
                    refused += 1
                }
            }
            try store.close()
        }
        #expect(admitted > 20 && refused > 20, "admitted \(admitted), refused \(refused)")
        let reopened = try FileStore(configuration: configuration, schema: schema)
        defer { try? reopened.close() }
        let rows = reopened.rows(for: Array(kept.keys))
        #expect(rows.compactMap { $0 }.count == kept.count)
        for row in rows.compactMap({ $0 }) {
            let expected = kept[row.id]!
            for (slot, value) in expected.enumerated() {
                #expect(Self.same(row.attributes[slot], value), "\(row.attributes[slot]) read back for \(value)")
            }
        }
    }

    /// Equal, a NaN's payload aside (a record writes every NaN as "nan").
    static func same(_ a: StoredValue, _ b: StoredValue) -> Bool {
        switch (a, b) {
        case let (.double(x), .double(y)): x.isNaN && y.isNaN || x.bitPattern == y.bitPattern
        case let (.array(x), .array(y)): x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case let (.dictionary(x), .dictionary(y)): x.keys == y.keys && x.allSatisfy { same($0.value, y[$0.key]!) }
        default: a == b
        }
    }

    static let scalarTypes: [Schema.AttributeType] = [
        .bool, .int, .int8, .int16, .int32, .int64, .uint, .uint8, .uint16, .uint32, .uint64, .double, .float,
        .string, .date, .data, .uuid, .url, .decimal,
    ]

    static func randomType(_ random: inout SeededGenerator, depth: Int) -> Schema.AttributeType {
        let scalar = scalarTypes.randomElement(using: &random)!
        guard depth < 2 else { return scalar }
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return .optional(randomType(&random, depth: depth + 1).nonOptional)
        case 1: return .array(randomType(&random, depth: depth + 1))
        case 2: return .dictionary(randomType(&random, depth: depth + 1))
        case 3: return .rawRepresentable(typeName: "Raw", rawType: [.int, .string].randomElement(using: &random)!)
        case 4: return .codable(typeName: "Thing")
        default: return scalar
        }
    }

    /// A value of `type`, sometimes at the edge of its range.
    static func value(of type: Schema.AttributeType, _ random: inout SeededGenerator, depth: Int) -> StoredValue {
        switch type {
        case .optional(let wrapped): return Bool.random(using: &random) ? .null : value(of: wrapped, &random, depth: depth)
        case .bool: return .bool(.random(using: &random))
        case .int, .int64: return .int(.random(in: .min ... .max, using: &random))
        case .int8: return .int(Int64(Int8.random(in: .min ... .max, using: &random)))
        case .int16: return .int(Int64(Int16.random(in: .min ... .max, using: &random)))
        case .int32: return .int(Int64(Int32.random(in: .min ... .max, using: &random)))
        case .uint8: return .int(Int64(UInt8.random(in: .min ... .max, using: &random)))
        case .uint16: return .int(Int64(UInt16.random(in: .min ... .max, using: &random)))
        case .uint32: return .int(Int64(UInt32.random(in: .min ... .max, using: &random)))
        case .uint, .uint64: return .uint(.random(in: .min ... .max, using: &random))
        case .double, .float: return .double([0, -0.0, .nan, .infinity, 1e300, -2.5].randomElement(using: &random)!)
        case .string, .url: return .string(["", "é", "a\"b", "https://x.org"].randomElement(using: &random)!)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(Int.random(in: -1_000_000...1_000_000, using: &random))))
        case .data: return .data(Data((0..<Int.random(in: 0..<9, using: &random)).map { UInt8($0) }))
        case .uuid: return .uuid(UUID())
        case .decimal: return .decimal(Decimal(string: ["0", "-12.5", "3.14159"].randomElement(using: &random)!)!)
        case .array(let element):
            return .array((0..<Int.random(in: 0..<3, using: &random)).map { _ in value(of: element, &random, depth: depth + 1) })
        case .dictionary(let element):
            var items: [String: StoredValue] = [:]
            for key in ["k", "é"] where Bool.random(using: &random) { items[key] = value(of: element, &random, depth: depth + 1) }
            return .dictionary(items)
        case .rawRepresentable(_, let raw): return value(of: raw, &random, depth: depth)
        case .codable: return randomValue(&random, depth: depth)
        }
    }

    /// A value of any kind.
    static func randomValue(_ random: inout SeededGenerator, depth: Int) -> StoredValue {
        let kinds = depth < 2 ? 13 : 11
        switch Int.random(in: 0..<kinds, using: &random) {
        case 0: return .null
        case 1: return .bool(.random(using: &random))
        case 2: return .int([0, 300, -1, .min, .max].randomElement(using: &random)!)
        case 3: return .uint([0, 5, .max].randomElement(using: &random)!)
        case 4: return .double(.random(in: -10...10, using: &random))
        case 5: return .string("s")
        case 6: return .date(Date(timeIntervalSinceReferenceDate: 5))
        case 7: return .data(Data([1, 2]))
        case 8: return .uuid(UUID())
        case 9: return .decimal(Decimal(7))
        case 10: return .external(ExternalData(name: String(repeating: "a", count: 64), data: Data()))
        case 11: return .array([randomValue(&random, depth: depth + 1)])
        default: return .dictionary(["k": randomValue(&random, depth: depth + 1)])
        }
    }
}
