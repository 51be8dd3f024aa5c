import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore

/// The cold phase (docs/BENCHMARKS.md): what a command-line tool that opens its store per invocation pays. Builds
/// the N-note W1 store once (or reuses it), then starts a new process again and again (this executable, hidden
/// subcommand `top20`) that opens the store, answers W1's pinned query, prints the answer and exits; times each
/// process from spawn to exit and takes its peak resident set from `wait4`. Every answer is checked against what W1
/// wrote, so the phase cannot pass while answering wrong.
///
/// Writable opens (as an application opens its store) and read-only ones alternate, ABBA, after one warm-up run of
/// each, so that other load falls on both.
enum Cold {
    struct Options {
        var notes = 100_000
        var directory = URL(fileURLWithPath: FileManager.default.temporaryDirectory.path)
        var runs = 10
    }

    enum ColdError: Error, CustomStringConvertible {
        case spawn(String, errno: Int32)
        case failed(String, status: String)
        case wrongAnswer(mode: String, run: Int, detail: String)

        var description: String {
            switch self {
            case .spawn(let path, let code): "cannot start \(path): \(String(cString: strerror(code)))"
            case .failed(let command, let status): "\(command) \(status)"
            case .wrongAnswer(let mode, let run, let detail): "the \(mode) open of run \(run) answered wrong: \(detail)"
            }
        }
    }

    static let usage = "notekit-bench cold [--notes N] [--dir DIR] [--runs K]"

    /// This executable, which the phase starts as its children.
    static var executable: String { Bundle.main.executablePath ?? CommandLine.arguments[0] }

    /// `notekit-bench cold` with `arguments` (after the subcommand): prints the phase's JSON line; returns the exit
    /// status (2 for a bad command line, 1 when the phase fails).
    static func main(_ words: [String]) -> Int32 {
        Phase.main(words, options: ["notes", "dir", "runs"], usage: usage, parse: parse, run: run)
    }

    /// The phase's options from `arguments`.
    ///
    /// - Throws: ``UsageError/invalidValue(option:value:expected:)`` for a count that is not a whole number above 0.
    static func parse(_ arguments: Arguments) throws(UsageError) -> Options {
        var options = Options()
        if let directory = arguments.options["dir"] { options.directory = URL(fileURLWithPath: directory) }
        options.notes = try positiveCount("notes", in: arguments) ?? options.notes
        options.runs = try positiveCount("runs", in: arguments) ?? options.runs
        return options
    }

    /// The value of `--NAME` as a whole number above 0; nil when it is not given.
    ///
    /// - Throws: ``UsageError/invalidValue(option:value:expected:)`` for any other value.
    static func positiveCount(_ name: String, in arguments: Arguments) throws(UsageError) -> Int? {
        guard let value = arguments.options[name] else { return nil }
        guard let number = Int(value), number > 0 else {
            throw .invalidValue(option: "--\(name)", value: "\"\(value)\"", expected: "a whole number above 0")
        }
        return number
    }

    /// The store the cold phase opens: `DIR/cold-N/w1.notekit`, as W1 leaves it (compacted), with W1's JSON line
    /// beside it in `w1.json`, written once the store is complete; without that file the store is built again.
    static func store(notes: Int, in directory: URL) throws -> (url: URL, built: Bool) {
        let executable = self.executable
        let folder = directory.appendingPathComponent("cold-\(notes)")
        let store = folder.appendingPathComponent("w1.notekit")
        let marker = folder.appendingPathComponent("w1.json")
        if FileManager.default.fileExists(atPath: marker.path), FileManager.default.fileExists(atPath: store.path) {
            return (store, false)
        }
        FileHandle.standardError.write(Data("building the \(notes)-note W1 store in \(folder.path)\n".utf8))
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // In a process of its own, so that this one stays small: on Linux a child started with posix_spawn (vfork)
        // starts its ru_maxrss at its launcher's peak.
        let arguments = ["w1", "--notes", "\(notes)", "--dir", folder.path]
        let w1 = try spawn(executable, arguments)
        guard w1.status == "exited 0" else {
            throw ColdError.failed("notekit-bench " + arguments.joined(separator: " "), status: w1.status)
        }
        try Data(w1.output.utf8).write(to: marker)
        return (store, true)
    }

    static func run(_ options: Options) throws -> String {
        let (store, built) = try store(notes: options.notes, in: options.directory)
        let expected = W1.pinnedTop20(notes: options.notes)
        var writable: [ChildRun] = [], readOnly: [ChildRun] = []
        func answer(readOnlyOpen: Bool, run: Int) throws -> ChildRun {
            let arguments = ["top20", store.path] + (readOnlyOpen ? ["--read-only"] : [])
            let child = try spawn(executable, arguments)
            guard child.status == "exited 0" else {
                throw ColdError.failed("notekit-bench " + arguments.joined(separator: " "), status: child.status)
            }
            if let wrong = mismatch(child.output, expected) {
                throw ColdError.wrongAnswer(mode: readOnlyOpen ? "read-only" : "writable", run: run, detail: wrong)
            }
            return child
        }
        // Run 0 is the warm-up of each mode; then ABBA.
        _ = try answer(readOnlyOpen: false, run: 0)
        _ = try answer(readOnlyOpen: true, run: 0)
        for run in 1...options.runs {
            for readOnlyOpen in run % 2 == 0 ? [true, false] : [false, true] {
                let child = try answer(readOnlyOpen: readOnlyOpen, run: run)
                if readOnlyOpen { readOnly.append(child) } else { writable.append(child) }
            }
        }
        return "{\"engine\":\"notekit\",\"phase\":\"cold\",\"notes\":\(options.notes),\"runs\":\(options.runs),"
            + "\"store\":\"\(built ? "built" : "reused")\",\"bytes_on_disk\":\(W1.directorySize(store)),"
            + figures(writable, time: "cold_open_top20", peak: "cold_peak_rss_mb") + ","
            + figures(readOnly, time: "cold_read_only_open_top20", peak: "cold_read_only_peak_rss_mb") + ","
            + launcherPeak + "}"
    }

    /// Where `output` (the child's lines, `seconds<TAB>title`) differs from `expected`, in a sentence; nil when the
    /// child answered right.
    static func mismatch(_ output: String, _ expected: [(createdAt: Int, title: String)]) -> String? {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast(output.hasSuffix("\n") ? 1 : 0)
        let wanted = expected.map { "\($0.createdAt)\t\($0.title)" }
        for (index, want) in wanted.enumerated() {
            guard index < lines.count else { return "\(lines.count) notes, expected \(wanted.count)" }
            guard lines[index] == want else { return "note \(index + 1) is \"\(lines[index])\", expected \"\(want)\"" }
        }
        return lines.count == wanted.count ? nil : "\(lines.count) notes, expected \(wanted.count)"
    }

    // MARK: The child

    /// `notekit-bench top20 STORE [--read-only]`: opens the store (writable unless `--read-only`; never creates
    /// one), fetches the pinned notes newest first, limit 20, as model objects, and prints one line per note,
    /// `seconds<TAB>title`. Returns the exit status.
    static func answerTop20(_ words: [String]) -> Int32 {
        let usage = "usage: notekit-bench top20 STORE [--read-only]"
        let arguments = Arguments.readOrExit(words, flags: ["read-only"], positional: true, usage: usage)
        let path: String
        do throws(UsageError) { path = try arguments.single("store path") } catch { error.exit(usage: usage) }
        let url = URL(fileURLWithPath: path)
        let mode: FileStoreConfiguration.Mode = arguments.flags.contains("read-only")
            ? .readOnly : .readWrite(createIfMissing: false)
        do {
            let container = try ModelContainer(for: NoteRecord.self,
                                               configurations: FileStoreConfiguration(url: url, mode: mode))
            let context = ModelContext(container)
            let found = try context.fetch(W1.pinnedTop20Query)
            print(found.map { "\(Int($0.createdAt.timeIntervalSince1970))\t\($0.title)" }.joined(separator: "\n"))
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    // MARK: Timing another program the same way

    static let timeUsage = "notekit-bench time [--runs K] -- PROGRAM [ARGUMENTS...]"

    /// `notekit-bench time [--runs K] -- PROGRAM ARGS...`: times a peer's cold start (`sqlite_top20 DB`) with the
    /// same clock and `wait4` as the cold phase: one warm-up run, then K runs (default 10), each of which must exit
    /// 0. Prints one JSON line; returns the exit status.
    static func timeProgram(_ words: [String]) -> Int32 {
        let arguments = Arguments.readOrExit(words, options: ["runs"], endOfOptions: true, usage: "usage: \(timeUsage)")
        let runs: Int
        let program: [String]
        do throws(UsageError) {
            runs = try positiveCount("runs", in: arguments) ?? 10
            guard let after = arguments.afterEndOfOptions, !after.isEmpty else {
                throw .missingOption(command: "time", option: "--", placeholder: "PROGRAM")
            }
            program = after
        } catch {
            error.exit(usage: "usage: \(timeUsage)")
        }
        do {
            var children: [ChildRun] = []
            for run in 0...runs {
                let child = try spawn(program[0], Array(program.dropFirst()))
                guard child.status == "exited 0" else {
                    throw ColdError.failed(program.joined(separator: " "), status: child.status)
                }
                if run > 0 { children.append(child) }
            }
            let name = URL(fileURLWithPath: program[0]).lastPathComponent
            print("{\"program\":\"\(name)\",\"runs\":\(runs),\(figures(children, time: "wall", peak: "peak_rss_mb")),"
                  + launcherPeak + "}")
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    /// The launching process's own peak, as a JSON member: the floor of every child's `ru_maxrss` on Linux, where
    /// a child started with posix_spawn (vfork) starts with its launcher's peak. A child's figure at this value says
    /// only that the child peaked no higher.
    static var launcherPeak: String {
        "\"launcher_peak_rss_mb\":" + String(format: "%.1f", W1.peakResidentMegabytes())
    }

    /// JSON members: `TIME_ms` (the median wall time of `runs`), `TIME_min_ms`, `TIME_max_ms`, `TIME_runs_ms`
    /// (every run's, in the order they ran), and `PEAK` (the largest peak resident set, in megabytes).
    static func figures(_ runs: [ChildRun], time: String, peak: String) -> String {
        let number = W1.number
        let times = runs.map(\.milliseconds).sorted()
        let median = times.isEmpty ? 0 : times.count % 2 == 1 ? times[times.count / 2]
            : (times[times.count / 2 - 1] + times[times.count / 2]) / 2
        return "\"\(time)_ms\":\(number(median, 2)),\"\(time)_min_ms\":\(number(times.first ?? 0, 2)),"
            + "\"\(time)_max_ms\":\(number(times.last ?? 0, 2)),"
            + "\"\(time)_runs_ms\":[\(runs.map { number($0.milliseconds, 2) }.joined(separator: ","))],"
            + "\"\(peak)\":\(number(runs.map(\.peakResidentMegabytes).max() ?? 0, 1))"
    }

    // MARK: Spawning and timing a process

    struct ChildRun {
        /// From just before `posix_spawn` to `wait4`'s return.
        var milliseconds: Double
        /// `wait4`'s `ru_maxrss` of the child.
        var peakResidentMegabytes: Double
        /// "exited N" or "killed by signal N".
        var status: String
        var output: String
    }

    /// Starts `executable` with `arguments`, its standard output into a pipe (standard error inherited), reads the
    /// output to its end and reaps the child with `wait4`.
    static func spawn(_ executable: String, _ arguments: [String]) throws -> ChildRun {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw ColdError.spawn(executable, errno: errno) }
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t = nil
        #else
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        posix_spawn_file_actions_addclose(&actions, ends[1])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let start = DispatchTime.now().uptimeNanoseconds
        let code = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(ends[1])
        guard code == 0 else {
            close(ends[0])
            throw ColdError.spawn(executable, errno: code)
        }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            if count > 0 { output += buffer[..<count] } else if count < 0, errno == EINTR { continue } else { break }
        }
        close(ends[0])
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw ColdError.spawn(executable, errno: errno) }
        }
        let milliseconds = W1.milliseconds(since: start)
        let peak = W1.megabytes(maxResident: usage.ru_maxrss)
        let signal = status & 0x7f
        return ChildRun(milliseconds: milliseconds, peakResidentMegabytes: peak,
                        status: signal == 0 ? "exited \((status >> 8) & 0xff)" : "killed by signal \(signal)",
                        output: String(decoding: output, as: UTF8.self))
    }
}
