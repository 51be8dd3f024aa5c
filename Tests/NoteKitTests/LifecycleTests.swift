import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 36, item 3: an object's lifecycle changes only through its named transitions (`ModelObject`'s insert,
/// attach, commit, delete, undelete, leave, revert, restore, adopt an identity). These pin what a transition must
/// reset that the context's hand-written steps once forgot.
@Suite("Lifecycle: an object's named transitions")
struct LifecycleTests {
    @Test("An object deleted and saved in one context, then inserted into another, saves its later changes there",
          arguments: StoreKind.allCases)
    func reinsertedElsewhere(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let first = ModelContext(container)
        let book = Book(title: "Kindred")
        first.insert(book)
        try first.save()
        book.pages = 264
        try first.delete(book)
        try first.save()
        #expect(book.isDeleted && book.modelContext == nil && !book.hasChanges)

        let second = ModelContext(container)
        second.insert(book)
        #expect(book.hasChanges && !book.isDeleted)
        try second.save()
        #expect(!book.hasChanges && !second.hasChanges, "inserted and saved: nothing is pending")
        book.title = "Dawn"
        #expect(book.hasChanges && second.hasChanges, "a change after the save is pending")
        try second.save()
        let titles = try ModelContext(container).fetch(FetchDescriptor<Book>()).map(\.title)
        #expect(titles == ["Dawn"])
    }

    @Test("An object inserted, saved, then deleted and its delete undone keeps tracking changes",
          arguments: StoreKind.allCases)
    func undeleted(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let book = Book(title: "Kindred")
        context.insert(book)
        try context.save()
        try context.delete(book)
        context.insert(book)
        #expect(!book.isDeleted && book.modelContext === context, "the delete is withdrawn")
        book.title = "Dawn"
        try context.save()
        #expect(try ModelContext(container).fetch(FetchDescriptor<Book>()).map(\.title) == ["Dawn"])
    }
}
