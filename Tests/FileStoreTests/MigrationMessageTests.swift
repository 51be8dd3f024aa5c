import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// ShelfUniqueName's plan with a `willMigrate` that saves a change but leaves the duplicates the constraint refuses.
enum ShelfIncompletePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfUniqueName.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShelfV1.self, toVersion: ShelfUniqueName.self,
                 willMigrate: { context in
                     for item in try context.fetch(FetchDescriptor<ShelfV1.Item>()) { item.count += 1 }
                 },
                 didMigrate: nil)]
    }
}

@Suite("Migration and open messages state what is true and what to do")
struct MigrationMessageTests {
    @Test("A migration refused after willMigrate saved says what was written, not that the store is untouched")
    func refusedAfterWillMigrate() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(container)
            for (name, count) in [("bolt", 3), ("bolt", 7)] {
                let item = ShelfV1.Item()
                item.name = name
                item.count = count
                context.insert(item)
            }
            try context.save()
            try StoreFiles.close(container)
        }
        do {
            _ = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                   migrationPlan: ShelfIncompletePlan.self,
                                   configurations: [FileStoreConfiguration(url: url)])
            Issue.record("the unique constraint over duplicates must be refused")
        } catch let error as MigrationError {
            guard case .refusedAfterWriting(_, let written) = error else {
                Issue.record("expected refusedAfterWriting, got \(error)")
                return
            }
            #expect(written == [.willMigrateSaved(from: Schema.Version(1, 0, 0), to: Schema.Version(2, 0, 0))])
            let message = "\(error)"
            #expect(!message.contains("untouched"), "\(message)")
            #expect(message.contains("willMigrate"), "\(message)")
            #expect(message.contains("saved"), "\(message)")
            #expect(message.contains("1.0.0"), "names the schema the store is at: \(message)")
            #expect(message.contains("unique constraint (name) added"), "and still lists the refused change: \(message)")
        }
        // What the message says is true: willMigrate's change is in the store, at the old schema.
        let old = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                     configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        #expect(try ModelContext(old).fetch(FetchDescriptor<ShelfV1.Item>(sortBy: [SortDescriptor(\.count)]))
                    .map(\.count) == [4, 8])
    }

    @Test("A migration refused before anything is written still says the store is untouched")
    func refusedUntouched() throws {
        let url = try SchemaGuide.v1Store(["ship"])
        let before = fileHashes(url)
        do {
            _ = try ModelContainer(for: Schema(versionedSchema: ShelfUniqueName.self),
                                   configurations: [FileStoreConfiguration(url: url)])
            Issue.record("another application's store must be refused")
        } catch let error as MigrationError {
            #expect("\(error)".contains("untouched"))
        }
        #expect(fileHashes(url) == before)
    }

    @Test("A second writable open in the same process says so, not that another process has the store")
    func secondOpenInThisProcess() throws {
        let url = TemporaryStores.newURL()
        let writer = try StoreFiles.open(url, NotesSchema.models) { $0.sharing = .exclusive }
        do {
            _ = try StoreFiles.open(url, NotesSchema.models) { $0.lockTimeout = 0 }
            Issue.record("a second writable open must be refused")
        } catch let error as FileStoreError {
            #expect(error == .lockedInThisProcess(path: url.path))
            let message = "\(error)"
            #expect(!message.contains("another process"), "\(message)")
            #expect(message.contains("in this process"), "\(message)")
            #expect(message.contains("close"), "says how to release it: \(message)")
        }
        try StoreFiles.close(writer)
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models))
    }

    @Test("Seed 002's TaskV1 → TaskV2 plan, as written, is refused with a message naming originalEntityName")
    func renamedModelNeedsOriginalEntityName() throws {
        let url = try SchemaGuide.v1Store(["ship"])
        let before = fileHashes(url)
        do {
            _ = try ModelContainer(for: SchemaGuide.SchemaV2.TaskV2.self,
                                   migrationPlan: SchemaGuide.TaskMigrationPlan.self,
                                   configurations: FileStoreConfiguration(url: url))
            Issue.record("a model renamed without originalEntityName must be refused")
        } catch let error as MigrationError {
            let message = "\(error)"
            for part in ["TaskV1", "TaskV2", "originalEntityName", #"{ "TaskV1" }"#, "originalName"] {
                #expect(message.contains(part), "\(part) in: \(message)")
            }
        }
        #expect(fileHashes(url) == before)
    }
}
