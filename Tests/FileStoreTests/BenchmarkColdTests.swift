import Foundation
import NoteKitTestSupport
import Testing

/// Runs the built `notekit-bench` (docs/BENCHMARKS.md, *The cold phase*): what can be checked without timing it.
@Suite("Benchmark: the cold phase")
struct BenchmarkColdTests {
    static let executable: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/notekit-bench")
    }()

    func bench(_ arguments: String...) throws -> CommandLineTests.Run {
        try CommandLineTests.run(Self.executable, arguments)
    }

    static let badCommandLines: [(arguments: [String], names: String)] = [
        (["cold", "--runs", "0"], "--runs"),
        (["cold", "--notes", "ten"], "--notes"),
        (["cold", "--notes", "-5"], "--notes"),
        (["cold", "--dir"], "--dir"),
        (["cold", "--bogus", "1"], "--bogus"),
        (["time", "--runs", "x", "--", "/bin/true"], "--runs"),
        (["time", "--runs", "3"], "--"),
    ]

    @Test("A bad command line exits 2 with an error that names the argument", arguments: badCommandLines)
    func badCommandLine(arguments: [String], names: String) throws {
        try Self.expectUsageError(arguments, naming: names)
    }

    /// Runs `notekit-bench` with `arguments` and expects exit status 2 and a first line `error: …` naming `names`.
    static func expectUsageError(_ arguments: [String], naming names: String,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        let run = try CommandLineTests.run(executable, arguments)
        #expect(run.status == 2, "\(arguments): \(run.errors)", sourceLocation: sourceLocation)
        let first = run.errors.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first.hasPrefix("error: ") && first.contains(names), "\(arguments): \(run.errors)",
                sourceLocation: sourceLocation)
    }

    @Test("The child opens an existing store only: on a missing one it fails and creates nothing")
    func childNeverCreates() throws {
        let missing = TemporaryStores.newURL("cold-missing")
        for mode in [[], ["--read-only"]] {
            let run = try CommandLineTests.run(Self.executable, ["top20", missing.path] + mode)
            #expect(run.status == 1 && run.errors.hasPrefix("error: "), "\(mode): \(run.errors)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        #expect(try bench("top20").status == 2)
    }

    @Test("The phase builds the store once, reuses it, and prints every key of both opens")
    func buildsOnceAndReports() throws {
        let directory = TemporaryStores.newURL("cold")
        let first = try bench("cold", "--notes", "120", "--dir", directory.path, "--runs", "1")
        #expect(first.status == 0, "\(first.errors)")
        #expect(first.json["store"] as? String == "built" && first.json["notes"] as? Int == 120, "\(first.output)")
        for key in ["cold_open_top20_ms", "cold_open_top20_min_ms", "cold_open_top20_max_ms", "cold_peak_rss_mb",
                    "cold_read_only_open_top20_ms", "cold_read_only_open_top20_min_ms",
                    "cold_read_only_open_top20_max_ms", "cold_read_only_peak_rss_mb", "bytes_on_disk"] {
            #expect((first.json[key] as? Double).map { $0 > 0 } == true, "\(key) in \(first.output)")
        }
        let second = try bench("cold", "--notes", "120", "--dir", directory.path, "--runs", "2")
        #expect(second.status == 0 && second.json["store"] as? String == "reused", "\(second.output) \(second.errors)")
        #expect((second.json["cold_open_top20_runs_ms"] as? [Double])?.count == 2, "\(second.output)")
        #expect((second.json["cold_read_only_open_top20_runs_ms"] as? [Double])?.count == 2, "\(second.output)")
    }

    @Test("A child that answers with other notes than W1's pinned top 20 fails the phase")
    func wrongAnswerFails() throws {
        // The 200-note store put where the phase expects the 120-note one: its children answer with notes
        // 150, 100, 50, 0 instead of 100, 50, 0.
        let directory = TemporaryStores.newURL("cold-wrong"), other = TemporaryStores.newURL("cold-other")
        #expect(try bench("cold", "--notes", "120", "--dir", directory.path, "--runs", "1").status == 0)
        #expect(try bench("cold", "--notes", "200", "--dir", other.path, "--runs", "1").status == 0)
        let store = directory.appendingPathComponent("cold-120/w1.notekit")
        try FileManager.default.removeItem(at: store)
        try FileManager.default.copyItem(at: other.appendingPathComponent("cold-200/w1.notekit"), to: store)
        let run = try bench("cold", "--notes", "120", "--dir", directory.path, "--runs", "1")
        #expect(run.status == 1, "\(run.output)")
        #expect(run.errors.contains("answered wrong: note 1 is \"1700000150\tEdited"), "\(run.errors)")
        #expect(run.output.isEmpty)
    }
}
