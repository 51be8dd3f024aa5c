#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The pieces version 1's records are made of: look-aheads, entities, attribute and relationship keys, identifiers,
/// transaction numbers and stored values.
extension RecordDecoderV1 {
    /// Stops a look-ahead as soon as it has what it wants.
    struct FoundAhead: Error {}

    /// The value of member `key` of the object at `reader`, read by `read` ahead on a copy of the reader, or nil
    /// when the object has no such member. The look-ahead stops at that member: for one the writer puts first, it
    /// reads one member.
    func lookAhead<T>(_ key: String, inObjectAt reader: JSONReader,
                              _ read: (inout JSONReader) throws -> T) throws -> T? {
        var probe = reader
        var value: T?
        do {
            try probe.readObject { member, name in
                guard name == key else { return try member.skipValue() }
                value = try read(&member)
                throw FoundAhead()
            }
        } catch is FoundAhead {}
        return value
    }

    /// The entity named by the `"e"` member of the object at `reader`, read ahead (``lookAhead(_:inObjectAt:_:)``).
    func entity(ofObjectAt reader: JSONReader, schema: Schema, role: String) throws -> Schema.Entity {
        guard let entity = try lookAhead("e", inObjectAt: reader, { try readEntity(&$0, schema: schema) }) else {
            throw fail(reader, "\(role) has no entity")
        }
        return entity
    }

    private func readEntity(_ reader: inout JSONReader, schema: Schema) throws -> Schema.Entity {
        let name = try reader.readString()
        guard let entity = schema.entity(named: name) else {
            throw fail(reader, "the schema has no entity \(String(reflecting: name))")
        }
        return entity
    }

    func schema(for relationship: Schema.Relationship, in entity: Schema.Entity) -> String? {
        relationship.destination
    }

    /// The attribute `key` names. Writers list attributes in declaration order, so the one after the previous key
    /// (`expected`) is tried first, without making a `String`.
    func attributeIndex(_ key: JSONKey, in entity: Schema.Entity, names: [[UInt8]], _ reader: JSONReader,
                        expected: inout Int) throws -> Int {
        try position(of: key, names: names, expected: &expected) { try attributeIndex(key, in: entity, reader) }
    }

    /// The relationship `key` names, tried as ``attributeIndex(_:in:names:_:expected:)`` tries attributes.
    func relationshipIndex(_ key: JSONKey, in entity: Schema.Entity, names: [[UInt8]], _ reader: JSONReader,
                           expected: inout Int) throws -> Int {
        try position(of: key, names: names, expected: &expected) { try relationshipIndex(key, in: entity, reader) }
    }

    /// The position `key` names among `names`: the one after the previous key (`expected`) first, else what
    /// `lookUp` finds; `expected` moves past it.
    @inline(__always)
    private func position(of key: JSONKey, names: [[UInt8]], expected: inout Int,
                          lookUp: () throws -> Int) rethrows -> Int {
        if expected < names.count, key.isUTF8(names[expected]) {
            expected += 1
            return expected - 1
        }
        let index = try lookUp()
        expected = index + 1
        return index
    }

    func attributeIndex(_ key: JSONKey, in entity: Schema.Entity, _ reader: JSONReader) throws -> Int {
        let name = key.string
        guard let index = entity.attributeIndex(named: name) else {
            throw fail(reader, "\(entity.name) has no attribute \(String(reflecting: name))")
        }
        return index
    }

    func relationshipIndex(_ key: JSONKey, in entity: Schema.Entity, _ reader: JSONReader) throws -> Int {
        let name = key.string
        guard let index = entity.relationshipIndex(named: name) else {
            throw fail(reader, "\(entity.name) has no relationship \(String(reflecting: name))")
        }
        return index
    }

    func readTargets(_ reader: inout JSONReader, toMany: Bool, destination: InternedEntityName) throws
        -> RelationshipTargets {
        if toMany { return .toMany(try readKeyArray(&reader, destination: destination)) }
        if reader.readNullIfPresent() { return .toOne(nil) }
        return .toOne(PersistentIdentifier(destination, primaryKey: try readUUID(&reader)))
    }

    func readKeyArray(_ reader: inout JSONReader, destination: String) throws -> [PersistentIdentifier] {
        try readKeyArray(&reader, destination: InternedEntityName(destination))
    }

    func readKeyArray(_ reader: inout JSONReader, destination: InternedEntityName) throws
        -> [PersistentIdentifier] {
        var ids: [PersistentIdentifier] = []
        try reader.readArray { element in
            ids.append(PersistentIdentifier(destination, primaryKey: try readUUID(&element)))
        }
        return ids
    }

    func readUUID(_ reader: inout JSONReader) throws -> UUID {
        try reader.readUUID()
    }

    /// Reads a transaction number. Numbers stop at 2^63 − 1, which no store reaches, so that the next number always
    /// exists: replaying or saving after a larger one would overflow.
    func readTransactionNumber(_ reader: inout JSONReader) throws -> UInt64 {
        let start = reader
        let number = try reader.readUInt64()
        guard number <= UInt64(Int64.max) else {
            throw fail(start, "transaction number \(number) is past the largest, 2^63 − 1")
        }
        return number
    }

    /// Reads a value in the JSON form its attribute's type calls for.
    func readValue(_ reader: inout JSONReader, attribute: Schema.Attribute) throws -> StoredValue {
        attribute.has(.externalStorage) ? try readExternal(&reader) : try readValue(&reader, type: attribute.type)
    }

    /// Reads an external-storage value: `null`, or `{"blob":…,"size":…}` made into a lazy reference.
    func readExternal(_ reader: inout JSONReader) throws -> StoredValue {
        if reader.readNullIfPresent() { return .null }
        var name: String?, size: Int?
        try reader.readObject { member, key in
            switch key {
            case "blob": name = try member.readString()
            case "size": size = Int(try member.readInt64())
            default: throw fail(member, "external data has only \"blob\" and \"size\"")
            }
        }
        guard let name, let size, size >= 0 else { throw fail(reader, "external data lacks blob or size") }
        // The name becomes a file name in blobs/: only a SHA-256 in lowercase hex, never a path.
        guard StoreLayout.isBlobName(name) else {
            throw fail(reader, "external data names blob \(String(reflecting: name)), which is not a SHA-256 in hex")
        }
        guard let blobs else {
            return .external(ExternalData(name: name, size: size) {
                throw StoredValueError.externalDataUnreadable(name: name, reason: "no store to read it from")
            })
        }
        return .external(blobs.reference(name: name, size: size))
    }

    func readValue(_ reader: inout JSONReader, type: Schema.AttributeType) throws -> StoredValue {
        switch type {
        case .optional(let wrapped):
            return reader.readNullIfPresent() ? .null : try readValue(&reader, type: wrapped)
        case .bool:
            return .bool(try reader.readBool())
        case .int, .int64:
            return .int(try reader.readInt64())
        case .int8, .int16, .int32, .uint8, .uint16, .uint32:
            let value = try reader.readInt64()
            guard Self.range(of: type).contains(value) else {
                throw fail(reader, "\(value) does not fit \(type)")
            }
            return .int(value)
        case .uint, .uint64:
            return .uint(try reader.readUInt64())
        case .double, .float:
            return .double(try reader.readDouble())
        case .string, .url:
            return .string(try reader.readString())
        case .date:
            return .date(Date(timeIntervalSinceReferenceDate: try reader.readDouble()))
        case .data:
            let text = try reader.readString()
            guard let data = Data(base64Encoded: text) else { throw fail(reader, "invalid base64 data") }
            return .data(data)
        case .uuid:
            return .uuid(try readUUID(&reader))
        case .decimal:
            let text = try reader.readString()
            guard let decimal = Decimal(string: text) else { throw fail(reader, "\(String(reflecting: text)) is not a decimal") }
            return .decimal(decimal)
        case .array(let element):
            var items: [StoredValue] = []
            try reader.readArray { items.append(try readValue(&$0, type: element)) }
            return .array(items)
        case .dictionary(let element):
            var items: [String: StoredValue] = [:]
            try reader.readObject { member, key in items[key.string] = try readValue(&member, type: element) }
            return .dictionary(items)
        case .rawRepresentable(_, let raw):
            return try readValue(&reader, type: raw)
        case .codable:
            return try readTagged(&reader)
        }
    }

    static func range(of type: Schema.AttributeType) -> ClosedRange<Int64> {
        switch type {
        case .int8: Int64(Int8.min)...Int64(Int8.max)
        case .int16: Int64(Int16.min)...Int64(Int16.max)
        case .int32: Int64(Int32.min)...Int64(Int32.max)
        case .uint8: 0...Int64(UInt8.max)
        case .uint16: 0...Int64(UInt16.max)
        case .uint32: 0...Int64(UInt32.max)
        default: Int64.min...Int64.max
        }
    }

    /// Reads the tagged form of a stored value (`{"string":"x"}`), used by `Codable` attributes and tombstones. Its
    /// null is `null`, the one spelling a record has for it.
    func readTagged(_ reader: inout JSONReader) throws -> StoredValue {
        if reader.readNullIfPresent() { return .null }
        var result: StoredValue?
        try reader.readObject { member, key in
            guard result == nil else { throw fail(member, "a tagged value has exactly one kind") }
            switch key {
            case "bool": result = .bool(try member.readBool())
            case "int": result = .int(try member.readInt64())
            case "uint": result = .uint(try member.readUInt64())
            case "double": result = .double(try member.readDouble())
            case "string": result = .string(try member.readString())
            case "date": result = .date(Date(timeIntervalSinceReferenceDate: try member.readDouble()))
            case "data":
                guard let data = Data(base64Encoded: try member.readString()) else { throw fail(member, "invalid base64") }
                result = .data(data)
            case "uuid": result = .uuid(try readUUID(&member))
            case "decimal":
                let text = try member.readString()
                guard let decimal = Decimal(string: text) else { throw fail(member, "invalid decimal") }
                result = .decimal(decimal)
            case "array":
                var items: [StoredValue] = []
                try member.readArray { items.append(try readTagged(&$0)) }
                result = .array(items)
            case "dictionary":
                var items: [String: StoredValue] = [:]
                try member.readObject { value, name in items[name.string] = try readTagged(&value) }
                result = .dictionary(items)
            case "null":
                // The schema's `Codable` form spells a nil default so (docs/FORMAT.md, *Attribute values*); a
                // record's values never do.
                throw fail(member, #"a null is written null in a record, not {"null":…}"#)
            default: throw fail(member, "unknown value kind \(String(reflecting: key.string))")
            }
        }
        guard let result else { throw fail(reader, "a tagged value has no kind") }
        return result
    }
}
