import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
import Synchronization

/// The readwrite phase (docs/BENCHMARKS.md, *Reads beside a write*): GRDB's `grdb-readwrite` counterpart. On a copy of
/// the N-note W1 store, one thread retitles a note per save (each save durable) for S seconds while the calling
/// thread answers W1's pinned top 20 in a loop, each on a context of its own over one container. Prints commits per
/// second and the reads' count and latency (median, 99th percentile, maximum), under the keys `grdb-readwrite`
/// prints; a read that waits for a save in progress shows in the percentiles and the maximum. `--sharing exclusive`
/// opens the copy as W1's option does: one process's writer, holding the store's lock from open to close, with reserved
/// space at the end of the segment (docs/FORMAT.md, *Reserved space*); the default shares it per save, as an app does.
///
/// The copy is made afresh from the cold phase's store (`DIR/cold-N`, built by W1 when missing), which stays as W1
/// left it: the cold phase checks its titles.
enum ReadWrite {
    struct Options {
        var notes = 100_000
        var directory = URL(fileURLWithPath: FileManager.default.temporaryDirectory.path)
        var seconds = 3.0
        /// How the copy's writable open shares the store: per save (the default, as an app's) or exclusive.
        var sharing = FileStoreConfiguration.Sharing.perSave
    }

    enum ReadWriteError: Error, CustomStringConvertible {
        case wrongAnswer(read: Int, found: Int, expected: Int)
        case noNotes

        var description: String {
            switch self {
            case .wrongAnswer(let read, let found, let expected):
                "read \(read) found \(found) pinned notes, expected \(expected)"
            case .noNotes: "the store holds no note for the writer to retitle"
            }
        }
    }

    static let usage = "notekit-bench readwrite [--notes N] [--dir DIR] [--seconds S] [--sharing exclusive|shared]"

    /// `notekit-bench readwrite` with `words` (after the subcommand): prints the phase's JSON line; returns the exit
    /// status (2 for a bad command line, 1 when the phase fails).
    static func main(_ words: [String]) -> Int32 {
        Phase.main(words, options: ["notes", "dir", "seconds", "sharing"], usage: usage, parse: parse, run: run)
    }

    /// The phase's options from `arguments`.
    ///
    /// - Throws: ``UsageError/invalidValue(option:value:expected:)`` for a note count that is not a whole number
    ///   above 0, a duration that is not a number of seconds above 0, or a sharing other than `exclusive` or
    ///   `shared`.
    static func parse(_ arguments: Arguments) throws(UsageError) -> Options {
        var options = Options()
        if let directory = arguments.options["dir"] { options.directory = URL(fileURLWithPath: directory) }
        options.notes = try Cold.positiveCount("notes", in: arguments) ?? options.notes
        if let value = arguments.options["seconds"] {
            guard let seconds = Double(value), seconds > 0, seconds.isFinite else {
                throw .invalidValue(option: "--seconds", value: "\"\(value)\"", expected: "a number of seconds above 0")
            }
            options.seconds = seconds
        }
        let sharing = arguments.options["sharing"] ?? "shared"
        guard let chosen = FileStoreConfiguration.Sharing(benchmarkName: sharing) else {
            throw .invalidValue(option: "--sharing", value: "\"\(sharing)\"", expected: "exclusive or shared")
        }
        options.sharing = chosen
        return options
    }

    static func run(_ options: Options) throws -> String {
        let (source, built) = try Cold.store(notes: options.notes, in: options.directory)
        let folder = options.directory.appendingPathComponent("readwrite-\(options.notes)")
        let store = folder.appendingPathComponent("w1.notekit")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: source, to: store)
        defer { try? FileManager.default.removeItem(at: folder) }

        let configuration = FileStoreConfiguration(url: store, sharing: options.sharing)
        let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
        let expected = min(20, (options.notes + W1.pinnedEvery - 1) / W1.pinnedEvery)
        let nanoseconds = UInt64(options.seconds * 1e9)
        let writer = Writer(container: container, until: DispatchTime.now().uptimeNanoseconds + nanoseconds)
        writer.start()

        // The reader: the calling thread, its own context, until the writer's deadline.
        let context = ModelContext(container)
        var latencies: [Double] = []
        let deadline = writer.deadline
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let start = DispatchTime.now().uptimeNanoseconds
            let found = try context.fetch(W1.pinnedTop20Query)
            latencies.append(W1.milliseconds(since: start))
            guard found.count == expected else {
                _ = try? writer.wait()
                throw ReadWriteError.wrongAnswer(read: latencies.count, found: found.count, expected: expected)
            }
        }
        let (commits, elapsed) = try writer.wait()
        try (container.store as? FileStore)?.close()

        latencies.sort()
        func at(_ quantile: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * quantile))]
        }
        return "{\"engine\":\"notekit\",\"phase\":\"readwrite\",\"notes\":\(options.notes),"
            + "\"sharing\":\"\(options.sharing.benchmarkName)\","
            + "\"store\":\"\(built ? "built" : "reused")\",\"seconds\":\(options.seconds),"
            + "\"commits\":\(commits),\"commits_per_s\":\(W1.number(Double(commits) / elapsed, 1)),"
            + "\"reads\":\(latencies.count),\"read_p50_ms\":\(W1.number(at(0.5), 4)),"
            + "\"read_p99_ms\":\(W1.number(at(0.99), 4)),\"read_max_ms\":\(W1.number(latencies.last ?? 0, 4))}"
    }

    /// The writing thread: retitles the first 1,000 notes by creation date in turn, one durable save each, until its
    /// deadline.
    final class Writer: Sendable {
        let container: ModelContainer
        let deadline: UInt64
        private let outcome = Mutex<Result<(commits: Int, seconds: Double), any Error>?>(nil)
        private let done = DispatchSemaphore(value: 0)

        init(container: ModelContainer, until deadline: UInt64) {
            self.container = container
            self.deadline = deadline
        }

        func start() {
            Thread.detachNewThread { [self] in
                let result = Result { try write() }
                outcome.withLock { $0 = result }
                done.signal()
            }
        }

        /// Waits for the thread to end; returns how many saves it made in how many seconds, or throws what stopped it.
        @discardableResult
        func wait() throws -> (commits: Int, seconds: Double) {
            done.wait()
            done.signal()
            return try outcome.withLock { $0! }.get()
        }

        private func write() throws -> (commits: Int, seconds: Double) {
            let context = ModelContext(container)
            var first = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)])
            first.fetchLimit = 1_000
            let notes = try context.fetch(first)
            guard !notes.isEmpty else { throw ReadWriteError.noNotes }
            let start = DispatchTime.now().uptimeNanoseconds
            var commits = 0
            while DispatchTime.now().uptimeNanoseconds < deadline {
                let note = notes[commits % notes.count]
                note.title = "Retitled \(commits)"
                note.updatedAt = Date()
                try context.save()
                commits += 1
            }
            return (commits, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
    }
}
