import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

// What building a schema from model types reports, pinned where the way it is built changed: property names and
// kinds told by the wrappers' types (a cast only for other stored properties), type names printed without
// `String(describing:)`, content hashes looked up for entities already hashed.

/// Models nested in a namespace, as a versioned schema declares them.
enum ConstructionV1 {
    /// A `Codable` value type nested in the namespace: its schema name is its own name.
    struct Point: Codable, Hashable {
        var x = 0.0
        var y = 0.0
    }

    /// A raw-valued enum nested in the namespace.
    enum Priority: Int, Codable {
        case low, high
    }

    final class Sketch: PersistentModel {
        @Attribute var title = ""
        @Attribute var origin = Point()
        @Attribute var priority = Priority.low
        @Attribute var corners: [Point] = []
        @Attribute var tagged = Tagged<Int>(value: 0)
        required init() {}
    }
}

/// A generic `Codable` value type: its schema name carries its argument.
struct Tagged<Value: Codable & Hashable>: Codable, Hashable {
    var value: Value
}

/// A generic model without an entity name of its own.
final class Shelved<Item>: PersistentModel {
    @Attribute var label = ""
    required init() {}
}

/// Every kind of stored property side by side, where one value type (`String`) backs an attribute, a transient
/// property, a lazy property and an unwrapped one, and the wrappers' value types repeat.
final class MixedProperties: PersistentModel {
    @Attribute var first = ""
    @Transient var scratch = ""
    @Relationship var owner: MixedOwner?
    @Attribute var second = ""
    lazy var shouted: String = first.uppercased()
    @Attribute var count = 0
    @Relationship var others: [MixedOwner] = []
    @Attribute var third = 0
    required init() {}
}

final class MixedOwner: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \MixedProperties.owner) var owned: [MixedProperties] = []
    @Relationship(inverse: \MixedProperties.others) var shared: [MixedProperties] = []
    required init() {}
}

/// ``MixedProperties`` with one stored `String` property that no wrapper declares, after the transient one.
final class MixedWithUnwrapped: PersistentModel {
    @Attribute var first = ""
    @Transient var scratch = ""
    var pending = ""
    @Attribute var second = ""
    required init() {}
}

@Suite("Schema construction: names, kinds and hashes as the model types declare them")
struct SchemaConstructionTests {
    @Test("Entity names are the type's name as String(describing:) prints it: nested and generic models")
    func entityNames() throws {
        #expect(ConstructionV1.Sketch.entityName == "Sketch")
        #expect(Shelved<Int>.entityName == "Shelved<Int>")
        #expect(Shelved<ConstructionV1.Point>.entityName == String(describing: Shelved<ConstructionV1.Point>.self))
        let schema = try Schema([ConstructionV1.Sketch.self, Shelved<Int>.self])
        #expect(schema.entities.map(\.name) == ["Shelved<Int>", "Sketch"])
    }

    @Test("Codable and raw-valued attribute types keep their printed names in the schema: nested, generic, in arrays")
    func attributeTypeNames() throws {
        let entity = try #require(try Schema([ConstructionV1.Sketch.self]).entity(named: "Sketch"))
        #expect(entity.attributes.map(\.type) == [
            .string,
            .codable(typeName: "Point"),
            .rawRepresentable(typeName: "Priority", rawType: .int),
            .array(.codable(typeName: "Point")),
            .codable(typeName: "Tagged<Int>"),
        ])
        #expect(String(describing: Tagged<Int>.self) == "Tagged<Int>")
    }

    @Test("Stored properties are told apart by their wrappers, whatever value types they share",
          arguments: StoreKind.allCases)
    func propertyKinds(kind: StoreKind) throws {
        let container = try kind.makeContainer([MixedProperties.self])
        let entity = try #require(container.schema.entity(named: "MixedProperties"))
        #expect(entity.attributes.map(\.name) == ["first", "second", "count", "third"])
        #expect(entity.attributes.map(\.type) == [.string, .string, .int, .int])
        #expect(entity.relationships.map(\.name) == ["owner", "others"])
        #expect(entity.relationships.map(\.inverse) == ["owned", "shared"])

        let context = ModelContext(container)
        let object = MixedProperties()
        object.first = "a"
        object.second = "b"
        object.third = 3
        object.scratch = "kept out"
        context.insert(object)
        try context.save()
        let copy = try #require(try ModelContext(container).fetch(FetchDescriptor<MixedProperties>()).first)
        #expect(copy.first == "a" && copy.second == "b" && copy.count == 0 && copy.third == 3)
        #expect(copy.scratch == "" && copy.shouted == "A")
    }

    @Test("An unwrapped stored property is refused when the container is created, beside transient ones",
          arguments: StoreKind.allCases)
    func unwrappedBesideTransient(kind: StoreKind) {
        #expect(throws: SchemaError.storedPropertyWithoutWrapper(entity: "MixedWithUnwrapped", property: "pending")) {
            try kind.makeContainer([MixedWithUnwrapped.self])
        }
        // The metadata is built once per process; the error is reported again by every schema of the type.
        #expect(throws: SchemaError.storedPropertyWithoutWrapper(entity: "MixedWithUnwrapped", property: "pending")) {
            try Schema([MixedWithUnwrapped.self])
        }
    }

    @Test("The common value types get the codec a cast finds: the same kind, the same stored form, the same value")
    func commonCodecs() throws {
        func check<Value: Equatable>(_ value: Value, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let common = try #require(AttributeCodecFactory.common(Value.self) as? AttributeCodec<Value>,
                                      sourceLocation: sourceLocation)
            let cast = try #require(AttributeCodecFactory.madeByCasting(Value.self), sourceLocation: sourceLocation)
            #expect(common.type == cast.type, sourceLocation: sourceLocation)
            let stored = try cast.encode(value)
            #expect(try common.encode(value) == stored, sourceLocation: sourceLocation)
            #expect(try common.decode(stored) == value, sourceLocation: sourceLocation)
        }
        try check("text")
        try check(42)
        try check(true)
        try check(2.5)
        try check(Date(timeIntervalSince1970: 1_700_000_000.25))
        try check(Data([0, 1, 255]))
        try check(UUID())
        try check(try #require(URL(string: "https://example.com/a?b=c")))
        try check(["a", "b"])
        for optional in [String?.none, "x"] { try check(optional) }
        for optional in [Int?.none, 7] { try check(optional) }
        for optional in [Bool?.none, false] { try check(optional) }
        for optional in [Double?.none, -0.5] { try check(optional) }
        for optional in [Date?.none, Date(timeIntervalSince1970: 0)] { try check(optional) }
        for optional in [Data?.none, Data()] { try check(optional) }
        for optional in [UUID?.none, UUID()] { try check(optional) }
        for optional in [URL?.none, URL(fileURLWithPath: "/tmp/x")] { try check(optional) }
        // Any other type is found by casting, as before.
        #expect(AttributeCodecFactory.common(Int8.self) == nil && AttributeCodecFactory.make(Int8.self) != nil)
        #expect(AttributeCodecFactory.common([Int].self) == nil && AttributeCodecFactory.make([Int].self) != nil)
        #expect(AttributeCodecFactory.common(ConstructionV1.Priority.self) == nil)
        #expect(AttributeCodecFactory.make(ConstructionV1.Priority.self)?.type
                == .rawRepresentable(typeName: "Priority", rawType: .int))
        #expect(AttributeCodecFactory.make(String??.self) == nil, "a nested optional has no stored form")
    }

    @Test("A schema's content hash is the hash of its entities as they are now, after a change too")
    func contentHashFollowsEntities() throws {
        var schema = try Schema([ConstructionV1.Sketch.self])
        let before = schema.contentHash
        let rebuilt = try Schema(version: schema.version, entities: schema.entities)
        #expect(rebuilt.contentHash == before, "equal entities, one hash")

        schema.entities[0].attributes.append(Schema.Attribute(name: "added", type: .int, defaultValue: .int(0)))
        let after = schema.contentHash
        #expect(after != before)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(after == SHA256Digest.hexString(try encoder.encode(schema.entities)), "the definition of the hash")
        schema.entities[0].attributes.removeLast()
        #expect(schema.contentHash == before)
    }

    @Test("Schemas whose strings are canonically equivalent but spelled differently keep different content hashes")
    func contentHashOfEquivalentStrings() throws {
        // Swift's String == compares canonical equivalence; the hash is of the encoded bytes, which differ.
        func schema(_ name: String) throws -> Schema {
            try Schema(version: Schema.Version(1, 0, 0), entities: [Schema.Entity(
                name: "Accent", attributes: [Schema.Attribute(name: name, type: .string, defaultValue: .string(""))],
                relationships: [])])
        }
        let composed = try schema("caf\u{E9}"), decomposed = try schema("cafe\u{301}")
        #expect(composed.entities == decomposed.entities, "equal as Swift values")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(composed.contentHash == SHA256Digest.hexString(try encoder.encode(composed.entities)))
        #expect(decomposed.contentHash == SHA256Digest.hexString(try encoder.encode(decomposed.entities)))
        #expect(composed.contentHash != decomposed.contentHash)
    }

    @Test("Schemas built again from the same types hash alike, and a changed copy of one never lends them its hash")
    func contentHashOfRebuiltSchemas() throws {
        var changed = try Schema([ConstructionV1.Sketch.self])
        changed.entities[0].indexes.append(["title"])
        let changedHash = changed.contentHash
        let rebuilt = try Schema([ConstructionV1.Sketch.self], version: Schema.Version(3, 0, 0))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(rebuilt.contentHash == SHA256Digest.hexString(try encoder.encode(rebuilt.entities)))
        #expect(rebuilt.contentHash != changedHash)
        #expect(try Schema([ConstructionV1.Sketch.self]).contentHash == rebuilt.contentHash)
    }

    @Test("A copy of a schema whose entities changed hashes its own entities; the original keeps its hash")
    func contentHashOfCopies() throws {
        let original = try Schema([ConstructionV1.Sketch.self])
        let hash = original.contentHash
        var copy = original
        #expect(copy.contentHash == hash)
        copy.entities[0].indexes.append(["title"])
        #expect(copy.contentHash != hash)
        #expect(original.contentHash == hash)
        copy.entities[0].indexes.removeLast()
        #expect(copy.contentHash == hash)
    }
}
