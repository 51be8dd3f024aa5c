import FoundationEssentials
import NoteKit

extension FileStore {
    /// How often a store that can fall behind looks for other processes' commits while someone listens to
    /// ``transactions()``, in seconds: a listener learns of a commit within about this long without reading.
    static let followingInterval: Double = 0.2

    /// Whether a background check is running for the listeners of ``transactions()``.
    final class Follower: Sendable {
        /// Guards starting and stopping, so that a listener who subscribes as the last one leaves is followed.
        let running = Locked(false)
    }

    /// Starts looking for other processes' commits in the background, every ``followingInterval``, unless it is
    /// running already or the open cannot fall behind (an exclusive writable open; `automaticRefreshInterval` nil).
    /// It stops when the last listener stops listening, and when the store is closed or released, which ends every
    /// listener's stream. Each look is what a read does first: a `stat` of the manifest and of the active segment,
    /// then only the records appended; what it picks up is published to the listeners.
    func followWhileListened() {
        guard configuration.automaticRefreshInterval != nil,
              state.withLock({ $0.position != nil }) else { return }
        let start = follower.running.withLock { running in
            defer { running = true }
            return !running
        }
        guard start else { return }
        let interval = Self.followingInterval
        Task.detached { [weak self] in
            while true {
                try? await Task.sleep(for: .seconds(interval))
                guard let store = self else { return }
                let listened = store.follower.running.withLock { running in
                    running = store.broadcaster.hasSubscribers
                    return running
                }
                guard listened else { return }
                store.state.withLock { state in
                    // A failure is kept as the automatic refresh of a read keeps it; the next look tries again.
                    do {
                        _ = try store.refresh(&state)
                        state.lastRefreshError = nil
                    } catch {
                        state.lastRefreshError = "\(error)"
                    }
                }
            }
        }
    }

    /// Whether the background check for listeners is running (for tests).
    var isFollowing: Bool { follower.running.withLock { $0 } }
}
