import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
import NoteKitMirror

/// `notekit-bench mirror`: the figures of docs/MIRROR.md against a PostgreSQL server given by its connection string.
///
/// 1. Initial push: a file store of N notes (in 100 notebooks, one transaction) sent by its first `sync()`; beside it
///    the floor: `COPY` of the same rows (the same JSON values, encoded in the same process) into a table like the
///    notes' table.
/// 2. Initial pull: a second device (another file store) takes the whole zone.
/// 3. Steady state: 1,000 transactions of one edit each, sent by one sync, then taken by the other device.
/// 4. Latency: 20 times, one edit saved on the first device, then its sync and the second's: the time until the second
///    has it (what a background loop adds to it is its polling, a quarter second at most).
///
/// 5. Keyed objects: N/10 objects with a unique key and two links each (many-to-many) pushed, then pulled, beside the
///    same count of notes: what unique-key checks and link tables cost a push and a pull.
///
/// 6. Blobs: N/100 photos (at least 10) of 64 KiB each pushed, then pulled by a second device, then every photo's
///    bytes read there once: the pull records each blob by its hash, and the first read fetches it.
///
/// Prints one JSON object. Every run uses a namespace of its own (`notekit_bench_<pid>`), dropped at the end.
enum MirrorBench {
    static let usage = "notekit-bench mirror --server CONNECTION [--notes N] [--dir DIR]"

    static func main(_ words: [String]) -> Int32 {
        let arguments = Arguments.readOrExit(words, options: ["server", "notes", "dir"], usage: "usage: \(usage)")
        guard let server = arguments.options["server"] else {
            UsageError.missingOption(command: "mirror", option: "--server", placeholder: "CONNECTION")
                .exit(usage: "usage: \(usage)")
        }
        let notes = arguments.options["notes"].flatMap(Int.init) ?? 100_000
        let directory = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("notekit-mirror-bench-\(getpid())")
        do {
            defer { try? FileManager.default.removeItem(at: directory) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let result = try run(server: server, notes: notes, directory: directory)
            let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    /// A file store of `types` named `name` in `directory`.
    static func openStore(_ name: String, in directory: URL, types: [any PersistentModel.Type]) throws -> ModelContainer {
        try ModelContainer(for: Schema(types),
                           configurations: [FileStoreConfiguration(url: directory.appendingPathComponent(name))])
    }

    static func milliseconds(_ start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    }

    static func run(server: String, notes count: Int, directory: URL) throws -> [String: Any] {
        let namespace = "notekit_bench_\(getpid())"
        let admin = try PostgresConnection(server)
        try admin.execute("DROP SCHEMA IF EXISTS \(namespace) CASCADE", purpose: "drop an old namespace")
        defer { _ = try? admin.execute("DROP SCHEMA IF EXISTS \(namespace) CASCADE", purpose: "clean up") }
        let configuration = MirrorConfiguration(connectionString: server, zone: "bench", namespace: namespace)
        func open(_ name: String) throws -> ModelContainer {
            try openStore(name, in: directory, types: [NoteRecord.self, NotebookRecord.self, PhotoRecord.self])
        }

        // The store: N notes in 100 notebooks, one save.
        let first = try open("a.notekit")
        try first.initializeMirrorSchema(configuration)
        let context = ModelContext(first)
        let notebooks = (0..<100).map { index in
            let notebook = NotebookRecord()
            notebook.name = "Notebook \(index)"
            context.insert(notebook)
            return notebook
        }
        for index in 0..<count {
            let note = NoteRecord()
            note.title = "Note \(index)"
            note.body = "Walked the ridge above the lake; the path was dry and the cairns easy to follow. \(index)"
            note.tags = index % 3 == 0 ? ["hike", "summer"] : ["walk"]
            note.isPinned = index % 50 == 0
            note.latitude = 45 + Double(index % 1000) / 1000
            context.insert(note)
            note.notebook = notebooks[index % notebooks.count]
        }
        try context.save()

        let mirror = try StoreMirror(container: first, configuration: configuration)
        var start = ContinuousClock.now
        let pushed = try mirror.sync()
        let pushMilliseconds = milliseconds(start)

        // The floor: the same note rows, encoded the same way, by COPY into a table like the notes' table.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try admin.execute("CREATE TABLE \(namespace).copy_floor (LIKE \(namespace).\"e_NoteRecord\")",
                          purpose: "make the COPY table")
        let schema = first.schema.entity(named: "NoteRecord")!
        start = ContinuousClock.now
        let rows = try first.store.fetch(StoreFetchRequest(entity: "NoteRecord")).rows
        var lines: [String] = []
        lines.reserveCapacity(rows.count)
        for row in rows {
            var fields = ["bench", row.id.primaryKey.uuidString.lowercased(), "1", "\\N"]
            for slot in schema.attributes.indices {
                let json = String(decoding: try encoder.encode(row.attributes[slot]), as: UTF8.self)
                fields += [json.replacingOccurrences(of: "\\", with: "\\\\"), "1"]
            }
            if case .toOne(let target?) = row.relationships[schema.relationships.firstIndex { $0.name == "notebook" }!] {
                fields += [target.primaryKey.uuidString.lowercased(), "1"]
            } else {
                fields += ["\\N", "1"]
            }
            lines.append(fields.joined(separator: "\t"))
        }
        let columns = ["zone", "id", "created_clock", "deleted_clock"]
            + schema.attributes.flatMap { ["\"a_\($0.name)\"", "\"ac_\($0.name)\""] } + ["\"r_notebook\"", "\"rc_notebook\""]
        let copied = try admin.copy("COPY \(namespace).copy_floor (\(columns.joined(separator: ", "))) FROM STDIN",
                                    lines: lines, purpose: "copy the notes")
        let copyMilliseconds = milliseconds(start)

        // A second device takes the whole zone.
        let second = try open("b.notekit")
        let secondMirror = try StoreMirror(container: second, configuration: configuration)
        start = ContinuousClock.now
        let pulled = try secondMirror.sync()
        let pullMilliseconds = milliseconds(start)

        // Steady state: 1,000 one-edit transactions.
        let edited = Array(try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title)])).prefix(1000))
        for (index, note) in edited.enumerated() {
            note.title = "Edited \(index)"
            try context.save()
        }
        start = ContinuousClock.now
        let steady = try mirror.sync()
        let exportMilliseconds = milliseconds(start)
        start = ContinuousClock.now
        let steadyPull = try secondMirror.sync()
        let importMilliseconds = milliseconds(start)

        // Latency of one edit, sync to sync.
        var latencies: [Double] = []
        for round in 0..<20 {
            edited[round].body = "Latency round \(round)"
            try context.save()
            start = ContinuousClock.now
            try mirror.sync()
            try secondMirror.sync()
            latencies.append(milliseconds(start))
        }
        latencies.sort()
        let check = try ModelContext(second).fetchCount(FetchDescriptor<NoteRecord>())
        guard check == count else { throw MirrorBenchError(description: "the second device has \(check) notes, not \(count)") }
        let keyed = try runKeyed(server: server, count: max(10, count / 10), directory: directory, namespace: namespace)
        let blobs = try runBlobs(server: server, count: max(10, count / 100), directory: directory, namespace: namespace)

        return [
            "notes": count,
            "initialPushMs": pushMilliseconds, "initialPushTransactions": pushed.exportedTransactions,
            "copyFloorMs": copyMilliseconds, "copyRows": copied,
            "initialPullMs": pullMilliseconds, "initialPullChanges": pulled.importedChanges,
            "steadyTransactions": steady.exportedTransactions,
            "steadyExportPerSecond": Double(steady.exportedTransactions) / (exportMilliseconds / 1000),
            "steadyImportPerSecond": Double(steadyPull.importedChanges) / (importMilliseconds / 1000),
            "latencyMedianMs": latencies[latencies.count / 2], "latencyP90Ms": latencies[latencies.count * 9 / 10],
        ].merging(keyed) { first, _ in first }.merging(blobs) { first, _ in first }
    }

    /// Phase 5: `count` keyed objects (unique key, two many-to-many links each) and `count` plain notes, each pushed
    /// by a first sync of a store of its own and pulled by a second store, each pass in a zone of its own.
    static func runKeyed(server: String, count: Int, directory: URL, namespace: String) throws -> [String: Any] {
        func open(_ name: String) throws -> ModelContainer {
            try openStore(name, in: directory,
                          types: [NoteRecord.self, NotebookRecord.self, PhotoRecord.self, KeyedRecord.self])
        }
        var result: [String: Any] = ["keyedObjects": count]
        for keyed in [false, true] {
            let configuration = MirrorConfiguration(connectionString: server, zone: keyed ? "bench-keyed" : "bench-plain",
                                                    namespace: namespace)
            let first = try open("k\(keyed)-a.notekit")
            try first.initializeMirrorSchema(configuration)
            let context = ModelContext(first)
            if keyed {
                var made: [KeyedRecord] = []
                for index in 0..<count {
                    let object = KeyedRecord()
                    object.key = "key \(keyed) \(index)"
                    object.body = "Walked the ridge above the lake. \(index)"
                    context.insert(object)
                    if made.count >= 2 { object.peers = [made[index - 1], made[index / 2]] }
                    made.append(object)
                }
            } else {
                for index in 0..<count {
                    let note = NoteRecord()
                    note.title = "Plain \(index)"
                    note.body = "Walked the ridge above the lake. \(index)"
                    context.insert(note)
                }
            }
            try context.save()
            let name = keyed ? "keyed" : "plain"
            let mirror = try StoreMirror(container: first, configuration: configuration)
            var start = ContinuousClock.now
            try mirror.sync()
            result[name + "PushMs"] = milliseconds(start)
            let second = try open("k\(keyed)-b.notekit")
            let secondMirror = try StoreMirror(container: second, configuration: configuration)
            start = ContinuousClock.now
            try secondMirror.sync()
            result[name + "PullMs"] = milliseconds(start)
            let pulled = keyed ? try ModelContext(second).fetchCount(FetchDescriptor<KeyedRecord>())
                : try ModelContext(second).fetchCount(FetchDescriptor<NoteRecord>())
            guard pulled == count else {
                throw MirrorBenchError(description: "the \(name) pass pulled \(pulled) objects, not \(count)")
            }
        }
        return result
    }
}

extension MirrorBench {
    /// Phase 6: `count` photos of 64 KiB (distinct bytes each) pushed by one device and pulled by another, whose
    /// reads of the bytes then come after the pull; the bytes in the second store's `blobs/` after each.
    static func runBlobs(server: String, count: Int, directory: URL, namespace: String) throws -> [String: Any] {
        let configuration = MirrorConfiguration(connectionString: server, zone: "bench-blobs", namespace: namespace)
        func open(_ name: String) throws -> ModelContainer {
            try openStore(name, in: directory, types: [NoteRecord.self, NotebookRecord.self, PhotoRecord.self])
        }
        let first = try open("blobs-a.notekit")
        try first.initializeMirrorSchema(configuration)
        let context = ModelContext(first)
        var generator = SystemRandomNumberGenerator()
        for index in 0..<count {
            let note = NoteRecord()
            note.title = "Photo note \(index)"
            context.insert(note)
            let photo = PhotoRecord()
            photo.fileName = "\(index).jpg"
            photo.data = Data((0..<65_536 / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } })
            note.photos.append(photo)
        }
        try context.save()
        try StoreMirror(container: first, configuration: configuration).sync()

        let second = try open("blobs-b.notekit")
        let secondMirror = try StoreMirror(container: second, configuration: configuration)
        var start = ContinuousClock.now
        try secondMirror.sync()
        let pullMilliseconds = milliseconds(start)
        let blobs = directory.appendingPathComponent("blobs-b.notekit/blobs")
        func diskBytes() throws -> Int {
            try FileManager.default.contentsOfDirectory(at: blobs, includingPropertiesForKeys: [.fileSizeKey])
                .reduce(0) { $0 + (try $1.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0) }
        }
        let afterPull = try diskBytes()
        start = ContinuousClock.now
        let photos = try ModelContext(second).fetch(FetchDescriptor<PhotoRecord>())
        let read = photos.reduce(0) { $0 + $1.data.count }
        let readMilliseconds = milliseconds(start)
        guard photos.count == count, read == count * 65_536 else {
            throw MirrorBenchError(description: "the blob pass read \(read) bytes of \(photos.count) photos")
        }
        return ["blobPhotos": count, "blobPullMs": pullMilliseconds, "blobDiskBytesAfterPull": afterPull,
                "blobFirstReadMs": readMilliseconds, "blobDiskBytesAfterRead": try diskBytes()]
    }
}

struct MirrorBenchError: Error, CustomStringConvertible {
    let description: String
}
