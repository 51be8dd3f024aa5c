import Foundation
import NoteKit
import Synchronization

// Models for ModelDeclarationTests and SchemaTests: one per declaration feature, and, in namespaces, the invalid
// declarations the schema must refuse. Types nested in a model or a namespace enum keep their short name as the
// entity or attribute type name (`Priority`, `Location`), so they cannot clash with other tests' models.

// MARK: - Every supported attribute type

/// Every scalar attribute type, each with a constant default.
final class ScalarSpecimen: PersistentModel {
    @Attribute var position = 0
    @Attribute var bool = false
    @Attribute var int = 0
    @Attribute var int8: Int8 = 0
    @Attribute var int16: Int16 = 0
    @Attribute var int32: Int32 = 0
    @Attribute var int64: Int64 = 0
    @Attribute var uint: UInt = 0
    @Attribute var uint8: UInt8 = 0
    @Attribute var uint16: UInt16 = 0
    @Attribute var uint32: UInt32 = 0
    @Attribute var uint64: UInt64 = 0
    @Attribute var double = 0.0
    @Attribute var float: Float = 0
    @Attribute var string = ""
    @Attribute var date = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var data = Data()
    @Attribute(.externalStorage) var blob = Data()
    @Attribute var uuid = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    @Attribute var url = URL(string: "about:blank")!
    @Attribute var decimal = Decimal(0)
    required init() {}
}

/// Floating-point edge values, one per object.
final class FloatingSpecimen: PersistentModel {
    @Attribute var position = 0
    @Attribute var double = 0.0
    @Attribute var float: Float = 0
    required init() {}
}

/// Text edge values, one per object.
final class TextSpecimen: PersistentModel {
    @Attribute var position = 0
    @Attribute var text = ""
    required init() {}
}

/// An optional of every scalar type, nil by default.
final class OptionalSpecimen: PersistentModel {
    @Attribute var position = 0
    @Attribute var bool: Bool?
    @Attribute var int: Int?
    @Attribute var int8: Int8?
    @Attribute var uint64: UInt64?
    @Attribute var double: Double?
    @Attribute var float: Float?
    @Attribute var string: String?
    @Attribute var date: Date?
    @Attribute var data: Data?
    @Attribute(.externalStorage) var blob: Data?
    @Attribute var uuid: UUID?
    @Attribute var url: URL?
    @Attribute var decimal: Decimal?
    required init() {}
}

/// Arrays and string-keyed dictionaries of scalar types.
final class CollectionSpecimen: PersistentModel {
    @Attribute var position = 0
    @Attribute var bools: [Bool] = []
    @Attribute var ints: [Int] = []
    @Attribute var uint8s: [UInt8] = []
    @Attribute var doubles: [Double] = []
    @Attribute var strings: [String] = []
    @Attribute var dates: [Date] = []
    @Attribute var datas: [Data] = []
    @Attribute var uuids: [UUID] = []
    @Attribute var urls: [URL] = []
    @Attribute var decimals: [Decimal] = []
    @Attribute var optionalInts: [Int?] = []
    @Attribute var optionalStrings: [String]?
    @Attribute var matrix: [[Int]] = []
    @Attribute var counts: [String: Int] = [:]
    @Attribute var labels: [String: String] = [:]
    @Attribute var deadlines: [String: Date] = [:]
    @Attribute var sparse: [String: Int?] = [:]
    @Attribute var groups: [String: [String]] = [:]
    @Attribute var attachments: [String: Data] = [:]
    required init() {}
}

/// `RawRepresentable` and `Codable` attribute types, and containers of them.
final class CustomValueSpecimen: PersistentModel {
    enum Priority: String, Codable, CaseIterable {
        case low, normal, high
    }

    enum Level: Int, Codable {
        case ground = 0, first = 1, top = 99
    }

    struct Coordinate: Codable, Hashable {
        var latitude: Double
        var longitude: Double
    }

    struct Location: Codable, Hashable {
        var name: String
        var coordinate: Coordinate
        var altitude: Double?
        var tags: [String]
        var visitedAt: Date
    }

    static let origin = Location(name: "origin", coordinate: Coordinate(latitude: 0, longitude: 0), altitude: nil,
                                 tags: [], visitedAt: Date(timeIntervalSinceReferenceDate: 0))

    @Attribute var position = 0
    @Attribute var priority = Priority.normal
    @Attribute var level = Level.ground
    @Attribute var optionalPriority: Priority?
    @Attribute var priorities: [Priority] = []
    @Attribute var prioritiesByName: [String: Priority] = [:]
    @Attribute var location = CustomValueSpecimen.origin
    @Attribute var optionalLocation: Location?
    @Attribute var route: [Location] = []
    required init() {}
}

// MARK: - Defaults, options, transient properties

/// Constant and generated defaults.
final class DefaultsSpecimen: PersistentModel {
    @Attribute var id = UUID()
    @Attribute var createdAt = Date.now
    @Attribute var title = "Untitled"
    @Attribute var rank = 7
    @Attribute var ratio = 0.5
    @Attribute var tags = ["new"]
    @Attribute var priority = CustomValueSpecimen.Priority.high
    @Attribute var location = CustomValueSpecimen.origin
    @Attribute var note: String?
    @Attribute var fixedID = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
    required init() {}
}

/// Every attribute option, a compound unique constraint, indexes and an original entity name.
final class OptionsSpecimen: PersistentModel {
    @Attribute(.unique) var code = ""
    @Attribute(.externalStorage) var photo = Data()
    @Attribute(.externalStorage) var thumbnail: Data?
    @Attribute(.preserveValueOnDeletion) var serial = 0
    @Attribute(originalName: "body") var content = ""
    @Attribute(.unique, .preserveValueOnDeletion, originalName: "handle") var username = ""
    @Attribute var shelf = ""
    @Attribute var slot = 0
    static var originalEntityName: String? { "OptionsSample" }
    static var uniqueConstraints: [[PartialKeyPath<OptionsSpecimen>]] { [[\.shelf, \.slot]] }
    static var indexes: [[PartialKeyPath<OptionsSpecimen>]] { [[\.serial], [\.shelf, \.slot]] }
    required init() {}
}

/// Properties that are never persisted.
final class TransientSpecimen: PersistentModel {
    @Attribute var name = ""
    @Transient var scratch = 0
    @Transient var cache = "empty"
    var shouted: String { name.uppercased() }
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// A model whose default counts its evaluations, to show that loading from a store never evaluates it.
///
/// The counter is task-local, so parallel tests each count their own evaluations only.
final class CountedDefaultSpecimen: PersistentModel {
    final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func next() -> Int { count.withLock { $0 += 1; return $0 } }
    }

    @TaskLocal static var counter: Counter?

    static func nextStamp() -> Int { counter?.next() ?? -1 }

    @Attribute var stamp = CountedDefaultSpecimen.nextStamp()
    @Attribute var label = ""
    required init() {}
}

/// A model that a transient property of another model creates: a new one each time its holder is created,
/// including when the holder is loaded from a store.
final class ScratchPage: PersistentModel {
    @Attribute var pageID = UUID()
    @Attribute var label = "fresh"
    @Attribute var startedAt = Date.now
    required init() {}
}

final class ScratchHolder: PersistentModel {
    @Attribute var name = ""
    @Transient var scratch = ScratchPage()
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

// MARK: - Relationship declarations

/// To-many with a declared inverse and cascade; many-to-many with an inferred inverse; self-referential.
final class Expedition: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .cascade, inverse: \Camp.expedition) var camps: [Camp] = []
    @Relationship(maximumModelCount: 8) var climbers: [Climber] = []
    @Relationship var parent: Expedition?
    @Relationship(deleteRule: .cascade, inverse: \Expedition.parent) var legs: [Expedition] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// A required to-one back to its expedition, and a to-one without an inverse.
final class Camp: PersistentModel {
    @Attribute var altitude = 0
    @Relationship(minimumModelCount: 1) var expedition: Expedition?
    @Relationship(deleteRule: .noAction) var warden: Climber?
    required init() {}
    convenience init(altitude: Int) {
        self.init()
        self.altitude = altitude
    }
}

/// The other side of `Expedition.climbers`; neither side names the other as its inverse.
final class Climber: PersistentModel {
    @Attribute var name = ""
    @Attribute var rating = 0.0
    @Relationship var expeditions: [Expedition] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

// MARK: - Declarations the schema refuses (SchemaTests)

/// `Team.players` names `Player.team` as its inverse, but `Player.team` names `Team.captain`.
enum MisdirectedInverse {
    final class Team: PersistentModel {
        @Relationship(inverse: \Player.team) var players: [Player] = []
        @Relationship var captain: Player?
        required init() {}
    }

    final class Player: PersistentModel {
        @Relationship(inverse: \Team.captain) var team: Team?
        required init() {}
    }
}

/// `Garden.plants` names `Plant.bed` as its inverse, which points at `Bed`, not `Garden`.
enum MismatchedInverse {
    final class Garden: PersistentModel {
        @Relationship(inverse: \Plant.bed) var plants: [Plant] = []
        required init() {}
    }

    final class Plant: PersistentModel {
        @Relationship var bed: Bed?
        required init() {}
    }

    final class Bed: PersistentModel {
        @Attribute var label = ""
        required init() {}
    }
}

/// `Kennel.dogs` names an attribute of `Dog` as its inverse.
enum AttributeAsInverse {
    final class Kennel: PersistentModel {
        @Relationship(inverse: \Dog.name) var dogs: [Dog] = []
        required init() {}
    }

    final class Dog: PersistentModel {
        @Attribute var name = ""
        required init() {}
    }
}

/// Two undeclared relationships from `Route` to `Stop`, and one back: which one mirrors `Stop.routes`?
enum AmbiguousInverse {
    final class Route: PersistentModel {
        @Relationship var origin: Stop?
        @Relationship var terminus: Stop?
        required init() {}
    }

    final class Stop: PersistentModel {
        @Relationship var routes: [Route] = []
        required init() {}
    }
}

/// Two relationships of `Chapter` both claim `Volume.chapters` as their inverse.
enum DoublyClaimedInverse {
    final class Volume: PersistentModel {
        @Relationship var chapters: [Chapter] = []
        required init() {}
    }

    final class Chapter: PersistentModel {
        @Relationship(inverse: \Volume.chapters) var volume: Volume?
        @Relationship(inverse: \Volume.chapters) var firstVolume: Volume?
        required init() {}
    }
}

/// Two model types whose entity name is `Entry`: one by its type name, one by `entityName`.
enum FirstCatalog {
    final class Entry: PersistentModel {
        @Attribute var title = ""
        required init() {}
    }
}

enum SecondCatalog {
    final class Entry: PersistentModel {
        @Attribute var label = ""
        required init() {}
    }

    final class Listing: PersistentModel {
        static var entityName: String { "Entry" }
        @Attribute var label = ""
        required init() {}
    }
}

/// `heading` was renamed from `title`, but `title` is still a property.
final class RenamedOntoExisting: PersistentModel {
    @Attribute var title = ""
    @Attribute(originalName: "title") var heading = ""
    required init() {}
}

/// Two properties claim the same original name.
final class RenamedTwice: PersistentModel {
    @Attribute(originalName: "name") var firstName = ""
    @Attribute(originalName: "name") var lastName = ""
    required init() {}
}

/// Neither `Codable` nor a `PersistentValue`.
final class OpaqueHandle {
    let descriptor: Int32 = 3
}

struct PlainPoint {
    var x = 0
    var y = 0
}

final class HoldsAClass: PersistentModel {
    @Attribute var name = ""
    @Attribute var handle = OpaqueHandle()
    required init() {}
}

final class HoldsANonCodableStruct: PersistentModel {
    @Attribute var point = PlainPoint()
    required init() {}
}

final class HoldsANestedOptional: PersistentModel {
    @Attribute var maybe: Int?? = nil
    required init() {}
}

final class ExternalText: PersistentModel {
    @Attribute(.externalStorage) var body = ""
    required init() {}
}

/// A unique constraint on a to-many relationship.
final class Basket: PersistentModel {
    @Attribute var label = ""
    @Relationship var items: [BasketItem] = []
    static var uniqueConstraints: [[PartialKeyPath<Basket>]] { [[\.items]] }
    required init() {}
}

final class BasketItem: PersistentModel {
    @Attribute var name = ""
    @Relationship var basket: Basket?
    required init() {}
}

/// A unique constraint on a to-one relationship.
final class UniqueOnToOne: PersistentModel {
    @Attribute var name = ""
    @Relationship var target: BoundsTarget?
    static var uniqueConstraints: [[PartialKeyPath<UniqueOnToOne>]] { [[\.name, \.target]] }
    required init() {}
}

/// An index on a to-many relationship.
final class IndexedOnRelationship: PersistentModel {
    @Attribute var name = ""
    @Relationship var targets: [BoundsTarget] = []
    static var indexes: [[PartialKeyPath<IndexedOnRelationship>]] { [[\.targets]] }
    required init() {}
}

/// An index on a computed property, in second position.
final class IndexedOnComputed: PersistentModel {
    @Attribute var name = ""
    var shouted: String { name.uppercased() }
    static var indexes: [[PartialKeyPath<IndexedOnComputed>]] { [[\.name, \.shouted]] }
    required init() {}
}

/// An index on a transient property.
final class IndexedOnTransient: PersistentModel {
    @Attribute var name = ""
    @Transient var scratch = 0
    static var indexes: [[PartialKeyPath<IndexedOnTransient>]] { [[\.scratch]] }
    required init() {}
}

/// A unique constraint on a computed property.
final class UniqueOnComputed: PersistentModel {
    @Attribute var name = ""
    var shouted: String { name.uppercased() }
    static var uniqueConstraints: [[PartialKeyPath<UniqueOnComputed>]] { [[\.shouted]] }
    required init() {}
}

/// An empty compound index.
final class EmptyIndex: PersistentModel {
    @Attribute var name = ""
    static var indexes: [[PartialKeyPath<EmptyIndex>]] { [[]] }
    required init() {}
}

/// Impossible count bounds.
final class InvertedBounds: PersistentModel {
    @Relationship(minimumModelCount: 3, maximumModelCount: 1) var members: [BoundsTarget] = []
    required init() {}
}

final class ToOneWithMaximumTwo: PersistentModel {
    @Relationship(maximumModelCount: 2) var target: BoundsTarget?
    required init() {}
}

final class NegativeMinimum: PersistentModel {
    @Relationship(minimumModelCount: -1) var members: [BoundsTarget] = []
    required init() {}
}

final class BoundsTarget: PersistentModel {
    @Attribute var name = ""
    required init() {}
}

/// Model inheritance, which NoteKit does not support. (`class Base: PersistentModel` does not even compile: a
/// non-final class cannot satisfy `uniqueConstraints`' `Self` requirement. A base that inherits `ModelObject`
/// without conforming is the one way to write it.)
class SpecimenBase: ModelObject {}

final class SpecimenSubclass: SpecimenBase, PersistentModelProtocol {
    @Attribute var name = ""
}

/// Inheritance where the base class declares an attribute too.
class AttributedBase: ModelObject {
    @Attribute var id = 0
}

final class AttributedSubclass: AttributedBase, PersistentModelProtocol {
    @Attribute var name = ""
}

// MARK: - Content hash (SchemaTests)

/// Two declarations of entity `Gauge` that differ by one attribute.
enum GaugeV1 {
    final class Gauge: PersistentModel {
        @Attribute var reading = 0.0
        required init() {}
    }
}

enum GaugeV2 {
    final class Gauge: PersistentModel {
        @Attribute var reading = 0.0
        @Attribute var unit = ""
        required init() {}
    }
}
