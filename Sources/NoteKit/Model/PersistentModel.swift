#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A persistent model: a `final class` that inherits NoteKit's storage and declares its persisted properties
/// with ``Attribute`` and ``Relationship``.
///
/// ```swift
/// final class Folder: PersistentModel {
///     @Attribute(.unique) var id = UUID()
///     @Attribute var name = ""
///     @Relationship(deleteRule: .nullify, inverse: \Note.folder) var notes: [Note] = []
///     @Relationship var parent: Folder?
///     @Relationship(deleteRule: .nullify, inverse: \Folder.parent) var children: [Folder] = []
///     required init() {}
/// }
/// ```
///
/// `PersistentModel` is ``ModelObject`` (the storage: identity, context, values, observation) together with
/// ``PersistentModelProtocol`` (what a type declares about itself). It is spelled as SwiftData spells it, so
/// `[any PersistentModel.Type]` and `FetchDescriptor<T: PersistentModel>` read the same.
///
/// Why property wrappers rather than a key-path table: the declaration stays beside each property, written
/// once, and each wrapper is four bytes per object. The engine derives the schema from one instance per type,
/// created with `init()`, and never reflects on the objects it loads (Fluent's lesson: per-instance reflection is
/// the bottleneck). Every persisted property needs a default value (or is optional): the same rule that makes a
/// lightweight migration possible.
///
/// Every stored property has a wrapper, as SwiftData persists every stored property unless it is `@Transient`:
/// ``Attribute`` or ``Relationship`` to persist it, ``Transient`` to keep it out of the store (it then resets when
/// the object is loaded again). Building a schema refuses a stored `var` or `let` without one
/// (``SchemaError/storedPropertyWithoutWrapper(entity:property:)``), so a property is never dropped silently.
/// Computed properties and `lazy var`s are derived state: they need no wrapper and are never persisted.
///
/// Initializers: write a convenience initializer that calls `self.init()` first, then sets properties:
/// ```swift
/// convenience init(name: String) { self.init(); self.name = name }
/// ```
public typealias PersistentModel = ModelObject & PersistentModelProtocol

/// What a model type declares about itself beyond its properties. Every requirement but `init()` has a default.
public protocol PersistentModelProtocol: AnyObject {
    /// Creates an object with every property at its declared default.
    init()

    /// The entity's name in the schema and the store. Default: the type's name (`"Folder"`, even when the type is
    /// nested in a frozen schema enum).
    static var entityName: String { get }

    /// The entity's name in an earlier schema, when the type was renamed (lightweight migration follows it).
    static var originalEntityName: String? { get }

    /// Compound unique constraints, SwiftData's `#Unique<QuickNote>([\.title, \.createdAt])`:
    /// ```swift
    /// static var uniqueConstraints: [[PartialKeyPath<QuickNote>]] { [[\.title, \.createdAt]] }
    /// ```
    static var uniqueConstraints: [[PartialKeyPath<Self>]] { get }

    /// Compound indexes, SwiftData's `#Index<NoteRecord>([\.createdAt], [\.isPinned, \.createdAt])`:
    /// ```swift
    /// static var indexes: [[PartialKeyPath<NoteRecord>]] { [[\.createdAt], [\.isPinned, \.createdAt]] }
    /// ```
    /// A fetch whose predicate is an equality or range on an index's leading attributes (and whose sort, if
    /// any, follows the next one) reads the index instead of every object.
    static var indexes: [[PartialKeyPath<Self>]] { get }
}

extension PersistentModelProtocol {
    /// The type's name, as `String(describing:)` prints it: `"Folder"` for `SchemaV2.Folder` too.
    public static var entityName: String { typeName(Self.self) }
    /// No earlier name: the type was not renamed.
    public static var originalEntityName: String? { nil }
    /// No compound unique constraint (single `.unique` attributes are declared on the attribute).
    public static var uniqueConstraints: [[PartialKeyPath<Self>]] { [] }
    /// No compound index.
    public static var indexes: [[PartialKeyPath<Self>]] { [] }
}

/// The targets of one relationship of one object, as identifiers.
public enum RelationshipTargets: Sendable, Hashable {
    /// A to-one relationship's target, or nil.
    case toOne(PersistentIdentifier?)
    /// A to-many relationship's targets, in order, each at most once.
    case toMany([PersistentIdentifier])

    /// The identifiers, in order.
    @inlinable public var identifiers: [PersistentIdentifier] {
        switch self {
        case .toOne(let id): id.map { [$0] } ?? []
        case .toMany(let ids): ids
        }
    }

    /// How many targets there are.
    @inlinable public var count: Int {
        switch self {
        case .toOne(let id): id == nil ? 0 : 1
        case .toMany(let ids): ids.count
        }
    }

    /// Whether `id` is a target.
    @inlinable public func contains(_ id: PersistentIdentifier) -> Bool {
        switch self {
        case .toOne(let target): target == id
        case .toMany(let ids): ids.contains(id)
        }
    }
}

/// A property value a ``Relationship`` can hold: an optional model (to-one) or an array of models (to-many).
///
/// NoteKit conforms `Optional` and `Array` of ``PersistentModel`` types, and adds no member to them but the
/// `Destination` type the protocol requires: how the wrapper reads and writes each is NoteKit's own. Conform no
/// other type: a relationship of another type stops the program at its first read or write.
public protocol RelationshipValue {
    /// The model type at the other end.
    associatedtype Destination: PersistentModel
}

extension Optional: RelationshipValue where Wrapped: PersistentModel {
    /// A to-one relationship points at the wrapped model type.
    public typealias Destination = Wrapped
}

extension Array: RelationshipValue where Element: PersistentModel {
    /// A to-many relationship points at the element model type.
    public typealias Destination = Element
}
