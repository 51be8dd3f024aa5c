import Foundation

/// A `notekit-stress child` process, seen from its parent: its standard output read line by line without blocking
/// for longer than asked, and its end by SIGKILL.
final class StressChildProcess {
    /// A line the child wrote (docs/reliability/kill.md, *The child's protocol*).
    enum Event: Equatable {
        /// The store is open and holds steps 1…`from - 1`.
        case ready(from: Int)
        /// Step `step` is being saved; `tags` say what it writes (`blob`, `large`, `rotate`).
        case saving(step: Int, tags: Set<String>)
        /// `save()` of step `step` returned; the save started `rotations` segments and ran `compactions`
        /// automatic compactions.
        case acknowledged(step: Int, rotations: Int, compactions: Int)
        case compacting(after: Int)
        case compacted(after: Int)
        case trimming(after: Int)
        case trimmed(after: Int)
        /// Asked to pause (a writer sharing the store), the child stopped between saves; it holds steps up to `at`.
        case paused(at: Int)
        /// A writer that counts refusals (`--retry`) was refused the lock after waiting `waited` seconds: to
        /// `what` (`save`, `compact`, `trim`, `open`) at step `step` (nil for an open); it tries again.
        case refused(what: String, step: Int?, waited: Double)
        /// A writer that counts refusals (`--retry`) could not open the store because the open reported damage;
        /// it opens it again.
        case openDamage(String)
        /// The child gave up: what went wrong.
        case failed(String)
        /// The child made as many saves as it was told to and is exiting.
        case finished

        init?(_ line: Substring) {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let word = words.first else { return nil }
            func number(_ index: Int) -> Int? { index < words.count ? Int(words[index]) : nil }
            func field(_ name: String) -> Int? {
                words.first { $0.hasPrefix(name + "=") }.flatMap { Int($0.dropFirst(name.count + 1)) }
            }
            switch word {
            case "ready": guard let from = number(1) else { return nil }; self = .ready(from: from)
            case "save":
                guard let step = number(1) else { return nil }
                self = .saving(step: step, tags: Set(words.dropFirst(2).map(String.init)))
            case "ack":
                guard let step = number(1) else { return nil }
                self = .acknowledged(step: step, rotations: field("rotations") ?? 0,
                                     compactions: field("compactions") ?? 0)
            case "compact": guard let step = number(1) else { return nil }; self = .compacting(after: step)
            case "compacted": guard let step = number(1) else { return nil }; self = .compacted(after: step)
            case "trim": guard let step = number(1) else { return nil }; self = .trimming(after: step)
            case "trimmed": guard let step = number(1) else { return nil }; self = .trimmed(after: step)
            case "paused": guard let step = number(1) else { return nil }; self = .paused(at: step)
            case "locked":
                guard words.count >= 2 else { return nil }
                let waited = words.first { $0.hasPrefix("waited=") }.flatMap { Double($0.dropFirst(7)) } ?? 0
                self = .refused(what: String(words[1]), step: number(2), waited: waited)
            case "damage":
                guard words.count >= 2, words[1] == "open" else { return nil }
                self = .openDamage(String(line.drop { $0 != " " }.dropFirst().drop { $0 != " " }.dropFirst()))
            case "error": self = .failed(String(line.dropFirst(word.count).drop { $0 == " " }))
            case "done": self = .finished
            default: return nil
            }
        }
    }

    /// How the child ended.
    enum Ending: Equatable {
        case killed
        case exited(Int32)
        case signalled(Int32)
    }

    private let process = Process()
    private let output = Pipe()
    /// The child's standard input, when the parent controls it (`pause`/`resume` lines).
    private let control: Pipe?
    private let descriptor: Int32
    private var pending: [UInt8] = []
    private(set) var endOfOutput = false
    let started = ContinuousClock.now

    /// Starts `executable` with `arguments`, its standard error going to the file at `errors` (appended to). With
    /// `controlled`, its standard input is a pipe ``send(_:)`` writes to; else it reads nothing.
    init(executable: URL, arguments: [String], errors: URL, controlled: Bool = false) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = output
        if !FileManager.default.fileExists(atPath: errors.path) {
            _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        }
        let errorFile = try FileHandle(forWritingTo: errors)
        errorFile.seekToEndOfFile()
        process.standardError = errorFile
        control = controlled ? Pipe() : nil
        process.standardInput = control ?? FileHandle.nullDevice
        descriptor = output.fileHandleForReading.fileDescriptor
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }

    /// Writes `line` to the child's standard input (if controlled); a child that is gone is ignored.
    func send(_ line: String) {
        guard let control else { return }
        let bytes = Array((line + "\n").utf8)
        // SIGPIPE is ignored by the driver: a write to a child that died fails with EPIPE instead.
        _ = bytes.withUnsafeBytes { write(control.fileHandleForWriting.fileDescriptor, $0.baseAddress, $0.count) }
    }

    /// The events of the complete lines written since the last call, waiting up to `timeout` seconds for one.
    func events(waitingUpTo timeout: Double) -> [Event] {
        lines(waitingUpTo: timeout).compactMap(Event.init)
    }

    /// The complete lines written since the last call, waiting up to `timeout` seconds for one: for a child whose
    /// lines are not ``Event``s (a share test reader).
    func lines(waitingUpTo timeout: Double) -> [Substring] {
        var result = drainLines()
        if !result.isEmpty || endOfOutput { return result }
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(max(0, timeout * 1000).rounded(.up)))
        if ready > 0 { readAvailable() }
        result = drainLines()
        return result
    }

    /// Kills the child with SIGKILL (if it is still running), waits for it, and returns the events it wrote last.
    func kill() -> (ending: Ending, events: [Event]) {
        let (ending, lines) = killReadingLines()
        return (ending, lines.compactMap(Event.init))
    }

    /// Kills the child with SIGKILL (if it is still running), waits for it, and returns the lines it wrote last.
    func killReadingLines() -> (ending: Ending, lines: [Substring]) {
        if process.isRunning { _ = Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        var lines: [Substring] = []
        // The child is gone: whatever it wrote is in the pipe. Read until nothing is left.
        while !endOfOutput {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else { break }
            readAvailable()
            lines += drainLines()
        }
        lines += drainLines()
        try? output.fileHandleForReading.close()
        try? control?.fileHandleForWriting.close()
        let ending: Ending = switch process.terminationReason {
        case .uncaughtSignal: process.terminationStatus == SIGKILL ? .killed : .signalled(process.terminationStatus)
        case .exit: .exited(process.terminationStatus)
        @unknown default: .exited(process.terminationStatus)
        }
        return (ending, lines)
    }

    private func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 { pending += chunk[0..<count] } else if count == 0 { endOfOutput = true }
    }

    private func drainLines() -> [Substring] {
        guard let last = pending.lastIndex(of: 0x0A) else { return [] }
        let text = String(decoding: pending[...last], as: UTF8.self)
        pending.removeSubrange(...last)
        return text.split(separator: "\n")
    }
}
