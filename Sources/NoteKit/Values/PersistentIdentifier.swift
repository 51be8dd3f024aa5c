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
    /// The name of the entity the object belongs to.
    public let entityName: String
    /// The object's key, unique within its store.
    public let primaryKey: UUID

    /// Creates an identifier from its parts (for stores and tests; models get theirs when created).
    public init(entityName: String, primaryKey: UUID) {
        self.entityName = entityName
        self.primaryKey = primaryKey
    }

    /// A fresh identifier for a new object of `entityName`.
    package static func make(entityName: String) -> PersistentIdentifier {
        PersistentIdentifier(entityName: entityName, primaryKey: KeyGenerator.next())
    }

    /// Two identifiers are equal when they name the same entity and the same primary key.
    public static func == (lhs: PersistentIdentifier, rhs: PersistentIdentifier) -> Bool {
        lhs.primaryKey == rhs.primaryKey && lhs.entityName == rhs.entityName
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
        if lhs.entityName != rhs.entityName { return lhs.entityName < rhs.entityName }
        return StoredValue.compare(.uuid(lhs.primaryKey), .uuid(rhs.primaryKey)) < 0
    }

    /// The identifier as `Entity/PRIMARY-KEY-UUID`, the form messages and the command-line tool print.
    public var description: String { "\(entityName)/\(primaryKey.uuidString)" }
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
