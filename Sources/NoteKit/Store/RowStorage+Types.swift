extension Schema.AttributeType {
    /// Whether `value` is what an attribute of this type stores: the one ``StoredValue`` case the type uses (see
    /// ``StoredValue``), in range for a narrow integer, element by element for an array or a dictionary, `.null` only
    /// for an optional (or a `Codable` value, which encodes its own nil). Every store reads back exactly what this
    /// admits; a save of anything else is refused before it is written, so that no store holds a value it cannot
    /// read (``SaveError/valueDoesNotMatchType(model:property:expected:found:)``).
    ///
    /// - Parameter external: whether the attribute keeps its bytes in external storage: then `.data`, `.external`
    ///   and `.null` are its values, whatever its declared type.
    package func admits(_ value: StoredValue, external: Bool = false) -> Bool {
        if external {
            switch value {
            case .data, .external, .null: return true
            default: return false
            }
        }
        switch (self, value) {
        case (.optional, .null): return true
        case (.optional(let wrapped), _): return wrapped.admits(value)
        case (.codable, _): return value.isTaggable
        case (.rawRepresentable(_, let raw), _): return raw.admits(value)
        case (.bool, .bool), (.int, .int), (.int64, .int), (.uint, .uint), (.uint64, .uint), (.double, .double),
             (.float, .double), (.string, .string), (.url, .string), (.date, .date), (.data, .data), (.uuid, .uuid),
             (.decimal, .decimal):
            return true
        case (.int8, .int(let v)): return Int64(Int8.min)...Int64(Int8.max) ~= v
        case (.int16, .int(let v)): return Int64(Int16.min)...Int64(Int16.max) ~= v
        case (.int32, .int(let v)): return Int64(Int32.min)...Int64(Int32.max) ~= v
        case (.uint8, .int(let v)): return 0...Int64(UInt8.max) ~= v
        case (.uint16, .int(let v)): return 0...Int64(UInt16.max) ~= v
        case (.uint32, .int(let v)): return 0...Int64(UInt32.max) ~= v
        case (.array(let element), .array(let items)): return items.allSatisfy { element.admits($0) }
        case (.dictionary(let element), .dictionary(let items)): return items.values.allSatisfy { element.admits($0) }
        default: return false
        }
    }
}

extension StoredValue {
    /// Whether a `Codable` attribute can hold this value: anything but external data, at any depth.
    fileprivate var isTaggable: Bool {
        switch self {
        case .external: false
        case .array(let items): items.allSatisfy(\.isTaggable)
        case .dictionary(let items): items.values.allSatisfy(\.isTaggable)
        default: true
        }
    }

    /// What a value is, for a message: its kind, and the number for an integer out of a narrow type's range.
    package var kindDescription: String {
        switch self {
        case .int(let v): "int \(v)"
        case .uint(let v): "uint \(v)"
        case .array(let items): "array of \(items.count)"
        default: kindName
        }
    }
}

extension RowStorage {
    /// The first value `changes` writes that its attribute's type does not admit
    /// (``Schema/AttributeType/admits(_:external:)``), an inserted row without a value for each attribute or targets
    /// for each relationship of its entity, or a change naming no attribute or relationship of the entity, or targets
    /// of the wrong kind, as a ``ChangeConflict/valueDoesNotMatchType(model:property:expected:found:)``. Typed models
    /// cannot make a change set that has one; dynamic models, a custom ``DataStore`` client or a bug can, and a store
    /// would then hold a value it cannot read back.
    func typeConflict(in changes: ChangeSet) -> ChangeConflict? {
        for row in changes.inserted {
            guard let entity = schema.entity(named: row.id.entityName) else { continue }
            guard row.attributes.count == entity.attributes.count else {
                return .valueDoesNotMatchType(model: row.id, property: "(its attributes)",
                                              expected: "\(entity.attributes.count) values",
                                              found: "\(row.attributes.count)")
            }
            for (slot, attribute) in entity.attributes.enumerated() {
                if let conflict = check(row.attributes[slot], of: attribute, in: row.id) { return conflict }
            }
            guard row.relationships.count == entity.relationships.count else {
                return .valueDoesNotMatchType(model: row.id, property: "(its relationships)",
                                              expected: "\(entity.relationships.count) relationships",
                                              found: "\(row.relationships.count)")
            }
            for (slot, relationship) in entity.relationships.enumerated() {
                let isToMany = if case .toMany = row.relationships[slot] { true } else { false }
                if let conflict = check(isToMany: isToMany, of: relationship, in: row.id) { return conflict }
            }
        }
        for update in changes.updated {
            guard let entity = schema.entity(named: update.id.entityName) else { continue }
            for change in update.attributes {
                guard entity.attributes.indices.contains(change.index) else {
                    return .valueDoesNotMatchType(model: update.id, property: "(attribute \(change.index))",
                                                  expected: "one of \(entity.attributes.count) attributes",
                                                  found: "position \(change.index)")
                }
                if let conflict = check(change.value, of: entity.attributes[change.index], in: update.id) {
                    return conflict
                }
            }
            for change in update.relationships {
                guard entity.relationships.indices.contains(change.index) else {
                    return .valueDoesNotMatchType(model: update.id, property: "(relationship \(change.index))",
                                                  expected: "one of \(entity.relationships.count) relationships",
                                                  found: "position \(change.index)")
                }
                let isToMany = if case .toMany = change.kind { true } else { false }
                if let conflict = check(isToMany: isToMany, of: entity.relationships[change.index], in: update.id) {
                    return conflict
                }
            }
        }
        return nil
    }

    private func check(_ value: StoredValue, of attribute: Schema.Attribute,
                       in model: PersistentIdentifier) -> ChangeConflict? {
        let external = attribute.has(.externalStorage)
        guard !attribute.type.admits(value, external: external) else { return nil }
        return .valueDoesNotMatchType(
            model: model, property: attribute.name,
            expected: external ? "\(attribute.type) in external storage" : "\(attribute.type)",
            found: value.kindDescription)
    }

    private func check(isToMany: Bool, of relationship: Schema.Relationship,
                       in model: PersistentIdentifier) -> ChangeConflict? {
        guard isToMany != relationship.isToMany else { return nil }
        return .valueDoesNotMatchType(
            model: model, property: relationship.name,
            expected: relationship.isToMany ? "a to-many relationship" : "a to-one relationship",
            found: isToMany ? "to-many targets" : "a to-one target")
    }
}
