/// A model declaration or stored schema that NoteKit refuses, naming the entity and property concerned.
public enum SchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which kind of constraint an error is about.
    public enum ConstraintKind: String, Sendable, Hashable {
        /// `unique`: a unique constraint (``PersistentModelProtocol/uniqueConstraints`` or `.unique`); `index`: an
        /// index (``PersistentModelProtocol/indexes``).
        case unique, index
    }

    /// Two model types (or a type and a renamed one) declare the same entity name.
    case duplicateEntityName(String, types: [String])
    /// Two properties of an entity have the same name (counting original names).
    case duplicatePropertyName(entity: String, property: String)
    /// An attribute's Swift type cannot be stored.
    case unsupportedAttributeType(entity: String, property: String, type: String)
    /// `.externalStorage` on an attribute that is not `Data` or `Data?`.
    case externalStorageRequiresData(entity: String, property: String, type: String)
    /// A declared inverse key path is not a relationship of the destination.
    case inverseNotARelationship(entity: String, property: String, destination: String, keyPath: String)
    /// The declared inverse is a relationship to another entity than this one.
    case inverseTypeMismatch(entity: String, property: String, inverse: String, expected: String, found: String)
    /// The declared inverse names another relationship as its own inverse.
    case inverseDoesNotPointBack(entity: String, property: String, inverse: String)
    /// Several relationships could be the inverse; declare it with `inverse:`.
    case ambiguousInverse(entity: String, property: String, candidates: [String])
    /// A relationship points at an entity the schema does not have.
    case missingDestination(entity: String, property: String, destination: String)
    /// A unique constraint includes a to-many relationship.
    case uniqueOnToMany(entity: String, property: String)
    /// A unique constraint or index includes a relationship; only attributes can be constrained or indexed.
    case constraintOnRelationship(entity: String, kind: ConstraintKind, property: String)
    /// An index names a key path that is not a persisted attribute of the entity.
    case indexOnMissingProperty(entity: String, position: Int, keyPath: String)
    /// A unique constraint names a key path that is not a persisted attribute of the entity.
    case constraintOnMissingProperty(entity: String, position: Int, keyPath: String)
    /// A stored schema's index or constraint names an attribute the entity does not have.
    case unknownAttributeInConstraint(entity: String, kind: ConstraintKind, attribute: String)
    /// A unique constraint or index with no key paths.
    case emptyConstraint(entity: String, kind: ConstraintKind)
    /// A relationship's count bounds are impossible.
    case invalidRelationshipCount(entity: String, property: String, minimum: Int, maximum: Int?)
    /// A model class inherits from another model class; NoteKit models inherit `ModelObject` directly.
    case inheritanceNotSupported(entity: String, superclass: String)
    /// A stored property (a `var` or a `let`) has neither ``Attribute`` nor ``Transient``: NoteKit would not persist
    /// it, where SwiftData persists every stored property that is not `@Transient`.
    case storedPropertyWithoutWrapper(entity: String, property: String)
    /// An ``Attribute`` whose type is a model, an optional model or an array of models: that is a relationship.
    case attributeHoldsModels(entity: String, property: String, type: String)

    /// A sentence that names the entity and property concerned and, where there is one, the declaration that fixes it.
    public var description: String {
        switch self {
        case let .duplicateEntityName(name, types):
            "entity name \(name) is declared by more than one model type (\(types.joined(separator: ", "))); "
                + "give one of them another entityName"
        case let .duplicatePropertyName(entity, property):
            "\(entity) has two properties named \(property) (counting original names)"
        case let .unsupportedAttributeType(entity, property, type):
            "\(entity).\(property) has type \(type), which cannot be stored; use a standard scalar type (Bool, "
                + "an integer, Double, Float, String, Date, Data, UUID, URL, Decimal, or an optional, array or "
                + "String-keyed dictionary of them), a RawRepresentable with such a raw value, or a Codable value type"
        case let .externalStorageRequiresData(entity, property, type):
            "\(entity).\(property) uses .externalStorage but has type \(type); external storage holds Data only"
        case let .inverseNotARelationship(entity, property, destination, keyPath):
            "the inverse of \(entity).\(property), \(keyPath), is not a relationship of \(destination)"
        case let .inverseTypeMismatch(entity, property, inverse, expected, found):
            "the inverse of \(entity).\(property) is \(inverse), which points at \(found) instead of \(expected)"
        case let .inverseDoesNotPointBack(entity, property, inverse):
            "\(entity).\(property) names \(inverse) as its inverse, but \(inverse) names another inverse"
        case let .ambiguousInverse(entity, property, candidates):
            "the inverse of \(entity).\(property) is ambiguous (\(candidates.joined(separator: ", "))); "
                + "declare it with `inverse:`"
        case let .missingDestination(entity, property, destination):
            "\(entity).\(property) points at \(destination), which the schema does not have"
        case let .uniqueOnToMany(entity, property):
            "a unique constraint of \(entity) includes the to-many relationship \(property)"
        case let .constraintOnRelationship(entity, kind, property):
            "\(kind == .unique ? "a unique constraint" : "an index") of \(entity) includes the relationship "
                + "\(property); only attributes can be constrained or indexed"
        case let .indexOnMissingProperty(entity, position, keyPath):
            "an index of \(entity) names \(keyPath) (key path \(position + 1)), which is not a persisted attribute"
        case let .constraintOnMissingProperty(entity, position, keyPath):
            "a unique constraint of \(entity) names \(keyPath) (key path \(position + 1)), which is not a "
                + "persisted attribute"
        case let .unknownAttributeInConstraint(entity, kind, attribute):
            "\(kind == .unique ? "a unique constraint" : "an index") of \(entity) names \(attribute), which "
                + "\(entity) does not have"
        case let .emptyConstraint(entity, kind):
            "\(entity) declares an empty \(kind == .unique ? "unique constraint" : "index")"
        case let .invalidRelationshipCount(entity, property, minimum, maximum):
            "\(entity).\(property) has impossible count bounds \(minimum)...\(maximum.map(String.init) ?? "")"
        case let .inheritanceNotSupported(entity, superclass):
            "\(entity) inherits \(superclass); model classes must inherit ModelObject directly "
                + "(declare `final class \(entity): PersistentModel`)"
        case let .storedPropertyWithoutWrapper(entity, property):
            "\(entity).\(property) is a stored property without a wrapper, which NoteKit would not persist; write "
                + "`@Attribute var \(property)` to persist it, or `@Transient var \(property)` to keep it out of the "
                + "store (a constant can be a computed property or a static let)"
        case let .attributeHoldsModels(entity, property, type):
            "\(entity).\(property) is an @Attribute of type \(type), which holds models: a property whose type is a "
                + "model, an optional model or an array of models is a relationship; declare it with @Relationship "
                + "(`@Relationship var \(property): Folder?`, or `: [Note] = []` for a to-many relationship)"
        }
    }
}
