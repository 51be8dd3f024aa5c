import Foundation
import NoteKit
import NoteKitFileStore

/// The writer of the hot-backup test (issue 34, item 6): a FieldNotes store saved step by step, each step one
/// transaction that inserts a note with a photo, and at some steps deletes an older note (its photo cascades) or
/// replaces an older photo's bytes, so that blobs are written, retired and removed; segments are small, so saves
/// rotate them, and every seventh step compacts. ``expected(after:)`` is the state after any number of steps: what
/// a backup of a committed prefix must hold.
public enum BackupWorkload {
    /// Small segments: the saves rotate them several times between compactions.
    public static func configuration(_ url: URL) -> FileStoreConfiguration {
        FileStoreConfiguration(url: url, maximumSegmentSize: 16 << 10, automaticCompaction: nil)
    }

    /// The bytes of note `step`'s photo at `version` (0 when inserted, the step that replaced them after).
    public static func photo(_ step: Int, version: Int) -> Data {
        Data((0..<(1_000 + step % 500)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ step &* 7 &+ version) })
    }

    /// The title of the note step `step` inserts.
    public static func title(_ step: Int) -> String { "note \(step)" }

    /// Which note step `step` deletes, if any.
    static func deleted(at step: Int) -> Int? { step % 3 == 0 && step > 2 ? step - 2 : nil }

    /// Which note's photo step `step` replaces, if any.
    static func replaced(at step: Int) -> Int? { step % 4 == 0 && step > 1 ? step - 1 : nil }

    /// Whether the writer compacts after step `step`.
    public static func compacts(after step: Int) -> Bool { step % 7 == 0 }

    /// The titles of the notes after `steps` steps, with their photo's bytes.
    public static func expected(after steps: Int) -> [String: Data] {
        var notes: [Int: Data] = [:]
        guard steps > 0 else { return [:] }
        for step in 1...steps {
            notes[step] = photo(step, version: 0)
            if let doomed = deleted(at: step) { notes[doomed] = nil }
            if let target = replaced(at: step), notes[target] != nil { notes[target] = photo(target, version: step) }
        }
        return Dictionary(uniqueKeysWithValues: notes.map { (title($0.key), $0.value) })
    }

    /// Saves step `step` in `context` (one transaction).
    public static func save(step: Int, in context: ModelContext) throws {
        let note = NoteRecord()
        note.title = title(step)
        context.insert(note)
        note.photos.append(PhotoRecord(fileName: "\(step).jpg", data: photo(step, version: 0)))
        func find(_ step: Int) throws -> NoteRecord? {
            let title = title(step)
            return try context.fetch(FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.title == title })).first
        }
        if let doomed = deleted(at: step), let old = try find(doomed) { try context.delete(old) }
        if let target = replaced(at: step), let old = try find(target) {
            old.photos.first?.data = photo(target, version: step)
        }
        try context.save()
    }

    /// What a backup of the store holds against ``expected(after:)`` at its last transaction: nil when it is
    /// that state exactly, else what differs.
    public static func check(backup url: URL) throws -> String? {
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [FileStoreConfiguration(url: url, mode: .readOnly)])
        defer { try? container.close() }
        let context = ModelContext(container)
        let steps = Int(container.store.transactionNumber)
        var found: [String: Data] = [:]
        for note in try context.fetch(FetchDescriptor<NoteRecord>()) {
            found[note.title] = note.photos.first?.data ?? Data()
        }
        if !context.readFailures.isEmpty { return "read failures: \(context.readFailures)" }
        let expected = expected(after: steps)
        guard found != expected else { return nil }
        let missing = Set(expected.keys).subtracting(found.keys).sorted()
        let extra = Set(found.keys).subtracting(expected.keys).sorted()
        let wrong = expected.keys.filter { found[$0] != nil && found[$0] != expected[$0] }.sorted()
        return "at transaction \(steps): missing \(missing), extra \(extra), wrong photo bytes \(wrong)"
    }
}
