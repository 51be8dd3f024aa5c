/// Runs a migration plan against a store, holding its lock across every step.
enum MigrationRunner {
    /// Opens the store for `schema`, first running the plan's stages from the stored schema's version.
    ///
    /// Each custom stage runs in order: `willMigrate` on the store opened with the stage's old schema, then the
    /// store is opened with its new schema (a lightweight migration recorded in the store), then `didMigrate`.
    /// What `willMigrate` saves stays saved if a later step fails; the schema moves on only when a stage completes
    /// (together with what `didMigrate` saved), so the next open runs a failed stage again (write stages so that
    /// running one twice does no harm). A change refused after a step wrote is reported as
    /// ``MigrationError/refusedAfterWriting(_:written:)``, naming what was written.
    ///
    /// - Throws: ``MigrationError`` (a downgrade is refused before any stage runs), ``SchemaError`` for an invalid
    ///   versioned schema, or the store's errors.
    static func open(_ schema: Schema, plan: any SchemaMigrationPlan.Type,
                     configuration: any MigratableStoreConfiguration,
                     uniquenessPolicy: UniquenessPolicy) throws -> any DataStore {
        let session = try configuration.beginMigration()
        var ended = false
        defer { if !ended { session.end() } }
        func finish() throws -> any DataStore {
            let store = try session.openStore(schema: schema, keepingLock: true)
            ended = true
            session.end()
            return store
        }
        let history = session.storedSchemaHistory
        guard let stored = history.last, !session.isReadOnly,
              case .migrate = try SchemaVersioning.decide(schema, history: history) else {
            return try finish()
        }
        let versions = try plan.schemas.map { try Schema(versionedSchema: $0) }
        // The version the store is at: the same hash and number, else (a store written without the plan) the hash.
        let storedHash = stored.contentHash
        guard var position = versions.firstIndex(where: { $0.contentHash == storedHash && $0.version == stored.version })
                ?? versions.firstIndex(where: { $0.contentHash == storedHash }) else {
            // A store written by no version the plan knows: infer a lightweight migration to today's schema.
            return try finish()
        }
        var written: [MigrationError.WrittenStep] = []
        do {
            try runStages(from: &position, versions: versions, plan: plan, session: session,
                          configuration: configuration, uniquenessPolicy: uniquenessPolicy, written: &written)
            return try finish()
        } catch MigrationError.refused(let diff) where !written.isEmpty {
            throw MigrationError.refusedAfterWriting(diff, written: written)
        }
    }

    /// Runs the plan's stages from the version at `position`, recording in `written` what each step wrote.
    private static func runStages(from position: inout Int, versions: [Schema], plan: any SchemaMigrationPlan.Type,
                                  session: any StoreMigrationSession, configuration: any MigratableStoreConfiguration,
                                  uniquenessPolicy: UniquenessPolicy,
                                  written: inout [MigrationError.WrittenStep]) throws {
        while let stage = plan.stages.first(where: { stageVersion($0.fromVersion, in: versions) == position }) {
            guard let target = stageVersion(stage.toVersion, in: versions), target > position else {
                throw MigrationError.stageFailed(from: versions[position].version, to: versions[position].version,
                                                 reason: "the stage does not lead to a later version of the plan")
            }
            let from = versions[position], to = versions[target]
            if case .custom(_, _, let willMigrate?, _) = stage {
                let store = try session.openStore(schema: from, keepingLock: false)
                let transactionNumber = store.transactionNumber
                try run(willMigrate, on: store, schema: from, configuration: configuration,
                        uniquenessPolicy: uniquenessPolicy, stage: (from.version, to.version))
                if store.transactionNumber != transactionNumber {
                    written.append(.willMigrateSaved(from: from.version, to: to.version))
                }
            }
            if case .custom(_, _, _, let didMigrate?) = stage {
                // The schema moves on only with didMigrate's changes: otherwise a failure or a crash in between
                // would leave the store migrated without them, and the next open would not run the stage again.
                let store = try session.openStoreForStage(schema: to)
                try run(didMigrate, on: store, schema: to, configuration: configuration,
                        uniquenessPolicy: uniquenessPolicy, stage: (from.version, to.version))
                try session.commitStage(store)
            } else {
                _ = try session.openStore(schema: to, keepingLock: false)
            }
            written.append(.stageCompleted(from: from.version, to: to.version))
            position = target
        }
    }

    private static func stageVersion(_ type: any VersionedSchema.Type, in versions: [Schema]) -> Int? {
        versions.firstIndex { $0.version == type.versionIdentifier }
    }

    private static func run(_ body: (ModelContext) throws -> Void, on store: any DataStore, schema: Schema,
                            configuration: any DataStoreConfiguration, uniquenessPolicy: UniquenessPolicy,
                            stage: (Schema.Version, Schema.Version)) throws {
        let container = try ModelContainer(schema: schema, store: store, configuration: configuration,
                                           uniquenessPolicy: uniquenessPolicy)
        let context = ModelContext(container)
        do {
            try body(context)
            if context.hasChanges { try context.save() }
        } catch {
            throw MigrationError.stageFailed(from: stage.0, to: stage.1, reason: "\(error)")
        }
    }
}
