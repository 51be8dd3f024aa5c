/// Checks a schema once, when it is built, so that nothing later has to: a schema that exists is consistent.
enum SchemaValidator {
    /// Throws the first problem found: declaration problems recorded while the types were reflected first,
    /// then the description's own consistency.
    ///
    /// - Throws: ``SchemaError``.
    static func validate(_ entities: [Schema.Entity], runtime: SchemaRuntime?) throws {
        if let problem = runtime?.problems.first { throw problem }
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for entity in entities {
            try validateNames(entity)
            for attribute in entity.attributes where attribute.has(.externalStorage) {
                guard attribute.type.nonOptional == .data else {
                    throw SchemaError.externalStorageRequiresData(entity: entity.name, property: attribute.name,
                                                                  type: attribute.type.description)
                }
            }
            for relationship in entity.relationships {
                guard let destination = byName[relationship.destination] else {
                    throw SchemaError.missingDestination(entity: entity.name, property: relationship.name,
                                                         destination: relationship.destination)
                }
                let minimum = relationship.minimumModelCount
                if minimum < 0 || (relationship.maximumModelCount.map { $0 < max(minimum, 0) } ?? false)
                    || (!relationship.isToMany && (minimum > 1 || (relationship.maximumModelCount ?? 1) > 1)) {
                    throw SchemaError.invalidRelationshipCount(entity: entity.name, property: relationship.name,
                                                               minimum: minimum,
                                                               maximum: relationship.maximumModelCount)
                }
                if let inverseName = relationship.inverse {
                    guard let inverse = destination.relationship(named: inverseName) else {
                        throw SchemaError.inverseNotARelationship(entity: entity.name, property: relationship.name,
                                                                  destination: destination.name, keyPath: inverseName)
                    }
                    guard inverse.destination == entity.name else {
                        throw SchemaError.inverseTypeMismatch(
                            entity: entity.name, property: relationship.name,
                            inverse: "\(destination.name).\(inverse.name)", expected: entity.name,
                            found: inverse.destination)
                    }
                    guard inverse.inverse == relationship.name else {
                        throw SchemaError.inverseDoesNotPointBack(entity: entity.name, property: relationship.name,
                                                                  inverse: "\(destination.name).\(inverse.name)")
                    }
                }
            }
            for (kind, lists) in [(SchemaError.ConstraintKind.unique, entity.uniqueConstraints), (.index, entity.indexes)] {
                for names in lists {
                    if names.isEmpty { throw SchemaError.emptyConstraint(entity: entity.name, kind: kind) }
                    for name in names where entity.attribute(named: name) == nil {
                        if let relationship = entity.relationship(named: name) {
                            throw relationship.isToMany && kind == .unique
                                ? SchemaError.uniqueOnToMany(entity: entity.name, property: name)
                                : SchemaError.constraintOnRelationship(entity: entity.name, kind: kind, property: name)
                        }
                        throw SchemaError.unknownAttributeInConstraint(entity: entity.name, kind: kind, attribute: name)
                    }
                }
            }
        }
    }

    /// Property names, and original names, are unique within an entity.
    private static func validateNames(_ entity: Schema.Entity) throws {
        var seen = Set<String>()
        let names = entity.attributes.map(\.name) + entity.relationships.map(\.name)
        for name in names where !seen.insert(name).inserted {
            throw SchemaError.duplicatePropertyName(entity: entity.name, property: name)
        }
        var originals = Set<String>()
        let renamed = entity.attributes.compactMap { attribute in attribute.originalName.map { ($0, attribute.name) } }
            + entity.relationships.compactMap { relationship in relationship.originalName.map { ($0, relationship.name) } }
        for (original, name) in renamed where original != name {
            // An original name may not be another property's current name, nor appear twice.
            if seen.contains(original) || !originals.insert(original).inserted {
                throw SchemaError.duplicatePropertyName(entity: entity.name, property: original)
            }
        }
    }
}
