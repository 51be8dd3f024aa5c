#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The permanent identity of one model object: its entity and a 128-bit key.
///
/// Unlike SwiftData, where an identifier is temporary until the first save and changes then, a NoteKit identifier
/// is assigned when the object is created and never changes: it can be stored, logged, passed to another actor
/// and compared before and after a save. Identifiers are the way models cross actors: pass the identifier, then
/// ask the other side's context for ``ModelContext/model(for:)``.
///
/// Keys are made of a random per-process prefix and a counter, so they are unique across processes without
/// coordination, cheap to create, and ordered by creation within a process.
public struct PersistentIdentifier: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The entity's name, interned: every identifier of an entity shares one, so an identifier is the key and one
    /// reference that needs no reference counting (24 bytes, and trivially copied).
    private unowned(unsafe) let entity: EntityName

    /// The name of the entity the object belongs to.
    public var entityName: String { entity.name }
    /// The interned name's identity: equal for every identifier made with the same spelling of an entity name
    /// (two canonically equivalent spellings have two), so a cache keyed by it needs the name only on a miss.
    package var entityIdentity: ObjectIdentifier { ObjectIdentifier(entity) }
    /// The object's key, unique within its store.
    public let primaryKey: UUID

    /// Creates an identifier from its parts (for stores and tests; models get theirs when created).
    ///
    /// - Complexity: one look-up of `entityName` in the process's table of entity names, which keeps every name
    ///   it is given for the life of the process.
    public init(entityName: String, primaryKey: UUID) {
        entity = EntityName.interned(entityName)
        self.primaryKey = primaryKey
    }

    /// An identifier of the entity `entity` names, without looking the name up: for a decoder that makes many
    /// identifiers of a few entities.
    package init(_ entity: InternedEntityName, primaryKey: UUID) {
        self.entity = entity.entity
        self.primaryKey = primaryKey
    }

    /// The bytes an identifier takes in a row's packing (``RelationshipValues``): the interned name's address and
    /// the primary key.
    static let packedSize = 24

    /// Writes the identifier's ``packedSize`` bytes at `address` (unaligned). The interned name lives as long as
    /// the process, so its address stays good as long as the bytes do.
    func pack(at address: UnsafeMutableRawPointer) {
        address.storeBytes(of: UInt(bitPattern: Unmanaged.passUnretained(entity).toOpaque()), as: UInt.self)
        withUnsafeBytes(of: primaryKey.uuid) { (address + 8).copyMemory(from: $0.baseAddress!, byteCount: 16) }
    }

    /// The identifier ``pack(at:)`` wrote at `address`.
    init(packedAt address: UnsafeRawPointer) {
        let name = address.loadUnaligned(as: UInt.self)
        // A packing holds only addresses `pack(at:)` took from interned names, which are never freed.
        entity = Unmanaged<EntityName>.fromOpaque(UnsafeRawPointer(bitPattern: name)!).takeUnretainedValue()
        primaryKey = UUID(uuid: address.loadUnaligned(fromByteOffset: 8, as: uuid_t.self))
    }

    /// A fresh identifier for a new object of `entityName`.
    package static func make(entityName: String) -> PersistentIdentifier {
        PersistentIdentifier(entityName: entityName, primaryKey: KeyGenerator.next())
    }

    /// Two identifiers are equal when they name the same entity and the same primary key.
    public static func == (lhs: PersistentIdentifier, rhs: PersistentIdentifier) -> Bool {
        // One entity name has one interned object, unless two spellings are canonically equivalent.
        lhs.primaryKey == rhs.primaryKey && (lhs.entity === rhs.entity || lhs.entity.name == rhs.entity.name)
    }

    /// Hashes the primary key, which is unique on its own.
    public func hash(into hasher: inout Hasher) {
        // The key alone is unique; hashing the entity name too would only cost time. Two words, not 16 bytes.
        let (high, low) = withUnsafeBytes(of: primaryKey.uuid) { ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self)) }
        hasher.combine(high)
        hasher.combine(low)
    }

    /// Orders identifiers by entity name, then by primary key: a stable order for sorting, not an insertion order.
    public static func < (lhs: PersistentIdentifier, rhs: PersistentIdentifier) -> Bool {
        if lhs.entity !== rhs.entity, lhs.entityName != rhs.entityName { return lhs.entityName < rhs.entityName }
        return StoredValue.compare(.uuid(lhs.primaryKey), .uuid(rhs.primaryKey)) < 0
    }

    /// The identifier as `Entity/PRIMARY-KEY-UUID`, the form messages and the command-line tool print.
    public var description: String { "\(entityName)/\(primaryKey.uuidString)" }

    private enum CodingKeys: String, CodingKey {
        case entityName, primaryKey
    }

    /// Decodes the form ``encode(to:)`` writes: the entity name and the primary key.
    ///
    /// - Throws: `DecodingError` when either is missing or of the wrong type.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(entityName: try container.decode(String.self, forKey: .entityName),
                  primaryKey: try container.decode(UUID.self, forKey: .primaryKey))
    }

    /// Encodes the identifier as its entity name (`entityName`) and its primary key (`primaryKey`).
    ///
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entityName, forKey: .entityName)
        try container.encode(primaryKey, forKey: .primaryKey)
    }
}

/// An entity name looked up once in the process's table of names: identifiers made from it
/// (``PersistentIdentifier/init(_:primaryKey:)``) skip the look-up ``PersistentIdentifier/init(entityName:primaryKey:)``
/// makes.
package struct InternedEntityName: Sendable {
    fileprivate let entity: EntityName

    /// `name`, looked up (and kept for the life of the process).
    package init(_ name: String) { entity = EntityName.interned(name) }
}

/// An entity name as identifiers hold it: one object per name (exactly, scalar for scalar) for the life of the
/// process, so identifiers refer to it without counting references.
final class EntityName: Sendable {
    let name: String

    private init(_ name: String) { self.name = name }

    /// A name compared and hashed by its exact scalars, as the table keys them.
    private struct Key: Hashable {
        let name: String
        static func == (lhs: Key, rhs: Key) -> Bool { lhs.name.utf8.elementsEqual(rhs.name.utf8) }
        func hash(into hasher: inout Hasher) {
            var name = name
            name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// Every name interned so far, and the few interned last (checked first: identifiers are made in runs of a
    /// few entities, a row's and its targets'). Names are never removed, since an identifier may refer to any.
    private struct Table {
        var names: [Key: EntityName] = [:]
        var recent: [EntityName] = []
    }

    private static let table = Mutex(Table())

    /// The one object for `name`.
    static func interned(_ name: String) -> EntityName {
        table.withLock { table in
            for recent in table.recent where recent.name.utf8.elementsEqual(name.utf8) { return recent }
            let key = Key(name: name)
            let found = table.names[key] ?? EntityName(name)
            table.names[key] = found
            if table.recent.count == 4 { table.recent.removeLast() }
            table.recent.insert(found, at: 0)
            return found
        }
    }
}

/// Makes identifier keys: 64 random bits per process, then a 64-bit counter.
///
/// Version and variant bits follow RFC 9562's version 8 ("custom") layout so the keys are valid UUIDs.
enum KeyGenerator {
    private static let prefix: UInt64 = UInt64.random(in: .min ... .max)
    private static let counter = Atomic<UInt64>(0)

    static func next() -> UUID {
        let n = counter.add(1, ordering: .relaxed).newValue
        var hi = prefix
        var lo = n
        // Version 8 in bits 48–51 of the first half, variant 0b10 in the top bits of the second half.
        hi = (hi & ~0x0000_0000_0000_F000) | 0x0000_0000_0000_8000
        lo = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let h = hi.bigEndian, l = lo.bigEndian
        return withUnsafeBytes(of: (h, l)) { raw in
            UUID(uuid: raw.load(as: uuid_t.self))
        }
    }
}
