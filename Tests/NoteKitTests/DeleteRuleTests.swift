import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Delete rules take effect when delete is called")
struct DeleteRuleTests {
    @Test("Seed 003: deleting a folder with 3 notes and the default rule leaves 3 notes without a folder",
          arguments: StoreKind.allCases)
    func defaultRuleNullifies(kind: StoreKind) throws {
        let container = try kind.makeContainer([PlainFolder.self])
        let context = ModelContext(container)
        let folder = PlainFolder(name: "Trip")
        context.insert(folder)
        for title in ["a", "b", "c"] { folder.notes.append(PlainNote(title: title)) }
        try context.save()

        let notes = try context.fetch(FetchDescriptor<PlainNote>())
        try context.delete(folder)
        #expect(notes.allSatisfy { $0.folder == nil }, "visible before save")
        try context.save()

        let fresh = ModelContext(container)
        let left = try fresh.fetch(FetchDescriptor<PlainNote>(sortBy: [SortDescriptor(\.title)]))
        #expect(left.count == 3)
        #expect(left.allSatisfy { $0.folder == nil })
        #expect(try fresh.fetchCount(FetchDescriptor<PlainFolder>()) == 0)
    }

    @Test("Cascade chains through several levels", arguments: StoreKind.allCases)
    func cascadeChains(kind: StoreKind) throws {
        let container = try kind.makeContainer([Warehouse.self])
        let context = ModelContext(container)
        let warehouse = Warehouse(name: "North")
        context.insert(warehouse)
        for number in 1...3 {
            let aisle = Aisle(number: number)
            warehouse.aisles.append(aisle)
            for code in ["x", "y"] { aisle.bins.append(Bin(code: "\(number)\(code)")) }
        }
        try context.save()
        try context.delete(warehouse)
        #expect(context.deletedModelsArray.count == 1 + 3 + 6)
        try context.save()
        let fresh = ModelContext(container)
        #expect(try fresh.fetchCount(FetchDescriptor<Aisle>()) == 0)
        #expect(try fresh.fetchCount(FetchDescriptor<Bin>()) == 0)
    }

    @Test("A cycle of cascades terminates and deletes each object once", arguments: StoreKind.allCases)
    func cascadeCycle(kind: StoreKind) throws {
        let container = try kind.makeContainer([TreeNode.self])
        let context = ModelContext(container)
        let a = TreeNode("a"), b = TreeNode("b"), c = TreeNode("c")
        context.insert(a)
        b.parent = a
        c.parent = b
        a.parent = c   // a → b → c → a: every children relationship cascades
        try context.save()
        try context.delete(b)
        #expect(context.deletedModelsArray.count == 3)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<TreeNode>()) == 0)
    }

    @Test(".deny blocks the delete with a typed error and leaves the graph unchanged", arguments: StoreKind.allCases)
    func denyBlocks(kind: StoreKind) throws {
        let container = try kind.makeContainer([Warehouse.self])
        let context = ModelContext(container)
        let warehouse = Warehouse(name: "South")
        context.insert(warehouse)
        let aisle = Aisle(number: 7)
        warehouse.aisles.append(aisle)
        warehouse.leases.append(Lease(tenant: "Acme"))
        try context.save()

        do {
            try context.delete(warehouse)
            Issue.record("the lease should deny the delete")
        } catch let DeleteError.denied(entity, relationship, model, count) {
            #expect(entity == "Warehouse" && relationship == "leases" && model == warehouse.persistentModelID)
            #expect(count == 1)
        }
        #expect(!context.hasChanges, "nothing changed")
        #expect(!warehouse.isDeleted && !aisle.isDeleted)
        #expect(aisle.warehouse === warehouse)

        // Once the lease is gone the same delete goes through.
        try context.delete(warehouse.leases[0])
        try context.delete(warehouse)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Aisle>()) == 0)
    }

    @Test(".deny does not block when the target is deleted by the same cascade", arguments: StoreKind.allCases)
    func denyWithinCascade(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Person.self]))
        let ada = Person(name: "Ada")
        context.insert(ada)
        ada.passport = Passport(number: "P")
        try context.save()
        try context.delete(ada)
        #expect(context.deletedModelsArray.count == 2)
    }

    @Test(".noAction leaves the targets unchanged in the context", arguments: StoreKind.allCases)
    func noAction(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Warehouse.self]))
        let bin = Bin(code: "b1")
        let tag = Tag(name: "fragile")
        context.insert(bin)
        bin.tags = [tag]
        try context.save()
        try context.delete(bin)
        #expect(tag.persistentModelID != bin.persistentModelID)
        #expect(tag.modelContext === context)
        #expect(!tag.hasChanges, "noAction does not touch the targets")
    }

    @Test("delete(model:where:) applies rules to every match", arguments: StoreKind.allCases)
    func deleteWhere(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        for (name, count) in [("A", 2), ("B", 1), ("C", 0)] {
            let author = Author(name: name)
            context.insert(author)
            for index in 0..<count { author.books.append(Book(title: "\(name)\(index)")) }
        }
        try context.save()
        try context.delete(model: Author.self, where: #Predicate { $0.name != "C" })
        try context.save()
        let fresh = ModelContext(container)
        #expect(try fresh.fetch(FetchDescriptor<Author>()).map(\.name) == ["C"])
        #expect(try fresh.fetchCount(FetchDescriptor<Book>()) == 0, "books cascade with their authors")
    }

    @Test("Deleting an inserted, unsaved object just forgets it", arguments: StoreKind.allCases)
    func deleteUnsaved(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Author.self]))
        let author = Author(name: "Temp")
        context.insert(author)
        try context.delete(author)
        #expect(!context.hasChanges)
        #expect(author.modelContext == nil && author.isDeleted)
    }
}
