import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

/// Seed 002's custom migration, ported line for line: `TaskV1 { name }` becomes `TaskV2 { title, priority }`, and
/// the plan's stage is a `static let` written with a trailing closure.
enum SchemaGuide {
    enum SchemaV1: VersionedSchema {
        static let versionIdentifier = Schema.Version(1, 0, 0)
        static var models: [any PersistentModel.Type] { [TaskV1.self] }

        final class TaskV1: PersistentModel {
            @Attribute var name = ""
            required init() {}
            convenience init(name: String) {
                self.init()
                self.name = name
            }
        }
    }

    /// V2 as seed 002 writes it: a new model name, no `originalEntityName`, no `originalName`.
    enum SchemaV2: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [TaskV2.self] }

        final class TaskV2: PersistentModel {
            @Attribute var title = ""
            @Attribute var priority = 0
            required init() {}
        }
    }

    enum TaskMigrationPlan: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [SchemaV1.self, SchemaV2.self] }

        static var stages: [MigrationStage] {
            [migrateV1toV2]
        }

        static let migrateV1toV2 = MigrationStage.custom(
            fromVersion: SchemaV1.self,
            toVersion: SchemaV2.self
        ) { context in
            let tasks = try context.fetch(FetchDescriptor<SchemaV1.TaskV1>())
            for task in tasks {
                // Transform data during migration
                _ = task
            }
            try context.save()
        }
    }

    /// V2 with the rename declared, as NoteKit asks: the model continues TaskV1, its title continues name.
    enum RenamedSchemaV2: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [TaskV2.self] }

        final class TaskV2: PersistentModel {
            @Attribute(originalName: "name") var title = ""
            @Attribute var priority = 0
            static var originalEntityName: String? { "TaskV1" }
            required init() {}
        }
    }

    /// Seed 002's plan over the declared rename; its stage trims every name, so a test can tell that it ran.
    enum RenamingTaskMigrationPlan: SchemaMigrationPlan {
        static let runs = Mutex(0)

        static var schemas: [any VersionedSchema.Type] { [SchemaV1.self, RenamedSchemaV2.self] }

        static var stages: [MigrationStage] {
            [migrateV1toV2]
        }

        static let migrateV1toV2 = MigrationStage.custom(
            fromVersion: SchemaV1.self,
            toVersion: RenamedSchemaV2.self
        ) { context in
            runs.withLock { $0 += 1 }
            let tasks = try context.fetch(FetchDescriptor<SchemaV1.TaskV1>())
            for task in tasks {
                // Transform data during migration
                task.name = task.name.trimmingCharacters(in: .whitespaces)
            }
            try context.save()
        }
    }

    /// A V1 store holding `names`.
    static func v1Store(_ names: [String]) throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: Schema(versionedSchema: SchemaV1.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        for name in names { context.insert(SchemaV1.TaskV1(name: name)) }
        try context.save()
        try StoreFiles.close(container)
        return url
    }
}

@Suite("Migration stages as the seeds write them")
struct SeedMigrationPlanTests {
    @Test("Seed 002's plan compiles as a static let with a trailing willMigrate, and runs on a file store")
    func schemaGuidePlanRuns() throws {
        let stage: any Sendable = SchemaGuide.RenamingTaskMigrationPlan.migrateV1toV2
        guard case .custom(_, _, let willMigrate, let didMigrate) = stage as? MigrationStage else {
            Issue.record("the stage is a custom one")
            return
        }
        #expect(willMigrate != nil, "the trailing closure is willMigrate")
        #expect(didMigrate == nil, "didMigrate defaults to nil")

        let url = try SchemaGuide.v1Store(["  write docs ", "ship"])
        let runsBefore = SchemaGuide.RenamingTaskMigrationPlan.runs.withLock { $0 }
        let container = try ModelContainer(for: SchemaGuide.RenamedSchemaV2.TaskV2.self,
                                           migrationPlan: SchemaGuide.RenamingTaskMigrationPlan.self,
                                           configurations: FileStoreConfiguration(url: url))
        #expect(SchemaGuide.RenamingTaskMigrationPlan.runs.withLock { $0 } == runsBefore + 1)
        let tasks = try ModelContext(container).fetch(FetchDescriptor<SchemaGuide.RenamedSchemaV2.TaskV2>(
            sortBy: [SortDescriptor(\.title)]))
        #expect(tasks.map(\.title) == ["ship", "write docs"], "willMigrate's trimming was kept through the rename")
        #expect(tasks.map(\.priority) == [0, 0])
    }
}
