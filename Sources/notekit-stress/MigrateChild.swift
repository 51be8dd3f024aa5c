import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport

/// `notekit-stress migrate`: one of several processes opening a FieldNotes V1 store with seed 001's plan
/// (``FieldNotesMigrationPlan``) at the same moment, as the app and its extensions do after an update
/// (docs/MIGRATIONS.md, *Several processes*).
///
/// Lines on standard output: `ready` once started (the store not touched yet); then, after a `go` line on standard
/// input, `step NAME` as each step of the stage starts, `steps willMigrate=W didMigrate=D` (how many times this
/// process ran each step) and either
/// `opened version=V notes=N placed=P` (the container is open; N notes, P of them with a place) followed by `done`
/// after closing, or `error MESSAGE` and exit status 1.
struct MigrateChild {
    let url: URL
    /// Nil: the configuration's default.
    let sharing: FileStoreConfiguration.Sharing?
    let lockTimeout: Double?
    let behaviour: FieldNotesMigrationPlan.Behaviour

    func run() -> Never {
        var behaviour = behaviour
        behaviour.onStep = { emit("step \($0.rawValue)") }
        FieldNotesMigrationPlan.setBehaviour(behaviour, for: url)
        emit("ready")
        guard case .some(let line?) = ControlInput().nextLine(waiting: true), line == "go" else {
            emit("error no go line on standard input")
            exit(1)
        }
        var configuration = FileStoreConfiguration(url: url, mode: .readWrite(createIfMissing: false),
                                                   lockTimeout: lockTimeout)
        if let sharing { configuration.sharing = sharing }
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: FieldNotesSchemaV2.self),
                                               migrationPlan: FieldNotesMigrationPlan.self,
                                               configurations: [configuration])
            reportSteps()
            let notes = try ModelContext(container).fetch(FetchDescriptor<NoteRecord>())
            emit("opened version=\(container.schema.version) notes=\(notes.count) "
                 + "placed=\(notes.filter { $0.placeName != nil }.count)")
            try (container.store as? FileStore)?.close()
            emit("done")
            exit(0)
        } catch {
            reportSteps()
            emit("error \(error)")
            exit(1)
        }
    }

    private func reportSteps() {
        let steps = FieldNotesMigrationPlan.steps(ranOn: url)
        emit("steps " + FieldNotesMigrationPlan.Step.allCases.map { step in
            "\(step.rawValue)=\(steps.filter { $0 == step }.count)"
        }.joined(separator: " "))
    }
}
