import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 13, item 1: an upsert merges an inserted duplicate into the object that holds its unique key; every
/// reference to the duplicate, from any pending object, must then point at the surviving identity.
@Suite("Uniqueness: references to an upserted duplicate point at the survivor")
struct UpsertReferenceTests {
    private static let types: [any PersistentModel.Type] = [TaggedNote.self, UniqueTag.self,
                                                            Byline.self, Story.self]

    private func tags(_ container: ModelContainer) throws -> [UniqueTag] {
        try ModelContext(container).fetch(FetchDescriptor<UniqueTag>())
    }

    @Test("Seed 003: two notes with their own Tag(name: \"swift\") saved together share one tag",
          arguments: StoreKind.allCases)
    func sameSaveToManyWithoutInverse(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let context = ModelContext(container)
        let first = TaggedNote(title: "First"), second = TaggedNote(title: "Second")
        first.tags = [UniqueTag(name: "swift")]
        second.tags = [UniqueTag(name: "swift")]
        context.insert(first)
        context.insert(second)
        try context.save()

        let stored = try tags(container)
        #expect(stored.map(\.name) == ["swift"])
        let reader = ModelContext(container)
        let notes = try reader.fetch(FetchDescriptor<TaggedNote>(sortBy: [SortDescriptor(\.title)]))
        withExtendedLifetime(reader) {
            #expect(notes.map { $0.tags.map(\.name) } == [["swift"], ["swift"]])
            #expect(Set(notes.flatMap { $0.tags.map(\.persistentModelID) }) == [stored[0].persistentModelID])
        }
        #expect(first.tags.map(\.persistentModelID) == second.tags.map(\.persistentModelID),
                "the saving context's own objects point at the survivor too")
    }

    @Test("Seed 003: a note saved later from a fresh context points at the stored tag it never loaded",
          arguments: StoreKind.allCases)
    func laterSaveAgainstStoredTag(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let writer = ModelContext(container)
        let first = TaggedNote(title: "First")
        first.tags = [UniqueTag(name: "swift")]
        writer.insert(first)
        try writer.save()
        let storedID = try #require(first.tags.first).persistentModelID

        let fresh = ModelContext(container)
        let second = TaggedNote(title: "Second")
        second.tags = [UniqueTag(name: "swift")]
        fresh.insert(second)
        try fresh.save()
        try fresh.save()   // and a retry has nothing left to fail on

        #expect(try tags(container).map(\.persistentModelID) == [storedID])
        let reader = ModelContext(container)
        let notes = try reader.fetch(FetchDescriptor<TaggedNote>(sortBy: [SortDescriptor(\.title)]))
        withExtendedLifetime(reader) {
            #expect(notes.map { $0.tags.map(\.persistentModelID) } == [[storedID], [storedID]])
        }
    }

    @Test("A to-one reference without an inverse follows the merge, in one save and against a stored object",
          arguments: StoreKind.allCases)
    func toOneWithoutInverse(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let context = ModelContext(container)
        let a = TaggedNote(title: "A"), b = TaggedNote(title: "B")
        a.primaryTag = UniqueTag(name: "work")
        b.primaryTag = UniqueTag(name: "work")
        context.insert(a)
        context.insert(b)
        try context.save()
        let survivor = try #require(try tags(container).first).persistentModelID

        let fresh = ModelContext(container)
        let c = TaggedNote(title: "C")
        c.primaryTag = UniqueTag(name: "work")
        fresh.insert(c)
        try fresh.save()

        #expect(try tags(container).count == 1)
        let reader = ModelContext(container)
        let notes = try reader.fetch(FetchDescriptor<TaggedNote>(sortBy: [SortDescriptor(\.title)]))
        withExtendedLifetime(reader) {
            #expect(notes.map { $0.primaryTag?.persistentModelID } == [survivor, survivor, survivor])
        }
    }

    @Test("A loaded object that gains a duplicate points at the survivor", arguments: StoreKind.allCases)
    func changedObjectGainsDuplicate(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let setup = ModelContext(container)
        setup.insert(UniqueTag(name: "swift"))
        setup.insert(TaggedNote(title: "Old"))
        try setup.save()

        let context = ModelContext(container)
        let old = try #require(try context.fetch(FetchDescriptor<TaggedNote>()).first)
        old.tags.append(UniqueTag(name: "swift"))   // a stored note, changed, gains a new duplicate tag
        old.primaryTag = old.tags.last
        try context.save()

        let stored = try tags(container)
        #expect(stored.count == 1)
        let reader = ModelContext(container)
        let reread = try #require(try reader.fetch(FetchDescriptor<TaggedNote>()).first)
        withExtendedLifetime(reader) {
            #expect(reread.tags.map(\.persistentModelID) == [stored[0].persistentModelID])
            #expect(reread.primaryTag?.persistentModelID == stored[0].persistentModelID)
        }
    }

    @Test("A note holding both the stored tag and its duplicate keeps one reference", arguments: StoreKind.allCases)
    func duplicateReferencesCollapse(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let context = ModelContext(container)
        let swift = UniqueTag(name: "swift")
        context.insert(swift)
        try context.save()

        let note = TaggedNote(title: "Both")
        note.tags = [swift, UniqueTag(name: "swift")]
        context.insert(note)
        try context.save()

        let reader = ModelContext(container)
        let reread = try #require(try reader.fetch(FetchDescriptor<TaggedNote>()).first)
        withExtendedLifetime(reader) { #expect(reread.tags.map(\.persistentModelID) == [swift.persistentModelID]) }
    }

    @Test("With an inverse: articles of a merged author belong to the survivor on both sides",
          arguments: StoreKind.allCases)
    func toOneWithInverse(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let context = ModelContext(container)
        let x = Story(headline: "X"), y = Story(headline: "Y")
        x.author = Byline(handle: "ada")
        y.author = Byline(handle: "ada", displayName: "Ada")
        context.insert(x)
        context.insert(y)
        try context.save()

        let fresh = ModelContext(container)
        let z = Story(headline: "Z")
        z.author = Byline(handle: "ada", displayName: "Ada L.")
        fresh.insert(z)
        try fresh.save()

        let reader = ModelContext(container)
        let authors = try reader.fetch(FetchDescriptor<Byline>())
        #expect(authors.map(\.displayName) == ["Ada L."])
        #expect(Set(authors.first?.articles.map(\.headline) ?? []) == ["X", "Y", "Z"])
        let articles = try reader.fetch(FetchDescriptor<Story>())
        withExtendedLifetime(reader) {
            #expect(articles.allSatisfy { $0.author?.persistentModelID == authors.first?.persistentModelID })
        }
    }
}
