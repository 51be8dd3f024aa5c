import Foundation
import NoteKit
import NoteKitTestSupport
import Testing

/// Issue 35, item 6: `HistoryDescriptor.sortBy`, as SwiftData has it. A fetch takes the transactions the predicate
/// accepts, sorts them, then keeps the first `fetchLimit`.
@Suite("History: sortBy")
struct HistorySortTests {
    private func context(_ kind: StoreKind) throws -> ModelContext {
        ModelContext(try kind.makeContainer([Diary.self, Page.self]))
    }

    /// Saves one diary per author, in order, each as a transaction by that author; returns the tokens.
    private func save(authors: [String?], in context: ModelContext) throws -> [DefaultHistoryToken] {
        try authors.enumerated().map { index, author in
            context.author = author
            context.insert(Diary(code: "D\(index)"))
            try context.save()
            // Distinct commit times, so that a sort by timestamp has no ties to break.
            Thread.sleep(forTimeInterval: 0.002)
            return try #require(context.currentHistoryToken())
        }
    }

    private func fetch(_ context: ModelContext, _ predicate: Predicate<DefaultHistoryTransaction>? = nil,
                       sortBy: [SortDescriptor<DefaultHistoryTransaction>],
                       limit: Int? = nil) throws -> [DefaultHistoryTransaction] {
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(predicate: predicate, sortBy: sortBy)
        descriptor.fetchLimit = limit
        return try context.fetchHistory(descriptor)
    }

    @Test("Without sortBy the order is the commit order, oldest first, and the limit keeps the oldest",
          arguments: StoreKind.allCases)
    func defaultOrderIsOldestFirst(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["a", "b", "c", "d"], in: context)
        #expect(HistoryDescriptor<DefaultHistoryTransaction>().sortBy.isEmpty)
        #expect(try fetch(context, sortBy: []).map(\.token) == tokens)
        #expect(try fetch(context, sortBy: [], limit: 2).map(\.token) == Array(tokens[0...1]))
    }

    @Test("sortBy token, reverse, returns the newest first; the limit keeps the newest",
          arguments: StoreKind.allCases)
    func tokenReverseIsNewestFirst(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["a", "b", "c", "d", "e"], in: context)
        let newestFirst = [SortDescriptor(\DefaultHistoryTransaction.token, order: .reverse)]
        #expect(try fetch(context, sortBy: newestFirst).map(\.token) == tokens.reversed())
        #expect(try fetch(context, sortBy: newestFirst, limit: 2).map(\.token) == [tokens[4], tokens[3]])
        // `id` is the token: the same order.
        #expect(try fetch(context, sortBy: [SortDescriptor(\.id, order: .reverse)], limit: 2).map(\.token)
                == [tokens[4], tokens[3]])
        #expect(try fetch(context, sortBy: [SortDescriptor(\.token)]).map(\.token) == tokens)
    }

    @Test("The limit applies after the predicate and the sort: the newest matches, not the oldest ones sorted",
          arguments: StoreKind.allCases)
    func limitAppliesAfterSorting(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["sync", "app", "sync", "sync", "app", "sync"], in: context)
        let first = tokens[0]
        let author = "sync"
        let predicate = #Predicate<DefaultHistoryTransaction> { $0.token > first && $0.author == author }
        #expect(try fetch(context, predicate, sortBy: [SortDescriptor(\.token, order: .reverse)], limit: 2)
                .map(\.token) == [tokens[5], tokens[3]])
        #expect(try fetch(context, predicate, sortBy: [SortDescriptor(\.timestamp, order: .reverse)], limit: 2)
                .map(\.token) == [tokens[5], tokens[3]])
        #expect(try fetch(context, predicate, sortBy: [SortDescriptor(\.timestamp)], limit: 2)
                .map(\.token) == [tokens[2], tokens[3]])
    }

    @Test("sortBy timestamp orders by commit time", arguments: StoreKind.allCases)
    func timestampOrder(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["a", "b", "c"], in: context)
        let all = try fetch(context, sortBy: [])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp }, "commit times are distinct")
        #expect(try fetch(context, sortBy: [SortDescriptor(\.timestamp, order: .reverse)]).map(\.token)
                == tokens.reversed())
        #expect(try fetch(context, sortBy: [SortDescriptor(\.timestamp)]).map(\.token) == tokens)
    }

    @Test("sortBy author orders by author, no author first; tied transactions stay oldest first",
          arguments: StoreKind.allCases)
    func authorOrderKeepsTiesOldestFirst(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["carol", "alice", nil, "bob", "alice", "carol"], in: context)
        #expect(try fetch(context, sortBy: [SortDescriptor(\.author)]).map(\.token)
                == [tokens[2], tokens[1], tokens[4], tokens[3], tokens[0], tokens[5]])
        #expect(try fetch(context, sortBy: [SortDescriptor(\.author, order: .reverse)]).map(\.token)
                == [tokens[0], tokens[5], tokens[3], tokens[1], tokens[4], tokens[2]])
        #expect(try fetch(context, sortBy: [SortDescriptor(\.author)], limit: 3).map(\.author)
                == [nil, "alice", "alice"])
    }

    @Test("Several descriptors apply in order: the second breaks the first's ties", arguments: StoreKind.allCases)
    func descriptorsApplyInOrder(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["carol", "alice", "bob", "alice", "carol"], in: context)
        let sorted = try fetch(context, sortBy: [SortDescriptor(\.author), SortDescriptor(\.token, order: .reverse)])
        #expect(sorted.map(\.token) == [tokens[3], tokens[1], tokens[2], tokens[4], tokens[0]])
        // A first descriptor by token decides alone: the ones after it change nothing.
        #expect(try fetch(context, sortBy: [SortDescriptor(\.token, order: .reverse), SortDescriptor(\.author)])
                .map(\.token) == tokens.reversed())
    }

    @Test("A descriptor on any other key path sorts as its own compare says", arguments: StoreKind.allCases)
    func otherKeyPathsSortAsFoundationCompares(kind: StoreKind) throws {
        let context = try context(kind)
        let small = try save(authors: ["a"], in: context)
        let big = Diary(code: "big")
        big.pages = [Page(number: 1, text: "one"), Page(number: 2, text: "two")]
        context.insert(big)
        try context.save()
        let bigToken = try #require(context.currentHistoryToken())
        let descriptors = [SortDescriptor(\DefaultHistoryTransaction.record.changeCount, order: .reverse)]
        let sorted = try fetch(context, sortBy: descriptors)
        #expect(sorted.map(\.token) == [bigToken, small[0]])
        #expect(sorted == (try fetch(context, sortBy: [])).sorted(using: descriptors),
                "the same order as sorting the fetched transactions with the descriptors")
    }

    @Test("deleteHistory ignores sortBy and fetchLimit: every transaction the predicate selects goes",
          arguments: StoreKind.allCases)
    func deleteIgnoresSortAndLimit(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["a", "b", "c", "d"], in: context)
        let keepFrom = tokens[2]
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token < keepFrom }, sortBy: [SortDescriptor(\.token, order: .reverse)])
        descriptor.fetchLimit = 1
        try context.deleteHistory(descriptor)
        #expect(try fetch(context, sortBy: []).map(\.token) == Array(tokens[2...]))
    }

    @Test("A sorted fetch that selects deleted history still says the token expired", arguments: StoreKind.allCases)
    func sortedFetchOfDeletedHistoryThrows(kind: StoreKind) throws {
        let context = try context(kind)
        let tokens = try save(authors: ["a", "b", "c"], in: context)
        let keepFrom = tokens[1]
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token < keepFrom }))
        let first = tokens[0]
        let after = #Predicate<DefaultHistoryTransaction> { $0.token >= first }
        #expect(throws: HistoryError.historyTokenExpired(oldestRetained: tokens[1])) {
            try fetch(context, after, sortBy: [SortDescriptor(\.timestamp, order: .reverse)], limit: 1)
        }
    }
}
