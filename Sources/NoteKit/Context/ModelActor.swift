import Dispatch

/// An actor that owns a ``ModelContext`` and runs on that context's executor (SwiftData's `ModelActor`), for
/// work with models away from the main actor: imports, background saves, a persistence layer behind a UI.
///
/// SwiftData writes `@ModelActor actor X {}`; NoteKit has no macros, so an actor adopts the protocol itself with
/// the two stored properties and the initializer the macro would have written:
///
/// ```swift
/// actor NotePersistence: ModelActor {
///     nonisolated let modelContainer: ModelContainer
///     nonisolated let modelExecutor: any ModelExecutor
///
///     init(modelContainer: ModelContainer) {
///         self.modelContainer = modelContainer
///         modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
///     }
///
///     func rename(_ id: PersistentIdentifier, to name: String) throws {
///         guard let folder = self[id, as: Folder.self] else { return }
///         folder.name = name
///         try modelContext.save()
///     }
/// }
/// ```
///
/// The protocol gives the actor its ``unownedExecutor`` from ``modelExecutor``, so every method of the actor runs
/// on the executor that owns the context, and ``modelContext`` is usable in any of them without `await`. Model
/// objects stay inside the actor: pass ``PersistentIdentifier``s or your own `Sendable` values across.
///
/// Each call from outside the actor is a hop to the executor's queue (a thread switch), so give the actor methods
/// that do a whole piece of work (fetch, change, save) rather than many small ones.
///
/// ## Topics
/// - ``modelContainer``
/// - ``modelExecutor``
/// - ``modelContext``
/// - ``unownedExecutor``
/// - ``subscript(_:as:)``
public protocol ModelActor: Actor {
    /// The container whose store the actor's context reads and writes.
    nonisolated var modelContainer: ModelContainer { get }

    /// The executor that runs the actor and owns its context. It must also be a `SerialExecutor` (as
    /// ``DefaultSerialModelExecutor`` is), since an actor runs on a serial executor.
    ///
    /// Use ``modelContext`` from the actor's methods rather than reaching for the executor's context: only the
    /// former is checked by the compiler to run on the executor.
    nonisolated var modelExecutor: any ModelExecutor { get }
}

extension ModelActor {
    /// The actor's executor: ``modelExecutor``, so that the actor's methods run where its context lives.
    ///
    /// - Precondition: ``modelExecutor`` conforms to `SerialExecutor`. A model executor that does not cannot run an
    ///   actor: the first call to the actor stops the program with a message naming the executor's type.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        guard let executor = modelExecutor as? any SerialExecutor else {
            preconditionFailure("\(type(of: modelExecutor)) is not a SerialExecutor, so it cannot run the model actor "
                                + "\(Self.self); use DefaultSerialModelExecutor(modelContext:)")
        }
        return executor.asUnownedSerialExecutor()
    }

    /// The actor's context: the one ``modelExecutor`` owns. Isolated to the actor, like the models it returns.
    public var modelContext: ModelContext {
        modelExecutor.modelContext
    }

    /// The model with identifier `id` as a `T`: the one the actor's context already has, or one loaded from the
    /// store; nil when the store does not have it or it is not a `T`.
    ///
    /// - Complexity: O(1).
    public subscript<T: PersistentModel>(id: PersistentIdentifier, as type: T.Type) -> T? {
        modelContext[id, as: type]
    }
}

/// An executor that owns a ``ModelContext`` and runs the work that uses it (SwiftData's `ModelExecutor`).
///
/// `ModelContext` is not `Sendable`; an executor makes it safe to use from concurrent code by running every job
/// that touches it one at a time. Read ``modelContext`` only from code the executor runs, which is what
/// ``ModelActor/modelContext`` guarantees.
public protocol ModelExecutor: Executor {
    /// The context this executor owns. Use it only from jobs the executor runs.
    var modelContext: ModelContext { get }
}

/// A ``ModelExecutor`` that runs its jobs one at a time, and so can be the executor of a ``ModelActor``
/// (SwiftData's `SerialModelExecutor`).
public protocol SerialModelExecutor: ModelExecutor, SerialExecutor {}

/// The executor of a ``ModelActor``: it owns one ``ModelContext`` and runs the actor's jobs one after another on a
/// serial dispatch queue of its own, never on the main thread.
///
/// ```swift
/// modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
/// ```
///
/// Each executor has its own queue, so two model actors run in parallel, each serially; give each actor its own
/// executor and context. The queue runs jobs in the order they are enqueued; which job the concurrency runtime
/// enqueues first (for instance among calls made concurrently from several tasks) is the runtime's choice, as
/// for any actor.
public final class DefaultSerialModelExecutor: SerialModelExecutor {
    /// The context this executor owns.
    ///
    /// `nonisolated(unsafe)` because `ModelContext` is not `Sendable` while this executor is: the compiler cannot
    /// see that the context is only used by the jobs this executor runs, one at a time on its serial queue, which
    /// is the contract of ``ModelExecutor`` and what ``ModelActor/modelContext`` enforces.
    public nonisolated(unsafe) let modelContext: ModelContext

    /// Serial: one job at a time, in the order enqueued, so the context is never used by two threads at once.
    private let queue: DispatchQueue

    /// Marks ``queue`` (and only it), so that the executor can tell whether the current code runs on it.
    private let queueKey = DispatchSpecificKey<Void>()

    /// An executor that owns `modelContext`, which from now on must be used only from the jobs it runs.
    ///
    /// Pass a new context made for this executor, `ModelContext(container)`, not one another actor also uses.
    public init(modelContext: ModelContext) {
        self.modelContext = modelContext
        queue = DispatchQueue(label: "NoteKit.DefaultSerialModelExecutor")
        queue.setSpecific(key: queueKey, value: ())
        // The context's autosaves (off by default, as in SwiftData) run on this queue, between the actor's jobs.
        modelContext._bindAutosave(to: queue, key: queueKey)
    }

    /// Runs `job` on the executor's queue, after the jobs enqueued before it.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(on: self.asUnownedSerialExecutor())
        }
    }

    /// Stops the program unless the current code runs on this executor; lets `assumeIsolated` and
    /// `preconditionIsolated` accept code running on the executor's queue outside a job.
    public func checkIsolated() {
        precondition(isCurrent, "expected to run on \(queue.label), the executor of a model actor")
    }

    /// Whether the current code runs on this executor.
    @available(macOS 26.0, iOS 26.0, watchOS 26.0, tvOS 26.0, visionOS 26.0, *)
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrent
    }

    /// Whether the current code runs on the executor's queue.
    var isCurrent: Bool {
        DispatchQueue.getSpecific(key: queueKey) != nil
    }
}
