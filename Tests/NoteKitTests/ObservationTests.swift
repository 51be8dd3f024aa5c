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
}
