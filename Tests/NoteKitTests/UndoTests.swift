import Foundation
import Observation
import Synchronization
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Undo and redo on a context")
struct UndoTests {
    /// A context of a new container of `types` on `kind`, with an undo manager.
    private func undoableContext(_ kind: StoreKind, _ types: [any PersistentModel.Type])
        throws -> (ModelContext, ModelUndoManager) {
        let context = ModelContext(try kind.makeContainer(types))
        let undoManager = ModelUndoManager()
        context.undoManager = undoManager
        return (context, undoManager)
    }

    /// What a new context of `container` reads from the store (for attributes: the objects' context is gone, so
    /// their relationships cannot be read).
    private func stored<T: PersistentModel>(_ type: T.Type, in container: ModelContainer,
                                            sortBy: [SortDescriptor<T>] = []) throws -> [T] {
        try ModelContext(container).fetch(FetchDescriptor<T>(sortBy: sortBy))
    }

    // MARK: Inserts

    @Test("Undoing an unsaved insert takes the graph out of the context; redo inserts it again",
          arguments: StoreKind.allCases)
    func insertBeforeSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "Ursula")
        author.books = [Book(title: "The Dispossessed"), Book(title: "Lavinia")]
        context.insert(author)
        #expect(undoManager.canUndo && !undoManager.canRedo)

        undoManager.undo()
        #expect(author.modelContext == nil && !author.isDeleted, "unmanaged again, as after a rollback")
        #expect(author.books.map(\.title) == ["The Dispossessed", "Lavinia"], "the graph it was inserted with")
        #expect(author.books.allSatisfy { $0.modelContext == nil && $0.author === author })
        #expect(!context.hasChanges && context.insertedModelsArray.isEmpty)
        #expect(context.registeredModel(for: author.persistentModelID) as Author? == nil)
        #expect(!undoManager.canUndo && undoManager.canRedo)

        undoManager.redo()
        #expect(author.modelContext === context)
        #expect(context.insertedModelsArray.count == 3)
        #expect(context.insertedModelsArray.first as? Author === author, "in the order they were inserted")
        try context.save()
        let reader = ModelContext(context.container)
        let authors = try reader.fetch(FetchDescriptor<Author>())
        #expect(authors.map(\.persistentModelID) == [author.persistentModelID])
        #expect(authors.first?.books.map(\.title) == ["The Dispossessed", "Lavinia"])
    }

    @Test("Undoing a saved insert deletes the object at the next save; redo inserts it again with its identifier",
          arguments: StoreKind.allCases)
    func insertAfterSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "Ursula")
        author.books = [Book(title: "Lavinia")]
        context.insert(author)
        try context.save()

        undoManager.undo()
        #expect(author.isDeleted && author.books.allSatisfy(\.isDeleted))
        #expect(context.deletedModelsArray.count == 2 && context.hasChanges)
        #expect(try stored(Author.self, in: context.container).count == 1, "nothing is saved by undo")
        try context.save()
        #expect(try stored(Author.self, in: context.container).isEmpty)
        #expect(try stored(Book.self, in: context.container).isEmpty)

        undoManager.redo()
        #expect(!author.isDeleted && author.modelContext === context)
        #expect(context.insertedModelsArray.count == 2, "its delete was saved: it is inserted again")
        try context.save()
        let reader = ModelContext(context.container)
        let authors = try reader.fetch(FetchDescriptor<Author>())
        #expect(authors.map(\.persistentModelID) == [author.persistentModelID] && authors.first?.name == "Ursula")
        #expect(authors.first?.books.map(\.persistentModelID) == author.books.map(\.persistentModelID))
    }

    @Test("Redoing an undone insert that was saved, before the delete is saved, withdraws the delete",
          arguments: StoreKind.allCases)
    func redoWithdrawsPendingDelete(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "Ursula")
        context.insert(author)
        try context.save()
        undoManager.undo()
        #expect(author.isDeleted)
        undoManager.redo()
        #expect(!author.isDeleted && !author.hasChanges && !context.hasChanges)
    }

    // MARK: Deletes

    @Test("Undoing a cascading delete brings every object back and restores nullified inverses on both sides",
          arguments: StoreKind.allCases)
    func cascadeBeforeSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self, Shelf.self])
        let (author, shelf) = libraryWithShelf(in: context)
        try context.save()
        let books = author.books

        try context.delete(author)
        #expect(books.allSatisfy(\.isDeleted) && shelf.books.isEmpty)
        undoManager.undo()
        #expect(!author.isDeleted && books.allSatisfy { !$0.isDeleted && $0.author === author })
        #expect(author.books == books, "in their order")
        #expect(shelf.books == books && books.allSatisfy { $0.shelves == [shelf] })
        #expect(!context.hasChanges, "everything is as saved")

        undoManager.redo()
        #expect(author.isDeleted && books.allSatisfy(\.isDeleted) && shelf.books.isEmpty)
        #expect(context.deletedModelsArray.count == 3)
        undoManager.undo()
        try context.save()
        #expect(try stored(Book.self, in: context.container).count == 2)
    }

    @Test("Undoing a saved cascading delete inserts every object again, same identifiers, values and relationships",
          arguments: StoreKind.allCases)
    func cascadeAfterSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self, Shelf.self])
        let (author, shelf) = libraryWithShelf(in: context)
        author.born = Date(timeIntervalSinceReferenceDate: 1_000)
        try context.save()
        let books = author.books
        let bookIDs = books.map(\.persistentModelID)

        try context.delete(author)
        try context.save()
        #expect(try stored(Author.self, in: context.container).isEmpty)
        let firstReader = ModelContext(context.container)
        #expect(try firstReader.fetch(FetchDescriptor<Shelf>()).first?.books.isEmpty == true)

        undoManager.undo()
        #expect(!author.isDeleted && author.modelContext === context)
        #expect(context.insertedModelsArray.count == 3 && context.changedModelsArray.count == 1)
        #expect(shelf.books == books)
        try context.save()
        let container = context.container
        let reader = ModelContext(container)
        let storedAuthor = try #require(try reader.fetch(FetchDescriptor<Author>()).first)
        #expect(storedAuthor.persistentModelID == author.persistentModelID)
        #expect(storedAuthor.name == "Ursula" && storedAuthor.born == Date(timeIntervalSinceReferenceDate: 1_000))
        #expect(storedAuthor.books.map(\.persistentModelID) == bookIDs)
        #expect(storedAuthor.books.map(\.title) == ["The Dispossessed", "Lavinia"])
        #expect(storedAuthor.books.map(\.pages) == [387, 279])
        #expect(storedAuthor.books.allSatisfy { $0.author === storedAuthor })
        let storedShelf = try #require(try reader.fetch(FetchDescriptor<Shelf>()).first)
        #expect(storedShelf.books.map(\.persistentModelID) == bookIDs)
        #expect(storedShelf.books.allSatisfy { $0.shelves == [storedShelf] })

        undoManager.redo()
        #expect(author.isDeleted && shelf.books.isEmpty)
        try context.save()
        #expect(try stored(Author.self, in: container).isEmpty && stored(Book.self, in: container).isEmpty)
        let lastReader = ModelContext(container)
        #expect(try lastReader.fetch(FetchDescriptor<Shelf>()).first?.books.isEmpty == true)
    }

    @Test("A three-level cascade comes back whole, before and after save", arguments: StoreKind.allCases)
    func deepCascade(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Warehouse.self])
        let warehouse = Warehouse(name: "North")
        context.insert(warehouse)
        for number in 1...3 {
            let aisle = Aisle(number: number)
            warehouse.aisles.append(aisle)
            for code in ["x", "y"] { aisle.bins.append(Bin(code: "\(number)\(code)")) }
        }
        try context.save()
        try context.delete(warehouse)
        try context.save()
        undoManager.undo()
        try context.save()
        let fresh = ModelContext(context.container)
        let stored = try #require(try fresh.fetch(FetchDescriptor<Warehouse>()).first)
        #expect(stored.persistentModelID == warehouse.persistentModelID)
        #expect(stored.aisles.map(\.number) == [1, 2, 3])
        #expect(stored.aisles.flatMap(\.bins).map(\.code) == ["1x", "1y", "2x", "2y", "3x", "3y"])
        #expect(stored.aisles.allSatisfy { aisle in
            aisle.warehouse === stored && aisle.bins.allSatisfy { $0.aisle === aisle }
        })
    }

    @Test("Undoing the delete of an unsaved object inserts it again", arguments: StoreKind.allCases)
    func deleteOfUnsaved(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [PlainFolder.self])
        let folder = PlainFolder(name: "Trip")
        context.insert(folder)
        let note = PlainNote(title: "Tickets")
        note.folder = folder
        context.processPendingChanges()
        try context.delete(folder)
        #expect(note.folder == nil && folder.modelContext == nil)
        undoManager.undo()
        #expect(folder.modelContext === context && note.folder === folder && folder.notes == [note])
        #expect(context.insertedModelsArray.count == 2)
        undoManager.redo()
        #expect(folder.isDeleted && folder.modelContext == nil && note.folder == nil)
        #expect(context.insertedModelsArray.count == 1)
    }

    // MARK: Attribute edits

    @Test("Edits undo and redo group by group, several edits in a group at once", arguments: StoreKind.allCases)
    func editsBeforeSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let book = Book(title: "Draft", pages: 10)
        context.insert(book)
        try context.save()

        book.title = "First"
        book.pages = 20
        book.title = "First, again"
        context.processPendingChanges()
        book.rating = 4.5
        book.pages = 30
        context.processPendingChanges()

        undoManager.undo()
        #expect(book.title == "First, again" && book.pages == 20 && book.rating == 0)
        undoManager.undo()
        #expect(book.title == "Draft" && book.pages == 10)
        #expect(!context.hasChanges && !book.hasChanges, "back to the saved values")
        undoManager.redo()
        #expect(book.title == "First, again" && book.pages == 20 && book.hasChanges)
        undoManager.redo()
        #expect(book.rating == 4.5 && book.pages == 30)
        #expect(!undoManager.canRedo)
        try context.save()
        #expect(try stored(Book.self, in: context.container).map(\.pages) == [30])
    }

    @Test("Edits undo and redo after they were saved; the next save stores what undo restored",
          arguments: StoreKind.allCases)
    func editsAfterSave(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let book = Book(title: "Draft", pages: 10)
        context.insert(book)
        try context.save()
        book.title = "Final"
        book.pages = 11
        try context.save()
        book.pages = 12
        try context.save()

        undoManager.undo()
        #expect(book.pages == 11 && book.title == "Final")
        #expect(book.hasChanges && context.changedModelsArray.count == 1, "it differs from what is saved")
        undoManager.undo()
        #expect(book.pages == 10 && book.title == "Draft")
        try context.save()
        #expect(try stored(Book.self, in: context.container).map(\.title) == ["Draft"])
        #expect(try stored(Book.self, in: context.container).map(\.pages) == [10])

        undoManager.redo()
        #expect(book.title == "Final" && book.pages == 11)
        undoManager.undo()
        #expect(!context.hasChanges, "back to what was just saved")
        undoManager.redo()
        undoManager.redo()
        try context.save()
        #expect(try stored(Book.self, in: context.container).map(\.pages) == [12])
    }

    @Test("Moving an object to another owner undoes on all three sides, before and after save",
          arguments: StoreKind.allCases)
    func moveBetweenOwners(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let first = Author(name: "First"), second = Author(name: "Second")
        let book = Book(title: "Moved")
        context.insert(first)
        context.insert(second)
        first.books = [book]
        try context.save()

        book.author = second
        #expect(first.books.isEmpty && second.books == [book])
        undoManager.undo()
        #expect(book.author === first && first.books == [book] && second.books.isEmpty)
        #expect(!context.hasChanges)
        undoManager.redo()
        try context.save()
        undoManager.undo()
        #expect(book.author === first && first.books == [book] && second.books.isEmpty)
        #expect(context.changedModelsArray.count == 3)
        try context.save()
        let reader = ModelContext(context.container)
        let stored = try reader.fetch(FetchDescriptor<Book>())
        #expect(stored.first?.author?.name == "First")
        let authors = try reader.fetch(FetchDescriptor<Author>(sortBy: [SortDescriptor(\.name)]))
        #expect(authors.map(\.books.count) == [1, 0])
    }

    @Test("Undoing every unsaved change leaves the context without changes, and save sends nothing",
          arguments: StoreKind.allCases)
    func undoAllUnsaved(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self, Shelf.self])
        let (author, shelf) = libraryWithShelf(in: context)
        try context.save()
        let transactionNumber = context.container.store.transactionNumber

        author.name = "U. K. Le Guin"
        author.books[0].pages = 1
        context.processPendingChanges()
        shelf.books.removeFirst()
        author.books.append(Book(title: "Always Coming Home"))
        context.processPendingChanges()
        try context.delete(author.books[1])
        context.insert(Shelf(label: "Spare"))

        for _ in 1...3 { undoManager.undo() }
        #expect(!context.hasChanges)
        #expect(context.insertedModelsArray.isEmpty && context.changedModelsArray.isEmpty)
        #expect(context.deletedModelsArray.isEmpty)
        try context.save()
        #expect(context.container.store.transactionNumber == transactionNumber, "nothing to save")
    }

    // MARK: The redo stack

    @Test("A change after an undo clears the redo stack", arguments: StoreKind.allCases)
    func newChangeClearsRedo(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        context.processPendingChanges()
        author.name = "B"
        undoManager.undo()
        #expect(undoManager.canRedo)
        author.born = .distantPast
        #expect(!undoManager.canRedo)
        undoManager.redo()
        #expect(author.name == "A", "nothing to redo")
        undoManager.undo()
        #expect(author.born == nil && author.name == "A")
    }

    // MARK: Grouping

    @Test("Explicit groups nest, and only the outermost end closes the group", arguments: StoreKind.allCases)
    func explicitGroups(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)   // implicit group, closed by the begin below

        undoManager.beginUndoGrouping()
        author.name = "B"
        undoManager.beginUndoGrouping()
        author.born = .distantPast
        undoManager.endUndoGrouping()
        #expect(undoManager.groupingLevel == 1)
        context.processPendingChanges()
        try context.save()
        author.name = "C"
        undoManager.endUndoGrouping()
        #expect(undoManager.groupingLevel == 0)

        undoManager.undo()
        #expect(author.name == "A" && author.born == nil, "save and processPendingChanges left the group open")
        #expect(!author.isDeleted, "the insert before the group is a group of its own")
        undoManager.undo()
        #expect(author.isDeleted, "the insert, saved since, is undone by a delete")
    }

    @Test("processPendingChanges and save close the implicit group; undo closes it too", arguments: StoreKind.allCases)
    func implicitGroups(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        try context.save()
        author.name = "B"
        context.processPendingChanges()
        author.name = "C"
        try context.save()
        author.name = "D"
        author.name = "E"

        undoManager.undo()
        #expect(author.name == "C", "undo closed the open group and undid it")
        undoManager.undo()
        #expect(author.name == "B")
        undoManager.undo()
        #expect(author.name == "A")
    }

    @Test("A group that changed nothing in the end is not recorded", arguments: StoreKind.allCases)
    func emptyGroup(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        try context.save()
        undoManager.removeAllActions()
        #expect(!undoManager.canUndo)
        author.name = "B"
        #expect(undoManager.canUndo)
        author.name = "A"
        #expect(!undoManager.canUndo, "the open group changed nothing")
        context.processPendingChanges()
        undoManager.beginUndoGrouping()
        undoManager.endUndoGrouping()
        undoManager.undo()
        #expect(author.modelContext === context, "the insert was not undone: there was nothing to undo")
        #expect(!undoManager.canRedo)
    }

    @Test("levelsOfUndo keeps the most recent groups only", arguments: StoreKind.allCases)
    func levelsOfUndo(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "0")
        context.insert(author)
        undoManager.levelsOfUndo = 3
        for name in ["1", "2", "3", "4"] {
            context.processPendingChanges()
            author.name = name
        }
        #expect(undoAll(undoManager) == 3)
        #expect(author.name == "1" && author.modelContext === context, "only the last three groups are kept")
        #expect(redoAll(undoManager) == 3)
        #expect(author.name == "4")
        undoManager.levelsOfUndo = 1
        #expect(undoAll(undoManager) == 1, "lowering the limit drops the oldest groups at once")
        #expect(author.name == "3")

        undoManager.levelsOfUndo = 0
        undoManager.removeAllActions()
        for name in ["5", "6", "7"] {
            author.name = name
            context.processPendingChanges()
        }
        #expect(undoAll(undoManager) == 3 && author.name == "3")
        undoManager.levelsOfUndo = 1
        #expect(redoAll(undoManager) == 3 && author.name == "7")
        #expect(undoAll(undoManager) == 1 && author.name == "6", "redone groups keep to the limit too")
    }

    @Test("Action names follow their groups to the undo and redo stacks", arguments: StoreKind.allCases)
    func actionNames(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        undoManager.setActionName("Add Author")
        context.insert(Author(name: "A"))
        #expect(undoManager.undoActionName == "Add Author")
        context.processPendingChanges()
        #expect(undoManager.undoActionName == "Add Author" && undoManager.redoActionName.isEmpty)
        undoManager.undo()
        #expect(undoManager.undoActionName.isEmpty && undoManager.redoActionName == "Add Author")
    }

    // MARK: Registration, rollback, opting in

    @Test("Changes made while registration is disabled stay when the group around them is undone",
          arguments: StoreKind.allCases)
    func disabledRegistration(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let book = Book(title: "A", pages: 1)
        context.insert(book)
        try context.save()
        book.title = "B"
        undoManager.disableUndoRegistration()
        #expect(!undoManager.isUndoRegistrationEnabled)
        book.pages = 2
        context.insert(Book(title: "Imported"))
        undoManager.enableUndoRegistration()
        book.title = "C"
        undoManager.undo()
        #expect(book.title == "A" && book.pages == 2, "the unrecorded edit stays")
        #expect(context.insertedModelsArray.count == 1, "the unrecorded insert stays")
        undoManager.redo()
        #expect(book.title == "C" && book.pages == 2)
    }

    @Test("rollback removes every undo and redo action", arguments: StoreKind.allCases)
    func rollbackClears(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        try context.save()
        author.name = "B"
        context.processPendingChanges()
        author.name = "C"
        context.processPendingChanges()
        undoManager.undo()
        author.born = .distantPast
        context.rollback()
        #expect(!undoManager.canUndo && !undoManager.canRedo)
        undoManager.undo()
        #expect(author.name == "A" && author.born == nil)
    }

    @Test("Undo is off by default: no manager, and changes made before one is assigned are not recorded")
    func offByDefault() throws {
        let container = try StoreKind.inMemory.makeContainer([Author.self])
        #expect(!container.isUndoEnabled)
        let context = ModelContext(container)
        #expect(context.undoManager == nil)
        let author = Author(name: "A")
        context.insert(author)
        author.name = "B"
        let undoManager = ModelUndoManager()
        context.undoManager = undoManager
        #expect(!undoManager.canUndo)
        undoManager.undo()
        #expect(author.name == "B" && author.modelContext === context)
    }

    @MainActor
    @Test("isUndoEnabled gives the main context an undo manager, and only it")
    func containerOptIn() throws {
        let container = try ModelContainer(for: Author.self, isUndoEnabled: true,
                                           configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        #expect(container.isUndoEnabled)
        let undoManager = try #require(container.mainContext.undoManager)
        #expect(container.mainContext.undoManager === undoManager)
        #expect(ModelContext(container).undoManager == nil)
        container.mainContext.insert(Author(name: "A"))
        undoManager.undo()
        #expect(!container.mainContext.hasChanges)
    }

    @Test("A manager removed from its context keeps its actions and records nothing meanwhile",
          arguments: StoreKind.allCases)
    func detachedManager(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        try context.save()
        author.name = "B"
        context.undoManager = nil
        author.name = "C"
        author.born = .distantPast
        context.undoManager = undoManager
        undoManager.undo()
        #expect(author.name == "A", "the group changed the name: it gets the group's value back")
        #expect(author.born == .distantPast, "the group did not change born; the manager was away")
        undoManager.undo()
        #expect(author.isDeleted, "the saved insert is undone")
    }

    @Test("A save that upserts an inserted duplicate removes every undo action", arguments: StoreKind.allCases)
    func upsertClears(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        context.insert(Author(name: "Same"))
        try context.save()
        context.insert(Author(name: "Same"))
        try context.save()
        #expect(!undoManager.canUndo && !undoManager.canRedo)
        #expect(try stored(Author.self, in: context.container).count == 1)
    }

    @Test("An undo inside a transaction whose block throws is itself undone", arguments: StoreKind.allCases)
    func undoInsideFailedTransaction(kind: StoreKind) throws {
        struct Abort: Error {}
        let (context, undoManager) = try undoableContext(kind, [Author.self])
        let author = Author(name: "A")
        context.insert(author)
        try context.save()
        author.name = "B"
        #expect(throws: Abort.self) {
            try context.transaction {
                undoManager.undo()
                #expect(author.name == "A")
                throw Abort()
            }
        }
        #expect(author.name == "B")
    }

    // MARK: Observation

    @Test("Undo and redo fire the observation of what they restore", arguments: StoreKind.allCases)
    func observation(kind: StoreKind) throws {
        let (context, undoManager) = try undoableContext(kind, [Author.self, Shelf.self])
        let (author, shelf) = libraryWithShelf(in: context)
        try context.save()
        author.name = "Changed"
        try context.delete(author.books[0])
        #expect(fires({ _ = author.name }, when: { undoManager.undo() }))
        #expect(author.name == "Ursula")
        #expect(fires({ _ = shelf.books }, when: { undoManager.redo() }), "the nullified inverse too")
        #expect(!fires({ _ = shelf.label }, when: { undoManager.undo() }), "what undo does not change stays quiet")
    }

    // MARK: Helpers

    /// Undoes until there is nothing left to undo (at most 100 times); returns how many groups were undone.
    private func undoAll(_ undoManager: ModelUndoManager) -> Int {
        var count = 0
        while undoManager.canUndo && count < 100 {
            undoManager.undo()
            count += 1
        }
        return count
    }

    /// Redoes until there is nothing left to redo (at most 100 times); returns how many groups were redone.
    private func redoAll(_ undoManager: ModelUndoManager) -> Int {
        var count = 0
        while undoManager.canRedo && count < 100 {
            undoManager.redo()
            count += 1
        }
        return count
    }

    /// An author with two books, both on one shelf, inserted into `context`.
    private func libraryWithShelf(in context: ModelContext) -> (Author, Shelf) {
        let author = Author(name: "Ursula")
        let shelf = Shelf(label: "Favourites")
        context.insert(author)
        context.insert(shelf)
        for (title, pages) in [("The Dispossessed", 387), ("Lavinia", 279)] {
            let book = Book(title: title, pages: pages)
            author.books.append(book)
            book.shelves = [shelf]
        }
        return (author, shelf)
    }

    /// Whether `change` fires the observation of what `read` reads.
    private func fires(_ read: () -> Void, when change: () throws -> Void) rethrows -> Bool {
        let fired = Mutex(false)
        withObservationTracking(read) { fired.withLock { $0 = true } }
        try change()
        return fired.withLock { $0 }
    }
}
