import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Testing

// Issue 17, item 2: a store opened through its checkpoint holds what its objects hold, and a bounded cache of what
// it read lately, not a copy of every row a fetch ever read.

@Suite("What a checkpoint keeps of what it read")
struct CheckpointCacheTests {
    @Test("A cache keeps at most its limit, and what is read again and again outlives a scan")
    func recentlyReadIsBounded() {
        var cache = RecentlyRead<String>(limit: 8)
        for key in 0..<100 {
            cache.insert("v\(key)", for: key)
            // The hot entry, read between every two inserts.
            if key > 0 { cache.insert("hot", for: -1) }
            _ = cache.value(for: -1)
            #expect(cache.count <= 8)
        }
        #expect(cache.value(for: -1) == "hot")
        #expect(cache.value(for: 99) == "v99")
        // What the scan passed over long ago is gone; a miss is nil, never a wrong value.
        #expect(cache.value(for: 0) == nil)
        #expect(cache.value(for: 50) == nil)
        // Replacing keeps one entry for the key.
        var small = RecentlyRead<Int>(limit: 4)
        for _ in 0..<10 { small.insert(1, for: 7) }
        small.insert(2, for: 7)
        #expect(small.count == 1 && small.value(for: 7) == 2)
    }

    @Test("An entry moved up from the older generation is kept once, and kept")
    func promotionKeepsOneEntry() {
        var cache = RecentlyRead<Int>(limit: 4)
        cache.insert(10, for: 1)
        cache.insert(20, for: 2)
        cache.insert(30, for: 3)  // 1 and 2 are now the older generation
        #expect(cache.value(for: 1) == 10)  // moved up beside 3
        #expect(cache.count == 3)
        cache.insert(40, for: 4)  // 3 and 1 become the older generation; 2 is dropped
        #expect(cache.value(for: 2) == nil)
        #expect(cache.value(for: 1) == 10 && cache.value(for: 3) == 30 && cache.value(for: 4) == 40)
        #expect(cache.count <= 4)
    }

    @Test("Fetching every row through a checkpoint keeps at most the row cache's limit, and a second fetch answers the same")
    func fetchingEverythingKeepsABoundedCache() throws {
        let count = CheckpointRowBase.rowCacheLimit * 2 + 500
        let (url, container) = try CheckpointFixture.store(count: count)
        try StoreFiles.close(container)
        defer { try? FileManager.default.removeItem(at: url) }
        let reopened = try StoreFiles.open(url, CheckpointFixture.models) { $0.mode = .readOnly }
        defer { try? StoreFiles.close(reopened) }
        let base = try #require(StoreFiles.store(reopened).state.withLock {
            $0.rows.base(of: "CheckpointItem") as? CheckpointRowBase
        })
        func everything() throws -> [String] {
            try ModelContext(reopened).fetch(FetchDescriptor<CheckpointItem>(sortBy: [SortDescriptor(\.rank)]))
                .map { "\($0.code)|\($0.title)|\($0.rank)|\($0.bucket)|\($0.serial ?? "-")|\($0.group?.name ?? "-")" }
        }
        let first = try everything()
        #expect(first.count == count - count / 20)
        #expect(base.rowsKept <= CheckpointRowBase.rowCacheLimit, "the base kept \(base.rowsKept) rows")
        #expect(base.rowsKept > 0)
        let second = try everything()
        #expect(second == first)
        #expect(base.rowsKept <= CheckpointRowBase.rowCacheLimit)
    }
}
