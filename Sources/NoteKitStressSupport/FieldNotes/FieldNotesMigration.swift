import Foundation
import NoteKit
import NoteKitFileStore
import Synchronization

// Seed 001's schema versions and the migration plan every FieldNotes process passes ("whichever opens the store
// first after an update runs the custom stage"). V1 is today's records minus the location fields; the seed names
// the plan but does not show its stage, so the stage here is one the app could have shipped: V1 kept a note's
// place as a `place:<name>` tag, which V2 moves into `placeName`. Both of its steps save, so that a test sees a
// saving stage at work under every sharing mode.

/// FieldNotes' first schema: notes without a location.
public enum FieldNotesSchemaV1: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    public static var models: [any PersistentModel.Type] { [NoteRecord.self, NotebookRecord.self, PhotoRecord.self] }

    public final class NoteRecord: PersistentModel {
        @Attribute(.preserveValueOnDeletion) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var createdAt = Date.now
        @Attribute public var tags: [String] = []
        @Attribute public var isPinned = false
        @Relationship public var notebook: NotebookRecord?
        @Relationship(deleteRule: .cascade, inverse: \PhotoRecord.note) public var photos: [PhotoRecord] = []

        public static var indexes: [[PartialKeyPath<NoteRecord>]] { [[\.createdAt], [\.isPinned, \.createdAt]] }

        public required init() {}

        public convenience init(title: String, tags: [String] = []) {
            self.init()
            self.title = title
            self.tags = tags
        }
    }

    public final class NotebookRecord: PersistentModel {
        @Attribute(.preserveValueOnDeletion) public var id = UUID()
        @Attribute public var name = ""
        @Attribute public var symbolName = "book.closed"
        @Relationship(deleteRule: .nullify, inverse: \NoteRecord.notebook) public var notes: [NoteRecord] = []
        public required init() {}
    }

    public final class PhotoRecord: PersistentModel {
        @Attribute public var id = UUID()
        @Attribute public var fileName = ""
        @Attribute public var addedAt = Date.now
        @Attribute(.externalStorage) public var data = Data()
        @Relationship public var note: NoteRecord?
        public required init() {}
    }
}

/// FieldNotes' current schema: the top-level records of `FieldNotes.swift`, which add a note's location.
public enum FieldNotesSchemaV2: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    public static var models: [any PersistentModel.Type] { [NoteRecord.self, NotebookRecord.self, PhotoRecord.self] }
}

/// The plan the app, its widgets, intents and share extension all pass.
public enum FieldNotesMigrationPlan: SchemaMigrationPlan {
    public static var schemas: [any VersionedSchema.Type] { [FieldNotesSchemaV1.self, FieldNotesSchemaV2.self] }
    public static var stages: [MigrationStage] { [migrateV1toV2] }

    /// The tag prefix V1 used for a note's place.
    public static let placeTagPrefix = "place:"

    /// `willMigrate` trims the titles V1 saved untrimmed; `didMigrate` moves each `place:` tag into `placeName`.
    /// Each saves; running either twice does no harm.
    public static let migrateV1toV2 = MigrationStage.custom(
        fromVersion: FieldNotesSchemaV1.self, toVersion: FieldNotesSchemaV2.self,
        willMigrate: { context in
            StageRuns.begin(.willMigrate, context)
            for note in try context.fetch(FetchDescriptor<FieldNotesSchemaV1.NoteRecord>()) {
                let trimmed = note.title.trimmingCharacters(in: .whitespaces)
                if trimmed != note.title { note.title = trimmed }
            }
            try context.save()
            try StageRuns.end(.willMigrate, context)
        },
        didMigrate: { context in
            StageRuns.begin(.didMigrate, context)
            for note in try context.fetch(FetchDescriptor<NoteRecord>()) {
                guard let tag = note.tags.first(where: { $0.hasPrefix(placeTagPrefix) }) else { continue }
                note.placeName = String(tag.dropFirst(placeTagPrefix.count))
                note.tags.removeAll { $0.hasPrefix(placeTagPrefix) }
            }
            try context.save()
            try StageRuns.end(.didMigrate, context)
        })

    /// A step of the plan's stage.
    public enum Step: String, Sendable, Hashable, CaseIterable {
        case willMigrate, didMigrate
    }

    /// What a test asks of the stage on one store: a pause at the start of a step (so that another process
    /// surely tries the store meanwhile, or a test can kill the process there), a step that fails once at its
    /// end, after its save, and a call as each step starts (before its pause).
    public struct Behaviour: Sendable {
        /// Seconds to pause at the start of each step, by step.
        public var pauses: [Step: Double]
        public var failing: Step?
        public var onStep: (@Sendable (Step) -> Void)?

        /// A pause of `pause` seconds at the start of each step in `pausing` (every step by default).
        public init(pause: Double = 0, pausing: Set<Step> = Set(Step.allCases), failing: Step? = nil,
                    onStep: (@Sendable (Step) -> Void)? = nil) {
            pauses = pause > 0 ? Dictionary(uniqueKeysWithValues: pausing.map { ($0, pause) }) : [:]
            self.failing = failing
            self.onStep = onStep
        }
    }

    /// The failure a ``Behaviour`` asks for.
    public struct InjectedFailure: Error, CustomStringConvertible {
        public var step: Step
        public init(step: Step) { self.step = step }
        public var description: String { "\(step.rawValue) failed on purpose" }
    }

    /// Sets what the stage does on the store at `url` in this process.
    public static func setBehaviour(_ behaviour: Behaviour, for url: URL) {
        StageRuns.state.withLock { $0.behaviours[url.standardizedFileURL.path] = behaviour }
    }

    /// The steps this process ran on the store at `url`, in order (a step counts when it starts).
    public static func steps(ranOn url: URL) -> [Step] {
        StageRuns.state.withLock { $0.runs[url.standardizedFileURL.path] ?? [] }
    }

    /// Counts the stage's steps by store, so that tests running at once do not see each other's.
    private enum StageRuns {
        struct State {
            var runs: [String: [Step]] = [:]
            var behaviours: [String: Behaviour] = [:]
        }

        static let state = Mutex(State())

        static func key(_ context: ModelContext) -> String? {
            (context.container.configuration as? FileStoreConfiguration)?.url.standardizedFileURL.path
        }

        static func begin(_ step: Step, _ context: ModelContext) {
            guard let key = key(context) else { return }
            let behaviour = state.withLock { state in
                state.runs[key, default: []].append(step)
                return state.behaviours[key]
            }
            behaviour?.onStep?(step)
            if let pause = behaviour?.pauses[step], pause > 0 { Thread.sleep(forTimeInterval: pause) }
        }

        static func end(_ step: Step, _ context: ModelContext) throws {
            guard let key = key(context) else { return }
            let fails = state.withLock { state in
                guard state.behaviours[key]?.failing == step else { return false }
                state.behaviours[key]?.failing = nil
                return true
            }
            if fails { throw InjectedFailure(step: step) }
        }
    }
}
