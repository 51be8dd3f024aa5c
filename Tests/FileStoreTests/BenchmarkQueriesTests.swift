import Foundation
import NoteKitTestSupport
import Testing

/// Runs the built `notekit-bench queries` (docs/BENCHMARKS.md, *W2: queries beyond one entity*) at a small size:
/// every key is printed, and every answer is the one W1's data gives, worked out here from W1's definition without
/// NoteKit (so a query engine that answers wrong fails here as well as against grdb-w2).
@Suite("Benchmark: W2's queries")
struct BenchmarkQueriesTests {
    static let questions = ["q1_to_one_path_count", "q1_to_one_path_top20", "q2_to_many_any", "q3_to_many_count",
                            "q4_strings", "q5_group_count", "q6_aggregates", "q7_sort_by_path", "q8_text_contains"]

    func bench(_ arguments: String...) throws -> CommandLineTests.Run {
        try CommandLineTests.run(BenchmarkColdTests.executable, arguments)
    }

    /// The store W1 leaves with `n` notes, as plain values: W1.swift (and grdb-w1) write 100 notebooks "Folder f"
    /// and note i titled "Note i", created at 1.7e9 + i seconds, pinned when i is a multiple of 50, in notebook
    /// i % 100 unless i % 10 == 9; then edit k (k < 1,000) retitles note (k × 97) % n "Edited k", and notebook 3 is
    /// deleted, its notes unfiled.
    struct W1Data {
        struct Note { var title: String; var createdAt: Int; var isPinned: Bool; var notebook: Int? }
        var notes: [Note]
        let notebooks = (0..<100).filter { $0 != 3 }

        init(notes n: Int) {
            notes = (0..<n).map { i in
                Note(title: "Note \(i)", createdAt: 1_700_000_000 + i, isPinned: i % 50 == 0,
                     notebook: i % 10 == 9 || i % 100 == 3 ? nil : i % 100)
            }
            for k in 0..<1000 { notes[(k * 97) % n].title = "Edited \(k)" }
        }

        func name(_ notebook: Int) -> String { "Folder \(notebook)" }

        /// grdb-w2's answers, before a long one becomes a digest.
        var answers: [String: String] {
            let folder7 = notes.filter { $0.notebook == 7 }
            let count = { (f: Int) in notes.filter { $0.notebook == f }.count }
            let pinned = notes.filter(\.isPinned)
            let byPath = notes.sorted { a, b in
                let (x, y) = (a.notebook.map(name), b.notebook.map(name))
                if x != y { return x == nil || (y != nil && x! < y!) }   // no notebook first, as SQL's NULL
                return a.createdAt > b.createdAt
            }
            return [
                "q1_to_one_path_count": "\(folder7.count)",
                "q1_to_one_path_top20": folder7.sorted { $0.createdAt > $1.createdAt }.prefix(20).map(\.title)
                    .joined(separator: ","),
                "q2_to_many_any": "\(notebooks.filter { f in pinned.contains { $0.notebook == f } }.count)",
                "q3_to_many_count": "\(notebooks.filter { count($0) > 900 }.count)",
                "q4_strings": "\(notes.filter { !$0.title.isEmpty }.count)",   // every body is "lorem ipsum …"
                "q5_group_count": notebooks.filter { count($0) > 0 }.sorted { name($0) < name($1) }
                    .map { "\(name($0))=\(count($0))" }.joined(separator: ","),
                "q6_aggregates": "\(pinned.count),\(pinned.map(\.createdAt).min()!),\(pinned.map(\.createdAt).max()!)",
                "q7_sort_by_path": byPath.prefix(20).map(\.title).joined(separator: ","),
                "q8_text_contains": "\(notes.filter { $0.title.lowercased().contains("edited 12") }.count)",
            ]
        }
    }

    /// grdb-w2's printed form: longer than 80 characters, `fnv1a:` and the FNV-1a digest of the UTF-8 in hex.
    static func printed(_ answer: String) -> String {
        guard answer.count > 80 else { return answer }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in answer.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "fnv1a:" + String(hash, radix: 16)
    }

    @Test("The phase builds W1's store, prints every key, answers as W1's data says, and --expect names each mismatch")
    func answersAndExpectations() throws {
        let n = 500
        let directory = TemporaryStores.newURL("queries")
        let run = try bench("queries", "--notes", "\(n)", "--dir", directory.path, "--runs", "1")
        #expect(run.status == 0, "\(run.errors)")
        let line = run.json
        #expect(line["engine"] as? String == "notekit" && line["notes"] as? Int == n, "\(run.output)")
        let expected = W1Data(notes: n).answers
        for name in Self.questions {
            #expect((line["\(name)_ms"] as? Double).map { $0 >= 0 } == true, "\(name)_ms in \(run.output)")
            #expect(line["\(name)_answer"] as? String == Self.printed(expected[name]!), "\(name): \(expected[name]!)")
        }
        // Spot checks of the reference itself: five of the 500 notes are in "Folder 7" (7, 107, …, 407), and the
        // notebooks holding a pinned note are "Folder 0" and "Folder 50".
        #expect(expected["q1_to_one_path_count"] == "5" && expected["q2_to_many_any"] == "2")

        // --expect: its own line matches; a line with one answer changed and one missing fails, naming both, and
        // still prints the line.
        let file = directory.appendingPathComponent("expected.json")
        try Data(run.output.utf8).write(to: file)
        let same = try bench("queries", "--notes", "\(n)", "--dir", directory.path, "--runs", "1",
                             "--expect", file.path)
        #expect(same.status == 0 && same.errors.isEmpty, "\(same.errors)")
        var doctored = line
        doctored["q3_to_many_count_answer"] = "41"
        doctored["q8_text_contains_answer"] = nil
        try JSONSerialization.data(withJSONObject: doctored).write(to: file)
        let wrong = try bench("queries", "--notes", "\(n)", "--dir", directory.path, "--runs", "1",
                              "--expect", file.path)
        #expect(wrong.status == 1, "\(wrong.errors)")
        let problems = wrong.errors.split(separator: "\n")
        #expect(problems.count == 2, "\(wrong.errors)")
        #expect(problems.contains { $0.hasPrefix("error: q3_to_many_count: ") && $0.contains("\"41\"") },
                "\(wrong.errors)")
        #expect(problems.contains { $0.hasPrefix("error: q8_text_contains: ") }, "\(wrong.errors)")
        #expect(wrong.json["q3_to_many_count_answer"] as? String == line["q3_to_many_count_answer"] as? String)
    }

    @Test("A store that is not W1's of N notes is refused, naming the command that makes it")
    func otherStoreRefused() throws {
        let directory = TemporaryStores.newURL("queries-other")
        #expect(try bench("w1", "--notes", "120", "--dir", directory.path).status == 0)
        let run = try bench("queries", "--notes", "200", "--dir", directory.path, "--runs", "1")
        #expect(run.status == 1 && run.output.isEmpty, "\(run.output)")
        #expect(run.errors.contains("holds 120 notes") && run.errors.contains("notekit-bench w1 --notes 200"),
                "\(run.errors)")
        #expect(try bench("queries", "--runs", "0").status == 2)
        #expect(try bench("queries", "--expect").status == 2)
    }
}
