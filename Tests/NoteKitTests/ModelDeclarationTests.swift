import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// A batch of objects saved by one context and fetched by a second one of the same container.
///
/// Both contexts are kept: a model object holds its context weakly, and reading a relationship of an object whose
/// context is gone is a programming error.
private struct Reloaded<T: PersistentModel> {
    let container: ModelContainer
    let writer: ModelContext
    let reader: ModelContext
    let originals: [T]
    let objects: [T]

    /// Saves `originals` with a fresh context of a new container, then fetches every `T` with another context.
    init(_ originals: [T], on kind: StoreKind, sortBy: [SortDescriptor<T>]) throws {
        container = try kind.makeContainer([T.self])
        writer = ModelContext(container)
        for object in originals { writer.insert(object) }
        try writer.save()
        reader = ModelContext(container)
        self.originals = originals
        objects = try reader.fetch(FetchDescriptor<T>(sortBy: sortBy))
    }

    /// Original and reloaded objects, side by side.
    var pairs: Zip2Sequence<[T], [T]> { zip(originals, objects) }
}

@Suite("Model declarations without macros")
struct ModelDeclarationTests {
    // MARK: Round trips of every attribute type

    @Test("Every scalar type survives save and fetch, including integer bounds", arguments: StoreKind.allCases)
    func scalarRoundTrip(kind: StoreKind) throws {
        let minimum = ScalarSpecimen()
        minimum.position = 0
        minimum.bool = false
        minimum.int = .min
        minimum.int8 = .min
        minimum.int16 = .min
        minimum.int32 = .min
        minimum.int64 = .min
        minimum.uint = .min
        minimum.uint8 = .min
        minimum.uint16 = .min
        minimum.uint32 = .min
        minimum.uint64 = .min
        minimum.double = -.greatestFiniteMagnitude
        minimum.float = -.greatestFiniteMagnitude
        minimum.string = ""
        minimum.date = .distantPast
        minimum.data = Data()
        minimum.blob = Data()
        minimum.uuid = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
        minimum.url = URL(string: "https://example.com/a%20b/caf%C3%A9?q=1&r=two#frag")!
        minimum.decimal = Decimal(string: "-3.14159265358979323846")!

        let maximum = ScalarSpecimen()
        maximum.position = 1
        maximum.bool = true
        maximum.int = .max
        maximum.int8 = .max
        maximum.int16 = .max
        maximum.int32 = .max
        maximum.int64 = .max
        maximum.uint = .max
        maximum.uint8 = .max
        maximum.uint16 = .max
        maximum.uint32 = .max
        maximum.uint64 = .max
        maximum.double = .greatestFiniteMagnitude
        maximum.float = .greatestFiniteMagnitude
        maximum.string = "The quick brown 🦊"
        maximum.date = .distantFuture
        maximum.data = Data((0...255).map { UInt8($0) })
        maximum.blob = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        maximum.uuid = UUID(uuidString: "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF")!
        maximum.url = URL(fileURLWithPath: "/tmp/Field Notes/2024 ✓.json")
        maximum.decimal = Decimal(string: "3.14159265358979323846")!

        let typical = ScalarSpecimen()
        typical.position = 2
        typical.bool = true
        typical.int = -42
        typical.int8 = -8
        typical.int16 = 1_600
        typical.int32 = -320_000
        typical.int64 = 6_400_000_000
        typical.uint = 42
        typical.uint8 = 8
        typical.uint16 = 16_000
        typical.uint32 = 3_200_000_000
        typical.uint64 = UInt64(Int64.max) + 1
        typical.double = 0.1
        typical.float = 0.1
        typical.string = "a\u{0}b"
        typical.date = Date(timeIntervalSinceReferenceDate: 765_432_109.123_456)
        typical.data = Data([0, 0, 0])
        typical.blob = Data([0xFF])
        typical.uuid = UUID()
        typical.url = URL(string: "mailto:ada@example.com")!
        typical.decimal = Decimal(string: "0.000000000000000000000000000000000001")!

        let reloaded = try Reloaded([minimum, maximum, typical], on: kind, sortBy: [SortDescriptor(\.position)])
        #expect(reloaded.objects.count == 3)
        #expect(reloaded.objects.allSatisfy { $0.modelContext === reloaded.reader })
        #expect(!reloaded.objects.contains { object in reloaded.originals.contains { $0 === object } },
                "the second context has objects of its own")
        for (original, copy) in reloaded.pairs {
            #expect(copy.position == original.position)
            #expect(copy.bool == original.bool)
            #expect(copy.int == original.int)
            #expect(copy.int8 == original.int8)
            #expect(copy.int16 == original.int16)
            #expect(copy.int32 == original.int32)
            #expect(copy.int64 == original.int64)
            #expect(copy.uint == original.uint)
            #expect(copy.uint8 == original.uint8)
            #expect(copy.uint16 == original.uint16)
            #expect(copy.uint32 == original.uint32)
            #expect(copy.uint64 == original.uint64)
            #expect(copy.double.bitPattern == original.double.bitPattern)
            #expect(copy.float.bitPattern == original.float.bitPattern)
            #expect(Array(copy.string.unicodeScalars) == Array(original.string.unicodeScalars))
            #expect(copy.date == original.date)
            #expect(copy.date.timeIntervalSinceReferenceDate.bitPattern
                    == original.date.timeIntervalSinceReferenceDate.bitPattern)
            #expect(copy.data == original.data)
            #expect(copy.blob == original.blob)
            #expect(copy.uuid == original.uuid)
            #expect(copy.url.absoluteString == original.url.absoluteString)
            #expect(copy.decimal == original.decimal)
        }
        // Spot checks against literals, so a value lost on both sides (never written at all) is caught too.
        let values = reloaded.objects
        try #require(values.count == 3)
        #expect(values[0].int64 == Int64.min && values[1].uint64 == UInt64.max && values[1].uint == UInt.max)
        #expect(values[0].int8 == -128 && values[1].uint8 == 255 && values[1].int16 == 32_767)
        #expect(values[0].date == .distantPast && values[1].date == .distantFuture)
        #expect(values[2].date.timeIntervalSinceReferenceDate == 765_432_109.123_456, "sub-second precision is kept")
        #expect(values[1].data.count == 256 && values[1].data.last == 255)
        #expect(values[1].blob.count == 100_000)
        #expect(values[1].url.isFileURL && values[1].url.path == "/tmp/Field Notes/2024 ✓.json")
        #expect(values[1].decimal.description == "3.14159265358979323846")
        #expect(values[2].decimal == Decimal(sign: .plus, exponent: -36, significand: 1))
        #expect(values[2].string.utf8.count == 3 && values[2].string.utf8.contains(0))
    }

    @Test("Double and Float edge values keep their exact bit patterns", arguments: StoreKind.allCases)
    func floatingRoundTrip(kind: StoreKind) throws {
        let doubles: [Double] = [
            0.0, 1.0 / 3.0, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
            .leastNormalMagnitude, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude / 4, .pi, .ulpOfOne,
            9_007_199_254_740_993.0, -0.0,
        ]
        let floats: [Float] = [
            0.0, 1.0 / 3.0, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
            .leastNormalMagnitude, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude / 4, .pi, .ulpOfOne,
            16_777_217.0, -0.0,
        ]
        let samples = zip(doubles, floats).enumerated().map { position, values in
            let sample = FloatingSpecimen()
            sample.position = position
            sample.double = values.0
            sample.float = values.1
            return sample
        }
        let reloaded = try Reloaded(samples, on: kind, sortBy: [SortDescriptor(\.position)])
        try #require(reloaded.objects.count == doubles.count)
        let isNegativeZero = { (position: Int) in doubles[position].sign == .minus && doubles[position] == 0 }
        for (position, copy) in reloaded.objects.enumerated() where !isNegativeZero(position) {
            #expect(copy.double.bitPattern == doubles[position].bitPattern, "double \(doubles[position])")
            #expect(copy.float.bitPattern == floats[position].bitPattern, "float \(floats[position])")
        }
        #expect(reloaded.objects[4].double.isNaN && reloaded.objects[4].float.isNaN)
        #expect(reloaded.objects[8].double.isSubnormal && reloaded.objects[10].float.isSubnormal)

        let negativeZero = try #require(reloaded.objects.last)
        #expect(samples.last!.double.sign == .minus, "read back from the object it was set on")
        #expect(negativeZero.double.bitPattern == (-0.0 as Double).bitPattern)
        #expect(negativeZero.float.bitPattern == (-0.0 as Float).bitPattern)
    }

    @Test("Strings keep every Unicode scalar: empty, emoji, combining marks, NUL", arguments: StoreKind.allCases)
    func stringRoundTrip(kind: StoreKind) throws {
        let texts = [
            "", "plain", "👩‍👩‍👧‍👦 family", "🇫🇷🇯🇵", "e\u{301}", "\u{E9}", "Z\u{335}\u{321}a\u{334}\u{35D}l\u{336}g\u{337}o",
            "\u{0}", "a\u{0}b\u{0}", "line\nbreak\ttab \"quoted\" \\ back", "\u{FEFF}bom", "日本語のテキスト",
            "\u{1F600}\u{FE0F}", "\u{D7FF}\u{E000}\u{10FFFF}", String(repeating: "long ", count: 2_000),
        ]
        let samples = texts.enumerated().map { position, text in
            let sample = TextSpecimen()
            sample.position = position
            sample.text = text
            return sample
        }
        let reloaded = try Reloaded(samples, on: kind, sortBy: [SortDescriptor(\.position)])
        #expect(reloaded.objects.map { Array($0.text.unicodeScalars) } == texts.map { Array($0.unicodeScalars) })
        #expect(reloaded.objects.map(\.text.utf8.count) == texts.map(\.utf8.count))
    }

    @Test("Optionals of every scalar type survive as nil and as a value", arguments: StoreKind.allCases)
    func optionalRoundTrip(kind: StoreKind) throws {
        let empty = OptionalSpecimen()
        empty.position = 0
        let full = OptionalSpecimen()
        full.position = 1
        full.bool = false
        full.int = 0
        full.int8 = -1
        full.uint64 = .max
        full.double = -2.5
        full.float = 0.25
        full.string = ""
        full.date = Date(timeIntervalSinceReferenceDate: -1.5)
        full.data = Data()
        full.blob = Data([1, 2, 3])
        full.uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        full.url = URL(string: "https://example.com")
        full.decimal = Decimal(string: "-0.5")
        // Set and cleared again: nil is written, not just left at the default.
        let cleared = OptionalSpecimen()
        cleared.position = 2
        cleared.string = "temporary"
        cleared.string = nil
        cleared.date = .now
        cleared.date = nil

        let reloaded = try Reloaded([empty, full, cleared], on: kind, sortBy: [SortDescriptor(\.position)])
        try #require(reloaded.objects.count == 3)
        for copy in [reloaded.objects[0], reloaded.objects[2]] {
            #expect(copy.bool == nil && copy.int == nil && copy.int8 == nil && copy.uint64 == nil)
            #expect(copy.double == nil && copy.float == nil && copy.string == nil && copy.date == nil)
            #expect(copy.data == nil && copy.blob == nil && copy.uuid == nil && copy.url == nil && copy.decimal == nil)
        }
        let copy = reloaded.objects[1]
        #expect(copy.bool == false)
        #expect(copy.int == 0)
        #expect(copy.int8 == -1)
        #expect(copy.uint64 == .max)
        #expect(copy.double == -2.5)
        #expect(copy.float == 0.25)
        #expect(copy.string == "")
        #expect(copy.date == Date(timeIntervalSinceReferenceDate: -1.5))
        #expect(copy.data == Data())
        #expect(copy.blob == Data([1, 2, 3]))
        #expect(copy.uuid == UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(copy.url == URL(string: "https://example.com"))
        #expect(copy.decimal == Decimal(string: "-0.5"))
    }

    @Test("Arrays and string-keyed dictionaries survive, empty and full", arguments: StoreKind.allCases)
    func collectionRoundTrip(kind: StoreKind) throws {
        let empty = CollectionSpecimen()
        empty.position = 0
        let full = CollectionSpecimen()
        full.position = 1
        full.bools = [true, false, true]
        full.ints = [.min, -1, 0, 1, .max]
        full.uint8s = [0, 255]
        full.doubles = [-1.5, 0, .infinity]
        full.strings = ["", "b", "a", "🦊", "a"]
        full.dates = [.distantPast, Date(timeIntervalSinceReferenceDate: 0.001), .distantFuture]
        full.datas = [Data(), Data([0]), Data([1, 2])]
        full.uuids = [UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!, UUID()]
        full.urls = [URL(string: "https://example.com/x")!, URL(string: "ftp://host/file")!]
        full.decimals = [Decimal(string: "1.5")!, Decimal(string: "-0.000001")!]
        full.optionalInts = [1, nil, 3, nil]
        full.optionalStrings = ["only"]
        full.matrix = [[1, 2], [], [3]]
        full.counts = ["apples": 3, "pears": 0, "": -1]
        full.labels = ["k": "v", "emoji 🦊": "\u{0}"]
        full.deadlines = ["due": Date(timeIntervalSinceReferenceDate: 123.456)]
        full.sparse = ["set": 1, "unset": nil]
        full.groups = ["fruit": ["apple", "pear"], "none": []]
        full.attachments = ["bytes": Data([0xDE, 0xAD, 0xBE, 0xEF])]

        let reloaded = try Reloaded([empty, full], on: kind, sortBy: [SortDescriptor(\.position)])
        try #require(reloaded.objects.count == 2)
        let none = reloaded.objects[0]
        #expect(none.bools.isEmpty && none.ints.isEmpty && none.strings.isEmpty && none.dates.isEmpty)
        #expect(none.optionalStrings == nil && none.matrix.isEmpty && none.counts.isEmpty && none.sparse.isEmpty)
        let copy = reloaded.objects[1]
        #expect(copy.bools == [true, false, true])
        #expect(copy.ints == [.min, -1, 0, 1, .max])
        #expect(copy.uint8s == [0, 255])
        #expect(copy.doubles == [-1.5, 0, .infinity])
        #expect(copy.strings == ["", "b", "a", "🦊", "a"], "order and duplicates are kept")
        #expect(copy.dates == full.dates)
        #expect(copy.datas == [Data(), Data([0]), Data([1, 2])])
        #expect(copy.uuids == full.uuids)
        #expect(copy.urls.map(\.absoluteString) == ["https://example.com/x", "ftp://host/file"])
        #expect(copy.decimals == [Decimal(string: "1.5")!, Decimal(string: "-0.000001")!])
        #expect(copy.optionalInts == [1, nil, 3, nil])
        #expect(copy.optionalStrings == ["only"])
        #expect(copy.matrix == [[1, 2], [], [3]])
        #expect(copy.counts == ["apples": 3, "pears": 0, "": -1])
        #expect(copy.labels == ["k": "v", "emoji 🦊": "\u{0}"])
        #expect(copy.deadlines == ["due": Date(timeIntervalSinceReferenceDate: 123.456)])
        #expect(copy.sparse.count == 2 && copy.sparse["set"] == .some(1) && copy.sparse["unset"] == .some(nil),
                "a nil value stays a key with a nil value")
        #expect(copy.groups == ["fruit": ["apple", "pear"], "none": []])
        #expect(copy.attachments == ["bytes": Data([0xDE, 0xAD, 0xBE, 0xEF])])
    }

    @Test("Enums are stored by raw value, Codable structs through their encoding", arguments: StoreKind.allCases)
    func customValueRoundTrip(kind: StoreKind) throws {
        typealias Location = CustomValueSpecimen.Location
        let summit = Location(name: "Summit", coordinate: .init(latitude: 45.832_622, longitude: 6.865_174),
                              altitude: 4_808.73, tags: ["peak", "snow"],
                              visitedAt: Date(timeIntervalSinceReferenceDate: 700_000_000.5))
        let hut = Location(name: "Hut", coordinate: .init(latitude: -0.5, longitude: 179.999),
                           altitude: nil, tags: [], visitedAt: .distantPast)
        let defaults = CustomValueSpecimen()
        defaults.position = 0
        let set = CustomValueSpecimen()
        set.position = 1
        set.priority = .high
        set.level = .top
        set.optionalPriority = .low
        set.priorities = [.high, .low, .high]
        set.prioritiesByName = ["mine": .low, "yours": .normal]
        set.location = summit
        set.optionalLocation = hut
        set.route = [hut, summit, hut]

        let reloaded = try Reloaded([defaults, set], on: kind, sortBy: [SortDescriptor(\.position)])
        try #require(reloaded.objects.count == 2)
        let first = reloaded.objects[0]
        #expect(first.priority == .normal && first.level == .ground && first.optionalPriority == nil)
        #expect(first.priorities.isEmpty && first.prioritiesByName.isEmpty)
        #expect(first.location == CustomValueSpecimen.origin && first.optionalLocation == nil && first.route.isEmpty)
        let copy = reloaded.objects[1]
        #expect(copy.priority == .high)
        #expect(copy.level == .top)
        #expect(copy.optionalPriority == .low)
        #expect(copy.priorities == [.high, .low, .high])
        #expect(copy.prioritiesByName == ["mine": .low, "yours": .normal])
        #expect(copy.location == summit)
        #expect(copy.location.altitude == 4_808.73 && copy.optionalLocation?.altitude == nil,
                "an optional field of a Codable struct survives as a value and as nil")
        #expect(copy.optionalLocation == hut)
        #expect(copy.route == [hut, summit, hut])

        // Stored as the raw value, so a store (and an index) sees "high" and 99, not an encoding.
        let row = try #require(reloaded.container.store.rows(for: [copy.persistentModelID]).first ?? nil)
        let entity = try #require(reloaded.container.schema.entity(named: "CustomValueSpecimen"))
        #expect(row.attributes[try #require(entity.attributeIndex(named: "priority"))] == .string("high"))
        #expect(row.attributes[try #require(entity.attributeIndex(named: "level"))] == .int(99))
        #expect(row.attributes[try #require(entity.attributeIndex(named: "priorities"))]
                == .array([.string("high"), .string("low"), .string("high")]))
    }

    @Test("The schema records each attribute's type", arguments: StoreKind.allCases)
    func attributeTypes(kind: StoreKind) throws {
        let container = try kind.makeContainer([ScalarSpecimen.self, OptionalSpecimen.self, CollectionSpecimen.self,
                                                CustomValueSpecimen.self])
        func type(_ entity: String, _ attribute: String) -> String? {
            container.schema.entity(named: entity)?.attribute(named: attribute)?.type.description
        }
        #expect(type("ScalarSpecimen", "bool") == "Bool")
        #expect(type("ScalarSpecimen", "int") == "Int")
        #expect(type("ScalarSpecimen", "int8") == "Int8")
        #expect(type("ScalarSpecimen", "uint64") == "UInt64")
        #expect(type("ScalarSpecimen", "float") == "Float")
        #expect(type("ScalarSpecimen", "decimal") == "Decimal")
        #expect(type("ScalarSpecimen", "url") == "URL")
        #expect(type("OptionalSpecimen", "date") == "Date?")
        #expect(type("OptionalSpecimen", "uuid") == "UUID?")
        #expect(type("CollectionSpecimen", "strings") == "[String]")
        #expect(type("CollectionSpecimen", "optionalInts") == "[Int?]")
        #expect(type("CollectionSpecimen", "optionalStrings") == "[String]?")
        #expect(type("CollectionSpecimen", "matrix") == "[[Int]]")
        #expect(type("CollectionSpecimen", "counts") == "[String: Int]")
        #expect(type("CollectionSpecimen", "sparse") == "[String: Int?]")
        #expect(type("CollectionSpecimen", "groups") == "[String: [String]]")
        #expect(type("CustomValueSpecimen", "priority") == "Priority(String)")
        #expect(type("CustomValueSpecimen", "level") == "Level(Int)")
        #expect(type("CustomValueSpecimen", "optionalPriority") == "Priority(String)?")
        #expect(type("CustomValueSpecimen", "priorities") == "[Priority(String)]")
        #expect(type("CustomValueSpecimen", "prioritiesByName") == "[String: Priority(String)]")
        #expect(type("CustomValueSpecimen", "location") == "codable Location")
        #expect(type("CustomValueSpecimen", "optionalLocation") == "codable Location?")
        #expect(type("CustomValueSpecimen", "route") == "[codable Location]")

        let scalars = try #require(container.schema.entity(named: "ScalarSpecimen"))
        #expect(scalars.attributes.map(\.name) == [
            "position", "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32",
            "uint64", "double", "float", "string", "date", "data", "blob", "uuid", "url", "decimal",
        ], "attributes in declaration order")
        #expect(scalars.relationships.isEmpty)
        #expect(container.schema.entity(named: "OptionalSpecimen")?.attributes.dropFirst().allSatisfy(\.isOptional)
                == true)
    }

    // MARK: Defaults

    @Test("A constant default is recorded in the schema; a generated one is marked and recorded as nil")
    func defaultValues() throws {
        let entity = try #require(try Schema([DefaultsSpecimen.self]).entity(named: "DefaultsSpecimen"))
        func attribute(_ name: String) throws -> Schema.Attribute { try #require(entity.attribute(named: name)) }

        #expect(try attribute("title").defaultValue == .string("Untitled"))
        #expect(try attribute("rank").defaultValue == .int(7))
        #expect(try attribute("ratio").defaultValue == .double(0.5))
        #expect(try attribute("tags").defaultValue == .array([.string("new")]))
        #expect(try attribute("priority").defaultValue == .string("high"))
        #expect(try attribute("location").defaultValue == (try StoredValueEncoder().encode(CustomValueSpecimen.origin)))
        #expect(try attribute("note").defaultValue == .null)
        #expect(try attribute("fixedID").defaultValue
                == .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!))
        for constant in ["title", "rank", "ratio", "tags", "priority", "location", "note", "fixedID"] {
            #expect(try attribute(constant).hasGeneratedDefault == false, "\(constant)")
        }
        for generated in ["id", "createdAt"] {
            #expect(try attribute(generated).hasGeneratedDefault, "\(generated)")
            #expect(try attribute(generated).defaultValue == nil, "\(generated)")
        }

        let first = DefaultsSpecimen(), second = DefaultsSpecimen()
        #expect(first.id != second.id, "UUID() is evaluated for each object")
        #expect(first.createdAt <= second.createdAt)
        #expect(first.title == "Untitled" && first.rank == 7 && first.tags == ["new"] && first.note == nil)
    }

    @Test("An object saved without setting anything reads its defaults elsewhere", arguments: StoreKind.allCases)
    func defaultsAreSaved(kind: StoreKind) throws {
        let before = Date.now
        let original = DefaultsSpecimen()
        let reloaded = try Reloaded([original], on: kind, sortBy: [SortDescriptor(\.rank)])
        let copy = try #require(reloaded.objects.first)
        #expect(copy.id == original.id, "the generated value is saved, not generated again")
        #expect(copy.createdAt == original.createdAt && copy.createdAt >= before)
        #expect(copy.title == "Untitled" && copy.rank == 7 && copy.ratio == 0.5 && copy.tags == ["new"])
        #expect(copy.priority == .high && copy.location == CustomValueSpecimen.origin && copy.note == nil)
        #expect(copy.fixedID == UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
    }

    @Test("Objects loaded from a store never evaluate declared defaults", arguments: StoreKind.allCases)
    func loadingSkipsDefaults(kind: StoreKind) throws {
        let counter = CountedDefaultSpecimen.Counter()
        try CountedDefaultSpecimen.$counter.withValue(counter) {
            let container = try kind.makeContainer([CountedDefaultSpecimen.self])
            let writer = ModelContext(container)
            let made = counter.value
            let objects = (0..<25).map { index in
                let object = CountedDefaultSpecimen()
                object.label = "#\(index)"
                return object
            }
            #expect(counter.value == made + 25, "each new object evaluates its default once")
            let stamps = objects.map(\.stamp)
            #expect(Set(stamps).count == 25)
            for object in objects { writer.insert(object) }
            try writer.save()

            let saved = counter.value
            let reader = ModelContext(container)
            let loaded = try reader.fetch(FetchDescriptor<CountedDefaultSpecimen>(sortBy: [SortDescriptor(\.stamp)]))
            #expect(loaded.count == 25)
            #expect(loaded.map(\.stamp) == stamps.sorted(), "loaded objects have their stored values")
            let lookup = ModelContext(container)
            let byIdentifier = try #require(lookup.model(for: objects[3].persistentModelID) as? CountedDefaultSpecimen)
            #expect(byIdentifier.stamp == objects[3].stamp)
            #expect(counter.value == saved, "fetching 26 objects evaluated the default \(counter.value - saved) times")
        }
    }

    @Test("A model created by a transient property of a model being loaded evaluates its own defaults",
          arguments: StoreKind.allCases)
    func nestedConstructionWhileLoading(kind: StoreKind) throws {
        let container = try kind.makeContainer([ScratchHolder.self, ScratchPage.self])
        let writer = ModelContext(container)
        let holders = (0..<3).map { ScratchHolder(name: "#\($0)") }
        #expect(Set(holders.map(\.scratch.pageID)).count == 3, "made by hand, each page has its own id")
        for holder in holders { writer.insert(holder) }
        try writer.save()

        let reader = ModelContext(container)
        let loaded = try reader.fetch(FetchDescriptor<ScratchHolder>(sortBy: [SortDescriptor(\.name)]))
        #expect(loaded.map(\.name) == ["#0", "#1", "#2"])
        #expect(loaded.allSatisfy { $0.scratch.label == "fresh" && $0.scratch.modelContext == nil })
        #expect(Set(loaded.map(\.scratch.pageID)).count == 3, "each loaded holder's page has its own id")
        let page = try #require(loaded.first?.scratch)
        reader.insert(page)
        try reader.save()
        let check = ModelContext(container)
        let row = try #require(try check.fetch(FetchDescriptor<ScratchPage>()).first { $0.persistentModelID
            == page.persistentModelID })
        #expect(row.pageID == page.pageID)
        #expect(check.readFailures.isEmpty, "the saved page has a stored id")
    }

    // MARK: Options

    @Test("Attribute options, original names, unique constraints and indexes appear in the schema")
    func attributeOptions() throws {
        let entity = try #require(try Schema([OptionsSpecimen.self]).entity(named: "OptionsSpecimen"))
        func attribute(_ name: String) throws -> Schema.Attribute { try #require(entity.attribute(named: name)) }

        #expect(try attribute("code").has(.unique))
        #expect(try attribute("code").options == [.unique])
        #expect(try attribute("photo").has(.externalStorage) && attribute("photo").type == .data)
        #expect(try attribute("thumbnail").has(.externalStorage) && attribute("thumbnail").type == .optional(.data))
        #expect(try attribute("serial").has(.preserveValueOnDeletion) && !attribute("serial").has(.unique))
        #expect(try attribute("content").originalName == "body" && attribute("content").options.isEmpty)
        #expect(try attribute("username").options == [.preserveValueOnDeletion, .unique], "options sorted by name")
        #expect(try attribute("username").originalName == "handle")
        #expect(try attribute("shelf").options.isEmpty && attribute("shelf").originalName == nil)
        #expect(entity.originalName == "OptionsSample")
        #expect(entity.uniqueConstraints == [["code"], ["username"], ["shelf", "slot"]])
        #expect(entity.indexes == [["serial"], ["shelf", "slot"]])
    }

    // MARK: Transient properties

    @Test("Transient properties are not in the schema, not saved, and not changes", arguments: StoreKind.allCases)
    func transientProperties(kind: StoreKind) throws {
        let container = try kind.makeContainer([TransientSpecimen.self])
        let entity = try #require(container.schema.entity(named: "TransientSpecimen"))
        #expect(entity.attributes.map(\.name) == ["name"])
        #expect(entity.relationships.isEmpty)

        let writer = ModelContext(container)
        let original = TransientSpecimen(name: "kept")
        original.scratch = 41
        original.cache = "filled"
        writer.insert(original)
        try writer.save()
        #expect(!original.hasChanges && !writer.hasChanges)
        original.scratch = 42
        original.cache = "refilled"
        #expect(!original.hasChanges, "changing a transient property is not a change")
        #expect(!writer.hasChanges && writer.changedModelsArray.isEmpty)
        #expect(original.scratch == 42 && original.cache == "refilled", "the object keeps them in memory")

        let reader = ModelContext(container)
        let copy = try #require(try reader.fetch(FetchDescriptor<TransientSpecimen>()).first)
        #expect(copy.name == "kept" && copy.shouted == "KEPT")
        #expect(copy.scratch == 0 && copy.cache == "empty", "a @Transient property starts at its initial value")
    }

    // MARK: Relationships

    @Test("Relationship declarations appear in the schema with destination, inverse, rule and bounds")
    func relationshipDeclarations() throws {
        let schema = try Schema([Expedition.self])
        #expect(schema.entities.map(\.name) == ["Camp", "Climber", "Expedition"])
        let expedition = try #require(schema.entity(named: "Expedition"))
        let camp = try #require(schema.entity(named: "Camp"))
        let climber = try #require(schema.entity(named: "Climber"))
        #expect(expedition.relationships.map(\.name) == ["camps", "climbers", "parent", "legs"])

        #expect(expedition.relationship(named: "camps") == Schema.Relationship(
            name: "camps", destination: "Camp", isToMany: true, inverse: "expedition", deleteRule: .cascade))
        #expect(camp.relationship(named: "expedition") == Schema.Relationship(
            name: "expedition", destination: "Expedition", isToMany: false, inverse: "camps",
            deleteRule: .nullify, minimumModelCount: 1))
        #expect(camp.relationship(named: "warden") == Schema.Relationship(
            name: "warden", destination: "Climber", isToMany: false, inverse: nil, deleteRule: .noAction),
                "a relationship nothing mirrors has no inverse")

        // Many-to-many, inverse inferred: neither side declares it.
        let climbers = try #require(expedition.relationship(named: "climbers"))
        #expect(climbers.destination == "Climber" && climbers.isToMany && climbers.inverse == "expeditions")
        #expect(climbers.minimumModelCount == 0 && climbers.maximumModelCount == 8)
        let expeditions = try #require(climber.relationship(named: "expeditions"))
        #expect(expeditions.destination == "Expedition" && expeditions.isToMany && expeditions.inverse == "climbers")
        #expect(expeditions.minimumModelCount == 0 && expeditions.maximumModelCount == nil)

        // Self-referential: declared on one side, recorded on both.
        #expect(expedition.relationship(named: "legs") == Schema.Relationship(
            name: "legs", destination: "Expedition", isToMany: true, inverse: "parent", deleteRule: .cascade))
        #expect(expedition.relationship(named: "parent") == Schema.Relationship(
            name: "parent", destination: "Expedition", isToMany: false, inverse: "legs", deleteRule: .nullify))
    }

    @Test("An inferred inverse is maintained like a declared one", arguments: StoreKind.allCases)
    func inferredInverseIsMaintained(kind: StoreKind) throws {
        let container = try kind.makeContainer([Expedition.self])
        let context = ModelContext(container)
        let everest = Expedition(name: "Everest"), k2 = Expedition(name: "K2")
        let tenzing = Climber(name: "Tenzing")
        context.insert(everest)
        context.insert(k2)
        tenzing.expeditions = [everest, k2]
        #expect(everest.climbers.map(\.name) == ["Tenzing"] && k2.climbers.map(\.name) == ["Tenzing"])
        k2.climbers.removeAll()
        #expect(tenzing.expeditions.map(\.name) == ["Everest"])
        let base = Camp(altitude: 5_364)
        base.expedition = everest
        #expect(everest.camps.map(\.altitude) == [5_364])
        try context.save()

        let reader = ModelContext(container)
        let loaded = try reader.fetch(FetchDescriptor<Climber>())
        #expect(loaded.map { $0.expeditions.map(\.name) } == [["Everest"]])
        #expect(try reader.fetch(FetchDescriptor<Camp>()).map { $0.expedition?.name } == ["Everest"])
    }

    // MARK: Change tracking by setters

    @Test("A setter on a saved object marks it changed; setting the same value again does not",
          arguments: StoreKind.allCases)
    func settersMarkChanges(kind: StoreKind) throws {
        let container = try kind.makeContainer([ScalarSpecimen.self])
        let context = ModelContext(container)
        let first = ScalarSpecimen(), second = ScalarSpecimen()
        first.position = 1
        first.string = "same"
        first.data = Data([1, 2])
        first.date = Date(timeIntervalSinceReferenceDate: 10.5)
        second.position = 2
        context.insert(first)
        context.insert(second)
        try context.save()
        #expect(!context.hasChanges && !first.hasChanges && context.changedModelsArray.isEmpty)

        first.string = "same"
        first.position = 1
        first.data = Data([1, 2])
        first.date = Date(timeIntervalSinceReferenceDate: 10.5)
        second.uuid = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        #expect(!first.hasChanges && !second.hasChanges, "equal values are not changes")
        #expect(!context.hasChanges && context.changedModelsArray.isEmpty)

        first.string = "different"
        #expect(first.hasChanges && !second.hasChanges)
        #expect(context.hasChanges)
        #expect(context.changedModelsArray.map(\.persistentModelID) == [first.persistentModelID])
        #expect(context.insertedModelsArray.isEmpty)
        second.int8 = 1
        second.int8 = 2
        #expect(context.changedModelsArray.map(\.persistentModelID)
                == [first.persistentModelID, second.persistentModelID], "each object once, in order of change")
        try context.save()
        #expect(!context.hasChanges && !first.hasChanges && !second.hasChanges)
        let reader = ModelContext(container)
        let saved = try reader.fetch(FetchDescriptor<ScalarSpecimen>(sortBy: [SortDescriptor(\.position)]))
        #expect(saved.map(\.string) == ["different", ""] && saved.map(\.int8) == [0, 2])
    }

    @Test("A relationship setter marks both sides changed; the same targets again do not",
          arguments: StoreKind.allCases)
    func relationshipSettersMarkChanges(kind: StoreKind) throws {
        let container = try kind.makeContainer([Expedition.self])
        let context = ModelContext(container)
        let everest = Expedition(name: "Everest"), tenzing = Climber(name: "Tenzing")
        let hillary = Climber(name: "Hillary")
        context.insert(everest)
        everest.climbers = [tenzing]
        context.insert(hillary)
        try context.save()

        everest.climbers = [tenzing]
        tenzing.expeditions = [everest]
        #expect(!context.hasChanges, "the same targets are not a change")
        everest.climbers.append(hillary)
        #expect(everest.hasChanges && hillary.hasChanges, "the inverse side changed too")
        #expect(!tenzing.hasChanges)
        #expect(Set(context.changedModelsArray.map(\.persistentModelID))
                == [everest.persistentModelID, hillary.persistentModelID])
    }

    @Test("Setting NaN over a stored NaN is not a change", arguments: StoreKind.allCases)
    func nanIsNotAChange(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([FloatingSpecimen.self]))
        let sample = FloatingSpecimen()
        sample.double = .nan
        context.insert(sample)
        try context.save()
        #expect(!sample.hasChanges)
        sample.double = .nan
        #expect(!sample.hasChanges)
        #expect(!context.hasChanges)
    }

    @Test("A string set to a canonically equivalent form is stored as given", arguments: StoreKind.allCases)
    func canonicallyEquivalentStrings(kind: StoreKind) throws {
        let container = try kind.makeContainer([TextSpecimen.self])
        let context = ModelContext(container)
        let sample = TextSpecimen()
        sample.text = "caf\u{E9}"
        context.insert(sample)
        try context.save()
        sample.text = "cafe\u{301}"
        #expect(sample.text.unicodeScalars.count == 5, "the decomposed form reads back from the object")
        #expect(sample.hasChanges)
        try context.save()
        let reader = ModelContext(container)
        let copy = try #require(try reader.fetch(FetchDescriptor<TextSpecimen>()).first)
        #expect(Array(copy.text.unicodeScalars) == Array("cafe\u{301}".unicodeScalars))
    }
}
