#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The schema and the store of an application's models (SwiftData's `ModelContainer`).
///
/// ```swift
/// let container = try ModelContainer(for: Note.self,
///                                    configurations: ModelConfiguration(isStoredInMemoryOnly: true))
/// let context = ModelContext(container)
/// ```
///
/// A container is `Sendable`: share one between actors and give each actor its own ``ModelContext``.
///
/// A container keeps its store open (a file store: its files and its write lock) until ``close()`` is called or the
/// last reference to the container goes, whichever comes first; see ``close()``.
///
/// ## Topics
/// - ``mainContext``
/// - ``close()``
/// - ``isClosed``
/// - ``transactions()``
public final class ModelContainer: Sendable {
    /// The schema: the registered types and every type reachable from them.
    public let schema: Schema
    /// The store's configuration.
    public let configuration: any DataStoreConfiguration
    /// The store every context of this container reads and writes.
    public let store: any DataStore
    /// What a save does with an inserted duplicate of a unique key.
    public let uniquenessPolicy: UniquenessPolicy
    /// Whether ``mainContext`` records changes for undo (it gets a ``ModelUndoManager``). Contexts created with
    /// ``ModelContext/init(_:)`` start without one, as in SwiftData: assign ``ModelContext/undoManager`` to
    /// opt in, so that background work does not pay for undo it never uses.
    public let isUndoEnabled: Bool

    /// Whether a fetch of this container's contexts may evaluate on model objects what its store cannot run
    /// (``ObjectEvaluation``); a descriptor's own ``FetchDescriptor/objectEvaluation`` wins. `.allowed` by default:
    /// every predicate works, the ones the store cannot run are slower (``ModelContext/explain(_:)`` says which).
    /// Set it to `.refused` in tests to make any such fetch throw ``FetchError/notRunInStore(entity:parts:)``, as
    /// SwiftData throws for a predicate its store cannot translate.
    public var objectEvaluation: ObjectEvaluation {
        get { core.objectEvaluation.withLock { $0 } }
        set { core.objectEvaluation.withLock { $0 = newValue } }
    }

    let runtime: SchemaRuntime
    /// What the container's contexts share with it: the store, and whether it is closed.
    let core: ContainerCore
    private let mainContextBox = MainContextBox()

    /// A container for `types` (and every type they reach).
    ///
    /// A store written with an older schema is migrated when it opens: lightweight changes by themselves (see
    /// ``MigrationStage/lightweight(fromVersion:toVersion:)``), other changes through `migrationPlan`'s custom
    /// stages. With a plan, the schema takes the version of the plan's ``VersionedSchema`` whose models `types`
    /// are (by content hash); without one, `types` are an unversioned model list, which the store orders by
    /// content hash against the schemas it was written with (docs/MIGRATIONS.md, *Versioning*).
    ///
    /// - Parameters:
    ///   - types: the model types.
    ///   - migrationPlan: the shipped schema versions and the stages between them, for changes that need code.
    ///   - uniquenessPolicy: upsert (SwiftData's behaviour, the default) or reject duplicates of unique keys.
    ///   - isUndoEnabled: whether ``mainContext`` gets a ``ModelUndoManager`` (SwiftData's `isUndoEnabled`);
    ///     false by default.
    ///   - configurations: exactly one store configuration.
    /// - Throws: ``SchemaError`` for an invalid model declaration, ``ModelContainerError`` for a configuration
    ///   NoteKit cannot use, ``MigrationError`` when the store's schema cannot be migrated (a store written by a
    ///   newer schema is refused and left untouched; each case says what was written), or the store's own errors
    ///   when it cannot be opened.
    public convenience init(for types: any PersistentModel.Type...,
                            migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
                            uniquenessPolicy: UniquenessPolicy = .upsert,
                            isUndoEnabled: Bool = false,
                            configurations: any DataStoreConfiguration...) throws {
        try self.init(for: Schema(types), migrationPlan: migrationPlan, uniquenessPolicy: uniquenessPolicy,
                      isUndoEnabled: isUndoEnabled, configurations: configurations)
    }

    /// A container for `schema`.
    ///
    /// ``schema`` is `schema` at its version: the one it declares; with a plan, the version of the plan's schema
    /// with its content hash; else the version the store records for it.
    ///
    /// - Throws: as the initializer that takes model types.
    public init(for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
                uniquenessPolicy: UniquenessPolicy = .upsert, isUndoEnabled: Bool = false,
                configurations: [any DataStoreConfiguration]) throws {
        guard let runtime = schema.runtime else { throw ModelContainerError.schemaWithoutModelTypes }
        guard let configuration = configurations.first else { throw ModelContainerError.noConfiguration }
        guard configurations.count == 1 else {
            throw ModelContainerError.multipleConfigurations(configurations.map(\.name))
        }
        let versioned = try migrationPlan.map { try SchemaVersioning.resolving(schema, in: $0) } ?? schema
        self.runtime = runtime
        self.configuration = configuration
        self.uniquenessPolicy = uniquenessPolicy
        self.isUndoEnabled = isUndoEnabled
        if let migrationPlan, let migratable = configuration as? any MigratableStoreConfiguration {
            store = try MigrationRunner.open(versioned, plan: migrationPlan, configuration: migratable,
                                             uniquenessPolicy: uniquenessPolicy)
        } else {
            store = try configuration.makeStore(schema: versioned)
        }
        // An unversioned schema has the version the store records for it (the store's own, carried on).
        let recorded = store.schema
        self.schema = !versioned.isVersioned && recorded.contentHash == versioned.contentHash
            ? versioned.carrying(recorded.version) : versioned
        core = ContainerCore(schema: self.schema, runtime: runtime, configuration: configuration, store: store,
                             uniquenessPolicy: uniquenessPolicy, ownsStore: true)
    }

    /// A container over a store already opened (by a migration session), which stays open when the container
    /// closes: the session hands it on.
    init(schema: Schema, store: any DataStore, configuration: any DataStoreConfiguration,
         uniquenessPolicy: UniquenessPolicy) throws {
        guard let runtime = schema.runtime else { throw ModelContainerError.schemaWithoutModelTypes }
        self.schema = schema
        self.runtime = runtime
        self.configuration = configuration
        self.uniquenessPolicy = uniquenessPolicy
        self.isUndoEnabled = false
        self.store = store
        core = ContainerCore(schema: schema, runtime: runtime, configuration: configuration, store: store,
                             uniquenessPolicy: uniquenessPolicy, ownsStore: false)
    }

    /// Releasing the last reference closes the container (see ``close()``).
    deinit { core.closeReleased() }

    /// A closed stand-in for a container that was released while its main context lived on (see
    /// ``ModelContext/container``).
    init(releasedContainerOf core: ContainerCore) {
        schema = core.schema
        runtime = core.runtime
        configuration = core.configuration
        uniquenessPolicy = core.uniquenessPolicy
        isUndoEnabled = false
        store = core.store
        self.core = core
    }

    /// The context of the main actor, created on first use; it has a ``ModelUndoManager`` when the container
    /// was created with `isUndoEnabled: true`, and saves by itself (``ModelContext/autosaveEnabled`` is true).
    ///
    /// The container keeps its main context; the main context does not keep the container (so that dropping the
    /// container releases the store). A main context used after its container was released finds it closed.
    @MainActor public var mainContext: ModelContext {
        if let context = mainContextBox.context { return context }
        let context = ModelContext(mainContextOf: self)
        if isUndoEnabled { context.undoManager = ModelUndoManager() }
        mainContextBox.context = context
        return context
    }
}

/// Holds the main actor's context inside a `Sendable` container.
@MainActor private final class MainContextBox {
    var context: ModelContext?
    nonisolated init() {}
}

/// A container NoteKit cannot create as asked.
public enum ModelContainerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No configuration was given.
    case noConfiguration
    /// More than one configuration was given; NoteKit stores a schema in one store.
    case multipleConfigurations([String])
    /// A persistent store was asked of the core library.
    case noPersistentStore(name: String)
    /// The schema was decoded from a store and has no model types to create objects from.
    case schemaWithoutModelTypes
    /// The container was closed (``ModelContainer/close()``, or released while one of its contexts lived on):
    /// its contexts neither fetch nor save.
    case closed(store: String)

    /// A sentence saying what was wrong with the container asked for and what to pass instead.
    public var description: String {
        switch self {
        case .noConfiguration:
            "no store configuration: pass ModelConfiguration(isStoredInMemoryOnly: true), or NoteKitFileStore's "
                + "FileStoreConfiguration(url:) for a store on disk"
        case .multipleConfigurations(let names):
            "\(names.count) configurations given (\(names.joined(separator: ", "))); a container has one store"
        case .noPersistentStore(let name):
            "configuration \(name) asks for a persistent store; import NoteKitFileStore and use "
                + "FileStoreConfiguration(url:)"
        case .schemaWithoutModelTypes:
            "the schema has no model types (it was decoded from a store); build it from the model types"
        case .closed(let store):
            "the container of store \(store) is closed (close() was called, or the container was released); "
                + "open a new ModelContainer to read or write the store"
        }
    }
}
