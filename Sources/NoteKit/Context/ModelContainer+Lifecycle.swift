import Foundation

extension ModelContainer {
    /// Whether the container is closed: ``close()`` was called (or the container was released while one of its
    /// contexts lived on). A closed container's contexts throw ``ModelContainerError/closed(store:)`` from every
    /// fetch and save.
    public var isClosed: Bool { core.isClosed }

    /// Saves what autosaving contexts have pending, then closes the store: a file store flushes, closes its files
    /// and releases its write lock, so another container (in this process or another) can open the same store.
    ///
    /// ```swift
    /// // A migration test: write with the previous version's models, then reopen with today's.
    /// let old = try ModelContainer(for: SchemaV1.Note.self, configurations: FileStoreConfiguration(url: url))
    /// …
    /// try old.close()
    /// let new = try ModelContainer(for: SchemaV2.Note.self, migrationPlan: NotesMigrationPlan.self,
    ///                              configurations: FileStoreConfiguration(url: url))
    /// ```
    ///
    /// Calling it again does nothing. Afterwards every context of the container, existing or new, throws
    /// ``ModelContainerError/closed(store:)`` from `fetch`, `fetchCount`, `fetchIdentifiers`, `save` and history
    /// calls; objects already loaded keep the values they have. A context's unsaved changes stay pending (and
    /// unsaved) unless it autosaves: each context with ``ModelContext/autosaveEnabled`` (the ``mainContext`` by
    /// default) saves first, on its own actor: right away when `close()` is called there, otherwise by waiting for
    /// that actor (so do not call `close()` from code that the main actor, or the model actor, is blocked on).
    ///
    /// Releasing the last reference to a container does the same as `close()`, errors aside (they are written to
    /// standard error). A context keeps its container (and objects keep their context) while anything uses them,
    /// except ``mainContext``, which the container keeps instead.
    ///
    /// - Throws: what closing the store throws (a file store's failed flush); the container is closed all the
    ///   same. A failed final autosave does not throw here: it is reported as every autosave failure is (see
    ///   ``ModelContext/autosaveEnabled``) and its changes stay pending in the context.
    public func close() throws {
        try core.close()
    }
}

/// What a container shares with its contexts: the store and the schema they use, and whether the container is
/// closed. Contexts hold the core rather than reach everything through the container, so that the main context
/// need not keep its container alive.
final class ContainerCore: Sendable {
    let schema: Schema
    let runtime: SchemaRuntime
    let configuration: any DataStoreConfiguration
    let store: any DataStore
    let uniquenessPolicy: UniquenessPolicy
    /// False for a container a migration stage borrows a store for: closing it leaves the store open.
    let ownsStore: Bool
    private let lifecycle = Locked(Lifecycle())
    /// Whether fetches may evaluate on objects what the store cannot run (``ModelContainer/objectEvaluation``).
    let objectEvaluation = Locked(ObjectEvaluation.allowed)

    private struct Lifecycle {
        var phase = Phase.open
        /// The contexts that autosave, for their final save.
        var autosaving: [ObjectIdentifier: WeakAutosaver] = [:]
    }

    private enum Phase {
        case open
        /// Final autosaves are running: contexts still save, nothing new is scheduled.
        case closing
        case closed
    }

    private struct WeakAutosaver {
        weak var autosaver: Autosaver?
    }

    init(schema: Schema, runtime: SchemaRuntime, configuration: any DataStoreConfiguration, store: any DataStore,
         uniquenessPolicy: UniquenessPolicy, ownsStore: Bool) {
        self.schema = schema
        self.runtime = runtime
        self.configuration = configuration
        self.store = store
        self.uniquenessPolicy = uniquenessPolicy
        self.ownsStore = ownsStore
    }

    var isClosed: Bool { lifecycle.withLock { $0.phase == .closed } }

    /// Whether contexts may still schedule autosaves.
    var acceptsAutosaves: Bool { lifecycle.withLock { $0.phase == .open } }

    /// Throws ``ModelContainerError/closed(store:)`` once the container is closed.
    func checkOpen() throws {
        if isClosed { throw ModelContainerError.closed(store: configuration.name) }
    }

    /// Remembers (weakly) a context that autosaves, so that closing saves it a last time.
    func register(_ autosaver: Autosaver) {
        lifecycle.withLock { lifecycle in
            lifecycle.autosaving = lifecycle.autosaving.filter { $0.value.autosaver != nil }
            lifecycle.autosaving[ObjectIdentifier(autosaver)] = WeakAutosaver(autosaver: autosaver)
        }
    }

    /// Runs the final autosaves, then closes the store (once).
    func close() throws {
        let autosavers: [Autosaver]? = lifecycle.withLock { lifecycle in
            guard lifecycle.phase == .open else { return nil }
            lifecycle.phase = .closing
            return lifecycle.autosaving.values.compactMap(\.autosaver)
        }
        guard let autosavers else { return }
        for autosaver in autosavers { autosaver.saveFinally() }
        lifecycle.withLock { lifecycle in
            lifecycle.phase = .closed
            lifecycle.autosaving = [:]
        }
        if ownsStore { try store.close() }
    }

    /// Closes on behalf of a container that was released: there is nobody to throw to.
    func closeReleased() {
        do {
            try close()
        } catch {
            StandardError.write("NoteKit: closing the store \(configuration.name) of a released container failed: "
                                + "\(error)")
        }
    }
}

/// Lines NoteKit writes to standard error: failures that happen where nothing can throw (an autosave, the release of
/// a container).
enum StandardError {
    static func write(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
