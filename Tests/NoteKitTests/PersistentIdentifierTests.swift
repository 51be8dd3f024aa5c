import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("PersistentIdentifier: the way models cross actors")
struct PersistentIdentifierTests {
    @Test("Identifiers are assigned at creation, never change, and are unique")
    func permanent() throws {
        let author = Author(name: "A")
        let before = author.persistentModelID
        let context = ModelContext(try StoreKind.inMemory.makeContainer([Author.self]))
        context.insert(author)
        try context.save()
        #expect(author.persistentModelID == before, "no temporary identifier that changes at save")
        let many = (0..<10_000).map { _ in PersistentIdentifier.make(entityName: "Author") }
        #expect(Set(many).count == many.count)
        #expect(many == many.sorted(), "within a process, identifiers order by creation")
    }

    @Test("Codable, Hashable and Comparable")
    func valueSemantics() throws {
        let id = PersistentIdentifier.make(entityName: "Book")
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: JSONEncoder().encode(id))
        #expect(decoded == id && decoded.hashValue == id.hashValue)
        let other = PersistentIdentifier(entityName: "Author", primaryKey: id.primaryKey)
        #expect(other != id, "the entity is part of the identity")
        #expect(other < id, "entities order by name first")
        #expect(!(id < id))
    }

    actor Importer {
        let context: ModelContext
        init(container: ModelContainer) { context = ModelContext(container) }
        func importBooks(_ titles: [String]) throws -> [PersistentIdentifier] {
            let books = titles.map { Book(title: $0) }
            for book in books { context.insert(book) }
            try context.save()
            return books.map(\.persistentModelID)
        }
    }

    @Test("An identifier made on one actor finds the object on another", arguments: StoreKind.allCases)
    func crossActor(kind: StoreKind) async throws {
        let container = try kind.makeContainer([Book.self])
        let ids = try await Importer(container: container).importBooks(["Piranesi", "Circe"])
        let context = ModelContext(container)
        let titles = ids.compactMap { context[$0, as: Book.self]?.title }
        #expect(titles == ["Piranesi", "Circe"])
    }
}
