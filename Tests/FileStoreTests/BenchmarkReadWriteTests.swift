import Foundation
import NoteKitTestSupport
import Testing

/// Runs the built `notekit-bench readwrite` (docs/BENCHMARKS.md, *Reads beside a write*): what can be checked without
/// timing it.
@Suite("Benchmark: reads beside a write")
struct BenchmarkReadWriteTests {
    static let badCommandLines: [(arguments: [String], names: String)] = [
        (["readwrite", "--seconds", "0"], "--seconds"),
        (["readwrite", "--seconds", "soon"], "--seconds"),
        (["readwrite", "--seconds", "inf"], "--seconds"),
        (["readwrite", "--notes", "-3"], "--notes"),
        (["readwrite", "--bogus", "1"], "--bogus"),
        (["readwrite", "--sharing", "sometimes"], "--sharing"),
    ]

    @Test("A bad command line exits 2 with an error that names the argument", arguments: badCommandLines)
    func badCommandLine(arguments: [String], names: String) throws {
        try BenchmarkColdTests.expectUsageError(arguments, naming: names)
    }

    @Test("The phase saves and reads at once, prints grdb-readwrite's keys, and leaves the cold phase's store as W1 left it")
    func savesReadsAndReports() throws {
        let directory = TemporaryStores.newURL("readwrite")
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try CommandLineTests.run(BenchmarkColdTests.executable,
                                           ["readwrite", "--notes", "120", "--dir", directory.path, "--seconds", "0.5"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.json["phase"] as? String == "readwrite" && run.json["store"] as? String == "built", "\(run.output)")
        #expect(run.json["sharing"] as? String == "shared", "writable opens share per save by default: \(run.output)")
        #expect((run.json["commits"] as? Int).map { $0 > 0 } == true, "\(run.output)")
        #expect((run.json["reads"] as? Int).map { $0 > 0 } == true, "\(run.output)")
        let figures = ["commits_per_s", "read_p50_ms", "read_p99_ms", "read_max_ms"].map { run.json[$0] as? Double }
        #expect(figures.allSatisfy { ($0 ?? 0) > 0 }, "\(run.output)")
        if let p50 = figures[1], let p99 = figures[2], let max = figures[3] {
            #expect(p50 <= p99 && p99 <= max, "\(run.output)")
        }
        // The copy it wrote is gone; the cold phase's store still answers W1's pinned query as W1 wrote it.
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("readwrite-120").path))
        let cold = try CommandLineTests.run(BenchmarkColdTests.executable,
                                            ["cold", "--notes", "120", "--dir", directory.path, "--runs", "1"])
        #expect(cold.status == 0 && cold.json["store"] as? String == "reused", "\(cold.output) \(cold.errors)")
    }

    @Test("--sharing exclusive opens the copy exclusive, as W1's option does, and says so")
    func exclusiveSharing() throws {
        let directory = TemporaryStores.newURL("readwrite")
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try CommandLineTests.run(BenchmarkColdTests.executable,
                                           ["readwrite", "--notes", "120", "--dir", directory.path, "--seconds", "0.3",
                                            "--sharing", "exclusive"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.json["sharing"] as? String == "exclusive", "\(run.output)")
        #expect((run.json["commits"] as? Int).map { $0 > 0 } == true, "\(run.output)")
    }
}
