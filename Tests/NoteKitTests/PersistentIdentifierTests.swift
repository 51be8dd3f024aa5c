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

    @Test("The Codable form is the entity name and the key; the description is Entity/KEY")
    func codableForm() throws {
        let key = UUID(uuidString: "3F2504E0-4F89-11D3-9A0C-0305E82C3301")!
        let id = PersistentIdentifier(entityName: "Folder", primaryKey: key)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(id), as: UTF8.self)
        #expect(json == #"{"entityName":"Folder","primaryKey":"3F2504E0-4F89-11D3-9A0C-0305E82C3301"}"#)
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: Data(json.utf8))
        #expect(decoded == id && decoded.entityName == "Folder" && decoded.primaryKey == key)
        #expect(id.description == "Folder/3F2504E0-4F89-11D3-9A0C-0305E82C3301")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PersistentIdentifier.self, from: Data(#"{"entityName":"Folder"}"#.utf8))
        }
    }

    @Test("Equality, hashing and order follow the entity name and the key, however the name was made")
    func equalityAcrossEntities() {
        let key = KeyGenerator.next()
        // Names built at run time, so that no two are the same string literal.
        let folder = PersistentIdentifier(entityName: ["Fol", "der"].joined(), primaryKey: key)
        let sameFolder = PersistentIdentifier(entityName: String("Folder".reversed().reversed()), primaryKey: key)
        let note = PersistentIdentifier(entityName: "Note", primaryKey: key)
        #expect(folder == sameFolder && folder.hashValue == sameFolder.hashValue)
        #expect(folder != note && !(folder < sameFolder) && folder < note)
        #expect(Set([folder, sameFolder, note]).count == 2)
        #expect([folder: 1, note: 2][sameFolder] == 1)
        let empty = PersistentIdentifier(entityName: "", primaryKey: key)
        #expect(empty.entityName.isEmpty && empty != folder && empty < folder)
        let accented = PersistentIdentifier(entityName: "Caf\u{E9}", primaryKey: key)
        let decomposed = PersistentIdentifier(entityName: "Cafe\u{301}", primaryKey: key)
        #expect(accented == decomposed, "names compare as Swift strings do")
        #expect(decomposed.entityName.unicodeScalars.elementsEqual("Cafe\u{301}".unicodeScalars),
                "the name reads back as it was given")
    }

    @Test("An identifier is a key and a reference to its interned entity name: 24 bytes, nil included")
    func compactLayout() {
        #expect(MemoryLayout<PersistentIdentifier>.size == 24)
        #expect(MemoryLayout<PersistentIdentifier?>.size == 24)
        #expect(MemoryLayout<ModelSnapshot?>.size == MemoryLayout<ModelSnapshot>.size)
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
