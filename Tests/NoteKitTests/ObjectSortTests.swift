import Foundation
import NoteKit
import NoteKitTestSupport
import Synchronization
import Testing

/// A model whose sort key is computed, so that a fetch sorted by it runs on objects, and which counts how often
/// the key is read.
final class CountedSortRecord: PersistentModel {
    @Attribute var rank = 0

    /// How many times ``sortKey`` was read, by every instance.
    static let sortKeyReads = Mutex(0)

    /// A computed property: a sort by it cannot run in the store.
    var sortKey: Int {
        Self.sortKeyReads.withLock { $0 += 1 }
        return -rank
    }

    required init() {}
}

/// A fetch whose predicate or sort the store cannot run is finished on the model objects (``FetchPlan/evaluatedInMemory``):
/// what it returns is sorted there, and only what it returns.
@Suite("Fetches finished on objects: only returned objects are sorted", .serialized)
struct ObjectSortTests {
    private func context(_ kind: StoreKind) throws -> ModelContext {
        let container = try kind.makeContainer([CountedSortRecord.self])
        let context = ModelContext(container)
        for rank in 0..<200 {
            let record = CountedSortRecord()
            record.rank = rank
            context.insert(record)
        }
        try context.save()
        return context
    }

    private func reads(_ body: () throws -> Void) rethrows -> Int {
        let before = CountedSortRecord.sortKeyReads.withLock { $0 }
        try body()
        return CountedSortRecord.sortKeyReads.withLock { $0 } - before
    }

    @Test("fetchCount and explain of a fetch sorted on objects read no sort key; fetch sorts what it returns",
          arguments: StoreKind.allCases)
    func countAndExplainDoNotSort(kind: StoreKind) throws {
        let context = try context(kind)
        var descriptor = FetchDescriptor<CountedSortRecord>(sortBy: [SortDescriptor(\.sortKey)])
        descriptor.fetchLimit = 10
        descriptor.fetchOffset = 5
        #expect(try context.explain(descriptor).evaluatedInMemory)
        var count = 0
        #expect(try reads { count = try context.fetchCount(descriptor) } == 0)
        #expect(count == 10)
        var plan: FetchPlan?
        #expect(try reads { plan = try context.explain(descriptor) } == 0)
        #expect(plan?.rowsReturned == 10)
        var ranks: [Int] = []
        #expect(try reads { ranks = try context.fetch(descriptor).map(\.rank) } > 0)
        #expect(ranks == Array((185..<195).reversed()))
        var identifiers: [PersistentIdentifier] = []
        #expect(try reads { identifiers = try context.fetchIdentifiers(descriptor) } > 0)
        #expect(identifiers == (try context.fetch(descriptor).map(\.persistentModelID)))
    }
}
