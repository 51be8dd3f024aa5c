import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

private func hoursAfterReference(_ hours: Int) -> Date { Date(timeIntervalSinceReferenceDate: Double(hours) * 3600) }

/// Seed 003's notes: two pinned, three not, created an hour apart (`Pinned old` first, `Newest` last).
private func insertTutorialNotes(into context: ModelContext) throws {
    let work = Tutorial.Folder(name: "Work")
    context.insert(work)
    for (hour, title, pinned) in [(0, "Pinned old", true), (1, "Old", false), (2, "Middle", false),
                                  (3, "Pinned new", true), (4, "Newest", false)] {
        context.insert(Tutorial.Note(title: title, createdAt: hoursAfterReference(hour), isPinned: pinned, folder: work))
    }
    try context.save()
}

@Suite("Sorting by a Bool attribute, without making Bool Comparable")
struct BoolSortTests {
    /// Seed 003's `NoteList` sort, as the tutorial writes it.
    static let tutorialSort = [SortDescriptor(\Tutorial.Note.isPinned, order: .reverse),
                               SortDescriptor(\Tutorial.Note.createdAt, order: .reverse)]

    @Test("Seed 003's NoteList sort: pinned notes first, then newest first, run by the store",
          arguments: StoreKind.allCases)
    func noteListSort(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.Folder.self])
        try insertTutorialNotes(into: ModelContext(container))
        let context = ModelContext(container)
        let descriptor = FetchDescriptor<Tutorial.Note>(sortBy: Self.tutorialSort)
        #expect(try !context.explain(descriptor).evaluatedInMemory, "the sort runs in the store")
        let notes = try context.fetch(descriptor)
        #expect(notes.map(\.title) == ["Pinned new", "Pinned old", "Newest", "Middle", "Old"])
        #expect(notes.sorted(using: Self.tutorialSort).map(\.title) == notes.map(\.title),
                "the descriptors order objects in Swift the same way")
    }

    @Test("false sorts before true, as in SwiftData's SQLite store", arguments: StoreKind.allCases)
    func falseBeforeTrue(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.Folder.self])
        try insertTutorialNotes(into: ModelContext(container))
        let context = ModelContext(container)
        let forward = FetchDescriptor<Tutorial.Note>(sortBy: [SortDescriptor(\.isPinned), SortDescriptor(\.createdAt)])
        #expect(try !context.explain(forward).evaluatedInMemory)
        #expect(try context.fetch(forward).map(\.title) == ["Old", "Middle", "Newest", "Pinned old", "Pinned new"])
    }

    @Test("With an index on (isPinned, createdAt), the newest pinned notes come from the index in order",
          arguments: StoreKind.allCases)
    func indexAnswersBoolSort(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.IndexedNote.self])
        let writer = ModelContext(container)
        for hour in 0..<40 {
            writer.insert(Tutorial.IndexedNote(title: "#\(hour)", createdAt: hoursAfterReference(hour),
                                               isPinned: hour % 10 == 0))
        }
        try writer.save()
        let context = ModelContext(container)
        var descriptor = FetchDescriptor<Tutorial.IndexedNote>(
            sortBy: [SortDescriptor(\.isPinned, order: .reverse), SortDescriptor(\.createdAt, order: .reverse)])
        descriptor.fetchLimit = 5
        let plan = try context.explain(descriptor)
        #expect(!plan.evaluatedInMemory && plan.index == ["isPinned", "createdAt"] && plan.sortedByIndex, "\(plan)")
        #expect(try context.fetch(descriptor).map(\.title) == ["#30", "#20", "#10", "#0", "#39"])
    }

    @Test("An optional Bool sorts nil first, then false, then true; the store and Swift agree",
          arguments: StoreKind.allCases)
    func optionalBool(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.IndexedNote.self])
        let writer = ModelContext(container)
        let flags: [Bool?] = [true, nil, false, true, nil, false]
        for (hour, flag) in flags.enumerated() {
            writer.insert(Tutorial.IndexedNote(title: "#\(hour)", createdAt: hoursAfterReference(hour), isFlagged: flag))
        }
        try writer.save()
        let context = ModelContext(container)
        let sort = [SortDescriptor(\Tutorial.IndexedNote.isFlagged), SortDescriptor(\Tutorial.IndexedNote.createdAt)]
        let descriptor = FetchDescriptor<Tutorial.IndexedNote>(sortBy: sort)
        #expect(try !context.explain(descriptor).evaluatedInMemory)
        let titles = try context.fetch(descriptor).map(\.title)
        #expect(titles == ["#1", "#4", "#2", "#5", "#0", "#3"])
        #expect(try context.fetch(descriptor).sorted(using: sort).map(\.title) == titles)
        let reversed = FetchDescriptor<Tutorial.IndexedNote>(
            sortBy: [SortDescriptor(\.isFlagged, order: .reverse), SortDescriptor(\.createdAt)])
        #expect(try context.fetch(reversed).map(\.title) == ["#0", "#3", "#2", "#5", "#1", "#4"])
    }

    @Test("A predicate evaluated on objects sorts by the Bool the same way", arguments: StoreKind.allCases)
    func inMemoryEvaluation(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.Folder.self])
        try insertTutorialNotes(into: ModelContext(container))
        let context = ModelContext(container)
        let descriptor = FetchDescriptor<Tutorial.Note>(predicate: #Predicate { $0.titleLength > 2 },
                                                        sortBy: Self.tutorialSort)
        #expect(try context.explain(descriptor).evaluatedInMemory)
        #expect(try context.fetch(descriptor).map(\.title) == ["Pinned new", "Pinned old", "Newest", "Middle", "Old"])
    }

    @Test("A Bool derived from an attribute (title.isEmpty) is sorted on objects, not taken for the attribute",
          arguments: StoreKind.allCases)
    func derivedBool(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.Folder.self])
        let writer = ModelContext(container)
        for (hour, title) in ["", "b", "", "a"].enumerated() {
            writer.insert(Tutorial.Note(title: title, createdAt: hoursAfterReference(hour)))
        }
        try writer.save()
        let context = ModelContext(container)
        let descriptor = FetchDescriptor<Tutorial.Note>(sortBy: [SortDescriptor(\.title.isEmpty),
                                                                 SortDescriptor(\.createdAt)])
        #expect(try context.explain(descriptor).evaluatedInMemory)
        #expect(try context.fetch(descriptor).map(\.title) == ["b", "a", "", ""])
    }

    @Test("Unsaved notes are sorted by the Bool together with saved ones", arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let container = try kind.makeContainer([Tutorial.Folder.self])
        let context = ModelContext(container)
        try insertTutorialNotes(into: context)
        context.insert(Tutorial.Note(title: "Draft pinned", createdAt: hoursAfterReference(10), isPinned: true))
        context.insert(Tutorial.Note(title: "Draft", createdAt: hoursAfterReference(11)))
        #expect(try context.fetch(FetchDescriptor<Tutorial.Note>(sortBy: Self.tutorialSort)).map(\.title)
            == ["Draft pinned", "Pinned new", "Pinned old", "Draft", "Newest", "Middle", "Old"])
    }

    @Test("Bool stays without a Comparable conformance: NoteKit adds none")
    func boolIsNotComparable() {
        #expect(!((true as Any) is any Comparable))
    }
}
