import Foundation
import Testing
@testable import NoteKit

/// Issue 17, item 6: what one model object costs. The benchmark's note has ten attributes and two relationships;
/// this model has the same shape.
final class SizedNote: PersistentModel {
    @Attribute var id = UUID()
    @Attribute var title = ""
    @Attribute var body = ""
    @Attribute var createdAt = Date(timeIntervalSince1970: 0)
    @Attribute var updatedAt = Date(timeIntervalSince1970: 0)
    @Attribute var tags: [String] = []
    @Attribute var isPinned = false
    @Attribute var latitude: Double?
    @Attribute var longitude: Double?
    @Attribute var placeName: String?
    @Relationship var shelf: SizedShelf?
    @Relationship(deleteRule: .cascade) var children: [SizedChild] = []
    required init() {}
}

final class SizedShelf: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \SizedNote.shelf) var notes: [SizedNote] = []
    required init() {}
}

final class SizedChild: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \SizedNote.children) var note: SizedNote?
    required init() {}
}

@Suite("What a model object costs")
struct ModelObjectSizeTests {
    #if canImport(Glibc)
    @Test("A model of ten attributes and two relationships is one heap block of at most 152 bytes")
    func objectBlock() {
        let note = SizedNote()
        let usable = mallocUsableSize(Unmanaged.passUnretained(note).toOpaque())
        // The object's header and engine fields (128 bytes), then two bytes a property wrapper.
        #expect(usable <= 152, "the object's block holds \(usable) bytes")
    }
    #endif

    /// Frames and stamps are kept modulo 2¹⁶: at a depth of 65,531 an object's stamps wrap past zero within its
    /// own properties, at 70,000 its frame is past 2¹⁶, at 131,070 past 2¹⁷.
    @Test("Objects made with the construction stack deeper than 2^16 values read and write their own properties, and save",
          arguments: [65_531, 70_000, 131_070])
    func framesBeyondSixteenBits(depth: Int) throws {
        let stack = ConstructionStack.current
        // As if this ran inside `depth` values' worth of models under construction.
        for _ in 0..<depth { stack.attributeValues.append(.null) }
        for _ in 0..<depth { stack.relationshipValues.append([]) }
        defer {
            stack.attributeValues.removeLast(depth)
            stack.relationshipValues.removeLast(depth)
        }
        let container = try ModelContainer(for: SizedNote.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let shelf = SizedShelf()
        shelf.name = "shelf"
        let notes = (0..<3).map { n in
            let note = SizedNote()
            note.title = "title \(n)"
            note.placeName = n == 1 ? "here" : nil
            note.isPinned = n == 2
            note.shelf = shelf
            return note
        }
        for note in notes { context.insert(note) }
        #expect(notes.map(\.title) == ["title 0", "title 1", "title 2"])
        #expect(notes.map(\.placeName) == [nil, "here", nil])
        #expect(notes.map(\.isPinned) == [false, false, true])
        #expect(shelf.notes.count == 3)
        try context.save()
        let fetched = try ModelContext(container).fetch(FetchDescriptor<SizedNote>(sortBy: [SortDescriptor(\.title)]))
        #expect(fetched.map(\.title) == ["title 0", "title 1", "title 2"])
        #expect(fetched.map { $0.shelf?.name } == ["shelf", "shelf", "shelf"])
        #expect(fetched[1].placeName == "here" && fetched[2].isPinned)
    }
}

#if canImport(Glibc)
@_silgen_name("malloc_usable_size") private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int
#endif
