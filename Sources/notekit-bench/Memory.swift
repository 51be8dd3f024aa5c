import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Observation

/// `notekit-bench memory`: where W1's bytes go. Builds W1's store of N notes, then measures the heap in use
/// (glibc's `malloc_stats()` total) and the peak resident set of each phase (VmHWM, reset between phases through
/// `/proc/self/clear_refs`), and prints one JSON line (docs/BENCHMARKS.md, *Memory*):
///
/// - `insert_objects_bpn`: bytes per note held by N new objects inserted in a context, before the save;
/// - `save_peak_mb`: the resident peak of the bulk insert's save, over what was resident before it;
/// - `replay_store_bpn` (b): bytes per note held by a store opened by replaying its log (no checkpoint);
/// - `replay_peak_mb`: the resident peak of that open, over what was resident before it;
/// - `replay_objects_bpn`: bytes per note held by a context that fetched every note of that store (objects alive);
/// - `checkpoint_store_bpn`, `checkpoint_objects_bpn` (a): the same after a compaction, opened through the
///   checkpoint;
/// - `w1_peak_phase`: the phase whose resident peak is highest.
///
/// `--layout` prints a second line: the sizes and strides of the types a row and an object are made of.
enum MemoryProbe {
    static let usage = "notekit-bench memory [--notes N] [--dir DIR] [--layout]"

    static func main(_ words: [String]) -> Int32 {
        let arguments = Arguments.readOrExit(words, flags: ["layout"], options: ["notes", "dir"],
                                             usage: "usage: \(usage)")
        let n = arguments.options["notes"].flatMap(Int.init) ?? 100_000
        let directory = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            print(try run(notes: n, directory: directory))
            if arguments.flags.contains("layout") { print(layout()) }
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    /// Bytes of the heap in use now, mmapped blocks included: the total of glibc's `malloc_stats()` (which
    /// prints to standard error, so the probe lends it a file for the call); 0 where glibc is missing.
    static func heapInUse() -> Int {
        #if canImport(Glibc)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("notekit-malloc-\(getpid())").path
        let file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard file >= 0 else { return 0 }
        defer { close(file); unlink(path) }
        fflush(nil)
        let saved = dup(2)
        dup2(file, 2)
        glibcMallocStats()
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let total = text.range(of: "Total (incl. mmap):") else { return 0 }
        let inUse = text[total.upperBound...].split(separator: "\n").first { $0.contains("in use bytes") }
        return inUse.flatMap { Int($0.split(separator: "=").last?.trimmingCharacters(in: .whitespaces) ?? "") } ?? 0
        #else
        return 0
        #endif
    }

    /// Resets the process's peak resident set to what is resident now (Linux; elsewhere it stays as it was).
    static func resetPeak() {
        #if os(Linux)
        if let file = fopen("/proc/self/clear_refs", "w") {
            fputs("5", file)
            fclose(file)
        }
        #endif
    }

    /// Runs `body` and gives the peak resident megabytes it reached over what was resident before.
    static func peak<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        #if canImport(Glibc)
        _ = glibcMallocTrim(0)
        #endif
        resetPeak()
        let before = W1.residentMegabytes()
        let result = try body()
        return (result, W1.peakResidentMegabytes() - before)
    }

    static func run(notes n: Int, directory: URL) throws -> String {
        let url = directory.appendingPathComponent("memory.notekit")
        try? FileManager.default.removeItem(at: url)
        let configuration = FileStoreConfiguration(url: url, automaticCompaction: nil)
        let body = String((0..<240).map { Array("lorem ipsum ")[$0 % 12] })
        func perNote(_ bytes: Int) -> Int { bytes / max(1, n) }
        var fields: [(String, String)] = [("notes", "\(n)")]
        var peaks: [(String, Double)] = []

        // Bulk insert, as W1's.
        do {
            let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
            let context = ModelContext(container)
            let notebooks = (0..<100).map { f in
                let notebook = NotebookRecord()
                notebook.name = "Folder \(f)"
                context.insert(notebook)
                return notebook
            }
            let heapBefore = heapInUse()
            let (_, createPeak) = peak {
                for i in 0..<n {
                    let note = NoteRecord()
                    note.title = "Note \(i)"
                    note.body = body
                    note.createdAt = W1.createdAt(ofNote: i)
                    note.updatedAt = note.createdAt
                    note.isPinned = i % W1.pinnedEvery == 0
                    context.insert(note)
                    if i % 10 != 9 { note.notebook = notebooks[i % 100] }
                }
            }
            fields.append(("insert_objects_bpn", "\(perNote(heapInUse() - heapBefore))"))
            peaks.append(("create", createPeak))
            let (_, savePeak) = try peak { try context.save() }
            peaks.append(("save", savePeak))
            try (container.store as? FileStore)?.close()
        }

        // (b) A store opened by replaying its log, then every note fetched.
        do {
            var heapBefore = heapInUse()
            let (container, openPeak) = try peak {
                try ModelContainer(for: NoteRecord.self, configurations: configuration)
            }
            peaks.append(("replay", openPeak))
            fields.append(("replay_store_bpn", "\(perNote(heapInUse() - heapBefore))"))
            heapBefore = heapInUse()
            var (all, fetchPeak) = try peak { try ModelContext(container).fetch(FetchDescriptor<NoteRecord>()) }
            peaks.append(("fetch_all", fetchPeak))
            guard all.count == n else { throw W1.BenchmarkError.wrongCount("loaded \(all.count) notes of \(n)") }
            fields.append(("replay_objects_bpn", "\(perNote(heapInUse() - heapBefore))"))
            all = []
            let store = container.store as! FileStore
            let (_, compactPeak) = try peak { try store.compact() }
            peaks.append(("compact", compactPeak))
            try store.close()
        }

        // (a) The same store opened through its checkpoint, then every note fetched.
        do {
            var heapBefore = heapInUse()
            let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
            fields.append(("checkpoint_store_bpn", "\(perNote(heapInUse() - heapBefore))"))
            heapBefore = heapInUse()
            let all = try ModelContext(container).fetch(FetchDescriptor<NoteRecord>())
            guard all.count == n else { throw W1.BenchmarkError.wrongCount("loaded \(all.count) notes of \(n)") }
            fields.append(("checkpoint_objects_bpn", "\(perNote(heapInUse() - heapBefore))"))
            withExtendedLifetime(all) {}
            try (container.store as? FileStore)?.close()
        }

        for (name, megabytes) in peaks { fields.append(("\(name)_peak_mb", String(format: "%.1f", megabytes))) }
        let highest = peaks.max { $0.1 < $1.1 }?.0 ?? ""
        fields.append(("w1_peak_phase", "\"\(highest)\""))
        return "{\"probe\":\"memory\"," + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// The sizes (`size`/`stride` in bytes) of what rows and objects are made of, and the heap block of one note
    /// object and of one observation registrar.
    static func layout() -> String {
        func entry<T>(_ name: String, _ type: T.Type) -> String {
            "\"\(name)\":[\(MemoryLayout<T>.size),\(MemoryLayout<T>.stride)]"
        }
        var parts = [
            entry("StoredValue", StoredValue.self), entry("PersistentIdentifier", PersistentIdentifier.self),
            entry("ModelSnapshot", ModelSnapshot.self), entry("ModelSnapshot?", ModelSnapshot?.self),
            entry("RelationshipTargets", RelationshipTargets.self), entry("UUID", UUID.self),
            entry("Decimal", Decimal.self), entry("Data", Data.self), entry("String", String.self),
            entry("ObservationRegistrar", ObservationRegistrar.self),
        ]
        #if canImport(Glibc)
        let note = NoteRecord()
        parts.append("\"NoteRecord_block\":\(glibcMallocUsableSize(Unmanaged.passUnretained(note).toOpaque()))")
        let before = heapInUse()
        let registrars = (0..<10_000).map { _ in ObservationRegistrar() }
        parts.append("\"ObservationRegistrar_heap\":\((heapInUse() - before) / registrars.count)")
        withExtendedLifetime(registrars) {}
        #endif
        return "{\"layout\":{" + parts.joined(separator: ",") + "}}"
    }
}

#if canImport(Glibc)
// glibc's malloc.h, which the Glibc module does not import: scalar arguments and results only, so these
// declarations call them correctly.
@_silgen_name("malloc_stats") private func glibcMallocStats()
@_silgen_name("malloc_trim") private func glibcMallocTrim(_ pad: Int) -> Int32
@_silgen_name("malloc_usable_size") private func glibcMallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int
#endif
