import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore

/// Workload W2 (docs/BENCHMARKS.md, *W2: queries beyond one entity*): the questions an app asks beyond one entity's
/// own attributes, asked of the store `notekit-bench w1 --notes N --dir DIR` leaves, written as a SwiftData user
/// writes them with the public API. They are the questions of `shared/bench/grdb/Sources/grdb-w2/main.swift`
/// (Q1–Q8), in its order, under its names, with its answers: so the two lines can be compared answer for answer
/// (`--expect FILE`, a file holding grdb-w2's line).
///
/// The store is opened as an app opens it (a `ModelContainer` with a read-only `FileStoreConfiguration`), and every
/// query runs on one `ModelContext`, hot: one warm-up run, then K timed runs (default 7, as grdb-w2), reporting the
/// median. The forms stay as a user writes them even where they are slow today (the query engine is being
/// rewritten); they are not to be rewritten around the slow paths.
enum Queries {
    struct Options {
        var notes = 100_000
        var directory = URL(fileURLWithPath: FileManager.default.temporaryDirectory.path)
        var runs = 7
        var expect: URL?
        /// The questions to ask (`--only q4_strings,q8_text_contains`); nil for all.
        var only: Set<String>?
    }

    enum QueriesError: Error, CustomStringConvertible {
        case notW1Store(String)
        case unsteadyAnswer(query: String, first: String, later: String)
        case unreadableExpectation(String)

        var description: String {
            switch self {
            case .notW1Store(let detail): detail
            case .unsteadyAnswer(let query, let first, let later):
                "\(query) answered \"\(first)\" first and \"\(later)\" later"
            case .unreadableExpectation(let detail): detail
            }
        }
    }

    static let usage = "notekit-bench queries [--notes N] [--dir DIR] [--expect FILE] [--runs K] [--only Q,Q…]"

    /// The questions, in grdb-w2's order and under its names; each returns its answer as grdb-w2 prints it
    /// (before a long answer becomes a digest).
    static let questions: [(name: String, ask: @Sendable (ModelContext) throws -> String)] = [
        // Q1: notes whose notebook is named "Folder 7", and the newest 20 of them (a to-one path).
        ("q1_to_one_path_count", { context in
            String(try context.fetchCount(FetchDescriptor<NoteRecord>(
                predicate: #Predicate { $0.notebook?.name == "Folder 7" })))
        }),
        ("q1_to_one_path_top20", { context in
            var newest = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.notebook?.name == "Folder 7" },
                                                     sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
            newest.fetchLimit = 20
            return try context.fetch(newest).map(\.title).joined(separator: ",")
        }),
        // Q2: notebooks holding at least one pinned note (a to-many `contains(where:)`).
        ("q2_to_many_any", { context in
            String(try context.fetchCount(FetchDescriptor<NotebookRecord>(
                predicate: #Predicate { $0.notes.contains { $0.isPinned } })))
        }),
        // Q3: notebooks with more than 900 notes (a to-many count).
        ("q3_to_many_count", { context in
            String(try context.fetchCount(FetchDescriptor<NotebookRecord>(
                predicate: #Predicate { $0.notes.count > 900 })))
        }),
        // Q4: notes with a title whose body contains "IPSUM" in any case (string operations). grdb-w2 asks
        // `LIKE '%IPSUM%'`; on W1's text (ASCII) that matches exactly what localizedStandardContains does.
        ("q4_strings", { context in
            String(try context.fetchCount(FetchDescriptor<NoteRecord>(
                predicate: #Predicate { !$0.title.isEmpty && $0.body.localizedStandardContains("IPSUM") })))
        }),
        // Q5: how many notes each notebook holds, as "name=count" sorted by name: NoteKit's grouped aggregate
        // (SwiftData has none; `notebook.notes.count` over every notebook is the other way, which reads no note
        // either). grdb-w2's `JOIN … GROUP BY` has no row for the notes without a notebook, so neither does this.
        ("q5_group_count", { context in
            try context.aggregate(FetchDescriptor<NoteRecord>(), groupedBy: \.notebook?.name, .count)
                .compactMap { group in group.key.map { "\($0)=\(group.values)" } }
                .joined(separator: ",")
        }),
        // Q6: the pinned notes' count and their oldest and newest creation dates (aggregates), in whole seconds
        // since 1970.
        ("q6_aggregates", { context in
            let (count, oldest, newest) = try context.aggregate(
                FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned }), .count, .min(\.createdAt),
                .max(\.createdAt))
            func seconds(_ date: Date?) -> String { date.map { String(Int($0.timeIntervalSince1970)) } ?? "" }
            return "\(count),\(seconds(oldest)),\(seconds(newest))"
        }),
        // Q7: the first 20 notes sorted by their notebook's name, then newest first (a sort through a to-one path;
        // notes without a notebook sort first).
        ("q7_sort_by_path", { context in
            var first = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.notebook?.name),
                                                             SortDescriptor(\.createdAt, order: .reverse)])
            first.fetchLimit = 20
            return try context.fetch(first).map(\.title).joined(separator: ",")
        }),
        // Q8: notes whose title contains "edited 12" in any case (text search).
        ("q8_text_contains", { context in
            String(try context.fetchCount(FetchDescriptor<NoteRecord>(
                predicate: #Predicate { $0.title.localizedStandardContains("edited 12") })))
        }),
    ]

    /// `notekit-bench queries` with `arguments` (after the subcommand): prints the JSON line; returns the exit status
    /// (2 for a bad command line, 1 when the run fails or an answer differs from `--expect`'s, with the line still
    /// printed).
    static func main(_ words: [String]) -> Int32 {
        let options: Options
        do throws(UsageError) {
            let arguments = Arguments.readOrExit(words, options: ["notes", "dir", "runs", "expect", "only"],
                                                 usage: "usage: \(usage)")
            options = try parse(arguments)
        } catch {
            error.exit(usage: "usage: \(usage)")
        }
        do {
            // Read the expectation first, so that a wrong path fails before minutes of queries.
            let expected = try options.expect.map(expectation)
            let (line, answers) = try run(options)
            print(line)
            guard let expected, let file = options.expect else { return 0 }
            let wrong = mismatches(answers, expected)
            for problem in wrong {
                FileHandle.standardError.write(Data("error: \(problem) (\(file.path))\n".utf8))
            }
            return wrong.isEmpty ? 0 : 1
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    /// The phase's options from `arguments`.
    ///
    /// - Throws: ``UsageError/invalidValue(option:value:expected:)`` for a count that is not a whole number above 0.
    static func parse(_ arguments: Arguments) throws(UsageError) -> Options {
        var options = Options()
        if let directory = arguments.options["dir"] { options.directory = URL(fileURLWithPath: directory) }
        if let expect = arguments.options["expect"] { options.expect = URL(fileURLWithPath: expect) }
        options.notes = try Cold.positiveCount("notes", in: arguments) ?? options.notes
        options.runs = try Cold.positiveCount("runs", in: arguments) ?? options.runs
        if let only = arguments.options["only"] {
            let names = Set(only.split(separator: ",").map(String.init))
            let known = Set(questions.map(\.name))
            guard !names.isEmpty, names.isSubset(of: known) else {
                throw UsageError.invalidValue(option: "only", value: only,
                                              expected: "question names among " + questions.map(\.name).joined(separator: ","))
            }
            options.only = names
        }
        return options
    }

    /// The store W1 leaves in `directory`, `DIR/w1.notekit`. When there is none, `notekit-bench w1 --notes N --dir
    /// DIR` builds it first, in a process of its own (so that this one starts the queries without its heap).
    static func store(notes: Int, in directory: URL) throws -> URL {
        let store = directory.appendingPathComponent("w1.notekit")
        if FileManager.default.fileExists(atPath: store.path) { return store }
        FileHandle.standardError.write(Data("building the \(notes)-note W1 store in \(directory.path)\n".utf8))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let arguments = ["w1", "--notes", "\(notes)", "--dir", directory.path]
        let w1 = try Cold.spawn(Cold.executable, arguments)
        guard w1.status == "exited 0" else {
            throw Cold.ColdError.failed("notekit-bench " + arguments.joined(separator: " "), status: w1.status)
        }
        return store
    }

    /// Opens the store, checks that it is W1's of `notes` notes, asks every question (a warm-up run, then
    /// `options.runs` timed ones) and returns the JSON line and each answer as printed.
    static func run(_ options: Options) throws -> (line: String, answers: [(name: String, answer: String)]) {
        let url = try store(notes: options.notes, in: options.directory)
        let openStart = DispatchTime.now().uptimeNanoseconds
        let container = try ModelContainer(for: NoteRecord.self,
                                           configurations: FileStoreConfiguration(url: url, mode: .readOnly))
        let context = ModelContext(container)
        let openMilliseconds = W1.milliseconds(since: openStart)

        // The store must be what W1 leaves with N notes, or the answers are not grdb-w2's.
        let notes = try context.fetchCount(FetchDescriptor<NoteRecord>())
        let notebooks = try context.fetchCount(FetchDescriptor<NotebookRecord>())
        guard notes == options.notes, notebooks == 99 else {
            throw QueriesError.notW1Store("\(url.path) holds \(notes) notes and \(notebooks) notebooks, not W1's "
                + "\(options.notes) and 99: run notekit-bench w1 --notes \(options.notes) --dir "
                + "\(options.directory.path) first")
        }

        let number = W1.number
        var fields = ["\"engine\":\"notekit\"", "\"notes\":\(options.notes)", "\"runs\":\(options.runs)",
                      "\"open_ms\":\(number(openMilliseconds, 1))"]
        var answers: [(name: String, answer: String)] = []
        for (name, ask) in questions where options.only?.contains(name) ?? true {
            let answer = try ask(context)   // the warm-up
            var times: [Double] = []
            for _ in 0..<options.runs {
                let start = DispatchTime.now().uptimeNanoseconds
                let again = try ask(context)
                times.append(W1.milliseconds(since: start))
                guard again == answer else {
                    throw QueriesError.unsteadyAnswer(query: name, first: answer, later: again)
                }
            }
            // grdb-w2's median: the middle run of the sorted times (the upper middle for an even count).
            let printed = printedAnswer(answer)
            fields.append("\"\(name)_ms\":\(number(times.sorted()[times.count / 2], 4))")
            fields.append("\"\(name)_answer\":\"\(escaped(printed))\"")
            answers.append((name, printed))
        }
        fields.append("\"peak_rss_mb\":\(number(W1.peakResidentMegabytes(), 1))")
        withExtendedLifetime(container) {}
        return ("{" + fields.joined(separator: ",") + "}", answers)
    }

    /// An answer as grdb-w2 prints it: as it is, or, longer than 80 characters, `fnv1a:` and its digest.
    static func printedAnswer(_ answer: String) -> String {
        answer.count > 80 ? "fnv1a:" + digest(answer) : answer
    }

    /// FNV-1a of the text's UTF-8, in lowercase hex without leading zeros: grdb-w2's `digest`, bit for bit.
    static func digest(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return String(hash, radix: 16)
    }

    /// `text` inside a JSON string's quotes.
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The JSON object of the last line of `file` that holds one (grdb-w2 prints one line).
    static func expectation(_ file: URL) throws -> [String: Any] {
        let text: String
        do { text = try String(contentsOf: file, encoding: .utf8) } catch {
            throw QueriesError.unreadableExpectation("cannot read \(file.path) as UTF-8 text")
        }
        for line in text.split(separator: "\n").reversed() {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
        }
        throw QueriesError.unreadableExpectation("\(file.path) holds no JSON line")
    }

    /// One sentence per question whose answer is not `expected`'s `<name>_answer`.
    static func mismatches(_ answers: [(name: String, answer: String)], _ expected: [String: Any]) -> [String] {
        answers.compactMap { name, answer in
            guard let want = expected["\(name)_answer"] as? String else { return "\(name): no expected answer" }
            return want == answer ? nil : "\(name): notekit answered \"\(answer)\", expected \"\(want)\""
        }
    }
}
