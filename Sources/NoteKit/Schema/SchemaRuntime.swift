/// The model types behind a schema built from code: their metadata, by entity name.
final class SchemaRuntime: Sendable {
    /// Metadata of every registered type, sorted by entity name.
    let metadata: [ModelMetadata]
    let metadataByName: [String: ModelMetadata]
    /// The entity descriptions, sorted by name.
    let entities: [Schema.Entity]

    /// Registers `types` and every type reachable from them through relationships.
    ///
    /// - Throws: ``SchemaError/duplicateEntityName(_:types:)`` when two types share an entity name.
    init(types: [any PersistentModel.Type]) throws {
        var byType: [ObjectIdentifier: ModelMetadata] = [:]
        var pending = types
        while let type = pending.popLast() {
            let key = ObjectIdentifier(type)
            guard byType[key] == nil else { continue }
            let metadata = ModelMetadata.of(type)
            byType[key] = metadata
            pending.append(contentsOf: metadata.relationships.map(\.destination))
        }
        var byName: [String: ModelMetadata] = [:]
        for metadata in byType.values {
            if let other = byName[metadata.entityName] {
                throw SchemaError.duplicateEntityName(metadata.entityName, types: [
                    String(reflecting: other.type), String(reflecting: metadata.type),
                ].sorted())
            }
            byName[metadata.entityName] = metadata
        }
        metadata = byName.values.sorted { $0.entityName < $1.entityName }
        metadataByName = byName
        entities = metadata.map { $0.entityDescription }
    }

    /// The declaration problems of every registered type, in entity order.
    var problems: [SchemaError] {
        metadata.flatMap { $0.problems + $0.inverses.problems }
    }
}

extension ModelMetadata {
    /// The schema's description of this type.
    var entityDescription: Schema.Entity {
        let inverses = self.inverses
        return Schema.Entity(
            name: entityName, originalName: originalEntityName,
            attributes: attributes.map { $0.description(in: entityName) },
            relationships: relationships.enumerated().map { slot, relationship in
                Schema.Relationship(
                    name: relationship.name, originalName: relationship.originalName,
                    destination: relationship.destinationMetadata.entityName, isToMany: relationship.isToMany,
                    inverse: inverses.references[slot]?.relationship.name, deleteRule: relationship.deleteRule,
                    minimumModelCount: relationship.minimumModelCount ?? 0,
                    maximumModelCount: relationship.maximumModelCount)
            },
            uniqueConstraints: uniqueConstraints, indexes: indexes)
    }
}
