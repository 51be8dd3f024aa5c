import Dispatch
import Foundation

extension ModelContext {
    /// How long after the first unsaved change an autosave runs (see ``autosaveEnabled``): 0.25 seconds.
    public static let autosaveDelay: Duration = .milliseconds(250)

    /// Posted when an autosave fails, with the context as the notification's object and the error in `userInfo`
    /// under ``autosaveErrorKey``. The context's changes stay pending.
    public static let autosaveFailed = Notification.Name("NoteKit.ModelContext.autosaveFailed")

    /// The `userInfo` key of ``autosaveFailed``'s error (`any Error`).
    public static let autosaveErrorKey = "error"

    func _autosaveEnabledDidChange() {
        guard autosaveEnabled else { return }
        guard let autosaver else {
            StandardError.write("NoteKit: autosaveEnabled has no effect on this ModelContext: it belongs to no actor "
                                + "NoteKit can save on (only container.mainContext and a ModelActor's context do); "
                                + "call save()")
            return
        }
        core.register(autosaver)
        if hasChanges { scheduleAutosave() }
    }

    /// Gives a context created for a model executor its actor: autosaves run on `queue`, which `key` marks.
    func _bindAutosave(to queue: DispatchQueue, key: DispatchSpecificKey<Void>) {
        autosaver = Autosaver(context: self, actor: .queue(queue, key))
        if autosaveEnabled { core.register(autosaver!) }
    }

    /// Schedules an autosave unless one is scheduled already or the container is closing.
    func scheduleAutosave() {
        guard let autosaver, !autosaver.isScheduled, core.acceptsAutosaves else { return }
        autosaver.schedule()
    }

    /// Saves pending changes, reporting a failure instead of throwing it (there is no caller to throw to).
    func autosave() {
        guard autosaveEnabled, hasChanges, !core.isClosed else { return }
        do {
            try save()
            lastAutosaveError = nil
        } catch {
            lastAutosaveError = error
            StandardError.write("NoteKit: autosave of a context of store \(core.configuration.name) failed; its "
                                + "changes stay pending: \(error)")
            NotificationCenter.default.post(name: Self.autosaveFailed, object: self,
                                            userInfo: [Self.autosaveErrorKey: error])
        }
    }
}

/// Runs a context's autosaves on the context's actor.
///
/// `@unchecked Sendable`: it is handed to the actor it schedules on, and everything it touches (its flag, the
/// context) is touched only there: in jobs of the main actor for the main context, on the serial queue of a model
/// executor for a model actor's context. The context is held weakly: the context owns its autosaver.
final class Autosaver: @unchecked Sendable {
    enum Actor {
        /// The main actor.
        case main
        /// A model executor's serial queue, marked by the key.
        case queue(DispatchQueue, DispatchSpecificKey<Void>)
    }

    private weak var context: ModelContext?
    private let actor: Actor
    /// Whether an autosave is scheduled and has not run yet.
    private(set) var isScheduled = false

    init(context: ModelContext, actor: Actor) {
        self.context = context
        self.actor = actor
    }

    /// ``ModelContext/autosaveDelay`` for Dispatch.
    private static let delay: DispatchTimeInterval = {
        let components = ModelContext.autosaveDelay.components
        return .nanoseconds(Int(components.seconds) * 1_000_000_000 + Int(components.attoseconds / 1_000_000_000))
    }()

    /// Schedules an autosave ``ModelContext/autosaveDelay`` from now. Called on the actor.
    ///
    /// A timer on the actor's own queue (the main queue runs the main actor's jobs), rather than a task that sleeps:
    /// a sleeping task wakes through the shared global queues, which long synchronous work elsewhere in the process
    /// can hold up for seconds.
    func schedule() {
        isScheduled = true
        switch actor {
        case .main:
            DispatchQueue.main.asyncAfter(deadline: .now() + Self.delay) {
                MainActor.assumeIsolated { self.fire() }
            }
        case .queue(let queue, _):
            queue.asyncAfter(deadline: .now() + Self.delay) { self.fire() }
        }
    }

    /// The scheduled autosave, on the actor.
    private func fire() {
        isScheduled = false
        context?.autosave()
    }

    /// Saves the context's pending changes a last time, on its actor, before the container closes; from any thread,
    /// waiting for the actor when called elsewhere.
    func saveFinally() {
        switch actor {
        case .main:
            if MainQueue.isCurrent {
                MainActor.assumeIsolated { context?.autosave() }
            } else {
                DispatchQueue.main.sync { MainActor.assumeIsolated { context?.autosave() } }
            }
        case .queue(let queue, let key):
            if DispatchQueue.getSpecific(key: key) != nil {
                context?.autosave()
            } else {
                queue.sync { context?.autosave() }
            }
        }
    }
}

/// Whether code runs on the main queue, where the main actor's jobs run. Not `Thread.isMainThread`: once a program
/// calls `dispatchMain()` (as an async `main` does on Linux), the main queue is drained by another thread.
enum MainQueue {
    private static let key: DispatchSpecificKey<Void> = {
        let key = DispatchSpecificKey<Void>()
        DispatchQueue.main.setSpecific(key: key, value: ())
        return key
    }()

    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) != nil }
}
