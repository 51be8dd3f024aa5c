import Foundation
import Observation
import Synchronization
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Observation of persisted properties")
struct ObservationTests {
    /// Whether `change` fires the observation of what `read` reads.
    private func fires(_ read: () -> Void, when change: () throws -> Void) rethrows -> Bool {
        let fired = Mutex(false)
        withObservationTracking(read) { fired.withLock { $0 = true } }
        try change()
        return fired.withLock { $0 }
    }

    @Test("Setting an attribute fires; reading another does not")
    func attribute() throws {
        let book = Book(title: "A")
        #expect(fires({ _ = book.title }, when: { book.title = "B" }))
        #expect(!fires({ _ = book.pages }, when: { book.title = "C" }))
        #expect(!fires({ _ = book.title }, when: { book.title = "C" }), "writing the same value changes nothing")
    }

    @Test("Inverse maintenance fires on the other side", arguments: StoreKind.allCases)
    func inverse(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([PlainFolder.self]))
        let work = PlainFolder(name: "Work")
        context.insert(work)
        _ = work.notes
        let note = PlainNote(title: "n")
        #expect(fires({ _ = work.notes }, when: { note.folder = work }))
        #expect(try fires({ _ = work.notes }, when: { try context.delete(note) }), "a delete rule's nullify fires too")
    }

    @Test("Rollback fires for the properties it restores", arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Author.self]))
        let author = Author(name: "Before")
        context.insert(author)
        try context.save()
        author.name = "After"
        #expect(fires({ _ = author.name }, when: { context.rollback() }))
        #expect(author.name == "Before")
    }

    @Test("A fetched object nobody read has no registrar; observing it from its first read sees every change",
          arguments: StoreKind.allCases)
    func registrarOnFirstRead(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let writer = ModelContext(container)
        writer.insert(Author(name: "Before"))
        try writer.save()
        let context = ModelContext(container)
        let author = try #require(try context.fetch(FetchDescriptor<Author>()).first)
        #expect(author._$sideAllocations == (false, false), "a fetched object allocates nothing beside itself")
        author.name = "Unobserved"
        #expect(!author._$sideAllocations.registrar, "a write nobody can observe makes no registrar")
        #expect(fires({ _ = author.name }, when: { author.name = "Seen" }))
        #expect(author._$sideAllocations.registrar)
        #expect(fires({ _ = author.name }, when: { context.rollback() }), "rollback fires for the new observer")
        #expect(author.name == "Before")
        let reader = ModelContext(container)
        let fresh = try #require(try reader.fetch(FetchDescriptor<Author>()).first)
        #expect(try fires({ _ = fresh.name }, when: {
            let other = ModelContext(container)
            try #require(try other.fetch(FetchDescriptor<Author>()).first).name = "Elsewhere"
            try other.save()
            _ = try reader.fetch(FetchDescriptor<Author>())
        }), "a fetch that loads a newer saved version fires")
        #expect(fresh.name == "Elsewhere")
    }
}
