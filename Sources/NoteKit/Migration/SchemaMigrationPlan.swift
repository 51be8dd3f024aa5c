/// The shipped versions of a schema, oldest first, and how to get from each to the next (SwiftData's
/// `SchemaMigrationPlan`).
///
/// ```swift
/// enum NotesMigrationPlan: SchemaMigrationPlan {
///     static var schemas: [any VersionedSchema.Type] { [SchemaV1.self, SchemaV2.self] }
///     static var stages: [MigrationStage] {
///         [.custom(fromVersion: SchemaV1.self, toVersion: SchemaV2.self,
///                  willMigrate: { context in /* remove duplicates before a unique constraint */ },
///                  didMigrate: nil)]
///     }
/// }
/// let container = try ModelContainer(for: SchemaV2.Note.self, migrationPlan: NotesMigrationPlan.self,
///                                    configurations: FileStoreConfiguration(url: url))
/// ```
///
/// A plan is needed only for changes a lightweight migration cannot infer; without one, NoteKit compares the stored
/// schema with today's and migrates by itself (see ``MigrationStage/lightweight(fromVersion:toVersion:)``). A
/// store whose schema matches none of the plan's versions is migrated lightweight to the current schema rather
/// than refused.
///
/// A container given a plan and plain model types (`ModelContainer(for: SchemaV2.Note.self, migrationPlan: …)`)
/// takes the version of the plan's schema whose content hash its models have (the newest, if several have), so a
/// new store records 2.0.0 and an older app's models are refused by number (docs/MIGRATIONS.md, *Versioning*).
public protocol SchemaMigrationPlan {
    /// Every shipped version, oldest first.
    static var schemas: [any VersionedSchema.Type] { get }
    /// The steps between consecutive versions.
    static var stages: [MigrationStage] { get }
}

/// One step of a migration plan (SwiftData's `MigrationStage`).
///
/// A stage is `Sendable`, so a plan can keep one in a `static let`, as seed 002 does; a trailing closure is the
/// stage's `willMigrate`:
///
/// ```swift
/// static let migrateV1toV2 = MigrationStage.custom(fromVersion: SchemaV1.self, toVersion: SchemaV2.self) { context in
///     for task in try context.fetch(FetchDescriptor<SchemaV1.TaskV1>()) { task.name = task.name.capitalized }
///     try context.save()
/// }
/// ```
public enum MigrationStage: Sendable {
    /// A step a lightweight migration makes by itself.
    case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type)
    /// A step with code: `willMigrate` runs on a context over the old version's models before the schema changes,
    /// `didMigrate` on a context over the new version's models after; what each changes is saved when it returns.
    /// Either may be nil (the default). The closures are `@Sendable`: they capture no context, they are given one.
    case custom(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
                willMigrate: (@Sendable (ModelContext) throws -> Void)? = nil,
                didMigrate: (@Sendable (ModelContext) throws -> Void)? = nil)

    var fromVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(let from, _), .custom(let from, _, _, _): from
        }
    }

    var toVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(_, let to), .custom(_, let to, _, _): to
        }
    }
}

/// A store configuration that can run a migration plan: it holds the store's write lock across every step, so
/// that a custom stage runs once even when several processes open the store together (the others wait, then find
/// the store migrated).
package protocol MigratableStoreConfiguration: DataStoreConfiguration {
    /// Takes the store's write lock (waiting as the configuration allows) and reads which schema it was written with.
    func beginMigration() throws -> any StoreMigrationSession
}

/// A store held for migration.
package protocol StoreMigrationSession: AnyObject {
    /// The schema the store was last written with; nil for a store that does not exist yet.
    var storedSchema: Schema? { get }
    /// Every schema the store was written with, oldest first (empty for a store that does not exist yet): what
    /// tells an older schema from a new one.
    var storedSchemaHistory: [Schema] { get }
    /// Opens the store with `schema` under the session's lock, migrating lightweight from the stored schema if they
    /// differ. With `keepingLock`, the store takes the lock over and the session ends.
    func openStore(schema: Schema, keepingLock: Bool) throws -> any DataStore
    /// Releases the lock, unless a store took it over.
    func end()
    /// Whether the store is opened read-only: lightweight steps then happen in memory only, and custom stages,
    /// whose changes could not be saved, do not run.
    var isReadOnly: Bool { get }
    /// Opens the store with `schema` for a custom stage's `didMigrate`: the migration to `schema` is not written
    /// yet, and ``commitStage(_:)`` writes it together with what the stage saved, in one step, so that a failure or
    /// a crash before then leaves the store at its old schema and the next open runs the stage again.
    func openStoreForStage(schema: Schema) throws -> any DataStore
    /// Writes the migration and the changes saved since ``openStoreForStage(schema:)`` as one atomic step.
    func commitStage(_ store: any DataStore) throws
}

extension StoreMigrationSession {
    /// The latest stored schema alone, for a session that cannot read the history.
    package var storedSchemaHistory: [Schema] { storedSchema.map { [$0] } ?? [] }

    /// A session that cannot hold a migration back writes it at open, and `didMigrate`'s changes after it.
    package func openStoreForStage(schema: Schema) throws -> any DataStore {
        try openStore(schema: schema, keepingLock: false)
    }

    package func commitStage(_ store: any DataStore) throws {}
}
