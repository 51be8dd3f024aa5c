#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An object of an entity known only from a stored schema's description, not from a Swift type: what a tool
/// beside an app (`notekit mirror sync`) reads and writes a store through, with the same engine, delete rules and
/// inverse maintenance as the app's own model types.
///
/// Its properties have no Swift names: the engine reads and writes them by slot, as it does every model's. It is
/// not public; a schema with dynamic models comes from ``Schema/withDynamicModels()``.
final class DynamicModel: ModelObject, PersistentModelProtocol {
    /// What every model's `init()` makes: for this class, an object of no entity, which ``init(metadata:)`` then
    /// binds. (Only `ModelObject`'s initializer is designated, so that model types declared with `@testable`
    /// access still get their implicit `super.init()`.)
    required init() {
        super.init()
    }

    /// A new object of the entity `metadata` describes, with every attribute at its fallback and no targets; with
    /// nil, a dynamic entity's prototype (which no key path can read).
    convenience init(metadata: ModelMetadata?) {
        self.init()
        _$metadata = metadata
        guard let metadata else { return }
        _$id = .make(entityName: metadata.entityName)
        _$attributes = AttributeValues(metadata.attributes.map(\.encodedFallback))
        _$relationships = RelationshipValues(metadata.relationships.map { $0.isToMany ? .toMany([]) : .toOne(nil) })
    }
}

extension Schema {
    /// This schema, with a dynamic model for each entity: a container made with it opens a store written by the
    /// schema's app without the app's types, and applies changes to it with the app's delete rules and inverses.
    ///
    /// - Throws: ``SchemaError`` when the description is inconsistent.
    package func withDynamicModels() throws -> Schema {
        try Schema(dynamicFrom: self)
    }
}

extension Schema.AttributeType {
    /// What a dynamic entity's attribute of this type holds when nothing gave it a value (no declared default, and
    /// the replica that made the object did not know the attribute): nil for an optional, zero or empty for a
    /// scalar, string, URL, data or collection, a raw value's zero for a `RawRepresentable`, and null for a
    /// `Codable` value (whose stored form takes null). Each is a value the store reads back for the type; one the
    /// app's type cannot take (a URL of no text, a raw value no case has) reads there as its declared default.
    var zeroValue: StoredValue {
        switch self {
        case .optional: .null
        case .bool: .bool(false)
        // As the typed codecs store them: an unsigned integer narrower than 64 bits fits, and is kept, as `.int`.
        case .int, .int8, .int16, .int32, .int64, .uint8, .uint16, .uint32: .int(0)
        case .uint, .uint64: .uint(0)
        case .double, .float: .double(0)
        case .string: .string("")
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        case .data: .data(Data())
        case .uuid: .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .decimal: .decimal(0)
        case .array: .array([])
        case .dictionary: .dictionary([:])
        case .url: .string("")
        case .rawRepresentable(_, let raw): raw.zeroValue
        case .codable: .null
        }
    }
}
