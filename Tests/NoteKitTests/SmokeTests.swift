import Foundation
import Testing
@testable import NoteKit

@Suite("Smoke") struct SmokeTests {
    @Test("insert, relate, save, fetch")
    func basics() throws {
        let container = try ModelContainer(for: Author.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        print(container.schema)
        let context = ModelContext(container)
        let author = Author(name: "Ursula")
        let book = Book(title: "Earthsea", pages: 200)
        book.author = author
        #expect(author.books.map(\.title) == ["Earthsea"])
        context.insert(author)
        #expect(book.modelContext === context)
        try context.save()
        let other = ModelContext(container)
        let books = try other.fetch(FetchDescriptor<Book>(predicate: #Predicate { $0.pages > 100 }, sortBy: [SortDescriptor(\.title)]))
        #expect(books.map(\.title) == ["Earthsea"])
        #expect(books.first?.author?.name == "Ursula")
        print(try other.explain(FetchDescriptor<Book>(predicate: #Predicate { $0.pages > 100 })))
    }
}
