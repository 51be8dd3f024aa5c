#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Observation
import Synchronization

/// Everything NoteKit knows about one model type, derived once per process from two instances made by `init()`.
///
/// The wrappers' declarations (types, options, delete rules, inverse key paths) are recorded while the
/// prototype is constructed; `Mirror` on the prototype gives the property names, in the same declaration order.
/// A second instance tells constant defaults (`""`) from generated ones (`UUID()`). Key paths used later by
/// predicates, sorts, indexes and inverses are mapped to properties by reading them on the prototype, which
/// records the property its getter served (see ``property(for:)``).
final class ModelMetadata: @unchecked Sendable {
    let type: any PersistentModel.Type
    let entityName: String
    let originalEntityName: String?
    let attributes: [AttributeMetadata]
    let relationships: [RelationshipMetadata]
    /// Per relationship, whether it is to-many (read by every object's construction without copying the metadata).
    let relationshipIsToMany: [Bool]
    let attributeIndexByName: [String: Int]
    let relationshipIndexByName: [String: Int]
    /// Per property, the key path Observation needs to announce a change made by the engine (inverse
    /// maintenance, rollback, refresh). Filled by the property's first getter or setter call.
    let attributeNotifiers: [MutationNotifierSlot]
    let relationshipNotifiers: [MutationNotifierSlot]
    /// Unique constraints as attribute names (single `.unique` attributes included), and indexes.
    private(set) var uniqueConstraints: [[String]] = []
    private(set) var indexes: [[String]] = []
    /// Declaration problems found while building; the schema reports them (``SchemaError``).
    private(set) var problems: [SchemaError] = []
    /// Whether this entity was built from a stored schema's description (``DynamicModel``), not from a Swift type.
    let isDynamic: Bool

    /// The prototype, used only under this lock, to map key paths to properties.
    private let prototype: Locked<ModelObject>
    private let keyPathCache = Locked<[AnyKeyPath: PropertyReference?]>([:])
    /// What ``faultRow(_:)`` and ``wholeRowFault`` make once.
    private let faultPlaceholder = Locked<(AttributeValues, RelationshipValues)?>(nil)
    private let wholeRowFaultBox = Locked<PartialFault?>(nil)
    /// Key paths through relationships already probed (``propertyPath(for:)``).
    private let pathCache = Locked<[AnyKeyPath: (hops: [Int], leaf: PropertyReference)?]>([:])
    private let inverseTable = AtomicLazyReference<InverseTable>()

    // MARK: Registry

    private static let registry = Mutex<[ObjectIdentifier: ModelMetadata]>([:])

    /// The metadata of `type`, built on first use.
    ///
    /// - Complexity: O(1) after the first call for a type (a lock and a dictionary lookup).
    static func of(_ type: any PersistentModel.Type) -> ModelMetadata {
        let key = ObjectIdentifier(type)
        if let known = registry.withLock({ $0[key] }) { return known }
        // Built outside the lock: building a type may build the types its defaults construct.
        let built = ModelMetadata(building: type)
        return registry.withLock { registry in
            if let raced = registry[key] { return raced }
            registry[key] = built
            return built
        }
    }

    // MARK: Building

    private init(building type: any PersistentModel.Type) {
        self.type = type
        isDynamic = false
        entityName = type.entityName
        originalEntityName = type.originalEntityName
        let (first, recorded) = Self.record(type)
        let (_, again) = Self.record(type)

        var problems: [SchemaError] = []
        let mirror = Mirror(reflecting: first)
        if let superMirror = mirror.superclassMirror, superMirror.subjectType != ModelObject.self {
            problems.append(.inheritanceNotSupported(entity: type.entityName,
                                                     superclass: String(describing: superMirror.subjectType)))
        }
        let (attributeNames, relationshipNames) = Self.propertyNames(mirror, recorded: recorded, of: type,
                                                                     problems: &problems)
        let attributes = Self.attributeMetadata(recorded: recorded, again: again, names: attributeNames, of: type,
                                                problems: &problems)
        self.attributes = attributes
        relationships = recorded.relationshipDeclarations.enumerated().map { index, declaration in
            RelationshipMetadata(name: relationshipNames[index], declaration: declaration)
        }
        relationshipIsToMany = relationships.map(\.isToMany)
        attributeIndexByName = Dictionary(uniqueKeysWithValues: attributes.enumerated().map { ($1.name, $0) })
        relationshipIndexByName = Dictionary(uniqueKeysWithValues: relationships.enumerated().map { ($1.name, $0) })
        attributeNotifiers = attributes.map { _ in MutationNotifierSlot() }
        relationshipNotifiers = relationships.map { _ in MutationNotifierSlot() }
        // The prototype's own base init handed its values over instead of storing them; store them now.
        first._$attributes = AttributeValues(zip(attributes, recorded.attributeValues).map { attribute, initial in
            attribute.codec.flatMap { try? $0.encodeAny(initial) } ?? .null
        })
        first._$relationships = RelationshipValues(relationships.map { $0.isToMany ? .toMany([]) : .toOne(nil) })
        prototype = Locked(first)
        self.problems = problems
        first._$metadata = self
        resolveDeclaredConstraints(type)
    }

    /// The names of the prototype's attributes and relationships, in declaration order, from its mirror; each stored
    /// property with no wrapper (nor `@Transient`) goes into `problems`.
    private static func propertyNames(_ mirror: Mirror, recorded: ConstructionStack.Recorded,
                                      of type: any PersistentModel.Type,
                                      problems: inout [SchemaError])
        -> (attributes: [String], relationships: [String]) {
        // Wrappers push in initialization order: the class's own properties, then each superclass's. Mirror lists
        // the same properties level by level, most derived first. A wrapper's property is told by its type, which
        // its declaration recorded: a cast to a marker protocol tells it too, but each cast of a type not cast
        // before scans every protocol conformance record of the process, and that was most of building a schema.
        // Only a stored property of another type (transient, lazy, or refused) is cast.
        let attributeWrappers = recorded.attributeDeclarations.map { ObjectIdentifier($0.wrapperType) }
        let relationshipWrappers = recorded.relationshipDeclarations.map { ObjectIdentifier($0.wrapperType) }
        var attributeNames: [String] = [], relationshipNames: [String] = []
        var level: Mirror? = mirror
        while let mirror = level, mirror.subjectType != ModelObject.self {
            for child in mirror.children {
                guard let label = child.label else { continue }
                let wrapper = ObjectIdentifier(Swift.type(of: child.value))
                if attributeWrappers.contains(wrapper) || (!relationshipWrappers.contains(wrapper)
                                                           && child.value is any AttributeWrapperMarker) {
                    attributeNames.append(String(label.dropFirst()))
                } else if relationshipWrappers.contains(wrapper) || child.value is any RelationshipWrapperMarker {
                    relationshipNames.append(String(label.dropFirst()))
                } else if !label.hasPrefix(Self.lazyStoragePrefix) && !(child.value is any TransientWrapperMarker) {
                    // SwiftData persists every stored property that is not @Transient; NoteKit would silently
                    // drop this one on reload, so it is refused. (Computed properties are not in the mirror.)
                    problems.append(.storedPropertyWithoutWrapper(entity: type.entityName, property: label))
                }
            }
            level = mirror.superclassMirror
        }
        if attributeNames.count != recorded.attributeDeclarations.count
            || relationshipNames.count != recorded.relationshipDeclarations.count {
            preconditionFailure("\(type): the declared properties and the properties found by reflection differ")
        }

        return (attributeNames, relationshipNames)
    }

    /// The attributes' metadata from their recorded declarations and the initial values of two prototypes: a
    /// default both agree on is constant, one they differ on generated. An attribute whose type is not storable
    /// goes into `problems`.
    private static func attributeMetadata(recorded: ConstructionStack.Recorded, again: ConstructionStack.Recorded,
                                          names attributeNames: [String], of type: any PersistentModel.Type,
                                          problems: inout [SchemaError]) -> [AttributeMetadata] {
        var attributes: [AttributeMetadata] = []
        for (index, declaration) in recorded.attributeDeclarations.enumerated() {
            let name = attributeNames[index]
            let initial = recorded.attributeValues[index]
            var defaultValue: StoredValue?
            var generated = false
            let holdsModels = Self.holdsModels(declaration.valueType, codec: declaration.codec)
            if holdsModels {
                // Generic code declares such an attribute without the compiler's warning (Attribute.swift).
                problems.append(.attributeHoldsModels(entity: type.entityName, property: name,
                                                      type: String(describing: declaration.valueType)))
            }
            if let codec = declaration.codec {
                defaultValue = try? codec.encodeAny(initial)
                let secondValue = try? codec.encodeAny(again.attributeValues[index])
                if defaultValue != secondValue {
                    generated = true
                    defaultValue = nil
                }
            } else if !holdsModels {
                problems.append(.unsupportedAttributeType(entity: type.entityName, property: name,
                                                          type: String(describing: declaration.valueType)))
            }
            attributes.append(AttributeMetadata(
                name: name, originalName: declaration.originalName, codec: declaration.codec,
                options: declaration.options, defaultValue: defaultValue, hasGeneratedDefault: generated,
                fallbackValue: initial, valueType: declaration.valueType))
        }
        return attributes
    }

    /// The metadata of an entity known only by its description (a schema read from a store): objects are
    /// ``DynamicModel`` instances, read and written by slot. `destinations` is filled by the caller once every entity
    /// of the schema has metadata (see ``SchemaRuntime/init(dynamic:)``).
    init(dynamic entity: Schema.Entity, destinations: DynamicDestinations) {
        type = DynamicModel.self
        isDynamic = true
        entityName = entity.name
        originalEntityName = entity.originalName
        attributes = entity.attributes.map { attribute in
            AttributeMetadata(name: attribute.name, originalName: attribute.originalName, codec: nil,
                              options: attribute.options, defaultValue: attribute.defaultValue,
                              hasGeneratedDefault: attribute.hasGeneratedDefault, fallbackValue: (),
                              valueType: Void.self,
                              storedFallback: attribute.defaultValue ?? attribute.type.zeroValue)
        }
        relationships = entity.relationships.map { relationship in
            RelationshipMetadata(dynamic: relationship, destinations: destinations)
        }
        relationshipIsToMany = relationships.map(\.isToMany)
        attributeIndexByName = Dictionary(uniqueKeysWithValues: attributes.enumerated().map { ($1.name, $0) })
        relationshipIndexByName = Dictionary(uniqueKeysWithValues: relationships.enumerated().map { ($1.name, $0) })
        attributeNotifiers = attributes.map { _ in MutationNotifierSlot() }
        relationshipNotifiers = relationships.map { _ in MutationNotifierSlot() }
        uniqueConstraints = entity.uniqueConstraints
        indexes = entity.indexes
        prototype = Locked(DynamicModel(metadata: nil))
    }

    /// Resolves a dynamic entity's inverses by the names its stored description gives, once every entity of the
    /// schema has metadata.
    func resolveDynamicInverses(_ entity: Schema.Entity) {
        let references = entity.relationships.enumerated().map { slot, relationship -> InverseReference? in
            guard let inverse = relationship.inverse else { return nil }
            let destination = relationships[slot].destinationMetadata
            return destination.relationshipIndexByName[inverse].map {
                InverseReference(metadata: destination, slot: $0)
            }
        }
        _ = inverseTable.storeIfNil(InverseTable(references: references))
    }

    /// How a `lazy var`'s storage is labelled in a mirror. A lazy property takes no wrapper and is computed from
    /// its initializer on first use: derived state, which is transient by design, as a computed property is.
    private static let lazyStoragePrefix = "$__lazy_storage_$_"

    /// Whether values of `type`, whose codec is `codec`, are models, or optionals, arrays or dictionaries of them: a
    /// relationship's values.
    private static func holdsModels(_ type: Any.Type, codec: (any AnyAttributeCodec)?) -> Bool {
        if type is ModelObject.Type { return true }
        switch codec?.type {
        case .optional?, .array?, .dictionary?, .rawRepresentable?, .codable?, nil:
            break
        default:
            // A scalar kind is a `PersistentValue` type's own: not an optional, array or dictionary, whose kinds say
            // so, so it contains nothing. (Asking would cast the type to `ContainerAttributeValue`, and a cast of a
            // type not cast before scans every protocol conformance record of the process.)
            return false
        }
        if let container = type as? any ContainerAttributeValue.Type {
            return holdsModels(container.elementType, codec: nil)
        }
        return false
    }

    /// Creates an instance of `type` while recording what its wrappers declare.
    private static func record(_ type: any PersistentModel.Type) -> (ModelObject, ConstructionStack.Recorded) {
        let stack = ConstructionStack.current
        // The first use of a type may come while the engine loads another object (a transient default that builds
        // a model): the prototype's wrappers must evaluate their defaults, not skip them as a load's would.
        let saved = (stack.recording, stack.recorded, stack.materialization)
        stack.materialization = nil
        stack.recordingDepth += 1
        stack.recording = .init(type: ObjectIdentifier(type), attributeMark: stack.attributeValues.count,
                                relationshipMark: stack.relationshipValues.count)
        let object = type.init()
        let recorded = stack.recorded
        stack.recordingDepth -= 1
        (stack.recording, stack.recorded, stack.materialization) = saved
        guard let recorded else {
            preconditionFailure("\(type).init() did not reach ModelObject.init()")
        }
        return (object, recorded)
    }

    /// Maps the type's declared unique constraints and indexes from key paths to attribute names.
    private func resolveDeclaredConstraints(_ type: any PersistentModel.Type) {
        func names(_ keyPaths: [AnyKeyPath], kind: SchemaError.ConstraintKind) -> [String]? {
            var names: [String] = []
            for (position, keyPath) in keyPaths.enumerated() {
                switch property(for: keyPath) {
                case .attribute(let slot)?:
                    names.append(attributes[slot].name)
                case .relationship(let slot)?:
                    let relationship = relationships[slot]
                    problems.append(relationship.isToMany && kind == .unique
                        ? .uniqueOnToMany(entity: entityName, property: relationship.name)
                        : .constraintOnRelationship(entity: entityName, kind: kind, property: relationship.name))
                    return nil
                case nil:
                    problems.append(kind == .index
                        ? .indexOnMissingProperty(entity: entityName, position: position,
                                                  keyPath: String(describing: keyPath))
                        : .constraintOnMissingProperty(entity: entityName, position: position,
                                                       keyPath: String(describing: keyPath)))
                    return nil
                }
            }
            if names.isEmpty { problems.append(.emptyConstraint(entity: entityName, kind: kind)) }
            return names.isEmpty ? nil : names
        }
        func keyPaths<T: PersistentModelProtocol>(_: T.Type) -> ([[AnyKeyPath]], [[AnyKeyPath]]) {
            (T.uniqueConstraints.map { $0 as [AnyKeyPath] }, T.indexes.map { $0 as [AnyKeyPath] })
        }
        let (unique, index) = keyPaths(type)
        var uniqueNames = attributes.filter { $0.options.contains(.unique) }.map { [$0.name] }
        for constraint in unique {
            if let names = names(constraint, kind: .unique), !uniqueNames.contains(names) { uniqueNames.append(names) }
        }
        uniqueConstraints = uniqueNames
        indexes = index.compactMap { names($0, kind: .index) }
    }

    // MARK: Lookups

    /// The typed codec of attribute `slot`.
    @inline(__always)
    func codec<Value>(at slot: Int, as type: Value.Type) -> AttributeCodec<Value> {
        // The codec was made for this very property's `Value` when the metadata was built.
        unsafeDowncast(attributes[slot].codec!, to: AttributeCodec<Value>.self)
    }

    /// The persisted property a key path reads, or nil when it is not exactly one persisted property of this type
    /// (a computed property, a multi-step path, a transient property).
    ///
    /// - Complexity: a dictionary lookup once a key path has been seen; the first time, one property read on the
    ///   prototype.
    func property(for keyPath: AnyKeyPath) -> PropertyReference? {
        // A dynamic entity has no Swift properties for key paths to name.
        if isDynamic { return nil }
        if let known = keyPathCache.withLock({ $0[keyPath] }) { return known }
        let found: PropertyReference? = prototype.withLock { prototype in
            prototype._$isPrototype = true
            prototype._$probeLog.removeAll()
            let value = prototype[keyPath: keyPath]
            let log = prototype._$probeLog
            prototype._$isPrototype = false
            prototype._$probeLog.removeAll()
            // A `Bool` sort descriptor's key path reads its attribute through a subscript (SortDescriptor+Bool.swift).
            let read = (value as? BoolSortKey)?.source ?? keyPath
            guard log.count == 1, log[0].keyPath == read else { return nil }
            return log[0].property
        }
        keyPathCache.withLock { $0[keyPath] = .some(found) }
        return found
    }

    /// The persisted property a key path reaches through to-one relationships (`\.folder?.name`,
    /// `\.folder?.parent?.name`): the relationships followed, in order, then the property; a one-step key path gives
    /// no relationship. Nil when the key path is not exactly that: a computed property, a to-many step, a transient
    /// property.
    ///
    /// The key path is read on the prototype with every to-one relationship giving a new object of its destination
    /// whose attributes hold recognizable values, and accepted only when each step read exactly one persisted
    /// property and the value at the end is the last one's own (so that `folder?.name.uppercased()` behind a
    /// computed property is not taken for `folder?.name`).
    func propertyPath(for keyPath: AnyKeyPath) -> (hops: [Int], leaf: PropertyReference)? {
        if let single = property(for: keyPath) { return ([], single) }
        if isDynamic { return nil }
        if let known = pathCache.withLock({ $0[keyPath] }) { return known }
        let found: (hops: [Int], leaf: PropertyReference)? = prototype.withLock { prototype in
            prototype._$isPrototype = true
            prototype._$probesPaths = true
            prototype._$probeLog.removeAll()
            prototype._$probeTargets.removeAll()
            defer {
                prototype._$isPrototype = false
                prototype._$probesPaths = false
                prototype._$probeLog.removeAll()
                prototype._$probeTargets.removeAll()
            }
            let value = prototype[keyPath: keyPath]
            var hops: [Int] = []
            var current: ModelObject = prototype
            while true {
                let log = current._$probeLog
                guard log.count == 1 else { return nil }
                switch log[0].property {
                case .relationship(let slot) where !current._$metadata.relationships[slot].isToMany:
                    guard current._$probeTargets.count == 1 else { return nil }
                    hops.append(slot)
                    current = current._$probeTargets[0]
                case .relationship, .attribute:
                    guard !hops.isEmpty, current._$probeTargets.isEmpty else { return nil }
                    // The value at the end must be what the last step read, as an optional chain gives it.
                    if case .attribute(let slot) = log[0].property, let expected = current._$metadata.probeValue(at: slot) {
                        guard let wrapped = (value as? any OptionalMarker)?.wrappedAny,
                              let codec = current._$metadata.attributes[slot].codec,
                              (try? codec.encodeAny(wrapped)) == expected else { return nil }
                    }
                    return (hops, log[0].property)
                }
            }
        }
        pathCache.withLock { $0[keyPath] = .some(found) }
        return found
    }

    /// A value attribute `slot` holds in a path probe's objects, recognizable as that attribute's; nil for a type
    /// with too few values to tell (a `Bool`) or none to make.
    func probeValue(at slot: Int) -> StoredValue? {
        guard let type = attributes[slot].codec?.type.nonOptional else { return nil }
        let mark = 0x5EED_0000 + slot
        switch type {
        case .string: return .string("\u{1}probe \(entityName) \(slot)")
        case .int, .int64, .int32: return .int(Int64(mark))
        case .uint, .uint64: return .uint(UInt64(mark))
        case .double: return .double(Double(mark) + 0.5)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(mark)))
        case .uuid: return .uuid(UUID(uuid: (0x5E, 0xED, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(slot >> 8 & 0xFF),
                                             UInt8(slot & 0xFF))))
        default: return nil
        }
    }

    /// The row a whole-row fault of this entity holds until its row is read: the identifier, each attribute's
    /// fallback, no relationship target, transaction number 0 (older than any stored row, so the stored row replaces
    /// it).
    func faultRow(_ id: PersistentIdentifier) -> ModelSnapshot {
        let placeholder = faultPlaceholder.withLock { placeholder in
            if let placeholder { return placeholder }
            let made = (AttributeValues(attributes.map(\.encodedFallback)),
                        RelationshipValues(relationships.map { $0.isToMany ? .toMany([]) : .toOne(nil) }))
            placeholder = made
            return made
        }
        return ModelSnapshot(id: id, attributes: placeholder.0, relationships: placeholder.1, transactionNumber: 0)
    }

    /// The fault of an object made for a relationship's target: nothing loaded.
    var wholeRowFault: PartialFault {
        wholeRowFaultBox.withLock { fault in
            if let fault { return fault }
            let made = PartialFault(loaded: attributes.map { _ in false }, relationshipsLoaded: false)
            fault = made
            return made
        }
    }

    /// The attribute slot a key path reads, if it reads exactly one attribute.
    func attributeSlot(for keyPath: AnyKeyPath) -> Int? {
        if case .attribute(let slot)? = property(for: keyPath) { return slot }
        return nil
    }

    // MARK: Inverses

    /// The relationship on the destination that mirrors relationship `slot`, if it has one.
    func inverse(ofRelationship slot: Int) -> InverseReference? {
        inverses.references[slot]
    }

    var inverses: InverseTable {
        if let table = inverseTable.load() { return table }
        return inverseTable.storeIfNil(InverseTable(resolving: self))
    }

    /// Whether an object of this type is an instance of `type`.
    func describes(_ other: any PersistentModel.Type) -> Bool { ObjectIdentifier(type) == ObjectIdentifier(other) }
}

/// One attribute of a model type.
struct AttributeMetadata: @unchecked Sendable {
    let name: String
    let originalName: String?
    /// Nil when the declared type cannot be stored (the schema reports it).
    let codec: (any AnyAttributeCodec)?
    let options: [Schema.Attribute.Option]
    let defaultValue: StoredValue?
    let hasGeneratedDefault: Bool
    /// The prototype's initial value, read back when a stored value cannot be decoded.
    let fallbackValue: Any
    let valueType: Any.Type
    /// A dynamic entity's stand-in for ``fallbackValue`` (it has no prototype): the declared default, else the
    /// type's zero value.
    var storedFallback: StoredValue? = nil

    /// The declared type's name, as the schema of an attribute without a codec gives it (whose building then fails).
    var valueTypeName: String { typeName(valueType) }

    var isExternal: Bool { options.contains(.externalStorage) }
    var preservesValueOnDeletion: Bool { options.contains(.preserveValueOnDeletion) }

    func description(in entity: String) -> Schema.Attribute {
        Schema.Attribute(name: name, originalName: originalName, type: codec?.type ?? .codable(typeName: valueTypeName),
                         defaultValue: defaultValue, hasGeneratedDefault: hasGeneratedDefault, options: options)
    }
}

/// One relationship of a model type.
struct RelationshipMetadata: @unchecked Sendable {
    let name: String
    let originalName: String?
    let destination: any PersistentModel.Type
    let isToMany: Bool
    let deleteRule: DeleteRule
    let minimumModelCount: Int?
    let maximumModelCount: Int?
    let declaredInverse: AnyKeyPath?
    /// Where a dynamic entity's relationship finds its destination's metadata (nil for a Swift type's).
    let dynamicDestinations: DynamicDestinations?
    /// The destination entity's name, for a dynamic entity's relationship.
    private(set) var destinationName: String? = nil

    init(name: String, declaration: RelationshipDeclaration) {
        dynamicDestinations = nil
        self.name = name
        originalName = declaration.originalName
        destination = declaration.destination
        isToMany = declaration.isToMany
        deleteRule = declaration.deleteRule
        minimumModelCount = declaration.minimumModelCount
        maximumModelCount = declaration.maximumModelCount
        declaredInverse = declaration.inverse
    }

    init(dynamic relationship: Schema.Relationship, destinations: DynamicDestinations) {
        name = relationship.name
        originalName = relationship.originalName
        destination = DynamicModel.self
        destinationName = relationship.destination
        isToMany = relationship.isToMany
        deleteRule = relationship.deleteRule
        minimumModelCount = relationship.minimumModelCount == 0 ? nil : relationship.minimumModelCount
        maximumModelCount = relationship.maximumModelCount
        declaredInverse = nil
        dynamicDestinations = destinations
    }

    var destinationMetadata: ModelMetadata {
        if let dynamicDestinations, let destinationName, let metadata = dynamicDestinations[destinationName] {
            return metadata
        }
        return ModelMetadata.of(destination)
    }

    /// Whether this relationship's targets are objects described by `metadata`.
    func points(at metadata: ModelMetadata) -> Bool {
        if dynamicDestinations != nil { return destinationName == metadata.entityName && metadata.isDynamic }
        return ObjectIdentifier(destination) == ObjectIdentifier(metadata.type)
    }
}

/// The metadata of a dynamic schema's entities by name, shared by their relationships. It holds them strongly and
/// they hold it: a dynamic schema's metadata lives as long as the process (a few hundred bytes an entity).
final class DynamicDestinations: @unchecked Sendable {
    private let byName = Locked<[String: ModelMetadata]>([:])

    subscript(name: String) -> ModelMetadata? {
        get { byName.withLock { $0[name] } }
        set { byName.withLock { $0[name] = newValue } }
    }
}

/// The relationship that mirrors another: where it lives and which one it is.
struct InverseReference: @unchecked Sendable {
    let metadata: ModelMetadata
    let slot: Int
    var relationship: RelationshipMetadata { metadata.relationships[slot] }
}

/// The inverse of each relationship of one type, resolved once, with the problems found on the way.
final class InverseTable: @unchecked Sendable {
    let references: [InverseReference?]
    let problems: [SchemaError]

    /// A table given outright (a dynamic entity's, resolved by name).
    init(references: [InverseReference?]) {
        self.references = references
        problems = []
    }

    init(resolving metadata: ModelMetadata) {
        var references: [InverseReference?] = []
        var problems: [SchemaError] = []
        let entity = metadata.entityName
        /// The relationships of `owner` that some relationship on their destination names as its inverse.
        func isClaimed(_ owner: ModelMetadata, _ slot: Int) -> Bool {
            let destination = owner.relationships[slot].destinationMetadata
            return destination.relationships.contains { other in
                guard other.describes(owner.type), let keyPath = other.declaredInverse else { return false }
                return owner.property(for: keyPath) == .relationship(slot)
            }
        }
        for (slot, relationship) in metadata.relationships.enumerated() {
            let destination = relationship.destinationMetadata
            if let keyPath = relationship.declaredInverse {
                guard case .relationship(let back)? = destination.property(for: keyPath) else {
                    problems.append(.inverseNotARelationship(entity: entity, property: relationship.name,
                                                             destination: destination.entityName,
                                                             keyPath: String(describing: keyPath)))
                    references.append(nil)
                    continue
                }
                let mirror = destination.relationships[back]
                guard mirror.describes(metadata.type) else {
                    problems.append(.inverseTypeMismatch(
                        entity: entity, property: relationship.name,
                        inverse: "\(destination.entityName).\(mirror.name)", expected: entity,
                        found: mirror.destinationMetadata.entityName))
                    references.append(nil)
                    continue
                }
                if let backKeyPath = mirror.declaredInverse, metadata.property(for: backKeyPath) != .relationship(slot) {
                    problems.append(.inverseDoesNotPointBack(
                        entity: entity, property: relationship.name,
                        inverse: "\(destination.entityName).\(mirror.name)"))
                    references.append(nil)
                    continue
                }
                references.append(InverseReference(metadata: destination, slot: back))
                continue
            }
            let claims = destination.relationships.indices.filter { back in
                let other = destination.relationships[back]
                guard other.describes(metadata.type), let keyPath = other.declaredInverse else { return false }
                return metadata.property(for: keyPath) == .relationship(slot)
            }
            if claims.count == 1 {
                references.append(InverseReference(metadata: destination, slot: claims[0]))
                continue
            }
            if claims.count > 1 {
                problems.append(.ambiguousInverse(entity: entity, property: relationship.name,
                                                  candidates: claims.map { "\(destination.entityName).\(destination.relationships[$0].name)" }))
                references.append(nil)
                continue
            }
            // Inference: exactly one undeclared relationship on each side pointing at the other.
            let onDestination = destination.relationships.indices.filter { back in
                let other = destination.relationships[back]
                return other.describes(metadata.type) && other.declaredInverse == nil
                    && !(destination === metadata && back == slot) && !isClaimed(destination, back)
            }
            let onSource = metadata.relationships.indices.filter { mine in
                let other = metadata.relationships[mine]
                return other.describes(destination.type) && other.declaredInverse == nil && !isClaimed(metadata, mine)
            }
            if onDestination.count == 1 && onSource.count == 1 && !(destination === metadata && onDestination[0] == slot) {
                references.append(InverseReference(metadata: destination, slot: onDestination[0]))
            } else {
                if !onDestination.isEmpty && (onDestination.count > 1 || onSource.count > 1) {
                    problems.append(.ambiguousInverse(
                        entity: entity, property: relationship.name,
                        candidates: onDestination.map { "\(destination.entityName).\(destination.relationships[$0].name)" }))
                }
                references.append(nil)
            }
        }
        self.references = references
        self.problems = problems
    }
}

extension RelationshipMetadata {
    func describes(_ type: any PersistentModel.Type) -> Bool {
        ObjectIdentifier(destination) == ObjectIdentifier(type)
    }
}

extension ModelMetadata {
    func describes(_ other: ModelMetadata) -> Bool { self === other }
}

/// The key path Observation needs to announce a change of one property, recorded on the property's first use.
final class MutationNotifierSlot: Sendable {
    private let notifier = AtomicLazyReference<MutationNotifier>()

    /// Records the property's key path if it is not known yet. Costs one atomic load afterwards.
    @inline(__always)
    func register<Model: ModelObject, Value>(_ keyPath: ReferenceWritableKeyPath<Model, Value>) {
        if notifier.load() == nil { _ = notifier.storeIfNil(MutationNotifier(keyPath)) }
    }

    /// Performs `mutation`, announced to observers of the property when anyone could be observing it.
    ///
    /// Nobody can observe a property whose getter never ran, so an unknown key path needs no announcement.
    func withMutation(of object: ModelObject, _ mutation: () -> Void) {
        if let notifier = notifier.load() { notifier.perform(object, mutation) } else { mutation() }
    }
}

final class MutationNotifier: @unchecked Sendable {
    let perform: (ModelObject, () -> Void) -> Void

    init<Model: ModelObject, Value>(_ keyPath: ReferenceWritableKeyPath<Model, Value>) {
        perform = { object, mutation in
            let model = unsafeDowncast(object, to: Model.self)
            model._$withMutation(of: model, keyPath: keyPath, mutation)
        }
    }
}

/// What `String(describing: type)` prints (`"Folder"` for `SchemaV2.Folder`, `"Array<String>"`), without what printing
/// a value does first: casting it to `CustomStringConvertible` and the other protocols printing consults (a cast of a
/// type not cast before scans every protocol conformance record of the process) and reflecting it. A metatype
/// conforms to none of those protocols, so `String(describing:)` ends in this very call.
func typeName(_ type: Any.Type) -> String { _typeName(type, qualified: false) }

/// Lets reflection tell persisted properties' wrappers from other stored properties.
protocol AttributeWrapperMarker {}
protocol RelationshipWrapperMarker {}
protocol TransientWrapperMarker {}
extension Attribute: AttributeWrapperMarker {}
extension Relationship: RelationshipWrapperMarker {}
extension Transient: TransientWrapperMarker {}
