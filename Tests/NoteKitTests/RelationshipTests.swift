import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Relationships: inverses are maintained at once")
struct RelationshipTests {
    @Test("Setting a to-one puts the object in the inverse to-many before any save", arguments: StoreKind.allCases)
    func toOneUpdatesInverse(kind: StoreKind) throws {
        let container = try kind.makeContainer([PlainFolder.self])
        let context = ModelContext(container)
        let work = PlainFolder(name: "Work"), home = PlainFolder(name: "Home")
        let note = PlainNote(title: "Plan")
        context.insert(work)
        context.insert(home)
        note.folder = work
        #expect(work.notes.map(\.title) == ["Plan"])
        #expect(note.modelContext === context, "relating to a managed object inserts the note")
        note.folder = home
        #expect(work.notes.isEmpty, "moving the note removes it from the first folder")
        #expect(home.notes.map(\.title) == ["Plan"])
        try context.save()

        let fresh = ModelContext(container)
        let folders = try fresh.fetch(FetchDescriptor<PlainFolder>(sortBy: [SortDescriptor(\.name)]))
        #expect(folders.map { $0.notes.map(\.title) } == [["Plan"], []])
    }

    @Test("Editing a to-many sets each target's to-one", arguments: StoreKind.allCases)
    func toManyUpdatesInverse(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([PlainFolder.self]))
        let work = PlainFolder(name: "Work"), home = PlainFolder(name: "Home")
        let a = PlainNote(title: "a"), b = PlainNote(title: "b")
        context.insert(work)
        context.insert(home)
        work.notes = [a, b]
        #expect(a.folder === work && b.folder === work)
        home.notes.append(a)
        #expect(a.folder === home, "a to-one inverse points at its new owner")
        #expect(work.notes.map(\.title) == ["b"], "and the previous owner loses it")
        work.notes.removeAll()
        #expect(b.folder == nil)
    }

    @Test("A to-many keeps insertion order through save and reload", arguments: StoreKind.allCases)
    func toManyOrder(kind: StoreKind) throws {
        let container = try kind.makeContainer([PlainFolder.self])
        let context = ModelContext(container)
        let folder = PlainFolder(name: "F")
        context.insert(folder)
        let titles = ["delta", "alpha", "charlie", "bravo"]
        for title in titles { folder.notes.append(PlainNote(title: title)) }
        try context.save()
        let reader = ModelContext(container)
        let reloaded = try #require(try reader.fetch(FetchDescriptor<PlainFolder>()).first)
        #expect(reloaded.notes.map(\.title) == titles)

        // Reordering alone is a change, and the new order is what is saved.
        folder.notes = folder.notes.reversed()
        try context.save()
        let laterReader = ModelContext(container)
        let again = try #require(try laterReader.fetch(FetchDescriptor<PlainFolder>()).first)
        #expect(again.notes.map(\.title) == titles.reversed())
    }

    @Test("A many-to-many link is seen from both sides", arguments: StoreKind.allCases)
    func manyToMany(kind: StoreKind) throws {
        let container = try kind.makeContainer([Shelf.self])
        let context = ModelContext(container)
        let fiction = Shelf(label: "Fiction"), favourites = Shelf(label: "Favourites")
        let dune = Book(title: "Dune"), emma = Book(title: "Emma")
        context.insert(fiction)
        context.insert(favourites)
        fiction.books = [dune, emma]
        dune.shelves.append(favourites)
        #expect(dune.shelves.map(\.label) == ["Fiction", "Favourites"])
        #expect(favourites.books.map(\.title) == ["Dune"])
        #expect(emma.shelves.map(\.label) == ["Fiction"])
        try context.save()

        let fresh = ModelContext(container)
        let books = try fresh.fetch(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]))
        #expect(books.map { $0.shelves.map(\.label) } == [["Fiction", "Favourites"], ["Fiction"]])
        fiction.books.removeAll { $0 === dune }
        #expect(dune.shelves.map(\.label) == ["Favourites"])
    }

    @Test("A self-referential relationship maintains parent and children", arguments: StoreKind.allCases)
    func selfReferential(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([TreeNode.self]))
        let root = TreeNode("root"), left = TreeNode("left"), right = TreeNode("right")
        context.insert(root)
        left.parent = root
        root.children.append(right)
        #expect(root.children.map(\.label) == ["left", "right"])
        #expect(right.parent === root)
        right.parent = left
        #expect(root.children.map(\.label) == ["left"])
        #expect(left.children.map(\.label) == ["right"])
    }

    @Test("One-to-one: giving a passport to another holder takes it from the first", arguments: StoreKind.allCases)
    func oneToOne(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Person.self]))
        let ada = Person(name: "Ada"), bob = Person(name: "Bob")
        let passport = Passport(number: "X1")
        context.insert(ada)
        context.insert(bob)
        ada.passport = passport
        #expect(passport.holder === ada)
        bob.passport = passport
        #expect(passport.holder === bob)
        #expect(ada.passport == nil)
    }

    @Test("Objects related before insertion are inserted together", arguments: StoreKind.allCases)
    func unmanagedGraph(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let author = Author(name: "Le Guin")
        let book = Book(title: "The Dispossessed")
        let replaced = Book(title: "Draft")
        book.author = author
        replaced.author = author
        replaced.author = nil
        #expect(author.books.map(\.title) == ["The Dispossessed"], "unsaved objects navigate each other")
        context.insert(author)
        #expect(book.modelContext === context)
        #expect(replaced.modelContext == nil, "an object no longer related is not inserted")
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Book>()) == 1)
    }

    @Test("Count bounds are checked at save, with a typed error", arguments: StoreKind.allCases)
    func countBounds(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Person.self]))
        let ada = Person(name: "Ada")
        context.insert(ada)
        let stray = Pet(name: "Stray")
        context.insert(stray)
        #expect(throws: SaveError.self) { try context.save() }
        #expect(context.hasChanges, "a refused save leaves everything pending")
        stray.owners = [ada]
        ada.pets += [Pet(name: "Rex"), Pet(name: "Tom")]
        #expect(ada.pets.count == 3)
        do {
            try context.save()
            Issue.record("three pets exceed the maximum of two")
        } catch let SaveError.relationshipCountOutOfRange(model, property, count, _, maximum) {
            #expect(model == ada.persistentModelID && property == "pets" && count == 3 && maximum == 2)
        }
        // Tom leaves Ada, and with no owner left he would break his own minimum: he goes too.
        let tom = ada.pets.removeLast()
        #expect(tom.owners.isEmpty)
        try context.delete(tom)
        try context.save()
        #expect(!context.hasChanges)
    }
}
