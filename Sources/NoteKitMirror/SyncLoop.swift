import Foundation

/// The background loop of ``StoreMirror/startSyncing(every:)``: a thread that syncs when woken, when its interval has
/// passed, or when the store has a transaction it has not synced (checked every quarter second: a transaction number
/// read, and for a file store a look at whether another process appended), until stopped. It uses no Swift concurrency
/// task, so that a cooperative pool kept busy by the app cannot hold it up.
final class SyncLoop: @unchecked Sendable {
    private let condition = NSCondition()
    let interval: Double
    // Guarded by `condition`.
    private var stopped = false
    private var woken = false
    private var finished = false

    static let threadName = "NoteKitMirror sync"

    init(interval: Duration) {
        let parts = interval.components
        self.interval = max(0.01, Double(parts.seconds) + Double(parts.attoseconds) / 1e18)
    }

    func start(mirror: StoreMirror) {
        // Weak: the loop must not keep the mirror alive, whose deinit stops it.
        let thread = Thread { [weak mirror, self] in
            // After a failure (the server down, the network gone) the next attempt comes sooner than the interval:
            // 1 second, doubling up to the interval, so that mirroring resumes soon after the server is back.
            var wait = 0.0, retry = 1.0
            var synced: UInt64?
            while let mirror, self.waitForTurn(seconds: wait, mirror: mirror, synced: synced) {
                // Read before the sync, not after: a commit that lands while the sync runs, or between its end and
                // the next look, must bring the next sync forward. (The sync's own import moves the transaction number
                // too, which costs one more sync that finds nothing.)
                let before = mirror.currentTransactionNumber()
                if (try? mirror.sync()) != nil {
                    wait = self.interval
                    retry = 1
                    synced = before
                } else {
                    wait = min(self.interval, retry)
                    retry = min(retry * 2, self.interval)
                    // What is committed from now on brings the next sync forward, but not what the failed sync left
                    // pending: that waits for the retry.
                    synced = mirror.currentTransactionNumber()
                }
            }
            self.condition.lock()
            self.finished = true
            self.condition.broadcast()
            self.condition.unlock()
        }
        thread.name = Self.threadName
        thread.start()
    }

    /// Waits until woken, `seconds` have passed or the store moved past `synced`; false once stopped.
    private func waitForTurn(seconds: Double, mirror: StoreMirror, synced: UInt64?) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            condition.lock()
            if !stopped && !woken { _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.25))) }
            let (isStopped, isWoken) = (stopped, woken)
            woken = false
            condition.unlock()
            if isStopped { return false }
            if isWoken || Date() >= deadline { return true }
            if let synced, mirror.currentTransactionNumber() != synced { return true }
        }
    }

    func wake() {
        condition.lock()
        woken = true
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while !finished && Thread.current.name != Self.threadName { condition.wait() }
        condition.unlock()
    }
}
