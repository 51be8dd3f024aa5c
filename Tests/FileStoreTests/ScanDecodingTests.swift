import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Testing

// Issue 35 (W2's scans): a fetch over an entity with more rows than the checkpoint keeps decoded decodes, of each
// row it examines, only what its filter and sort read; a count or identifiers need nothing more, and a fetch with a
// limit reads the few rows it returns whole. An entity that fits the kept rows is read whole, so that the next query
// finds its rows decoded. Answers are checked against the in-memory store's.

/// More notes than ``CheckpointRowBase/rowCacheLimit``.
private let manyNotes = CheckpointRowBase.rowCacheLimit + 904

@Suite("Scans over a checkpoint decode what the filter and sort read")
struct ScanDecodingTests {
    private func descriptors() -> [(String, FetchDescriptor<PartialNote>)] {
        var newestWithPlace = FetchDescriptor<PartialNote>(predicate: #Predicate { $0.place != nil },
                                                           sortBy: [SortDescriptor(\.rank, order: .reverse)])
        newestWithPlace.fetchLimit = 7
        newestWithPlace.fetchOffset = 2
        var byTitle = FetchDescriptor<PartialNote>(predicate: #Predicate { $0.title.contains("9") },
                                                   sortBy: [SortDescriptor(\.title)])
        byTitle.fetchLimit = 5
        return [("place", newestWithPlace), ("title", byTitle)]
    }

    @Test("A count decodes, of each row, only the attributes its predicate reads, and agrees with the in-memory store")
    func countDecodesThePredicate() throws {
        let fixture = try PartialStore.checkpoint.open(count: manyNotes)
        let reference = try PartialStore.inMemory.open(count: manyNotes)
        let predicate = #Predicate<PartialNote> { $0.title.contains("7") && $0.rank % 2 == 1 }
        let before = fixture.valuesDecoded
        let count = try ModelContext(fixture.container).fetchCount(FetchDescriptor(predicate: predicate))
        let decoded = fixture.valuesDecoded - before
        #expect(count == (try ModelContext(reference.container).fetchCount(FetchDescriptor(predicate: predicate))))
        #expect(count > 0)
        // title and rank of each note: two of six attributes.
        #expect(decoded == 2 * manyNotes, "decoded \(decoded) values for \(manyNotes) notes")

        // The identifiers of the same notes (each store made its own identifiers: compare the notes' titles).
        let context = ModelContext(fixture.container)
        let ids = try context.fetchIdentifiers(FetchDescriptor(predicate: predicate))
        let titles = try ids.map { id in try #require(context.model(for: id) as? PartialNote).title }
        let expected = try ModelContext(reference.container).fetch(FetchDescriptor(predicate: predicate)).map(\.title)
        #expect(titles.sorted() == expected.sorted())
    }

    @Test("A fetch with a limit decodes what its predicate and sort read, and returns whole objects")
    func topKReturnsWholeObjects() throws {
        let fixture = try PartialStore.checkpoint.open(count: manyNotes)
        let reference = try PartialStore.inMemory.open(count: manyNotes)
        for (name, descriptor) in descriptors() {
            let before = fixture.valuesDecoded
            let found = try ModelContext(fixture.container).fetch(descriptor)
            let afterFetch = fixture.valuesDecoded
            #expect(afterFetch - before < 3 * manyNotes, "\(name): decoded \(afterFetch - before) values")
            let own = found.map(ownValues)
            #expect(fixture.valuesDecoded == afterFetch, "\(name): the results were whole, reading them decodes nothing")
            #expect(own == (try ModelContext(reference.container).fetch(descriptor).map(ownValues)), "\(name)")
            #expect(found.map(values) == (try ModelContext(reference.container).fetch(descriptor).map(values)))
        }
    }

    @Test("A count over an entity that fits the kept rows reads them whole, and the next count decodes nothing")
    func smallEntityStaysDecoded() throws {
        let fixture = try PartialStore.checkpoint.open(count: 400)
        let predicate = #Predicate<PartialNote> { $0.title.contains("7") }
        let context = ModelContext(fixture.container)
        let first = try context.fetchCount(FetchDescriptor(predicate: predicate))
        let afterFirst = fixture.valuesDecoded
        #expect(afterFirst >= 6 * 400, "whole rows: every attribute of every note")
        #expect(try context.fetchCount(FetchDescriptor(predicate: predicate)) == first)
        #expect(fixture.valuesDecoded == afterFirst)
    }
}

/// Every attribute of a note, as text (reading nothing of other objects).
private func ownValues(_ note: PartialNote) -> String {
    "\(note.title)|\(note.body)|\(note.rank)|\(note.pinned)|\(note.created.timeIntervalSinceReferenceDate)|"
        + "\(note.place ?? "-")"
}

/// Every persisted value of a note, its folder's name too, as text.
private func values(_ note: PartialNote) -> String {
    "\(note.title)|\(note.body)|\(note.rank)|\(note.pinned)|\(note.created.timeIntervalSinceReferenceDate)|"
        + "\(note.place ?? "-")|\(note.folder?.name ?? "-")"
}
