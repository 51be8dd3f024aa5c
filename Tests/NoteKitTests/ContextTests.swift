import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Context: insert, save, rollback, transactions")
struct ContextTests {
    @Test("Inserting a model inserts the graph it reaches, and the context lists what changed",
          arguments: StoreKind.allCases)
    func changeLists(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        #expect(!context.hasChanges)
        let author = Author(name: "Octavia")
        author.books = [Book(title: "Kindred"), Book(title: "Dawn")]
        context.insert(author)
        #expect(context.hasChanges)
        #expect(context.insertedModelsArray.count == 3)
        #expect(context.insertedModelsArray.first as? Author === author, "in insertion order")
        try context.save()
        #expect(!context.hasChanges && context.insertedModelsArray.isEmpty)

        author.name = "Octavia E. Butler"
        #expect(context.changedModelsArray.count == 1 && author.hasChanges)
        try context.delete(author.books[0])
        #expect(context.deletedModelsArray.count == 1)
        #expect(context.changedModelsArray.count == 1, "the author's books changed, it was already listed")
        try context.save()
        #expect(!context.hasChanges)
        let reader = ModelContext(container)
        let stored = try reader.fetch(FetchDescriptor<Author>())
        #expect(stored.map(\.name) == ["Octavia E. Butler"])
        #expect(stored.first?.books.map(\.title) == ["Dawn"])
    }

    @Test("Rollback discards inserts, restores edits and relationships, and brings deleted objects back",
          arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let author = Author(name: "Iain")
        let book = Book(title: "Excession", pages: 400)
        book.author = author
        context.insert(author)
        try context.save()

        author.name = "Iain M."
        book.pages = 1
        book.author = nil
        let extra = Book(title: "Draft")
        context.insert(extra)
        let other = Author(name: "Other")
        context.insert(other)
        try context.delete(other)
        try context.delete(author)
        #expect(book.author == nil && author.isDeleted)

        context.rollback()
        #expect(!context.hasChanges)
        #expect(author.name == "Iain" && !author.isDeleted)
        #expect(book.pages == 400 && book.author === author && author.books.map(\.title) == ["Excession"])
        #expect(extra.modelContext == nil)
        try context.save()
        let reader = ModelContext(container)
        #expect(try reader.fetchCount(FetchDescriptor<Book>()) == 1)
    }

    @Test("transaction saves its changes, or undoes only them when the block throws", arguments: StoreKind.allCases)
    func transaction(kind: StoreKind) throws {
        struct Abort: Error {}
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let kept = Author(name: "Kept")
        context.insert(kept)
        try context.save()

        kept.name = "Edited before"
        #expect(throws: Abort.self) {
            try context.transaction {
                kept.name = "Edited inside"
                context.insert(Author(name: "Inserted inside"))
                try context.delete(kept)
                throw Abort()
            }
        }
        #expect(kept.name == "Edited before" && !kept.isDeleted, "only the block's changes are undone")
        #expect(context.insertedModelsArray.isEmpty)
        #expect(context.hasChanges, "changes made before the transaction stay pending")

        try context.transaction {
            context.insert(Author(name: "Committed"))
        }
        #expect(!context.hasChanges, "a transaction that returns saves everything")
        let reader = ModelContext(container)
        let names = try reader.fetch(FetchDescriptor<Author>(sortBy: [SortDescriptor(\.name)])).map(\.name)
        #expect(names == ["Committed", "Edited before"])
    }

    @Test("A transaction whose block throws brings back an unsaved object it deleted, on both sides",
          arguments: StoreKind.allCases)
    func transactionRestoresDeletedInsert(kind: StoreKind) throws {
        struct Abort: Error {}
        let context = ModelContext(try kind.makeContainer([PlainFolder.self]))
        let folder = PlainFolder(name: "Trip")
        context.insert(folder)
        let note = PlainNote(title: "Tickets")
        note.folder = folder
        #expect(throws: Abort.self) {
            try context.transaction {
                try context.delete(folder)
                throw Abort()
            }
        }
        #expect(folder.modelContext === context && !folder.isDeleted)
        #expect(note.folder === folder && folder.notes == [note])
        #expect(context.insertedModelsArray.count == 2)
    }

    @Test("A save that fails leaves the store unchanged and every change pending, ready to retry")
    func failedSave() throws {
        let configuration = FailingStoreConfiguration()
        let container = try ModelContainer(for: Schema([Author.self]), configurations: [configuration])
        let store = try #require(configuration.holder.withLock { $0 })
        let context = ModelContext(container)
        let author = Author(name: "Ted")
        context.insert(author)
        store.failuresLeft.withLock { $0 = 1 }
        #expect(throws: FailingStore.InjectedFailure.self) { try context.save() }
        #expect(context.hasChanges && context.insertedModelsArray.count == 1)
        #expect(store.transactionNumber == 0, "nothing reached the store")
        try context.save()
        #expect(!context.hasChanges)

        author.name = "Ted Chiang"
        store.failuresLeft.withLock { $0 = 1 }
        #expect(throws: FailingStore.InjectedFailure.self) { try context.save() }
        #expect(author.hasChanges && context.changedModelsArray.count == 1)
        try context.save()
        let reader = ModelContext(container)
        #expect(try reader.fetch(FetchDescriptor<Author>()).map(\.name) == ["Ted Chiang"])
    }

    @Test("model(for:) finds saved objects, returns the registered instance, and nil for unknown identifiers",
          arguments: StoreKind.allCases)
    func modelForIdentifier(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let author = Author(name: "Zadie")
        context.insert(author)
        #expect(context.model(for: author.persistentModelID) as? Author === author, "inserted objects too")
        try context.save()
        let reader = ModelContext(container)
        let found = try #require(reader[author.persistentModelID, as: Author.self])
        #expect(found.name == "Zadie" && found !== author)
        #expect(reader.model(for: author.persistentModelID) as? Author === found)
        #expect(reader.model(for: .make(entityName: "Author")) == nil)
        #expect(reader[author.persistentModelID, as: Book.self] == nil)
    }

    @Test("Each context sees the others' saves; its own unsaved edits win until it saves", arguments: StoreKind.allCases)
    func contextsShareTheStore(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let first = ModelContext(container), second = ModelContext(container)
        let author = Author(name: "N. K.")
        first.insert(author)
        try first.save()
        let seen = try #require(try second.fetch(FetchDescriptor<Author>()).first)
        author.name = "N. K. Jemisin"
        try first.save()
        _ = try second.fetch(FetchDescriptor<Author>())
        #expect(seen.name == "N. K. Jemisin", "an unchanged object is refreshed by the next fetch")
        seen.born = Date(timeIntervalSinceReferenceDate: 0)
        author.name = "Nora"
        try first.save()
        _ = try second.fetch(FetchDescriptor<Author>())
        #expect(seen.name == "N. K. Jemisin", "a changed object keeps its state until saved")
        try second.save()
        let reader = ModelContext(container)
        let stored = try #require(try reader.fetch(FetchDescriptor<Author>()).first)
        #expect(stored.name == "Nora", "only the changed property was sent, so the other edit survives")
        #expect(stored.born == Date(timeIntervalSinceReferenceDate: 0))
    }

    @Test("A container needs a configuration it can use; the error says which to pass")
    func containerConfiguration() {
        #expect(throws: ModelContainerError.noConfiguration) { try ModelContainer(for: Author.self) }
        #expect(throws: ModelContainerError.noPersistentStore(name: "default")) {
            try ModelContainer(for: Author.self, configurations: ModelConfiguration(isStoredInMemoryOnly: false))
        }
    }

    @MainActor
    @Test("The main context is created once, on the main actor")
    func mainContext() throws {
        let container = try StoreKind.inMemory.makeContainer([Author.self])
        #expect(container.mainContext === container.mainContext)
        container.mainContext.insert(Author(name: "Main"))
        try container.mainContext.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Author>()) == 1)
    }
}
