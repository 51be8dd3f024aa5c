import Foundation
import NoteKit
import NoteKitNotes

/// A model with an attribute of every kind NoteKit stores, for round trips through a store.
public final class EveryType: PersistentModel {
    public enum Mood: String, Codable, Sendable { case calm, curious, cross }
    public enum Level: Int, Codable, Sendable { case low = 1, high = 9 }
    public struct Place: Codable, Hashable, Sendable {
        public var name: String
        public var latitude: Double
        public var visited: Date?
        public var tags: [String]
        public init(name: String, latitude: Double, visited: Date?, tags: [String]) {
            self.name = name
            self.latitude = latitude
            self.visited = visited
            self.tags = tags
        }
    }

    @Attribute public var bool = false
    @Attribute public var int = 0
    @Attribute public var int8: Int8 = 0
    @Attribute public var int16: Int16 = 0
    @Attribute public var int32: Int32 = 0
    @Attribute public var int64: Int64 = 0
    @Attribute public var uint: UInt = 0
    @Attribute public var uint8: UInt8 = 0
    @Attribute public var uint16: UInt16 = 0
    @Attribute public var uint32: UInt32 = 0
    @Attribute public var uint64: UInt64 = 0
    @Attribute public var double = 0.0
    @Attribute public var float: Float = 0
    @Attribute public var string = ""
    @Attribute public var date = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute public var data = Data()
    @Attribute public var uuid = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    @Attribute public var url = URL(string: "https://example.com")!
    @Attribute public var decimal: Decimal = 0
    @Attribute public var optionalString: String?
    @Attribute public var optionalDate: Date?
    @Attribute public var strings: [String] = []
    @Attribute public var counts: [String: Int] = [:]
    @Attribute public var mood = Mood.calm
    @Attribute public var level: Level?
    @Attribute public var moods: [Mood] = []
    @Attribute public var place = Place(name: "", latitude: 0, visited: nil, tags: [])
    @Attribute public var places: [Place] = []
    @Attribute(.externalStorage) public var blob = Data()
    @Attribute(.externalStorage) public var optionalBlob: Data?

    public required init() {}

    /// Every attribute set to an unusual value (`variant` changes them).
    public static func sample(_ variant: Int) -> EveryType {
        let value = EveryType()
        value.bool = variant % 2 == 0
        value.int = Int.min + variant
        value.int8 = Int8.min
        value.int16 = Int16.max
        value.int32 = Int32.min
        value.int64 = Int64.max - Int64(variant)
        value.uint = UInt.max - UInt(variant)
        value.uint8 = UInt8.max
        value.uint16 = UInt16.max
        value.uint32 = UInt32.max
        value.uint64 = UInt64.max
        value.double = [0.1, -0.0, .nan, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude,
                        Double.leastNormalMagnitude / 4][variant % 8]
        value.float = Float.leastNormalMagnitude * Float(variant + 1)
        value.string = ["", "quote \" backslash \\ newline \n tab \t", "😀 e\u{301} \u{0} \u{7F} \u{2028}",
                        "日本語", String(repeating: "long ", count: 400)][variant % 5]
        value.date = Date(timeIntervalSinceReferenceDate: 786_054_321.123_456_789 + Double(variant))
        value.data = Data((0..<(variant * 37 % 300)).map { UInt8($0 % 256) })
        value.uuid = UUID()
        value.url = URL(string: "https://example.com/path?query=\(variant)&x=%20y#frag")!
        value.decimal = Decimal(string: "3.14159265358979323846")! * Decimal(variant + 1)
        value.optionalString = variant % 3 == 0 ? nil : "present \(variant)"
        value.optionalDate = variant % 2 == 0 ? nil : Date(timeIntervalSinceReferenceDate: -1e9)
        value.strings = ["a", "", "b\u{301}"].shuffled()
        value.counts = ["one": 1, "minus": -1, "": 0]
        value.mood = [.calm, .curious, .cross][variant % 3]
        value.level = variant % 2 == 0 ? .high : nil
        value.moods = [.cross, .calm]
        value.place = Place(name: "Plaza \(variant)", latitude: 48.8566, visited: variant % 2 == 0 ? nil : Date(timeIntervalSinceReferenceDate: 3),
                            tags: ["x", "y"])
        value.places = [value.place, Place(name: "Other", latitude: -33.9, visited: nil, tags: [])]
        value.blob = Data((0..<(1000 + variant)).map { UInt8(($0 * 7 + variant) % 256) })
        value.optionalBlob = variant % 2 == 0 ? nil : Data([1, 2, 3])
        return value
    }

    /// Every attribute's stored form, to compare two objects exactly.
    public var storedValues: [StoredValue] {
        [bool.storedValue, int.storedValue, int8.storedValue, int16.storedValue, int32.storedValue,
         int64.storedValue, uint.storedValue, uint8.storedValue, uint16.storedValue, uint32.storedValue,
         uint64.storedValue, double.storedValue, float.storedValue, string.storedValue, date.storedValue,
         data.storedValue, uuid.storedValue, url.storedValue, decimal.storedValue, optionalString.storedValue,
         optionalDate.storedValue, strings.storedValue, counts.storedValue, .string(mood.rawValue),
         level.map { .int(Int64($0.rawValue)) } ?? .null, .array(moods.map { .string($0.rawValue) }),
         .string(place.name), .double(place.latitude), .array(places.map { .string($0.name) }),
         blob.storedValue, optionalBlob.storedValue]
    }
}

extension Note {
    /// A note with `title`, in no context yet.
    public static func titled(_ title: String) -> Note {
        let note = Note()
        note.title = title
        return note
    }
}
