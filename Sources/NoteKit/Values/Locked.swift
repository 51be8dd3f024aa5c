import Synchronization

/// State of any type behind a lock (shared by the package's modules, not public), for the few places where the state is not `Sendable` itself (a prototype
/// model object, the rows of a store) but every access goes through the lock.
package final class Locked<State>: @unchecked Sendable {
    private let mutex = Mutex<Void>(())
    private var state: State

    package init(_ state: State) { self.state = state }

    /// Runs `body` with exclusive access to the state.
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        mutex._unsafeLock()
        defer { mutex._unsafeUnlock() }
        return try body(&state)
    }
}
