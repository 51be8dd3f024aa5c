#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Version 1's data records: `rows` (also one row at a time, for a checkpoint) and `tx` with its inserts, updates
/// and deletions.
extension RecordDecoderV1 {
    /// A `rows` record's entity, rows, and each row object's bytes (from its `{` to after its `}`, as offsets in
    /// `file`): what a checkpoint built from a segment lists. Rows decode the same in every format version.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``, also when the record is not `rows`.
    func decodeRows(_ payload: UnsafeRawBufferPointer, offset: Int, file: String, schema: Schema) throws
        -> (entity: String, rows: [ModelSnapshot], spans: [Range<Int>]) {
        var reader = JSONReader(payload, baseOffset: offset)
        plans.beginRecord()
        do {
            guard try recordKind(reader, readingNumber: false).kind == .rows else {
                throw fail(reader, "the record is not a rows record")
            }
            var spans: [Range<Int>]? = []
            guard case let .rows(entity, rows) = try decodeRows(&reader, schema: schema, spans: &spans) else {
                throw fail(reader, "the record is not a rows record")
            }
            try reader.finish()
            return (entity, rows, spans ?? [])
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    /// One row object of `entity` as a `rows` record holds it (`{"id":…,"a":{…},"r":{…}}`), alone in `bytes`, whose
    /// first byte is at `offset` in `file`: how a checkpoint's rows are read back.
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)``.
    ///
    /// - Parameters:
    ///   - only: which attributes to decode (by position); the others are checked to be present, skipped, and left
    ///     `.null` in the row. Nil decodes every attribute.
    ///   - decoded: incremented by the number of attribute values decoded (what a partial read saves, for tests).
    ///   - beginsRecord: whether `entity`'s decoding plan is checked again (true, the default): false for the
    ///     next of several rows the caller decodes with the very same `entity`, which the first one checked.
    func decodeRow(_ bytes: UnsafeRawBufferPointer, offset: Int, file: String, entity: Schema.Entity,
                   only: [Bool]? = nil, decoded: inout Int, beginsRecord: Bool = true) throws -> ModelSnapshot {
        var reader = JSONReader(bytes, baseOffset: offset)
        // Each row is a record of its own unless the caller says otherwise: it may pass another description of an
        // entity of the same name, so its plan is checked again.
        if beginsRecord { plans.beginRecord() }
        do {
            let row = try readWholeRow(&reader, entity: entity, withEntityKey: false, only: only, decoded: &decoded)
            try reader.finish()
            return row
        } catch let error as JSONReadError {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        } catch let error as DecodingFailure {
            throw FileStoreError.undecodableRecord(file: file, offset: error.offset, reason: error.reason)
        }
    }

    func decodeRows(_ reader: inout JSONReader, schema: Schema, spans: inout [Range<Int>]?) throws
        -> StoreRecord {
        // The rows are in the entity's layout: `"e"` is read first, wherever it stands (the writer puts it second).
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "a rows record")
        var rows: [ModelSnapshot] = []
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "e": try member.skipValue()
            case "rows":
                try member.readArray { element in
                    let start = element.offset
                    rows.append(try readWholeRow(&element, entity: entity, withEntityKey: false))
                    if spans != nil { spans!.append(start..<element.offset) }
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a rows record")
            }
        }
        return .rows(entity: entity.name, rows: rows)
    }

    func decodeTransaction(_ reader: inout JSONReader, schema: Schema) throws -> Transaction {
        var number: UInt64?, time: Date?
        var changes = ChangeSet()
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "tx": number = try readTransactionNumber(&member)
            case "time": time = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "author": changes.author = try member.readString()
            case "insert":
                let readPast = progress.readPast
                var first: Int?
                try member.readArray { element in
                    if first == nil { first = element.offset }
                    changes.inserted.append(try readInsert(&element, schema: schema))
                    if let readPast, let first { readPast(first..<element.offset) }
                }
            case "update":
                try member.readArray { element in changes.updated.append(try readUpdate(&element, schema: schema)) }
            case "delete":
                try member.readArray { element in changes.deleted.append(try readDeletion(&element, schema: schema)) }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a transaction record")
            }
        }
        guard let number, let time else { throw fail(start, "a transaction record lacks tx or time") }
        return Transaction(number: number, time: time, changes: changes)
    }

    private func readInsert(_ reader: inout JSONReader, schema: Schema) throws -> ModelSnapshot {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "an inserted object")
        return try readWholeRow(&reader, entity: entity, withEntityKey: true)
    }

    /// Reads `{"id":…, "a":{…}, "r":{…}}` (with `"e"` too when `withEntityKey`), requiring every attribute and
    /// relationship of the entity.
    private func readWholeRow(_ reader: inout JSONReader, entity: Schema.Entity, withEntityKey: Bool) throws -> ModelSnapshot {
        var decoded = 0
        return try readWholeRow(&reader, entity: entity, withEntityKey: withEntityKey, only: nil, decoded: &decoded)
    }

    /// As above, decoding only the attributes `only` selects (nil: all), counting those decoded in `decoded`.
    private func readWholeRow(_ reader: inout JSONReader, entity: Schema.Entity, withEntityKey: Bool, only: [Bool]?,
                              decoded: inout Int) throws -> ModelSnapshot {
        let plan = plans.plan(for: entity)
        var id: PersistentIdentifier?
        let attributeCount = plan.attributeTypes.count
        plans.packer.begin(count: attributeCount)
        var relationships = [RelationshipTargets](repeating: .toOne(nil), count: plan.toMany.count)
        var seenAttributes = PresenceSet(count: attributeCount), seenRelationships = PresenceSet(count: relationships.count)
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e" where withEntityKey: try member.skipValue()
            case "id": id = PersistentIdentifier(plan.interned, primaryKey: try member.readUUID())
            case "a":
                var expected = 0
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, names: plan.attributeNames, value,
                                                   expected: &expected)
                    guard seenAttributes.insert(index) else { throw fail(value, "attribute \(name.string) appears twice") }
                    if let only, !only[index] { return try value.skipValue() }
                    decoded += 1
                    if plan.text[index] {
                        // Text goes into the row as it is read, with no `String` made of it.
                        if value.readNullIfPresent() { return plans.packer.set(.null, at: index) }
                        try value.readStringBytes { plans.packer.setString(utf8: $0, at: index) }
                    } else {
                        plans.packer.set(plan.external[index] ? try readExternal(&value)
                                            : try readValue(&value, type: plan.attributeTypes[index]), at: index)
                    }
                }
            case "r":
                var expected = 0
                try member.readObject { value, name in
                    let index = try relationshipIndex(name, in: entity, names: plan.relationshipNames, value,
                                                      expected: &expected)
                    guard seenRelationships.insert(index) else { throw fail(value, "relationship \(name.string) appears twice") }
                    relationships[index] = try readTargets(&value, toMany: plan.toMany[index],
                                                           destination: plan.destinations[index])
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in an object of \(entity.name)")
            }
        }
        guard let id else { throw fail(start, "an object of \(entity.name) has no id") }
        if let missing = seenAttributes.firstMissing {
            throw fail(start, "\(id) lacks attribute \(entity.attributes[missing].name)")
        }
        if let missing = seenRelationships.firstMissing {
            throw fail(start, "\(id) lacks relationship \(entity.relationships[missing].name)")
        }
        let packed = plans.packer.finish(relationships: relationships)
        return ModelSnapshot(id: id, attributes: packed.attributes, relationships: packed.relationships)
    }

    func readUpdate(_ reader: inout JSONReader, schema: Schema) throws -> ModelUpdate {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "an updated object")
        var id: PersistentIdentifier?
        var attributes: [AttributeChange] = []
        var relationships: [RelationshipChange] = []
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e": try member.skipValue()
            case "id": id = PersistentIdentifier(entityName: entity.name, primaryKey: try readUUID(&member))
            case "a":
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, value)
                    attributes.append(AttributeChange(index: index,
                                                      value: try readValue(&value, attribute: entity.attributes[index])))
                }
            case "r":
                try member.readObject { value, name in
                    let index = try relationshipIndex(name, in: entity, value)
                    let relationship = entity.relationships[index]
                    let destination = relationship.destination
                    if relationship.isToMany {
                        var added: [PersistentIdentifier] = [], removed: [PersistentIdentifier] = []
                        try value.readObject { list, listKey in
                            switch listKey {
                            case "add": added = try readKeyArray(&list, destination: destination)
                            case "remove": removed = try readKeyArray(&list, destination: destination)
                            default: throw fail(list, "a to-many change has only \"add\" and \"remove\"")
                            }
                        }
                        relationships.append(RelationshipChange(index: index, kind: .toMany(added: added, removed: removed)))
                    } else {
                        let target = value.readNullIfPresent()
                            ? nil : PersistentIdentifier(entityName: destination, primaryKey: try readUUID(&value))
                        relationships.append(RelationshipChange(index: index, kind: .toOne(target)))
                    }
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in an update")
            }
        }
        guard let id else { throw fail(start, "an updated object of \(entity.name) has no id") }
        return ModelUpdate(id: id, attributes: attributes, relationships: relationships)
    }

    private func readDeletion(_ reader: inout JSONReader, schema: Schema) throws -> ModelDeletion {
        let entity = try entity(ofObjectAt: reader, schema: schema, role: "a deleted object")
        var id: PersistentIdentifier?
        var tombstone: [String: StoredValue] = [:]
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "e": try member.skipValue()
            case "id": id = PersistentIdentifier(entityName: entity.name, primaryKey: try readUUID(&member))
            case "tombstone":
                try member.readObject { value, name in
                    let index = try attributeIndex(name, in: entity, value)
                    tombstone[entity.attributes[index].name] = try readValue(&value, attribute: entity.attributes[index])
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a deletion")
            }
        }
        guard let id else { throw fail(start, "a deleted object of \(entity.name) has no id") }
        return ModelDeletion(id: id, tombstone: tombstone)
    }
}
