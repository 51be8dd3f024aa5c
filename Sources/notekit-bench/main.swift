// notekit-bench: workload W1 on the file store, one JSON line per run (docs/BENCHMARKS.md).
//
//     swift run -c release notekit-bench w1 --notes 100000 --dir /tmp/bench
//     swift run -c release notekit-bench w1 --sharing exclusive      # writable opens exclusive (default: shared)
//     swift run -c release notekit-bench history --transactions 100000 --dir /tmp/bench   # following history
//     swift run -c release notekit-bench open STORE     # reopens a store three times, for profiling replay
//     swift run -c release notekit-bench cold --notes 100000 --dir /tmp/bench --runs 10   # new process: open + top 20
//     swift run -c release notekit-bench time --runs 10 -- ./sqlite_top20 w1.sqlite       # a peer's, timed alike
//     swift run -c release notekit-bench queries --notes 100000 --dir /tmp/bench --expect w2.json   # W2
//     swift run -c release notekit-bench rows --notes 100000   # the row storage over loaded rows and over a base
//     swift run -c release notekit-bench memory --notes 100000 --layout   # bytes per note, per phase
//     swift run -c release notekit-bench readwrite --notes 100000 --dir /tmp/bench --seconds 3   # reads beside a write
//     swift run -c release notekit-bench mirror --notes 100000 --server "host=/tmp/pg dbname=postgres"   # MIRROR.md
//
// NOTEKIT_BENCH_TRACE=1 prints the parts of the insert and open phases to standard error;
// NOTEKIT_BENCH_KEEP=PATH keeps a copy of the store as the bulk insert left it.
import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
import NoteKitMirror

let w1Usage = "notekit-bench w1 [--notes N] [--dir DIR] [--sharing exclusive|shared] [--automatic-compaction off|default]"
let historyUsage = "notekit-bench history [--transactions N] [--dir DIR]"
let openUsage = "notekit-bench open STORE"

/// Every subcommand's synopsis: what `--help` prints, and a command line naming no subcommand (exit 2).
let usage = """
    usage: \(w1Usage)
           \(historyUsage)
           \(Cold.usage)
           \(Cold.timeUsage)
           \(Queries.usage)
           \(RowBaseBench.usage)
           \(MemoryProbe.usage)
           \(ReadWrite.usage)
           \(MirrorBench.usage)
    """

let words = Array(CommandLine.arguments.dropFirst())
let rest = Array(words.dropFirst())
switch words.first {
case "open":
    // Opens an existing store three times, for profiling the replay.
    let path: String
    do throws(UsageError) {
        path = try Arguments.readOrExit(rest, positional: true, usage: "usage: \(openUsage)").single("store path")
    } catch {
        error.exit(usage: "usage: \(openUsage)")
    }
    for _ in 0..<3 {
        let start = DispatchTime.now().uptimeNanoseconds
        let container = try ModelContainer(for: NoteRecord.self,
                                           configurations: FileStoreConfiguration(url: URL(fileURLWithPath: path), mode: .readOnly))
        print("open: \(W1.milliseconds(since: start)) ms", container.schema.entities.count)
    }
    exit(0)
case "cold": exit(Cold.main(rest))
case "time": exit(Cold.timeProgram(rest))
case "queries": exit(Queries.main(rest))
case "rows": exit(RowBaseBench.main(rest))
case "memory": exit(MemoryProbe.main(rest))
case "mirror": exit(MirrorBench.main(rest))
case "readwrite": exit(ReadWrite.main(rest))
// The cold phase's child: not in the usage, since only `cold` starts it.
case "top20": exit(Cold.answerTop20(rest))
case "history":
    let arguments = Arguments.readOrExit(rest, options: ["transactions", "dir"], usage: "usage: \(historyUsage)")
    let transactions = arguments.options["transactions"].flatMap(Int.init) ?? 100_000
    let directory = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        print(try HistoryWorkload.run(transactions: transactions, directory: directory))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "w1":
    break
case let word? where Arguments.asksForHelp(word):
    print(usage)
    exit(0)
default:
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}
let arguments = Arguments.readOrExit(rest, options: ["notes", "dir", "sharing", "automatic-compaction"],
                                     usage: "usage: \(w1Usage)")
let sharingName = arguments.options["sharing"] ?? "shared"
guard let sharing = FileStoreConfiguration.Sharing(benchmarkName: sharingName) else {
    UsageError.invalidValue(option: "--sharing", value: sharingName, expected: "exclusive or shared")
        .exit(usage: "usage: \(w1Usage)")
}
// W1 as defined runs without automatic compaction, phase for phase as the SQLite program; `default` runs it with the
// store's default policy, whose replay limit compacts the bulk insert's log inside its save.
let compaction: FileStoreConfiguration.AutomaticCompaction?
switch arguments.options["automatic-compaction"] ?? "off" {
case "off": compaction = nil
case "default": compaction = FileStoreConfiguration.AutomaticCompaction()
case let other:
    UsageError.invalidValue(option: "--automatic-compaction", value: other, expected: "off or default")
        .exit(usage: "usage: \(w1Usage)")
}
let notes = arguments.options["notes"].flatMap(Int.init) ?? 100_000
let directory = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    print(try W1.run(notes: notes, directory: directory, sharing: sharing, automaticCompaction: compaction).json)
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
