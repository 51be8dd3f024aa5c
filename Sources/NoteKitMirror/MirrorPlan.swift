import Foundation
import NoteKit

/// The server's columns for each entity of a schema, named as ``ServerTables`` made them, with what the mirror
/// needs to move values through them.
struct MirrorPlan {
    struct Attribute {
        let name: String
        let slot: Int
        let type: Schema.AttributeType
        let isExternal: Bool
        /// `"a_<name>"` and `"ac_<name>"`, quoted.
        let value: String
        let clock: String
    }

    struct ToOne {
        let name: String
        let slot: Int
        let destination: String
        /// `"r_<name>"` and `"rc_<name>"`, quoted.
        let target: String
        let clock: String
    }

    /// A to-many relationship recorded in a link table (many-to-many, or without an inverse): one row a link,
    /// `(id, target)`, present or removed at a clock. The table belongs to one side; the other side reads it the other
    /// way round.
    struct Link {
        let name: String
        let slot: Int
        let destination: String
        /// `namespace."l_<Entity>_<relationship>"`.
        let table: String
        /// Whether this side's objects are the table's `id` column (else its `target` column).
        let isOwner: Bool
        /// The column holding this side's objects, and the one holding the targets.
        var selfColumn: String { isOwner ? "id" : "target" }
        var targetColumn: String { isOwner ? "target" : "id" }
    }

    struct Entity {
        let name: String
        /// `namespace."e_<Entity>"`.
        let table: String
        let attributes: [Attribute]
        let toOnes: [ToOne]
        /// The to-many relationships kept in link tables.
        var links: [Link] = []
        let attributeByName: [String: Attribute]
        let toOneByName: [String: ToOne]
        /// The table's name unquoted (`e_<Entity>`), for the server's catalog.
        var tableName: String { "e_" + name }
        /// The unique constraints, by their number in the schema (the store's number for them too); a constraint
        /// on an external-storage attribute is left out, since the server holds only the bytes' hash.
        var uniqueKeys: [(number: Int, attributes: [Attribute])] = []
        /// The to-one relationships, of any entity, that point at this one: what a unique-key merge remaps.
        var referrers: [(entity: String, toOne: ToOne)] = []
    }

    /// The namespace, quoted.
    let namespace: String
    /// The namespace as named, for the server's catalog.
    let namespaceName: String
    let entities: [String: Entity]

    /// The plan of `schema`'s tables in `namespace`.
    ///
    /// - Throws: ``MirrorError/invalidName(kind:name:reason:)`` as ``ServerTables`` does.
    init(schema: Schema, namespace: String) throws(MirrorError) {
        let ns = try ServerTables.identifier(namespace, kind: "namespace", prefix: "").quoted
        self.namespace = ns
        namespaceName = namespace
        var entities: [String: Entity] = [:]
        for entity in schema.entities {
            let table = try ServerTables.identifier(entity.name, kind: "entity", prefix: "e_")
            var attributes: [Attribute] = []
            for (slot, attribute) in entity.attributes.enumerated() {
                let clock = try ServerTables.identifier(attribute.name, kind: "attribute", prefix: "ac_")
                attributes.append(Attribute(name: attribute.name, slot: slot, type: attribute.type,
                                            isExternal: attribute.options.contains(.externalStorage),
                                            value: "\"a_\(attribute.name)\"", clock: clock.quoted))
            }
            var toOnes: [ToOne] = []
            var links: [Link] = []
            for (slot, relationship) in entity.relationships.enumerated() {
                if relationship.isToMany {
                    let inverse = relationship.inverse.flatMap {
                        schema.entity(named: relationship.destination)?.relationship(named: $0)
                    }
                    // A to-many relationship whose inverse is to-one travels as that inverse's column.
                    if let inverse, !inverse.isToMany { continue }
                    // Many-to-many: the table of the side whose `Entity.relationship` sorts first (as ServerTables
                    // makes it); without an inverse, a table of its own.
                    var owner = (entity.name, relationship.name)
                    if let inverseName = relationship.inverse, (relationship.destination, inverseName) < owner {
                        owner = (relationship.destination, inverseName)
                    }
                    let table = try ServerTables.identifier("\(owner.0)_\(owner.1)", kind: "relationship", prefix: "l_")
                    links.append(Link(name: relationship.name, slot: slot, destination: relationship.destination,
                                      table: "\(ns).\(table.quoted)",
                                      isOwner: owner == (entity.name, relationship.name)))
                    continue
                }
                let clock = try ServerTables.identifier(relationship.name, kind: "relationship", prefix: "rc_")
                toOnes.append(ToOne(name: relationship.name, slot: slot, destination: relationship.destination,
                                    target: "\"r_\(relationship.name)\"", clock: clock.quoted))
            }
            entities[entity.name] = Entity(
                name: entity.name, table: "\(ns).\(table.quoted)", attributes: attributes, toOnes: toOnes,
                attributeByName: Dictionary(uniqueKeysWithValues: attributes.map { ($0.name, $0) }),
                toOneByName: Dictionary(uniqueKeysWithValues: toOnes.map { ($0.name, $0) }))
            entities[entity.name]?.links = links
            for (number, names) in entity.uniqueConstraints.enumerated() {
                let keyAttributes = names.compactMap { name in attributes.first { $0.name == name } }
                guard keyAttributes.count == names.count, !keyAttributes.contains(where: \.isExternal) else { continue }
                entities[entity.name]?.uniqueKeys.append((number, keyAttributes))
            }
        }
        for entity in entities.values.sorted(by: { $0.name < $1.name }) {
            for toOne in entity.toOnes { entities[toOne.destination]?.referrers.append((entity.name, toOne)) }
        }
        self.entities = entities
    }
}

/// How attribute values travel in the server's `jsonb` columns: the store's own one-key form of a value
/// (`{"string": "x"}`, `{"date": 7.5e8}`), so every type round-trips exactly; an external-storage value as
/// `{"blob": "<sha-256>"}`, its bytes in `blobs`.
struct MirrorValueCoding {
    /// One encoder and one decoder for a whole sync: making one a value costs more than the value.
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
    private let decoder = JSONDecoder()

    /// The JSON text of `value`.
    func encode(_ value: StoredValue) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The value a column's JSON text holds, checked against the attribute's type.
    ///
    /// - Throws: a sentence saying what is wrong, for the report of a row skipped.
    func decode(_ text: String, as type: Schema.AttributeType) throws -> StoredValue {
        let value: StoredValue
        do { value = try decoder.decode(StoredValue.self, from: Data(text.utf8)) } catch {
            throw MirrorRowProblem("the value \(text.prefix(80)) does not decode: \(error)")
        }
        guard Self.fits(value, type) else {
            throw MirrorRowProblem("a \(value.kindName) is not a \(type)")
        }
        return value
    }

    /// The blob a column's JSON text names, if it is `{"blob": "<sha-256>"}`.
    static func blobName(_ text: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              object.count == 1, let name = object["blob"] as? String, name.utf8.count == 64,
              name.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        return name
    }

    /// Whether `value` is of a kind an attribute of `type` stores (widths and formats are the codec's to check).
    static func fits(_ value: StoredValue, _ type: Schema.AttributeType) -> Bool {
        switch (type, value) {
        case (.optional(let wrapped), _): return value.isNull || fits(value, wrapped)
        case (.bool, .bool): return true
        case (.int, .int), (.int8, .int), (.int16, .int), (.int32, .int), (.int64, .int): return true
        case (.uint, .uint), (.uint64, .uint), (.uint, .int), (.uint64, .int), (.uint8, .int), (.uint16, .int),
             (.uint32, .int): return true
        case (.double, .double), (.float, .double): return true
        case (.string, .string), (.url, .string): return true
        case (.date, .date), (.data, .data), (.uuid, .uuid), (.decimal, .decimal): return true
        case (.array(let element), .array(let values)): return values.allSatisfy { fits($0, element) }
        case (.dictionary(let element), .dictionary(let values)): return values.values.allSatisfy { fits($0, element) }
        case (.rawRepresentable(_, let raw), _): return fits(value, raw)
        case (.codable, .external): return false
        case (.codable, _): return true
        default: return false
        }
    }
}

/// Why one server row cannot be applied.
struct MirrorRowProblem: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
