import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
        // On a queue of its own, not on Swift concurrency's cooperative pool: each look is blocking file I/O under the
        // store's lock, and an application whose tasks keep the pool's few threads busy must not starve it.
        Self.followingQueue.asyncAfter(deadline: .now() + Self.followingInterval) { [weak self] in
            self?.followOnce()
        }
    }

    /// The queue the background checks of every store run on, one look at a time.
    private static let followingQueue = DispatchQueue(label: "NoteKitFileStore.following")

    /// One look for other processes' commits; schedules the next while someone listens.
    private func followOnce() {
        let listened = follower.running.withLock { running in
            running = broadcaster.hasSubscribers
            return running
        }
        guard listened else { return }
        state.withLock { state in
            // A failure is kept as the automatic refresh of a read keeps it; the next look tries again.
            do {
                _ = try refresh(&state)
                state.lastRefreshError = nil
            } catch {
                state.lastRefreshError = error
            }
        }
        Self.followingQueue.asyncAfter(deadline: .now() + Self.followingInterval) { [weak self] in
            self?.followOnce()
        }
    }

    /// Whether the background check for listeners is running (for tests).
    var isFollowing: Bool { follower.running.withLock { $0 } }
}
