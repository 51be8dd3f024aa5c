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

    /// A dynamic model for each of `entities` (a stored schema's, already validated): objects are
    /// ``DynamicModel`` instances, and relationships find their destinations and inverses by name.
    init(dynamic entities: [Schema.Entity]) {
        let destinations = DynamicDestinations()
        let sorted = entities.sorted { $0.name < $1.name }
        let metadata = sorted.map { ModelMetadata(dynamic: $0, destinations: destinations) }
        for item in metadata { destinations[item.entityName] = item }
        for (item, entity) in zip(metadata, sorted) { item.resolveDynamicInverses(entity) }
        self.metadata = metadata
        metadataByName = Dictionary(uniqueKeysWithValues: metadata.map { ($0.entityName, $0) })
        self.entities = sorted
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
