#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing
@testable import NoteKit

// MARK: - Fixtures

private struct Scalars: Codable, Equatable {
    var bool: Bool
    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64
    var float: Float
    var double: Double
    var string: String
    var date: Date
    var data: Data
    var uuid: UUID
    var url: URL
    var decimal: Decimal

    static let sample = Scalars(
        bool: true, int: -42, int8: .min, int16: .max, int32: -70_000, int64: .min,
        uint: 7, uint8: .max, uint16: 65_000, uint32: .max, uint64: .max,
        float: 0.1, double: -2.5e300, string: "héllo ✓",
        date: Date(timeIntervalSinceReferenceDate: 700_000_000.25), data: Data([0, 1, 254, 255]),
        uuid: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
        url: URL(string: "https://example.com/notes?id=3#top")!,
        decimal: Decimal(sign: .minus, exponent: -4, significand: 123456789))
}

private struct Envelope: Codable, Equatable {
    var title: String
    var scalars: Scalars
    var history: [Scalars]
}

private struct Point: Codable, Equatable, Hashable {
    var x: Int
    var y: Int
}

private struct Draft: Codable, Equatable {
    var title: String
    var subtitle: String?
    var wordCount: Int?
    var tags: [String]?
}

private enum Priority: String, Codable, Equatable {
    case low, high
}

private enum Level: Int, Codable, Equatable {
    case one = 1, two = 2
}

private enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(width: Double, height: Double)
    case labelled(String)
    case empty
}

private class Base: Codable {
    let id: Int

    init(id: Int) { self.id = id }
}

private final class Derived: Base {
    let name: String

    init(id: Int, name: String) {
        self.name = name
        super.init(id: id)
    }

    private enum CodingKeys: String, CodingKey { case name }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try super.encode(to: container.superEncoder())
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        try super.init(from: container.superDecoder())
    }
}

/// Writes into nested containers after creating them, and uses keyed and unkeyed super encoders.
private struct Layered: Codable, Equatable {
    var id: Int
    var width: Double
    var tags: [String]
    var inner: Point
    var parent: Point

    private enum Keys: String, CodingKey { case id, size, tags, parent }
    private enum SizeKeys: String, CodingKey { case width, corner }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var size = container.nestedContainer(keyedBy: SizeKeys.self, forKey: .size)
        var tagList = container.nestedUnkeyedContainer(forKey: .tags)
        try container.encode(id, forKey: .id)
        try parent.encode(to: container.superEncoder(forKey: .parent))
        // Written after the parent went on encoding other keys: must still land in the parent.
        try size.encode(width, forKey: .width)
        var corner = size.nestedUnkeyedContainer(forKey: .corner)
        try inner.encode(to: corner.superEncoder())
        try corner.encode("after")
        for tag in tags { try tagList.encode(tag) }
    }

    init(id: Int, width: Double, tags: [String], inner: Point, parent: Point) {
        self.id = id
        self.width = width
        self.tags = tags
        self.inner = inner
        self.parent = parent
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decode(Int.self, forKey: .id)
        let size = try container.nestedContainer(keyedBy: SizeKeys.self, forKey: .size)
        width = try size.decode(Double.self, forKey: .width)
        var corner = try size.nestedUnkeyedContainer(forKey: .corner)
        inner = try Point(from: corner.superDecoder())
        _ = try corner.decode(String.self)
        var tagList = try container.nestedUnkeyedContainer(forKey: .tags)
        var tags: [String] = []
        while !tagList.isAtEnd { tags.append(try tagList.decode(String.self)) }
        self.tags = tags
        parent = try Point(from: container.superDecoder(forKey: .parent))
    }
}

/// Encodes `nil` explicitly, unlike synthesized `encodeIfPresent`.
private struct ExplicitNil: Encodable {
    private enum Keys: String, CodingKey { case gone, alsoGone }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeNil(forKey: .gone)
        try container.encode(Int?.none, forKey: .alsoGone)
    }
}

/// Records what `decodeNil(forKey:)` reports.
private struct NilProbe: Decodable {
    var missing: Bool
    var null: Bool
    var present: Bool

    private enum Keys: String, CodingKey { case missing, null, present }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        missing = try container.decodeNil(forKey: .missing)
        null = try container.decodeNil(forKey: .null)
        present = try container.decodeNil(forKey: .present)
    }
}

/// Encodes nothing at all.
private struct Silent: Codable {
    func encode(to encoder: any Encoder) throws {}
    init() {}
    init(from decoder: any Decoder) throws {}
}

private struct Holder: Encodable {
    var silent = Silent()
}

private struct Blob: Codable, Equatable {
    var bytes: Data
}

private struct Wide: Codable, Equatable {
    var signed: Int128
    var unsigned: UInt128
}

private struct Unreadable: Error, Equatable {}

private let contextKey = CodingUserInfoKey(rawValue: "notekit.test.context")!

private struct ContextReader: Codable, Equatable {
    var seen: String

    init(seen: String) { self.seen = seen }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(encoder.userInfo[contextKey] as? String ?? "none")
    }

    init(from decoder: any Decoder) throws {
        let context = decoder.userInfo[contextKey] as? String ?? "none"
        seen = context + ":" + (try decoder.singleValueContainer().decode(String.self))
    }
}

private func encode<T: Encodable>(_ value: T) throws -> StoredValue {
    try StoredValueEncoder().encode(value)
}

private func decode<T: Decodable>(_ type: T.Type, _ value: StoredValue) throws -> T {
    try StoredValueDecoder().decode(type, from: value)
}

private func roundTrip<T: Codable>(_ value: T) throws -> T {
    try decode(T.self, encode(value))
}

private func entries(_ value: StoredValue) -> [String: StoredValue]? {
    if case .dictionary(let entries) = value { return entries }
    return nil
}

private func path(_ context: DecodingError.Context) -> [String] {
    context.codingPath.map(\.stringValue)
}

private let scalarsShape: [String: StoredValue] = [
    "bool": .bool(true),
    "int": .int(-42),
    "int8": .int(-128),
    "int16": .int(32767),
    "int32": .int(-70_000),
    "int64": .int(.min),
    "uint": .uint(7),
    "uint8": .int(255),
    "uint16": .int(65_000),
    "uint32": .int(4_294_967_295),
    "uint64": .uint(.max),
    "float": .double(Double(Float(0.1))),
    "double": .double(-2.5e300),
    "string": .string("héllo ✓"),
    "date": .date(Date(timeIntervalSinceReferenceDate: 700_000_000.25)),
    "data": .data(Data([0, 1, 254, 255])),
    "uuid": .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!),
    "url": .string("https://example.com/notes?id=3#top"),
    "decimal": .decimal(Decimal(sign: .minus, exponent: -4, significand: 123456789)),
]

// MARK: - Tests

@Suite("StoredValue coding")
struct StoredValueCoderTests {

    // MARK: Shapes and round trips

    @Test("Every scalar encodes to its typed case")
    func scalarShapes() throws {
        #expect(try encode(Scalars.sample) == .dictionary(scalarsShape))
    }

    @Test("Every scalar survives a round trip")
    func scalarRoundTrip() throws {
        let decoded = try roundTrip(Scalars.sample)
        #expect(decoded == Scalars.sample)
        #expect(decoded.uint64 == .max)
        #expect(decoded.int8 == .min)
        #expect(decoded.float == 0.1)
    }

    @Test("Top-level scalars encode to scalar cases")
    func topLevelScalars() throws {
        #expect(try encode(true) == .bool(true))
        #expect(try encode("x") == .string("x"))
        #expect(try encode(Int8(-3)) == .int(-3))
        #expect(try encode(UInt32.max) == .int(Int64(UInt32.max)))
        #expect(try encode(UInt(5)) == .uint(5))
        #expect(try encode(Float(1.5)) == .double(1.5))
        #expect(try encode(Int?.none) == .null)
        let date = Date(timeIntervalSinceReferenceDate: 9)
        #expect(try encode(Optional(date)) == .date(date))
        #expect(try decode(Int?.self, .null) == nil)
        #expect(try decode(Int?.self, .int(4)) == 4)
    }

    @Test("A nested struct encodes to nested dictionaries and round-trips")
    func nestedStruct() throws {
        var second = Scalars.sample
        second.string = "second"
        let envelope = Envelope(title: "Inbox", scalars: .sample, history: [second, .sample])
        let encoded = try encode(envelope)
        let top = try #require(entries(encoded))
        #expect(Set(top.keys) == ["title", "scalars", "history"])
        #expect(top["title"] == .string("Inbox"))
        #expect(top["scalars"] == .dictionary(scalarsShape))
        guard case .array(let history)? = top["history"] else {
            Issue.record("history is not an array: \(String(describing: top["history"]))")
            return
        }
        #expect(history.count == 2)
        #expect(entries(history[0])?["string"] == .string("second"))
        #expect(try decode(Envelope.self, encoded) == envelope)
    }

    @Test("Absent optionals are left out; present ones are stored")
    func optionals() throws {
        let bare = Draft(title: "t", subtitle: nil, wordCount: nil, tags: nil)
        #expect(try encode(bare) == .dictionary(["title": .string("t")]))
        #expect(try roundTrip(bare) == bare)

        let full = Draft(title: "t", subtitle: "s", wordCount: 0, tags: [])
        #expect(try encode(full) == .dictionary([
            "title": .string("t"), "subtitle": .string("s"), "wordCount": .int(0), "tags": .array([]),
        ]))
        #expect(try roundTrip(full) == full)

        // `.null` decodes as nil as well as a missing key.
        let nulls = try decode(Draft.self, .dictionary(["title": .string("t"), "subtitle": .null, "tags": .null]))
        #expect(nulls == bare)
    }

    @Test("Explicit encodeNil stores .null")
    func explicitNil() throws {
        #expect(try encode(ExplicitNil()) == .dictionary(["gone": .null, "alsoGone": .null]))
    }

    @Test("decodeNil(forKey:) is true for null and for a missing key")
    func decodeNilForKey() throws {
        let probe = try decode(NilProbe.self, .dictionary(["null": .null, "present": .int(0)]))
        #expect(probe.missing)
        #expect(probe.null)
        #expect(!probe.present)
    }

    @Test("Arrays of structs encode to arrays of dictionaries")
    func arraysOfStructs() throws {
        let points = [Point(x: 1, y: 2), Point(x: -3, y: 4)]
        #expect(try encode(points) == .array([
            .dictionary(["x": .int(1), "y": .int(2)]),
            .dictionary(["x": .int(-3), "y": .int(4)]),
        ]))
        #expect(try roundTrip(points) == points)
        #expect(try roundTrip([[Point]]()) == [])
        #expect(try roundTrip([[1, 2], [], [3]]) == [[1, 2], [], [3]])
    }

    @Test("String-keyed and Int-keyed dictionaries encode as keyed dictionaries")
    func dictionaries() throws {
        let byName = ["a": 1, "b": 2]
        #expect(try encode(byName) == .dictionary(["a": .int(1), "b": .int(2)]))
        #expect(try roundTrip(byName) == byName)

        let byNumber = [1: "one", -20: "minus twenty"]
        #expect(try encode(byNumber) == .dictionary(["1": .string("one"), "-20": .string("minus twenty")]))
        #expect(try roundTrip(byNumber) == byNumber)

        let nested = ["origin": [Point(x: 0, y: 0)], "none": []]
        #expect(try encode(nested) == .dictionary([
            "origin": .array([.dictionary(["x": .int(0), "y": .int(0)])]), "none": .array([]),
        ]))
        #expect(try roundTrip(nested) == nested)
    }

    @Test("Raw-value enums encode as their raw value")
    func rawValueEnums() throws {
        #expect(try encode(Priority.high) == .string("high"))
        #expect(try encode([Level.one, .two]) == .array([.int(1), .int(2)]))
        #expect(try decode(Priority.self, .string("low")) == .low)
        #expect(try decode(Level.self, .uint(2)) == .two)
        #expect(throws: DecodingError.self) { try decode(Priority.self, .string("medium")) }
    }

    @Test("Enums with associated values use the synthesized keyed shape")
    func associatedValueEnums() throws {
        #expect(try encode(Shape.circle(radius: 2)) == .dictionary(["circle": .dictionary(["radius": .double(2)])]))
        #expect(try encode(Shape.labelled("x")) == .dictionary(["labelled": .dictionary(["_0": .string("x")])]))
        #expect(try encode(Shape.empty) == .dictionary(["empty": .dictionary([:])]))
        let shapes: [Shape] = [.circle(radius: 1.5), .rect(width: 2, height: 3), .labelled("tag"), .empty]
        #expect(try roundTrip(shapes) == shapes)
    }

    @Test("A subclass stores its superclass under \"super\"")
    func superEncoder() throws {
        let encoded = try encode(Derived(id: 9, name: "child"))
        #expect(encoded == .dictionary(["name": .string("child"), "super": .dictionary(["id": .int(9)])]))
        let decoded = try decode(Derived.self, encoded)
        #expect(decoded.id == 9)
        #expect(decoded.name == "child")
    }

    @Test("Nested containers and super encoders write back into their parents")
    func nestedContainers() throws {
        let value = Layered(id: 1, width: 2.5, tags: ["a", "b"], inner: Point(x: 3, y: 4), parent: Point(x: 5, y: 6))
        let encoded = try encode(value)
        #expect(encoded == .dictionary([
            "id": .int(1),
            "size": .dictionary([
                "width": .double(2.5),
                "corner": .array([.dictionary(["x": .int(3), "y": .int(4)]), .string("after")]),
            ]),
            "tags": .array([.string("a"), .string("b")]),
            "parent": .dictionary(["x": .int(5), "y": .int(6)]),
        ]))
        #expect(try decode(Layered.self, encoded) == value)
    }

    @Test("A missing super entry decodes from null")
    func missingSuper() throws {
        let error = #expect(throws: DecodingError.self) {
            try decode(Derived.self, .dictionary(["name": .string("orphan")]))
        }
        guard case .valueNotFound(_, let context)? = error else {
            Issue.record("expected valueNotFound, got \(String(describing: error))")
            return
        }
        #expect(path(context) == ["super"])
    }

    @Test("Data decodes from external data by loading it")
    func externalData() throws {
        let blob = ExternalData(name: "blob-1", data: Data([9, 8, 7]))
        #expect(try decode(Blob.self, .dictionary(["bytes": .external(blob)])) == Blob(bytes: Data([9, 8, 7])))
        #expect(try encode(Blob(bytes: Data([1]))) == .dictionary(["bytes": .data(Data([1]))]))

        let broken = ExternalData(name: "blob-2", size: 3) { throw Unreadable() }
        let error = #expect(throws: DecodingError.self) {
            try decode(Blob.self, .dictionary(["bytes": .external(broken)]))
        }
        guard case .dataCorrupted(let context)? = error else {
            Issue.record("expected dataCorrupted, got \(String(describing: error))")
            return
        }
        #expect(path(context) == ["bytes"])
        #expect(context.underlyingError as? Unreadable == Unreadable())
    }

    @Test("Numbers widen where no information is lost")
    func numericLeniency() throws {
        #expect(try decode(Double.self, .int(-3)) == -3)
        #expect(try decode(Double.self, .uint(UInt64(1) << 60)) == 0x1p60)
        #expect(try decode(Float.self, .int(2)) == 2)
        #expect(try decode(Int64.self, .uint(12)) == 12)
        #expect(try decode(UInt64.self, .int(12)) == 12)
        #expect(try decode(Decimal.self, .int(-7)) == Decimal(-7))
        #expect(try decode(UInt8.self, .int(255)) == 255)
    }

    @Test("128-bit integers are stored when they fit 64 bits")
    func wideIntegers() throws {
        let wide = Wide(signed: Int128(Int64.min), unsigned: UInt128(UInt64.max))
        #expect(try encode(wide) == .dictionary(["signed": .int(.min), "unsigned": .uint(.max)]))
        #expect(try roundTrip(wide) == wide)
        #expect(throws: EncodingError.self) { try encode(Int128(UInt64.max) + 1) }
    }

    @Test("userInfo reaches the values being coded")
    func userInfo() throws {
        var encoder = StoredValueEncoder()
        encoder.userInfo[contextKey] = "enc"
        #expect(try encoder.encode(ContextReader(seen: "")) == .string("enc"))
        var decoder = StoredValueDecoder()
        decoder.userInfo[contextKey] = "dec"
        #expect(try decoder.decode(ContextReader.self, from: .string("x")).seen == "dec:x")
    }

    // MARK: Errors

    @Test("A value of the wrong kind throws typeMismatch with its coding path")
    func typeMismatch() throws {
        let envelope = Envelope(title: "t", scalars: .sample, history: [.sample])
        guard case .dictionary(var shape) = try encode(envelope) else {
            Issue.record("envelope did not encode to a dictionary")
            return
        }
        var history = try #require(entries(.dictionary(scalarsShape)))
        history["int16"] = .string("not a number")
        shape["history"] = .array([.dictionary(history)])

        let error = #expect(throws: DecodingError.self) { try decode(Envelope.self, .dictionary(shape)) }
        guard case .typeMismatch(let type, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(Int16.self))
        #expect(path(context) == ["history", "Index 0", "int16"])
        #expect(context.codingPath[1].intValue == 0)
    }

    @Test("Typed cases are not interchangeable", arguments: [
        (StoredValue.string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"), "uuid"),
        (StoredValue.double(1), "int"),
        (StoredValue.int(1), "bool"),
        (StoredValue.string("2024"), "date"),
        (StoredValue.array([.int(1)]), "data"),
        (StoredValue.int(1), "string"),
    ])
    func strictKinds(value: StoredValue, key: String) throws {
        var shape = scalarsShape
        shape[key] = value
        let error = #expect(throws: DecodingError.self) { try decode(Scalars.self, .dictionary(shape)) }
        guard case .typeMismatch(_, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(path(context) == [key])
    }

    @Test("A container of the wrong kind throws typeMismatch")
    func containerMismatch() throws {
        let error = #expect(throws: DecodingError.self) { try decode([Point].self, .dictionary(["x": .int(1)])) }
        guard case .typeMismatch(_, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(context.codingPath.isEmpty)
        #expect(throws: DecodingError.self) { try decode(Point.self, .array([.int(1), .int(2)])) }
    }

    @Test("A missing key throws keyNotFound")
    func missingKey() throws {
        let error = #expect(throws: DecodingError.self) {
            try decode([String: Point].self, .dictionary(["p": .dictionary(["x": .int(1)])]))
        }
        guard case .keyNotFound(let key, let context)? = error else {
            Issue.record("expected keyNotFound, got \(String(describing: error))")
            return
        }
        #expect(key.stringValue == "y")
        #expect(path(context) == ["p"])

        let enumError = #expect(throws: DecodingError.self) {
            try decode(Shape.self, .dictionary(["rect": .dictionary(["width": .int(1)])]))
        }
        guard case .keyNotFound(let enumKey, let enumContext)? = enumError else {
            Issue.record("expected keyNotFound, got \(String(describing: enumError))")
            return
        }
        #expect(enumKey.stringValue == "height")
        #expect(path(enumContext) == ["rect"])
    }

    @Test("An integer that does not fit its type throws dataCorrupted")
    func integerOverflow() throws {
        let error = #expect(throws: DecodingError.self) { try decode(UInt8.self, .int(300)) }
        guard case .dataCorrupted(let context)? = error else {
            Issue.record("expected dataCorrupted, got \(String(describing: error))")
            return
        }
        #expect(context.codingPath.isEmpty)

        #expect(throws: DecodingError.self) { try decode(UInt64.self, .int(-1)) }
        #expect(throws: DecodingError.self) { try decode(Int64.self, .uint(.max)) }
        #expect(throws: DecodingError.self) { try decode(Int8.self, .int(-129)) }
        #expect(throws: DecodingError.self) { try decode(Float.self, .double(1e300)) }

        let nested = #expect(throws: DecodingError.self) {
            try decode([Point].self, .array([.dictionary(["x": .int(1), "y": .uint(.max)])]))
        }
        guard case .dataCorrupted(let nestedContext)? = nested else {
            Issue.record("expected dataCorrupted, got \(String(describing: nested))")
            return
        }
        #expect(path(nestedContext) == ["Index 0", "y"])
    }

    @Test("null where a value is required throws valueNotFound")
    func nullForNonOptional() throws {
        let error = #expect(throws: DecodingError.self) {
            try decode(Point.self, .dictionary(["x": .int(1), "y": .null]))
        }
        guard case .valueNotFound(let type, let context)? = error else {
            Issue.record("expected valueNotFound, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(Int.self))
        #expect(path(context) == ["y"])

        let special = #expect(throws: DecodingError.self) { try decode([Date].self, .array([.null])) }
        guard case .valueNotFound(_, let specialContext)? = special else {
            Issue.record("expected valueNotFound, got \(String(describing: special))")
            return
        }
        #expect(path(specialContext) == ["Index 0"])

        let container = #expect(throws: DecodingError.self) { try decode(Point.self, .null) }
        guard case .valueNotFound? = container else {
            Issue.record("expected valueNotFound, got \(String(describing: container))")
            return
        }
    }

    @Test("An exhausted unkeyed container throws valueNotFound")
    func unkeyedAtEnd() throws {
        // A tuple-like decode of two elements from a one-element array.
        struct Pair: Decodable {
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                _ = try container.decode(Int.self)
                _ = try container.decode(Int.self)
            }
        }
        let atEnd = #expect(throws: DecodingError.self) { try decode(Pair.self, .array([.int(1)])) }
        guard case .valueNotFound(_, let context)? = atEnd else {
            Issue.record("expected valueNotFound, got \(String(describing: atEnd))")
            return
        }
        #expect(path(context) == ["Index 1"])
    }

    @Test("An invalid URL string throws dataCorrupted")
    func invalidURL() throws {
        let error = #expect(throws: DecodingError.self) { try decode(URL.self, .string("")) }
        guard case .dataCorrupted? = error else {
            Issue.record("expected dataCorrupted, got \(String(describing: error))")
            return
        }
    }

    @Test("A value that encodes nothing is an error at the top and an empty dictionary inside")
    func emptyEncoding() throws {
        #expect(throws: EncodingError.self) { try encode(Silent()) }
        #expect(try encode(Holder()) == .dictionary(["silent": .dictionary([:])]))
    }

    @Test("An external value the store cannot read names the blob once: the loader's error is not wrapped again")
    func unreadableExternalDataNamedOnce() throws {
        let blob = ExternalData(name: "abc", size: 3) {
            throw StoredValueError.externalDataUnreadable(name: "abc", reason: "blobs/abc.blob is missing")
        }
        let error = #expect(throws: StoredValueError.self) { try Data(storedValue: .external(blob)) }
        #expect(error.map { "\($0)" } == "external data abc cannot be read: blobs/abc.blob is missing")
    }
}
