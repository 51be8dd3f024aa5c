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
//     swift run -c release notekit-bench mirror --notes 100000 --server "host=/tmp/pg dbname=postgres"   # MIRROR.md
//
// NOTEKIT_BENCH_TRACE=1 prints the parts of the insert and open phases to standard error;
// NOTEKIT_BENCH_KEEP=PATH keeps a copy of the store as the bulk insert left it.
import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitMirror

func value(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "open", let path = arguments.dropFirst().first {
    // Opens an existing store three times, for profiling the replay.
    for _ in 0..<3 {
        let start = DispatchTime.now().uptimeNanoseconds
        let container = try ModelContainer(for: NoteRecord.self,
                                           configurations: FileStoreConfiguration(url: URL(fileURLWithPath: path), mode: .readOnly))
        print("open: \(W1.milliseconds(since: start)) ms", container.schema.entities.count)
    }
    exit(0)
}
switch arguments.first {
case "cold": exit(Cold.main(Array(arguments.dropFirst())))
case "time": exit(Cold.timeProgram(Array(arguments.dropFirst())))
case "queries": exit(Queries.main(Array(arguments.dropFirst())))
case "rows": exit(RowBaseBench.main(Array(arguments.dropFirst())))
case "memory": exit(MemoryProbe.main(Array(arguments.dropFirst())))
case "mirror": exit(MirrorBench.main(Array(arguments.dropFirst())))
// The cold phase's child: not in the usage, since only `cold` starts it.
case "top20": exit(Cold.answerTop20(Array(arguments.dropFirst())))
default: break
}
if arguments.first == "history" {
    let transactions = value("--transactions", in: arguments).flatMap(Int.init) ?? 100_000
    let directory = URL(fileURLWithPath: value("--dir", in: arguments) ?? FileManager.default.temporaryDirectory.path)
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        print(try HistoryWorkload.run(transactions: transactions, directory: directory))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
}
guard arguments.first == "w1" else {
    FileHandle.standardError.write(Data("usage: notekit-bench w1 [--notes N] [--dir DIR] [--sharing exclusive|shared] [--automatic-compaction off|default]\n       notekit-bench history [--transactions N] [--dir DIR]\n       \(Cold.usage)\n       \(Cold.timeUsage)\n       \(Queries.usage)\n       \(RowBaseBench.usage)\n       \(MemoryProbe.usage)\n       \(MirrorBench.usage)\n".utf8))
    exit(2)
}
let sharing: FileStoreConfiguration.Sharing
switch value("--sharing", in: arguments) ?? "shared" {
case "shared": sharing = .perSave
case "exclusive": sharing = .exclusive
case let other:
    FileHandle.standardError.write(Data("error: --sharing must be exclusive or shared, not \(other)\n".utf8))
    exit(2)
}
// W1 as defined runs without automatic compaction, phase for phase as the SQLite program; `default` runs it with the
// store's default policy, whose replay limit compacts the bulk insert's log inside its save.
let compaction: FileStoreConfiguration.AutomaticCompaction?
switch value("--automatic-compaction", in: arguments) ?? "off" {
case "off": compaction = nil
case "default": compaction = FileStoreConfiguration.AutomaticCompaction()
case let other:
    FileHandle.standardError.write(Data("error: --automatic-compaction must be off or default, not \(other)\n".utf8))
    exit(2)
}
let notes = value("--notes", in: arguments).flatMap(Int.init) ?? 100_000
let directory = URL(fileURLWithPath: value("--dir", in: arguments) ?? FileManager.default.temporaryDirectory.path)
do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    print(try W1.run(notes: notes, directory: directory, sharing: sharing, automaticCompaction: compaction).json)
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
