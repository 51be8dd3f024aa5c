import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// The names the transaction number and the row had before issue 36 (item 5) still answer, as deprecated forwarders,
/// so that code written against them builds until they are removed.
@Suite("Deprecated names: the transaction number and the row")
struct DeprecatedNamesTests {
    @Test("generation, SaveResult(generation:), ModelSnapshot's version and applying(_:version:) still answer",
          arguments: StoreKind.allCases)
    @available(*, deprecated)
    func transactionNumberForwarders(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        context.insert(Author(name: "Ursula"))
        try context.save()
        #expect(container.store.generation == container.store.transactionNumber)

        var result = SaveResult(generation: 7)
        #expect(result.transactionNumber == 7 && result.generation == 7)
        result.generation = 8
        #expect(result.transactionNumber == 8)

        let id = PersistentIdentifier(entityName: "Author", primaryKey: UUID())
        var row = ModelSnapshot(id: id, attributes: [StoredValue](), relationships: [], version: 3)
        #expect(row.transactionNumber == 3 && row.version == 3)
        row.version = 4
        #expect(row.transactionNumber == 4)
        let packed = ModelSnapshot(id: id, attributes: AttributeValues([]), relationships: [], version: 5)
        let values = ModelSnapshot(id: id, attributes: AttributeValues([]), relationships: RelationshipValues([]),
                                   version: 6)
        #expect(packed.transactionNumber == 5 && values.transactionNumber == 6)
        let update = ModelUpdate(id: id, attributes: [], relationships: [])
        #expect(row.applying(update, version: 9) == row.applying(update, transactionNumber: 9))
    }

    @Test("snapshots(for:), .snapshots, StoreFetchResult.snapshots and FetchPlan's record counts still answer",
          arguments: StoreKind.allCases)
    @available(*, deprecated)
    func rowForwarders(kind: StoreKind) throws {
        let container = try kind.makeContainer([Author.self])
        let context = ModelContext(container)
        let author = Author(name: "Ursula")
        context.insert(author)
        try context.save()
        let store = container.store
        #expect(store.snapshots(for: [author.persistentModelID]) == store.rows(for: [author.persistentModelID]))
        var result = try store.fetch(StoreFetchRequest(entity: "Author", resultType: .snapshots))
        #expect(result.snapshots.count == 1 && result.snapshots == result.rows)
        result.snapshots = []
        #expect(result.rows.isEmpty)
        var plan = FetchPlan(entity: "Author", recordsExamined: 2, recordsReturned: 1)
        #expect(plan.rowsExamined == 2 && plan.rowsReturned == 1)
        plan.recordsExamined = 3
        plan.recordsReturned = 3
        #expect(plan.rowsExamined == 3 && plan.recordsReturned == plan.rowsReturned)
    }
}
