import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A line on standard error that says a long operation is still running, for a person at a terminal: it appears
/// after the first second (a quick run prints nothing), counts the seconds, and is erased when the operation ends.
/// When standard error is not a terminal (a script, a pipe, a log), nothing is written.
enum Progress {
    /// Runs `operation`, showing `label` and the seconds elapsed on standard error while it lasts over a second.
    static func whileRunning<Result>(_ label: String, _ operation: () throws -> Result) rethrows -> Result {
        guard isatty(STDERR_FILENO) == 1 else { return try operation() }
        // (shown, finished): a tick that fires after the operation ended writes nothing.
        let line = Mutex((shown: false, finished: false))
        let start = ContinuousClock.now
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler {
            let seconds = (ContinuousClock.now - start).components.seconds
            line.withLock { line in
                guard !line.finished else { return }
                line.shown = true
                FileHandle.standardError.write(Data("\r\(label)… \(seconds) s".utf8))
            }
        }
        timer.resume()
        defer {
            timer.cancel()
            line.withLock { line in
                line.finished = true
                if line.shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            }
        }
        return try operation()
    }
}
