import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore

/// Workload W1 (docs/BENCHMARKS.md), phase for phase as `shared/bench/sqlite_anchor.c` runs it on SQLite: the same
/// data, the same number of durable saves, the same query, medians where it takes medians.
enum W1 {
    struct Result {
        var notes = 0
        var sharing = FileStoreConfiguration.Sharing.perSave
        /// Whether the run used the store's default automatic compaction (W1 as defined runs without).
        var automaticCompaction = false
        var bulkInsert = 0.0
        var openLoadAll = 0.0
        var pinnedTop20 = 0.0
        var singleUpdate = 0.0
        var deleteFolderNullify = 0.0
        var bytesOnDisk = 0
        var peakRSS = 0.0

        var json: String {
            return "{\"engine\":\"notekit\",\"sharing\":\"\(sharing.benchmarkName)\","
                + (automaticCompaction ? "\"automatic_compaction\":\"default\"," : "")
                + "\"notes\":\(notes),\"bulk_insert_ms\":\(number(bulkInsert, 1)),"
                + "\"open_load_all_ms\":\(number(openLoadAll, 1)),\"pinned_top20_ms\":\(number(pinnedTop20, 4)),"
                + "\"single_update_tx_ms\":\(number(singleUpdate, 4)),"
                + "\"delete_folder_nullify_ms\":\(number(deleteFolderNullify, 2)),\"bytes_on_disk\":\(bytesOnDisk),"
                + "\"peak_rss_mb\":\(number(peakRSS, 1))}"
        }
    }

    /// With NOTEKIT_BENCH_TRACE set, prints how long a part of a phase took, to standard error.
    static func trace(_ label: String, _ start: UInt64) {
        guard ProcessInfo.processInfo.environment["NOTEKIT_BENCH_TRACE"] != nil else { return }
        let line = "  \(label): \(String(format: "%.1f", milliseconds(since: start))) ms, "
            + "resident \(String(format: "%.0f", residentMegabytes())) MB, peak \(String(format: "%.0f", peakResidentMegabytes())) MB\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func milliseconds(since start: UInt64) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
    }

    /// `value` with `digits` decimals, as every phase's JSON line writes its figures.
    static func number(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

    // The data W1 writes, in one place: the cold phase (Cold.swift) checks a new process's answer against it.
    /// Every note whose number is a multiple of this is pinned.
    static let pinnedEvery = 50
    /// How many single-note edits W1 saves, each its own durable save.
    static let edits = 1000

    /// When note `i` was created: one second after note `i - 1`.
    static func createdAt(ofNote i: Int) -> Date { Date(timeIntervalSince1970: 1.7e9 + Double(i)) }

    /// The note that edit `k` (of ``edits``) retitles "Edited k", in a store of `n` notes.
    static func editedNote(_ k: Int, notes n: Int) -> Int { (k * 97) % n }

    /// W1's pinned query: pinned notes, newest first, at most 20. The hot phase and the cold phase's child both
    /// run this one.
    static var pinnedTop20Query: FetchDescriptor<NoteRecord> {
        var pinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                 sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        pinned.fetchLimit = 20
        return pinned
    }

    /// The pinned query's answer on the store W1 leaves with `n` notes: the newest pinned notes, at most 20, as
    /// (creation time in seconds since 1970, title), newest first.
    static func pinnedTop20(notes n: Int) -> [(createdAt: Int, title: String)] {
        var lastEdit: [Int: Int] = [:]
        for k in 0..<edits { lastEdit[editedNote(k, notes: n)] = k }
        let newestPinned = (n - 1) / pinnedEvery * pinnedEvery
        return stride(from: newestPinned, through: 0, by: -pinnedEvery).prefix(20).map { i in
            (Int(createdAt(ofNote: i).timeIntervalSince1970), lastEdit[i].map { "Edited \($0)" } ?? "Note \(i)")
        }
    }

    /// Runs W1 with writable opens shared as `sharing` says (the default, `.perSave`, or `.exclusive`), and without
    /// automatic compaction unless `automaticCompaction` gives a policy.
    static func run(notes n: Int, directory: URL, sharing: FileStoreConfiguration.Sharing = .perSave,
                    automaticCompaction: FileStoreConfiguration.AutomaticCompaction? = nil) throws -> Result {
        var result = Result()
        result.notes = n
        result.sharing = sharing
        result.automaticCompaction = automaticCompaction != nil
        let url = directory.appendingPathComponent("w1.notekit")
        try? FileManager.default.removeItem(at: url)
        let configuration = FileStoreConfiguration(url: url, automaticCompaction: automaticCompaction, sharing: sharing)
        let body = String((0..<240).map { Array("lorem ipsum ")[$0 % 12] })

        // Bulk insert: open a new store, 100 notebooks and n notes, one durable save.
        var start = DispatchTime.now().uptimeNanoseconds
        var folderIDs: [PersistentIdentifier] = []
        var noteIDs: [PersistentIdentifier] = []
        do {
            let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
            let context = ModelContext(container)
            var notebooks: [NotebookRecord] = []
            for f in 0..<100 {
                let notebook = NotebookRecord()
                notebook.name = "Folder \(f)"
                context.insert(notebook)
                notebooks.append(notebook)
            }
            noteIDs.reserveCapacity(n)
            for i in 0..<n {
                let note = NoteRecord()
                note.title = "Note \(i)"
                note.body = body
                note.createdAt = createdAt(ofNote: i)
                note.updatedAt = note.createdAt
                note.isPinned = i % pinnedEvery == 0
                context.insert(note)
                if i % 10 != 9 { note.notebook = notebooks[i % 100] }
                noteIDs.append(note.persistentModelID)
            }
            trace("create and insert", start)
            let saveStart = DispatchTime.now().uptimeNanoseconds
            try context.save()
            trace("save", saveStart)
            result.bulkInsert = milliseconds(since: start)
            folderIDs = notebooks.map(\.persistentModelID)
            try (container.store as? FileStore)?.close()
        }
        if let keep = ProcessInfo.processInfo.environment["NOTEKIT_BENCH_KEEP"] {
            // For profiling the reopen: a copy of the store as the bulk insert left it.
            try? FileManager.default.removeItem(atPath: keep)
            try FileManager.default.copyItem(at: url, to: URL(fileURLWithPath: keep))
        }

        // Reopen and load every note: every note's attributes readable in memory, as model objects.
        start = DispatchTime.now().uptimeNanoseconds
        let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
        trace("open (replay)", start)
        let fetchStart = DispatchTime.now().uptimeNanoseconds
        let context = ModelContext(container)
        let all = try context.fetch(FetchDescriptor<NoteRecord>())
        trace("fetch all", fetchStart)
        result.openLoadAll = milliseconds(since: start)
        guard all.count == n else { throw BenchmarkError.wrongCount("loaded \(all.count) notes of \(n)") }

        // Pinned notes, newest first, limit 20: hot, median of 101.
        let pinned = pinnedTop20Query
        var times: [Double] = []
        for _ in 0..<101 {
            let queryStart = DispatchTime.now().uptimeNanoseconds
            let found = try context.fetch(pinned)
            times.append(milliseconds(since: queryStart))
            guard found.count == min(20, (n + pinnedEvery - 1) / pinnedEvery) else {
                throw BenchmarkError.wrongCount("query found \(found.count)")
            }
        }
        result.pinnedTop20 = times.sorted()[50]

        // 1,000 single-note edits, each its own durable save.
        let byID = Dictionary(uniqueKeysWithValues: all.map { ($0.persistentModelID, $0) })
        start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<edits {
            let note = byID[noteIDs[editedNote(i, notes: n)]]!
            note.title = "Edited \(i)"
            note.updatedAt = Date(timeIntervalSince1970: 1.8e9 + Double(i))
            try context.save()
        }
        result.singleUpdate = milliseconds(since: start) / Double(edits)
        trace("1,000 saves", start)

        // Delete one notebook: its notes are nullified, one durable save.
        start = DispatchTime.now().uptimeNanoseconds
        guard let notebook = context[folderIDs[3], as: NotebookRecord.self] else {
            throw BenchmarkError.wrongCount("notebook 3 is missing")
        }
        try context.delete(notebook)
        trace("delete (the rule nullifies its notes)", start)
        let saveStart = DispatchTime.now().uptimeNanoseconds
        try context.save()
        trace("its save", saveStart)
        result.deleteFolderNullify = milliseconds(since: start)
        // The loaded notes stay alive through every timed phase, as an app's list keeps them: a context does not keep
        // objects nobody references, and without this the optimizer would free all 100,000 right after their last
        // use, inside the single-update timing, and the delete would load the notebook's notes again.
        withExtendedLifetime((all, byID)) {}

        // Bytes on disk after compaction.
        let store = container.store as! FileStore
        start = DispatchTime.now().uptimeNanoseconds
        try store.compact()
        trace("compact", start)
        try store.close()
        result.bytesOnDisk = directorySize(url)
        result.peakRSS = peakResidentMegabytes()
        return result
    }

    static func directorySize(_ url: URL) -> Int {
        var total = 0
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        for case let file as URL in walker {
            total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        }
        return total
    }

    /// The process's peak resident set (VmHWM), in megabytes. Darwin has no `/proc`: there it is `getrusage`'s
    /// `ru_maxrss`, which Darwin counts in bytes (Linux in kilobytes).
    static func peakResidentMegabytes() -> Double {
        #if canImport(Darwin)
        var usage = rusage()
        guard getrusage(RUSAGE_SELF, &usage) == 0 else { return 0 }
        return megabytes(maxResident: usage.ru_maxrss)
        #else
        return statusMegabytes("VmHWM:")
        #endif
    }

    /// A `ru_maxrss` (of `getrusage` or `wait4`) in megabytes: Darwin counts it in bytes, Linux in kilobytes.
    static func megabytes(maxResident value: Int) -> Double {
        #if canImport(Darwin)
        Double(value) / 1_048_576
        #else
        Double(value) / 1024
        #endif
    }

    /// The process's resident set now (VmRSS), in megabytes; 0 where there is no `/proc` (Darwin).
    static func residentMegabytes() -> Double { statusMegabytes("VmRSS:") }

    private static func statusMegabytes(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes / 1024
    }

    enum BenchmarkError: Error, CustomStringConvertible {
        case wrongCount(String)
        var description: String {
            switch self { case .wrongCount(let message): "W1 went wrong: \(message)" }
        }
    }
}

extension FileStoreConfiguration.Sharing {
    /// The sharing `--sharing` names on the benchmark's command line (`shared` or `exclusive`); nil for another word.
    init?(benchmarkName name: String) {
        switch name {
        case "shared": self = .perSave
        case "exclusive": self = .exclusive
        default: return nil
        }
    }

    /// The word `--sharing` takes for this sharing, which the phases' JSON lines print too.
    var benchmarkName: String { self == .exclusive ? "exclusive" : "shared" }
}
