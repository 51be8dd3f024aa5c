// This file imports NoteKit and nothing else from Foundation, as a SwiftData file imports SwiftData alone: NoteKit
// re-exports Foundation, so #Predicate, SortDescriptor, Date and UUID are in scope. Do not add imports here.
import NoteKit
import Testing

/// Seed 003's note, declared in a file that imports NoteKit alone.
final class ImportedAloneNote: PersistentModel {
    @Attribute var id = UUID()
    @Attribute var title = ""
    @Attribute var createdAt = Date.now
    @Attribute var isPinned = false
    required init() {}
    convenience init(title: String, createdAt: Date, isPinned: Bool = false) {
        self.init()
        self.title = title
        self.createdAt = createdAt
        self.isPinned = isPinned
    }
}

@Suite("import NoteKit alone is enough, as import SwiftData is")
struct ImportNoteKitAloneTests {
    @Test("A file importing only NoteKit fetches with #Predicate and SortDescriptor over Date, UUID and Bool")
    func predicateAndSortWithoutFoundation() throws {
        // In memory only: the file store's configuration is in NoteKitFileStore, which this file must not import.
        let container = try ModelContainer(for: ImportedAloneNote.self,
                                           configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let notes = [("Groceries", 0.0, false), ("Taxes", 3600, true), ("Ideas", 7200, false), ("", 10800, true)]
            .map { ImportedAloneNote(title: $0.0, createdAt: Date(timeIntervalSinceReferenceDate: $0.1), isPinned: $0.2) }
        for note in notes { context.insert(note) }
        try context.save()

        let cutoff = Date(timeIntervalSinceReferenceDate: 3600)
        let excluded: UUID = notes[2].id
        let descriptor = FetchDescriptor<ImportedAloneNote>(
            predicate: #Predicate { $0.createdAt >= cutoff && $0.title != "" || $0.id == excluded },
            sortBy: [SortDescriptor(\.isPinned, order: .reverse), SortDescriptor(\.createdAt, order: .reverse)])
        #expect(try context.fetch(descriptor).map(\.title) == ["Taxes", "Ideas"])
        #expect(try !context.explain(descriptor).evaluatedInMemory)
    }
}
