#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The shape of a store: its entities, their attributes and relationships, and a version.
///
/// A schema is derived from model types and closed over relationships: naming `Project` alone registers every
/// entity reachable from it, so naming fewer models never produces an older schema.
///
/// ```swift
/// let schema = try Schema([Project.self], version: Schema.Version(2, 0, 0))
/// schema.entities.map(\.name)   // ["Project", "Todo"]: Project.todos reaches Todo
/// ```
///
/// Building a schema validates it; every error names the entity and property concerned (``SchemaError``).
/// The schema is `Codable`: a store records the schemas it was written with, and migration compares a stored
/// schema with today's. Two schemas with the same entities have the same ``contentHash``, whatever their order of
/// declaration of entities.
///
/// ## Topics
/// - ``init(_:version:)``
/// - ``init(versionedSchema:)``
/// - ``Entity``
/// - ``Attribute``
/// - ``Relationship``
/// - ``AttributeType``
/// - ``Version``
public struct Schema: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The schema's version, as its author numbered it; for a schema with no declared version (a plain model
    /// list, see ``isVersioned``), 1.0.0 until a store gives it the version it carries on (docs/MIGRATIONS.md).
    /// Setting it declares it.
    public var version: Version {
        didSet { isVersioned = true }
    }
    /// Whether the version was declared: by a ``VersionedSchema``, an explicit `version:`, a migration plan the
    /// container was given, or a stored schema. A plain model list (`Schema([Note.self])`) is unversioned: a
    /// store orders it by content hash against the schemas it was written with, never by number, and it may not
    /// drop stored data (docs/MIGRATIONS.md, *Versioning*). It says how the schema was made, not what it is, so
    /// it is not part of equality.
    public private(set) var isVersioned: Bool
    /// The entities, sorted by name.
    public var entities: [Entity] {
        didSet { contentHashBox = ContentHashBox() }
    }
    /// Where ``contentHash`` is kept once computed; a new one when the entities change.
    private var contentHashBox = ContentHashBox()

    /// The model types this schema was built from; nil for a schema decoded from a store.
    let runtime: SchemaRuntime?

    /// Builds the schema of `types` and of every type reachable from them through relationships.
    ///
    /// - Parameters:
    ///   - types: the model types to register.
    ///   - version: the schema's version. Without one the schema is unversioned (``isVersioned`` is false, and
    ///     ``version`` reads 1.0.0): a store decides where it stands by content hash.
    /// - Throws: ``SchemaError`` when a declaration is invalid: an inverse that does not point back, mismatched
    ///   inverse types, a duplicate name, an unsupported attribute type, a uniqueness constraint on a to-many
    ///   relationship, an index or constraint on a property that does not exist.
    /// - Complexity: builds each type's metadata once per process (two instances are created by `init()`).
    public init(_ types: [any PersistentModel.Type], version: Version? = nil) throws {
        let runtime = try SchemaRuntime(types: types)
        self.version = version ?? Version(1, 0, 0)
        self.isVersioned = version != nil
        self.entities = runtime.entities
        self.runtime = runtime
        try SchemaValidator.validate(entities, runtime: runtime)
    }

    /// Builds the schema of a versioned schema's models, with its version.
    ///
    /// - Throws: ``SchemaError`` as ``init(_:version:)`` does.
    public init(versionedSchema: any VersionedSchema.Type) throws {
        try self.init(versionedSchema.models, version: versionedSchema.versionIdentifier)
    }

    /// A schema from its description alone (a stored schema), validated. Decoding a schema validates it too: a
    /// schema value that exists is consistent.
    ///
    /// - Throws: ``SchemaError`` when the description is inconsistent.
    public init(version: Version, entities: [Entity]) throws {
        self.version = version
        self.isVersioned = true
        self.entities = entities.sorted { $0.name < $1.name }
        self.runtime = nil
        try SchemaValidator.validate(self.entities, runtime: nil)
    }

    /// `schema` with a dynamic model for each of its entities (``withDynamicModels()``).
    init(dynamicFrom schema: Schema) throws {
        try SchemaValidator.validate(schema.entities, runtime: nil)
        version = schema.version
        isVersioned = schema.isVersioned
        entities = schema.entities
        runtime = SchemaRuntime(dynamic: schema.entities)
    }

    /// A fresh default value for attribute `attribute` of `entity`, made as inserting a new object would make it
    /// (so `UUID()` gives a new identifier each time). Nil for a schema decoded from a store, which has no model
    /// types to run.
    package func generatedDefault(entity: String, attribute: Int) -> StoredValue? {
        guard let metadata = runtime?.metadataByName[entity], !metadata.isDynamic else { return nil }
        let object = metadata.type.init()
        return object._$attributes[attribute]
    }

    /// This schema at `version`, versioned or not as it was: how a store gives an unversioned schema the version it
    /// records (the store's own, carried on).
    package func carrying(_ version: Version) -> Schema {
        var schema = self
        let wasVersioned = isVersioned
        schema.version = version
        schema.isVersioned = wasVersioned
        return schema
    }

    /// The entity named `name`, if the schema has it.
    public func entity(named name: String) -> Entity? {
        entities.first { $0.name == name }
    }

    /// A stable hash of the entities (not of the version): lowercase hex SHA-256 of their canonical JSON.
    ///
    /// - Complexity: encodes and hashes the entities the first time it is asked of this schema or a copy of it made
    ///   since its entities last changed; afterwards O(1).
    public var contentHash: String { contentHashBox.hash(of: entities) }

    /// The schema's `Codable` form as a store records it: JSON with sorted keys and unescaped slashes.
    ///
    /// - Complexity: encodes the first time it is asked of this schema or a copy of it at the same version made
    ///   since its entities last changed; afterwards O(1).
    package var storedForm: Data { contentHashBox.storedForm(of: self) }

    /// A readable listing: the version, the first 12 digits of ``contentHash``, then each entity with its attributes,
    /// relationships, unique constraints and indexes, one per line.
    public var description: String {
        var lines = ["Schema \(version) (\(contentHash.prefix(12)))"]
        for entity in entities { lines.append(entity.description) }
        return lines.joined(separator: "\n")
    }

    private enum CodingKeys: String, CodingKey { case version, entities }

    /// Decodes a stored schema and validates it, so that a decoded schema is as consistent as a built one. A decoded
    /// schema is versioned and has no model types (no attribute default is generated from a model type).
    ///
    /// - Throws: `DecodingError.dataCorrupted` when the entities are inconsistent (the underlying ``SchemaError`` says
    ///   which entity and property), or any decoding error of a malformed value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Version.self, forKey: .version)
        isVersioned = true
        entities = try container.decode([Entity].self, forKey: .entities).sorted { $0.name < $1.name }
        runtime = nil
        do { try SchemaValidator.validate(entities, runtime: nil) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "the schema is inconsistent: \(error)",
                                                    underlyingError: error))
        }
    }

    /// Encodes the version and the entities, the form a store records.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(entities, forKey: .entities)
    }

    /// Two schemas are equal when they have the same version and the same entities; ``isVersioned`` is not compared.
    public static func == (lhs: Schema, rhs: Schema) -> Bool {
        lhs.version == rhs.version && lhs.entities == rhs.entities
    }

    /// Hashes the version and the entities, consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(version)
        hasher.combine(entities)
    }
}

extension Schema {
    /// A schema version: major, minor and patch numbers, ordered numerically.
    public struct Version: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
        /// The major number, compared first.
        public var major: Int
        /// The minor number, compared when the major numbers are equal.
        public var minor: Int
        /// The patch number, compared last.
        public var patch: Int

        /// A version from its three numbers, as in `Schema.Version(2, 0, 0)`.
        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// Versions are ordered by major, then minor, then patch number.
        public static func < (lhs: Version, rhs: Version) -> Bool {
            (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }

        /// The version as `major.minor.patch`, the form it is stored in.
        public var description: String { "\(major).\(minor).\(patch)" }

        /// Reads a version from its `major.minor.patch` string.
        ///
        /// - Throws: `DecodingError.dataCorrupted` when the string is not three integers separated by dots.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            let parts = text.split(separator: ".").compactMap { Int($0) }
            guard parts.count == 3 else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                        debugDescription: "invalid schema version \(text)"))
            }
            self.init(parts[0], parts[1], parts[2])
        }

        /// Writes the version as its `major.minor.patch` string.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(description)
        }
    }

    /// One entity: a model type's name, attributes, relationships, unique constraints and indexes.
    public struct Entity: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The entity's name (the model type's name unless it declares ``PersistentModelProtocol/entityName``).
        public var name: String
        /// The name the entity had in an earlier schema, for a rename migration.
        public var originalName: String?
        /// The attributes, in declaration order (the order of values in a stored row).
        public var attributes: [Attribute]
        /// The relationships, in declaration order.
        public var relationships: [Relationship]
        /// Compound unique constraints, each a list of attribute names. A single `.unique` attribute appears
        /// here as a one-name constraint too.
        public var uniqueConstraints: [[String]]
        /// Compound indexes, each a list of attribute names.
        public var indexes: [[String]]

        /// An entity from its parts, as a store decodes one or a test builds one. Nothing is validated here:
        /// ``Schema/init(version:entities:)`` validates the entities together.
        public init(name: String, originalName: String? = nil, attributes: [Attribute],
                    relationships: [Relationship], uniqueConstraints: [[String]] = [], indexes: [[String]] = []) {
            self.name = name
            self.originalName = originalName
            self.attributes = attributes
            self.relationships = relationships
            self.uniqueConstraints = uniqueConstraints
            self.indexes = indexes
        }

        /// The attribute named `name`.
        public func attribute(named name: String) -> Attribute? { attributes.first { $0.name == name } }
        /// The relationship named `name`.
        public func relationship(named name: String) -> Relationship? { relationships.first { $0.name == name } }
        /// The position of attribute `name` in a stored row.
        public func attributeIndex(named name: String) -> Int? { attributes.firstIndex { $0.name == name } }
        /// The position of relationship `name` in a stored row.
        public func relationshipIndex(named name: String) -> Int? { relationships.firstIndex { $0.name == name } }

        /// A readable listing of the entity: its name (and former name), then one line per attribute, relationship,
        /// unique constraint and index.
        public var description: String {
            var lines = ["  entity \(name)" + (originalName.map { " (was \($0))" } ?? "")]
            for attribute in attributes { lines.append("    " + attribute.description) }
            for relationship in relationships { lines.append("    " + relationship.description) }
            for constraint in uniqueConstraints { lines.append("    unique(\(constraint.joined(separator: ", ")))") }
            for index in indexes { lines.append("    index(\(index.joined(separator: ", ")))") }
            return lines.joined(separator: "\n")
        }
    }

    /// One persisted attribute.
    public struct Attribute: Sendable, Hashable, Codable, CustomStringConvertible {
        /// An attribute option, as SwiftData spells them.
        public struct Option: Sendable, Hashable, Codable, CustomStringConvertible {
            let name: String
            /// No two objects of the entity may have the same value (inserting a duplicate updates the existing
            /// object by default; see ``UniquenessPolicy``).
            public static let unique = Option(name: "unique")
            /// The bytes are kept outside the store's main files and read only when the property is read.
            public static let externalStorage = Option(name: "externalStorage")
            /// The value is kept in the history tombstone when the object is deleted.
            public static let preserveValueOnDeletion = Option(name: "preserveValueOnDeletion")

            /// The option's name, as SwiftData spells it (`unique`, `externalStorage`, `preserveValueOnDeletion`).
            public var description: String { name }
            /// Reads an option from its name.
            ///
            /// - Throws: a `DecodingError` when the value is not a string. An unknown name is kept, so a store
            ///   written by a newer version with an option this one does not know still decodes.
            public init(from decoder: any Decoder) throws {
                name = try decoder.singleValueContainer().decode(String.self)
            }
            /// Writes the option's name.
            public func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(name)
            }
            init(name: String) { self.name = name }
        }

        /// The property's name.
        public var name: String
        /// The name the attribute had in an earlier schema, for a rename migration.
        public var originalName: String?
        /// The attribute's type.
        public var type: AttributeType
        /// The declared default value, when it is the same for every new object (nil for a generated default
        /// such as `UUID()`, see ``hasGeneratedDefault``).
        public var defaultValue: StoredValue?
        /// Whether the default value is computed anew for each object (`UUID()`, `Date.now`).
        public var hasGeneratedDefault: Bool
        /// The options, sorted by name.
        public var options: [Option]

        /// An attribute from its parts, as a store decodes one or a test builds one; `options` are sorted by name.
        public init(name: String, originalName: String? = nil, type: AttributeType, defaultValue: StoredValue?,
                    hasGeneratedDefault: Bool = false, options: [Option] = []) {
            self.name = name
            self.originalName = originalName
            self.type = type
            self.defaultValue = defaultValue
            self.hasGeneratedDefault = hasGeneratedDefault
            self.options = options.sorted { $0.name < $1.name }
        }

        /// Whether the attribute has `option`.
        public func has(_ option: Option) -> Bool { options.contains(option) }
        /// Whether `nil` is a valid value.
        public var isOptional: Bool { type.isOptional }

        /// The attribute as a declaration would read it: `name: Type = default [options] (was oldName)`.
        public var description: String {
            var text = "\(name): \(type)"
            if let defaultValue { text += " = \(defaultValue)" } else if hasGeneratedDefault { text += " = <generated>" }
            if !options.isEmpty { text += " [" + options.map(\.name).joined(separator: ", ") + "]" }
            if let originalName { text += " (was \(originalName))" }
            return text
        }
    }

    /// One relationship from an entity to another (or to itself).
    public struct Relationship: Sendable, Hashable, Codable, CustomStringConvertible {
        /// What deleting an object does to the objects this relationship points at.
        public enum DeleteRule: String, Sendable, Hashable, Codable {
            /// The targets stay; their inverse no longer points at the deleted object (the default).
            case nullify
            /// The targets are deleted too, and their own delete rules apply in turn.
            case cascade
            /// The delete is refused while the relationship has any target.
            case deny
            /// Nothing is done to the targets: they are not changed in the context and history records nothing
            /// for them. Their inverse then reads as if the deleted object were never there (nil, or left out of a
            /// list), and the store drops the reference when it applies the delete, so that a predicate on the
            /// inverse (`$0.folder == nil`) agrees with the property.
            case noAction
        }

        /// The property's name.
        public var name: String
        /// The name the relationship had in an earlier schema, for a rename migration.
        public var originalName: String?
        /// The entity the relationship points at.
        public var destination: String
        /// Whether the property is an array (to-many) rather than an optional (to-one).
        public var isToMany: Bool
        /// The relationship on the destination that mirrors this one, if any.
        public var inverse: String?
        /// What deleting the source does to the targets.
        public var deleteRule: DeleteRule
        /// The fewest targets a saved object may have (0 when unconstrained).
        public var minimumModelCount: Int
        /// The most targets a saved object may have (nil when unbounded).
        public var maximumModelCount: Int?

        /// A relationship from its parts, as a store decodes one or a test builds one. Nothing is validated here:
        /// ``Schema/init(version:entities:)`` checks the destination, the inverse and the bounds.
        public init(name: String, originalName: String? = nil, destination: String, isToMany: Bool,
                    inverse: String?, deleteRule: DeleteRule = .nullify, minimumModelCount: Int = 0,
                    maximumModelCount: Int? = nil) {
            self.name = name
            self.originalName = originalName
            self.destination = destination
            self.isToMany = isToMany
            self.inverse = inverse
            self.deleteRule = deleteRule
            self.minimumModelCount = minimumModelCount
            self.maximumModelCount = maximumModelCount
        }

        /// The relationship as a declaration would read it: its name, destination (`[Folder]` or `Folder?`), delete
        /// rule, inverse, count bounds and former name.
        public var description: String {
            var text = "\(name): " + (isToMany ? "[\(destination)]" : "\(destination)?") + " \(deleteRule)"
            if let inverse { text += " inverse \(destination).\(inverse)" }
            if minimumModelCount > 0 || maximumModelCount != nil {
                text += " count \(minimumModelCount)...\(maximumModelCount.map(String.init) ?? "")"
            }
            if let originalName { text += " (was \(originalName))" }
            return text
        }
    }
}

/// A schema's content hash and stored form once computed, shared by the copies of the schema until one's entities
/// change. An open asks for the hash of the schema it opens with and of each stored schema it reads several times
/// (the segment's `schema` record, the versioning decision, the container, the manifest copy's check), and each time
/// the entities were encoded to JSON and hashed, which cost more than the rest of a checkpointed open; a manifest
/// written or compared encodes the whole history. Equal entities are not enough to share either: `String` equality
/// is canonical equivalence, and both are of the encoded bytes. The stored form holds the version as well, which a
/// copy may change without changing the entities, so it is kept with the version it was made for.
///
/// Nothing is kept process-wide (a cache of schemas by their bytes or by their model types was tried): the fuzz
/// target's leak check counts what a global keeps as leaked, and a process's schemas are few.
final class ContentHashBox: Sendable {
    private let hash = Mutex<String?>(nil)
    private let form = Mutex<(version: Schema.Version, bytes: Data)?>(nil)

    func hash(of entities: [Schema.Entity]) -> String {
        if let known = hash.withLock({ $0 }) { return known }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain value types with String keys cannot fail.
        let computed = SHA256Digest.hexString((try? encoder.encode(entities)) ?? Data())
        hash.withLock { $0 = computed }
        return computed
    }

    func storedForm(of schema: Schema) -> Data {
        if let known = form.withLock({ $0 }), known.version == schema.version { return known.bytes }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding the schema's plain value types cannot fail.
        let computed = (try? encoder.encode(schema)) ?? Data("{}".utf8)
        form.withLock { $0 = (schema.version, computed) }
        return computed
    }
}

/// The delete rule of a relationship (SwiftData spells it `Schema.Relationship.DeleteRule`).
public typealias DeleteRule = Schema.Relationship.DeleteRule
