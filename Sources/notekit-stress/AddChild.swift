import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport

/// `notekit-stress add`: a short-lived writer, as a command-line tool run next to others would be. It opens the
/// FieldNotes store at a path in the default configuration (created when missing), inserts one note, deletes the
/// notes with a given title, saves once, and exits. With a compaction threshold it is an app extension whose
/// save compacts the store automatically (``FileStoreConfiguration/AutomaticCompaction``) once the log holds that
/// many bytes, as an extension's open does on a store an app mirrors.
///
/// Prints `added TITLE transaction=N` on success (exit 0); on failure, `error MESSAGE` on standard error and exit 1,
/// with `locked holder=PID waited=SECONDS` first when the failure is ``FileStoreError/locked(path:holder:timeout:)``
/// (PID `unknown` when the holder's id could not be read), so that a parent can count refusals and their waits.
struct AddChild {
    let url: URL
    let title: String
    let deleting: String?
    let lockTimeout: Double?
    /// The log size from which the save compacts automatically; nil: the default configuration's thresholds.
    var compactAfterBytes: Int? = nil

    func run() -> Never {
        let started = ContinuousClock.now
        do {
            var configuration = FileStoreConfiguration(url: url)
            if let lockTimeout { configuration.lockTimeout = lockTimeout }
            if let bytes = compactAfterBytes {
                configuration.automaticCompaction = .init(minimumLogSize: bytes, garbageRatio: 0, replayLimit: bytes)
            }
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
            let context = ModelContext(container)
            context.author = "add \(title)"
            let record = NoteRecord()
            record.title = title
            context.insert(record)
            if let deleting {
                for doomed in try context.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.title == deleting })) {
                    try context.delete(doomed)
                }
            }
            try context.save()
            print("added \(title) transaction=\(container.store.transactionNumber)")
            exit(0)
        } catch {
            if case .locked(_, let holder, _) = error as? FileStoreError {
                let waited = ContinuousClock.now - started
                let seconds = Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
                FileHandle.standardError.write(Data(
                    "locked holder=\(holder.map(String.init) ?? "unknown") waited=\(seconds)\n".utf8))
            }
            FileHandle.standardError.write(Data("error \(error)\n".utf8))
            exit(1)
        }
    }
}
