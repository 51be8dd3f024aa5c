import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

// Small schemas whose versions differ by one change each. Entity names are shared across namespaces so that a
// later namespace's models reopen an earlier one's store.
enum ShelfV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }
    final class Item: PersistentModel {
        @Attribute var name = ""
        @Attribute var count = 0
        @Attribute var note: String?
        static var entityName: String { "Item" }
        required init() {}
    }
}

/// Lightweight from V1: a renamed attribute, a new attribute with a generated default, a new optional one, a new
/// entity and relationship; `note` becomes required with a default.
enum ShelfV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }
    final class Item: PersistentModel {
        @Attribute(originalName: "name") var title = ""
        @Attribute var count = 0
        @Attribute var note = "none"
        @Attribute var serial = UUID()
        @Attribute var rating: Double?
        @Relationship(inverse: \Bin.items) var bin: Bin?
        static var entityName: String { "Item" }
        required init() {}
    }
    final class Bin: PersistentModel {
        @Attribute var label = ""
        @Relationship var items: [Item] = []
        required init() {}
    }
}

/// From V1, a type change: refused.
enum ShelfTypeChange: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }
    final class Item: PersistentModel {
        @Attribute var name = ""
        @Attribute var count = ""
        @Attribute var note: String?
        static var entityName: String { "Item" }
        required init() {}
    }
}

/// From V1, a new required attribute without a default... cannot be declared (every wrapper has a default), so a
/// required attribute whose stored values are nil: `note` becomes required, and stored notes are nil.
enum ShelfRequiredNote: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }
    final class Item: PersistentModel {
        @Attribute var name = ""
        @Attribute var count = 0
        @Attribute var note = UUID().uuidString
        static var entityName: String { "Item" }
        required init() {}
    }
}

/// From V1, a unique constraint on `name`: refused over stored duplicates.
enum ShelfUniqueName: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }
    final class Item: PersistentModel {
        @Attribute(.unique) var name = ""
        @Attribute var count = 0
        @Attribute var note: String?
        static var entityName: String { "Item" }
        required init() {}
    }
}

/// The steps of the Shelf plans' custom stage, shared by the plans of the migration and fault tests.
enum ShelfStages {
    /// `willMigrate`: keeps the item with the lowest count of each name, so the unique constraint can be added.
    static func removeDuplicateNames(_ context: ModelContext) throws {
        var seen = Set<String>()
        for item in try context.fetch(FetchDescriptor<ShelfV1.Item>(sortBy: [SortDescriptor(\.count)]))
        where !seen.insert(item.name).inserted {
            try context.delete(item)
        }
    }

    /// `didMigrate`: changes every item, so a test can tell whether it ran.
    static func addHundred(_ context: ModelContext) throws {
        for item in try context.fetch(FetchDescriptor<ShelfUniqueName.Item>()) { item.count += 100 }
    }
}

/// ShelfUniqueName's migration plan: a custom stage removes duplicates before the constraint, and counts its runs.
enum ShelfDedupePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfUniqueName.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShelfV1.self, toVersion: ShelfUniqueName.self,
                 willMigrate: { context in
                     StageLog.record("willMigrate")
                     try ShelfStages.removeDuplicateNames(context)
                 },
                 didMigrate: { context in
                     StageLog.record("didMigrate")
                     try ShelfStages.addHundred(context)
                 })]
    }
}

/// ShelfDedupePlan with a `didMigrate` that throws the first time it runs.
enum ShelfFailingDidMigratePlan: SchemaMigrationPlan {
    static let failuresLeft = Mutex(1)

    struct Failure: Error {}

    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfUniqueName.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShelfV1.self, toVersion: ShelfUniqueName.self,
                 willMigrate: { context in
                     try ShelfStages.removeDuplicateNames(context)
                 },
                 didMigrate: { context in
                     try ShelfStages.addHundred(context)
                     try context.save()
                     if failuresLeft.withLock({ left in defer { left -= 1 }; return left > 0 }) { throw Failure() }
                 })]
    }
}

/// Where custom stages say they ran: a file, so that stages in other processes are counted too.
enum StageLog {
    static func record(_ line: String) {
        guard let path = ProcessInfo.processInfo.environment["NOTEKIT_STAGE_LOG"] else { return }
        let handle = FileHandle(forWritingAtPath: path) ?? {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            return FileHandle(forWritingAtPath: path)!
        }()
        handle.seekToEndOfFile()
        handle.write(Data("\(line) \(getpid())\n".utf8))
        try? handle.close()
        if ProcessInfo.processInfo.environment["NOTEKIT_STAGE_SLOW"] != nil { usleep(700_000) }
    }
}

@Suite("Migration: lightweight, refused, custom stages")
struct MigrationTests {
    /// A V1 store with three items, two of them named alike, and one note nil.
    private func v1Store() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        for (name, count, note) in [("bolt", 3, "steel"), ("nut", 5, nil), ("bolt", 7, "brass")] as [(String, Int, String?)] {
            let item = ShelfV1.Item()
            item.name = name
            item.count = count
            item.note = note
            context.insert(item)
        }
        try context.save()
        try StoreFiles.close(container)
        return url
    }

    @Test("A lightweight migration renames, adds with defaults, fills generated values once, and is appended")
    func lightweight() throws {
        let url = try v1Store()
        let before = try Data(contentsOf: StoreFiles.segment(url))
        var serials: [UUID] = []
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(container)
            let items = try context.fetch(FetchDescriptor<ShelfV2.Item>(sortBy: [SortDescriptor(\.count)]))
            #expect(items.map(\.title) == ["bolt", "nut", "bolt"])
            #expect(items.map(\.note) == ["steel", "none", "brass"], "nil became the new default")
            #expect(items.allSatisfy { $0.rating == nil && $0.bin == nil })
            serials = items.map(\.serial)
            #expect(Set(serials).count == 3, "each object got its own generated value")
            items[0].bin = ShelfV2.Bin()
            try context.save()
            try StoreFiles.close(container)
        }
        let after = try Data(contentsOf: StoreFiles.segment(url))
        #expect(after.prefix(before.count) == before, "the migration is appended; old records are not rewritten")
        #expect(String(decoding: after.suffix(from: before.count), as: UTF8.self).contains(#""k":"migration""#))

        // Replaying the log gives the same generated values: they were recorded.
        let container = try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        let items = try context.fetch(FetchDescriptor<ShelfV2.Item>(sortBy: [SortDescriptor(\.count)]))
        #expect(items.map(\.serial) == serials)
        #expect(items[0].bin != nil)
        try StoreFiles.store(container).compact()
        try StoreFiles.close(container)
        let compacted = try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        #expect(try ModelContext(compacted).fetch(FetchDescriptor<ShelfV2.Item>(sortBy: [SortDescriptor(\.count)]))
                    .map(\.serial) == serials)
    }

    @Test("A read-only open migrates in memory only")
    func readOnlyMigratesInMemory() throws {
        let url = try v1Store()
        let before = StoreFiles.contents(of: url)
        let container = try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                                           configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        #expect(try ModelContext(container).fetch(FetchDescriptor<ShelfV2.Item>()).map(\.title).sorted()
                == ["bolt", "bolt", "nut"])
        #expect(StoreFiles.contents(of: url) == before)
    }

    @Test("Each refusable change is refused with a readable diff, and the store's bytes are unchanged",
          arguments: ["type", "required", "unique"])
    func refused(kind: String) throws {
        let url = try v1Store()
        let before = StoreFiles.contents(of: url)
        let schema: Schema = switch kind {
        case "type": try Schema(versionedSchema: ShelfTypeChange.self)
        case "required": try Schema(versionedSchema: ShelfRequiredNote.self)
        default: try Schema(versionedSchema: ShelfUniqueName.self)
        }
        do {
            _ = try ModelContainer(for: schema, configurations: [FileStoreConfiguration(url: url)])
            Issue.record("the \(kind) change must be refused")
        } catch MigrationError.refused(let diff) {
            let refusal = try #require(diff.refusals.first)
            switch kind {
            case "type":
                #expect(refusal.change == "attribute count changes type Int → String")
            case "required":
                // A generated default cannot stand in for a missing value: every object would get a different one,
                // invisibly. Stored nils need a custom stage.
                #expect(refusal.change == "attribute note becomes required" || refusal.change == "Item.note is now required")
            default:
                #expect(refusal.change == "unique constraint (name) added")
                #expect(refusal.refusal?.contains("2 stored objects share \"bolt\"") == true)
            }
            #expect(MigrationError.refused(diff).description.contains("the store is untouched"))
        }
        #expect(StoreFiles.contents(of: url) == before)
    }

    @Test("A store written by a newer schema is refused and left untouched")
    func backwardMigration() throws {
        let url = try v1Store()
        try StoreFiles.close(try ModelContainer(for: Schema(versionedSchema: ShelfV2.self),
                                                configurations: [FileStoreConfiguration(url: url)]))
        let before = StoreFiles.contents(of: url)
        #expect(throws: MigrationError.storeIsNewer(stored: Schema.Version(2, 0, 0), current: Schema.Version(1, 0, 0))) {
            _ = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self), configurations: [FileStoreConfiguration(url: url)])
        }
        #expect(StoreFiles.contents(of: url) == before)
    }

    @Test("A custom stage removes duplicates before a unique constraint, with typed access to old and new models")
    func customStage() throws {
        let url = try v1Store()
        let container = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                           migrationPlan: ShelfDedupePlan.self,
                                           configurations: [FileStoreConfiguration(url: url)])
        let items = try ModelContext(container).fetch(FetchDescriptor<ShelfUniqueName.Item>(sortBy: [SortDescriptor(\.name)]))
        #expect(items.map(\.name) == ["bolt", "nut"])
        #expect(items.map(\.count) == [103, 105], "didMigrate ran on the new models")
        try StoreFiles.close(container)
        // Opening again runs nothing: the store is at the current version.
        let again = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                       migrationPlan: ShelfDedupePlan.self,
                                       configurations: [FileStoreConfiguration(url: url)])
        #expect(try ModelContext(again).fetch(FetchDescriptor<ShelfUniqueName.Item>()).map(\.count).sorted() == [103, 105])
    }

    @Test("A didMigrate that fails leaves the store at its old schema, and the next open runs the stage again")
    func failedDidMigrateRunsAgain() throws {
        let url = try v1Store()
        #expect(throws: MigrationError.self) {
            _ = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                   migrationPlan: ShelfFailingDidMigratePlan.self,
                                   configurations: [FileStoreConfiguration(url: url)])
        }
        // willMigrate's save stays; the schema and didMigrate's saved changes do not.
        let old = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                     configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        #expect(try ModelContext(old).fetch(FetchDescriptor<ShelfV1.Item>(sortBy: [SortDescriptor(\.count)]))
                    .map(\.count) == [3, 5])
        let container = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                           migrationPlan: ShelfFailingDidMigratePlan.self,
                                           configurations: [FileStoreConfiguration(url: url)])
        #expect(try ModelContext(container).fetch(FetchDescriptor<ShelfUniqueName.Item>(sortBy: [SortDescriptor(\.count)]))
                    .map(\.count) == [103, 105])
    }

    @Test("A custom stage runs exactly once when two processes open the store at the same moment")
    func customStageOnceAcrossProcesses() async throws {
        let url = try v1Store()
        let log = TemporaryStores.newURL("stage-log").path
        let path = url.path
        setenv("NOTEKIT_STAGE_LOG", log, 1)
        setenv("NOTEKIT_STAGE_SLOW", "1", 1)
        defer {
            unsetenv("NOTEKIT_STAGE_LOG")
            unsetenv("NOTEKIT_STAGE_SLOW")
        }
        async let first = #expect(processExitsWith: .success) { [path = path as String] in
            let container = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                               migrationPlan: ShelfDedupePlan.self,
                                               configurations: [FileStoreConfiguration(url: URL(fileURLWithPath: path))])
            let count = try ModelContext(container).fetchCount(FetchDescriptor<ShelfUniqueName.Item>())
            exit(count == 2 ? 0 : 1)
        }
        async let second = #expect(processExitsWith: .success) { [path = path as String] in
            let container = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                               migrationPlan: ShelfDedupePlan.self,
                                               configurations: [FileStoreConfiguration(url: URL(fileURLWithPath: path))])
            let count = try ModelContext(container).fetchCount(FetchDescriptor<ShelfUniqueName.Item>())
            exit(count == 2 ? 0 : 1)
        }
        _ = await (first, second)
        // Only the two child processes count: a stage of another test in this process may log too.
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            .filter { !$0.hasSuffix(" \(getpid())") }
        #expect(lines.filter { $0.hasPrefix("willMigrate") }.count == 1)
        #expect(lines.filter { $0.hasPrefix("didMigrate") }.count == 1)
    }

    @Test("LightweightMigration lists every change, allowed or refused")
    func diffDescription() throws {
        let migration = try LightweightMigration(from: Schema(versionedSchema: ShelfV1.self),
                                                 to: Schema(versionedSchema: ShelfV2.self))
        let text = migration.diff.description
        for line in ["schema 1.0.0 → 2.0.0:", "Bin: entity added", "Item: attribute name renamed to title",
                     "Item: attribute note becomes required (nil becomes \"none\")",
                     "Item: attribute serial added (UUID, a generated default for each object)",
                     "Item: attribute rating added (Double?, nil)", "Item: relationship bin added (Bin?, empty)"] {
            #expect(text.contains(line), "\(line)")
        }
        #expect(!migration.diff.isRefused)
    }
}
