/// Why a change set cannot be applied to a store's rows: what the one applier of change sets finds
/// (``ChangeSet/conflict(with:)``), and what a store's own checks of types and unique keys find, before anything
/// changes.
///
/// Each client says it in its own terms: a save throws the ``SaveError`` it maps to (``SaveError/init(_:in:)``); a
/// replay, a verification, a refresh or a salvage of a log reports the record as damage, naming its file and offset.
package enum ChangeConflict: Error, Sendable, Hashable {
    /// An insert names an entity the rows do not have.
    case unknownEntity(PersistentIdentifier)
    /// An insert names a row that exists, or that the change set inserts twice.
    case insertedRowExists(PersistentIdentifier)
    /// An update names a row that does not exist, or that the change set deletes.
    case updatedRowMissing(PersistentIdentifier)
    /// A delete names a row that does not exist, or that the change set deletes twice.
    case deletedRowMissing(PersistentIdentifier)
    /// Relationship `relationship` (its position in `source`'s entity) would point at `target`, which does not
    /// exist once the change set is applied (``ChangeSet/missingTarget(with:)``).
    case missingTarget(source: PersistentIdentifier, relationship: Int, target: PersistentIdentifier)
    /// `existing` holds `values` of `entity`'s unique `properties`, which the change set gives another row too.
    case uniqueKeyTaken(entity: String, properties: [String], values: [StoredValue], existing: PersistentIdentifier)
    /// A change writes a value that `property`'s type (`expected`) does not admit (`found`), or targets of the
    /// wrong kind for a relationship (``Schema/AttributeType/admits(_:external:)``).
    case valueDoesNotMatchType(model: PersistentIdentifier, property: String, expected: String, found: String)
}

extension SaveError {
    /// What a save throws for `conflict`, in a store whose schema is `schema`.
    package init(_ conflict: ChangeConflict, in schema: Schema) {
        switch conflict {
        case .unknownEntity(let id), .updatedRowMissing(let id), .deletedRowMissing(let id):
            self = .objectNotFound(id)
        case .insertedRowExists(let id):
            self = .duplicateIdentifier(id)
        case let .missingTarget(source, relationship, target):
            let relationships = schema.entity(named: source.entityName)?.relationships ?? []
            let name = relationships.indices.contains(relationship)
                ? relationships[relationship].name : "(relationship \(relationship))"
            self = .relationshipToMissingModel(model: source, property: name, target: target)
        case let .uniqueKeyTaken(entity, properties, values, existing):
            self = .uniqueConstraintViolation(entity: entity, properties: properties, values: values, existing: existing)
        case let .valueDoesNotMatchType(model, property, expected, found):
            self = .valueDoesNotMatchType(model: model, property: property, expected: expected, found: found)
        }
    }
}
