import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport

/// The workloads the fault-injection and crash-step suites run: between them, every code path of the file store
/// that writes (saves, blobs, rotation, compaction explicit and automatic, history deletion, recovery of a torn
/// tail and of leftovers, a lightweight migration at open, a migration plan with a custom stage).
///
/// A scenario is a list of steps run on one store. The expected state after each step is what a run without faults
/// gives, as a ``StoreScenario/Open/fingerprint`` that names objects by their values, not their random identifiers,
/// so that runs can be compared.
///
/// Several writers can share the store (each its own open, ``FileStoreConfiguration/Sharing/perSave``): a step
/// wrapped in ``Step/by(_:_:)`` uses that writer's open; others use writer 0. The state after a step is read through
/// the step's writer, so each step must leave its writer caught up with everything committed (a save or a store
/// call catches up first; an offline step belongs to the writer that wrote last).
struct StoreScenario {
    /// How to open the store, and how to describe what it holds.
    struct Open {
        var name: String
        var make: (URL, any StoreFileSystem) throws -> ModelContainer
        /// The store's content as a canonical text (reading every external-storage value).
        var fingerprint: (ModelContext) throws -> String
    }

    enum Step {
        /// Opens the store (the container the next steps use).
        case open(Open)
        /// Changes objects in the context, then saves it.
        case save(String, (ModelContext) throws -> Void)
        /// Calls the file store (compact, delete history); may be run again after a failure.
        case store(String, (FileStore, ModelContext) throws -> Void)
        /// Closes the store.
        case close
        /// Changes the files while the store is closed, as another program or an earlier crash would.
        case offline(String, (SimulatedDisk, URL) throws -> Void)
        /// Does the step with writer `writer` (0, 1, …): its own open of the store, shared with the other writers.
        indirect case by(Int, Step)

        var name: String {
            switch self {
            case .open(let open): "open (\(open.name))"
            case .save(let name, _), .store(let name, _): name
            case .close: "close"
            case .offline(let name, _): name
            case .by(let writer, let step): "writer \(writer): \(step.name)"
            }
        }

        /// The writer whose open the step uses.
        var writer: Int {
            if case .by(let writer, _) = self { writer } else { 0 }
        }

        /// What the step does, whoever does it.
        var action: Step {
            if case .by(_, let step) = self { step.action } else { self }
        }
    }

    var name: String
    var steps: [Step]
    /// Steps before this index prepare the store and run without faults.
    var faultsFrom: Int
}

// MARK: - The scenarios

extension StoreScenario {
    static var all: [String: StoreScenario] {
        [
            notes.name: notes, lightweightMigration.name: lightweightMigration, migrationPlan.name: migrationPlan,
            twoWriters.name: twoWriters,
        ]
    }

    /// Small sizes so that a short run rotates segments and compacts by itself.
    static func notesConfiguration(_ configuration: inout FileStoreConfiguration) {
        configuration.maximumSegmentSize = 2_048
        configuration.automaticCompaction = .init(minimumLogSize: 12_000, garbageRatio: 0.5)
    }

    static var openNotes: Open {
        Open(name: "notes", make: { url, fileSystem in
            try StoreFiles.open(url, NotesSchema.models) {
                notesConfiguration(&$0)
                $0.fileSystem = fileSystem
            }
        }, fingerprint: notesFingerprint)
    }

    static func notesFingerprint(_ context: ModelContext) throws -> String {
        var lines: [String] = []
        for note in try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])) {
            let drawing = note.drawing.map { "\(SHA256Digest.hexString($0.data).prefix(12)) \($0.data.count)" } ?? "-"
            lines.append("note \(note.title) | \(note.body.prefix(24)) \(note.body.count) | folder \(note.folder?.name ?? "-")"
                         + " | drawing \(drawing) | \(note.revisions.count) revisions")
        }
        for folder in try context.fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)])) {
            lines.append("folder \(folder.name) | \(folder.notes.count) notes")
        }
        lines.append("drawings \(try context.fetchCount(FetchDescriptor<NoteDrawing>()))")
        if !context.readFailures.isEmpty { lines.append("read failures \(context.readFailures)") }
        return lines.joined(separator: "\n")
    }

    /// The note titled `title`.
    static func note(_ title: String, in context: ModelContext) throws -> Note {
        guard let note = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == title })).first else {
            throw ScenarioError.missing(title)
        }
        return note
    }

    static func drawingBytes(_ seed: UInt8, count: Int = 300) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: Int(seed) &* 31 &+ $0) })
    }

    /// The notes domain through every writing path of a store's life.
    static var notes: StoreScenario {
        StoreScenario(name: "notes", steps: [
            .open(openNotes),
            .save("insert a folder and four notes") { context in
                let editor = NoteEditor(context: context)
                let folder = Folder(name: "Inbox")
                context.insert(folder)
                for index in 0..<4 {
                    editor.createNote(.init(title: "n\(index)", body: String(repeating: "b\(index) ", count: 40)), in: folder)
                }
            },
            .save("a drawing (a new blob)") { context in
                try NoteEditor(context: context).setDrawing(drawingBytes(1), on: try note("n0", in: context))
            },
            .save("edit every body (rotates the segment)") { context in
                let editor = NoteEditor(context: context)
                for index in 0..<4 {
                    let note = try note("n\(index)", in: context)
                    editor.commit(.init(title: note.title, body: String(repeating: "e\(index) ", count: 60)), to: note)
                }
            },
            .save("two drawings: the same bytes again, and new ones") { context in
                let editor = NoteEditor(context: context)
                try editor.setDrawing(drawingBytes(1), on: try note("n1", in: context))
                try editor.setDrawing(drawingBytes(2), on: try note("n2", in: context))
            },
            .store("delete history before the third transaction") { _, context in
                let third = DefaultHistoryToken(transactionNumber: 3)
                try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
                    predicate: #Predicate { $0.token < third }))
            },
            .store("compact") { store, _ in try store.compact() },
            .save("edit round 1") { context in try editRound(1, context) },
            .save("edit round 2") { context in try editRound(2, context) },
            .save("edit round 3") { context in try editRound(3, context) },
            .save("edit round 4") { context in try editRound(4, context) },
            .save("edit round 5") { context in try editRound(5, context) },
            .save("delete a note and its drawing (its blob becomes garbage)") { context in
                try context.delete(try note("n2", in: context))
            },
            .store("compact (removes the blob)") { store, _ in try store.compact() },
            .close,
            .offline("a torn tail and leftovers") { disk, url in
                let layout = url.path
                guard let manifest = disk.contents(layout + "/MANIFEST"), let active = manifestSegments(manifest).last else {
                    throw ScenarioError.noStore
                }
                try disk.appendDurably(StoreFiles.segment(url, active).path, Array("0000004a 1234abcd {\"k\":\"tx\"".utf8))
                try disk.appendDurably(StoreFiles.segment(url, 900).path, Array("NOTEKIT/1 segment\n".utf8))
                try disk.appendDurably(layout + "/MANIFEST.tmp", Array("NOTEKIT/1 manifest\n".utf8))
                try disk.appendDurably(layout + "/blobs/." + String(repeating: "a", count: 64) + ".partial", [1, 2, 3])
                try disk.appendDurably(layout + "/blobs/" + SHA256Digest.hexString(Data([9])) + ".blob", [9])
            },
            .open(openNotes),
            .save("a note after recovery") { context in
                NoteEditor(context: context).createNote(.init(title: "n9", body: "after"))
            },
            .close,
        ], faultsFrom: 0)
    }

    private static func editRound(_ round: Int, _ context: ModelContext) throws {
        let note = try note("n3", in: context)
        note.body = "round \(round) " + String(repeating: "r", count: 900)
    }

    /// A lightweight migration at open, of a store with a torn tail and leftovers to recover first.
    static var lightweightMigration: StoreScenario {
        StoreScenario(name: "lightweight migration", steps: [
            .open(openShelfV1),
            .save("three items") { context in
                for (name, count, note) in [("bolt", 3, "steel"), ("nut", 5, nil), ("washer", 7, "brass")]
                    as [(String, Int, String?)] {
                    let item = ShelfV1.Item()
                    (item.name, item.count, item.note) = (name, count, note)
                    context.insert(item)
                }
            },
            .close,
            .offline("a torn tail and a leftover segment") { disk, url in
                try disk.appendDurably(StoreFiles.segment(url, 1).path, Array("00000010 00000000 {\"k\"".utf8))
                try disk.appendDurably(StoreFiles.segment(url, 7).path, Array("NOTEKIT/1 segment\n".utf8))
            },
            .open(openShelfV2),
            .save("a bin and a rating") { context in
                let items = try context.fetch(FetchDescriptor<ShelfV2.Item>(sortBy: [SortDescriptor(\.count)]))
                let bin = ShelfV2.Bin()
                bin.label = "top"
                context.insert(bin)
                items[0].bin = bin
                items[1].rating = 4.5
            },
            .close,
        ], faultsFrom: 4)
    }

    static var openShelfV1: Open {
        Open(name: "shelf v1", make: { url, fileSystem in
            try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                               configurations: [FileStoreConfiguration(url: url, fileSystem: fileSystem)])
        }, fingerprint: { context in
            try context.fetch(FetchDescriptor<ShelfV1.Item>(sortBy: [SortDescriptor(\.count)]))
                .map { "\($0.name) \($0.count) \($0.note ?? "nil")" }.joined(separator: "\n")
        })
    }

    static var openShelfV2: Open {
        Open(name: "shelf v2, migrating", make: { url, fileSystem in
            try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                               configurations: [FileStoreConfiguration(url: url, fileSystem: fileSystem)])
        }, fingerprint: { context in
            let items = try context.fetch(FetchDescriptor<ShelfV2.Item>(sortBy: [SortDescriptor(\.count)]))
            return items.map { "\($0.title) \($0.count) \($0.note) \($0.rating ?? -1) \($0.bin?.label ?? "-")" }
                .joined(separator: "\n") + "\nserials \(Set(items.map(\.serial)).count)"
        })
    }

    /// A migration plan whose custom stage saves in `willMigrate` (removing duplicates) and in `didMigrate`.
    static var migrationPlan: StoreScenario {
        StoreScenario(name: "migration plan", steps: [
            .open(openShelfV1),
            .save("three items, two named alike") { context in
                for (name, count, note) in [("bolt", 3, "steel"), ("nut", 5, nil), ("bolt", 7, "brass")]
                    as [(String, Int, String?)] {
                    let item = ShelfV1.Item()
                    (item.name, item.count, item.note) = (name, count, note)
                    context.insert(item)
                }
            },
            .close,
            .open(openDedupePlan),
            .save("an edit after the migration") { context in
                let items = try context.fetch(FetchDescriptor<ShelfUniqueName.Item>(sortBy: [SortDescriptor(\.count)]))
                items[0].note = "checked"
            },
            .close,
        ], faultsFrom: 3)
    }

    static var openDedupePlan: Open {
        Open(name: "shelf with a unique name, by a plan", make: { url, fileSystem in
            try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self), migrationPlan: ShelfScenarioPlan.self,
                               configurations: [FileStoreConfiguration(url: url, fileSystem: fileSystem)])
        }, fingerprint: { context in
            try context.fetch(FetchDescriptor<ShelfUniqueName.Item>(sortBy: [SortDescriptor(\.count)]))
                .map { "\($0.name) \($0.count) \($0.note ?? "nil")" }.joined(separator: "\n")
        })
    }
}

extension StoreScenario {
    /// The notes store shared per save: each save, history deletion and compaction takes the lock, catches up with
    /// what the other writers committed, and appends. A lock left held fails the next save at once rather than
    /// after the default 5 seconds.
    static var openSharedNotes: Open {
        Open(name: "notes, shared per save", make: { url, fileSystem in
            try StoreFiles.open(url, NotesSchema.models) {
                notesConfiguration(&$0)
                $0.sharing = .perSave
                $0.lockTimeout = 0
                $0.fileSystem = fileSystem
            }
        }, fingerprint: notesFingerprint)
    }

    /// Two writers (two opens, each its own `FileStore`) take turns on one store, so that every save, history
    /// deletion and compaction first catches up with the other's commits: appended records, a rotation, a
    /// compaction that replaced every segment (a full reload of what the writer had cached), and a torn tail that
    /// a writer killed in the middle of an append left, which the next writer cuts off (quarantine, truncate).
    /// Each writer edits objects it knows without refreshing: its own, or, after a reload, the other's.
    static var twoWriters: StoreScenario {
        let a = 0, b = 1
        return StoreScenario(name: "two writers", steps: [
            .by(a, .open(openSharedNotes)),
            .by(b, .open(openSharedNotes)),
            .by(a, .save("a folder and three notes") { context in
                let editor = NoteEditor(context: context)
                let folder = Folder(name: "Inbox")
                context.insert(folder)
                for index in 0..<3 {
                    editor.createNote(.init(title: "a\(index)", body: String(repeating: "a\(index) ", count: 40)),
                                      in: folder)
                }
            }),
            .by(b, .save("two notes and a drawing (a new blob), after the other's appends; the segment fills") { context in
                let editor = NoteEditor(context: context)
                let drawn = editor.createNote(.init(title: "b0", body: "drawn"))
                editor.createNote(.init(title: "b1", body: String(repeating: "b1 ", count: 400)))
                try editor.setDrawing(drawingBytes(3), on: drawn)
            }),
            .by(a, .save("edit a body (rotates the segment)") { context in
                try note("a0", in: context).body = "rotated " + String(repeating: "r", count: 300)
            }),
            .by(b, .store("delete history before the third transaction, after the other's rotation") { _, context in
                let third = DefaultHistoryToken(transactionNumber: 3)
                try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
                    predicate: #Predicate { $0.token < third }))
            }),
            .by(a, .store("compact, after the other's history deletion") { store, _ in try store.compact() }),
            .by(b, .save("edit with state cached from before the other's compaction (reload)") { context in
                try note("b0", in: context).body = "after the compaction"
            }),
            .by(b, .offline("a third writer dies in the middle of an append: a torn tail") { disk, url in
                guard let manifest = disk.contents(url.path + "/MANIFEST"), let active = manifestSegments(manifest).last else {
                    throw ScenarioError.noStore
                }
                try disk.appendDurably(StoreFiles.segment(url, active).path, Array("0000004a 1234abcd {\"k\":\"tx\"".utf8))
            }),
            .by(a, .save("edit the other's note (known from catching up), cutting off the torn tail") { context in
                try note("b1", in: context).body = "edited by a"
            }),
            // The other's log is stale now: closing must not cut the segment back to where it stood.
            .by(b, .close),
            .by(a, .close),
        ], faultsFrom: 1)
    }
}

/// ShelfDedupePlan's stages without its stage log, which another test slows down on purpose while it runs.
enum ShelfScenarioPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfUniqueName.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShelfV1.self, toVersion: ShelfUniqueName.self,
                 willMigrate: { context in
                     try ShelfStages.removeDuplicateNames(context)
                 },
                 didMigrate: { context in
                     try ShelfStages.addHundred(context)
                 })]
    }
}

enum ScenarioError: Error, CustomStringConvertible {
    case missing(String)
    case noStore
    var description: String {
        switch self {
        case .missing(let title): "no note titled \(title)"
        case .noStore: "no store is open"
        }
    }
}

// MARK: - Looking at a store's files

/// The segment numbers a manifest's bytes list.
func manifestSegments(_ bytes: [UInt8]) -> [Int] {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let start = text.range(of: "\"segments\":["),
          let end = text[start.upperBound...].firstIndex(of: "]") else { return [] }
    return text[start.upperBound..<end].split(separator: ",").compactMap { Int($0) }
}

/// What a writable open should have deleted, among a store's `files` (relative path to bytes): a temporary
/// manifest, segments the manifest does not list, blob files that are partial or that no object references
/// (`referencedBlobs`, names). Only names the format produces count (docs/FORMAT.md, *File types*): anything else
/// in the store's directories is not the store's to delete.
func leftovers(in files: [String: [UInt8]], referencedBlobs: Set<String>) -> [String] {
    let listed = Set(manifestSegments(files["MANIFEST"] ?? []))
    let isHash = { (name: Substring) in name.count == 64 && name.allSatisfy { $0.isHexDigit && !$0.isUppercase } }
    return files.keys.sorted().filter { path in
        if path == "MANIFEST.tmp" { return true }
        if path.hasPrefix("segments/") {
            let name = path.dropFirst("segments/".count)
            guard name.hasSuffix(".seg"), name.count >= 10, let number = Int(name.dropLast(4)) else { return false }
            return !listed.contains(number)
        }
        if path.hasPrefix("blobs/") {
            let name = path.dropFirst("blobs/".count)
            if name.hasPrefix("."), name.hasSuffix(".partial") { return isHash(name.dropFirst().dropLast(8)) }
            return name.hasSuffix(".blob") && isHash(name.dropLast(5)) && !referencedBlobs.contains(String(name.dropLast(5)))
        }
        return false
    }
}

/// The blob names the notes of a context reference.
func referencedBlobs(_ context: ModelContext) -> Set<String> {
    Set(((try? context.fetch(FetchDescriptor<NoteDrawing>())) ?? []).map { SHA256Digest.hexString($0.data) })
}
