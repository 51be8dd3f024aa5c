#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKitStressSupport
import Testing
@testable import NoteKit
import NoteKitNotes

@Suite("Index tree")
struct IndexTreeTests {
    // MARK: - Reference model

    /// The order the tree must follow, written independently of it: `StoredValue.compare` per component, then
    /// `PersistentIdentifier`'s `<`.
    static func order(_ a: IndexEntry, _ b: IndexEntry) -> Int {
        let c = prefixOrder(a.key, b.key)
        if c != 0 { return c }
        return a.id < b.id ? -1 : (b.id < a.id ? 1 : 0)
    }

    /// Compares the components both arrays have (a bound compares only its own length).
    static func prefixOrder(_ key: [StoredValue], _ bound: [StoredValue]) -> Int {
        for (x, y) in zip(key, bound) {
            let c = StoredValue.compare(x, y)
            if c != 0 { return c }
        }
        return 0
    }

    /// A plain sorted array (a multiset, like the tree).
    struct Reference {
        var entries: [IndexEntry] = []

        func firstIndex(where isPast: (IndexEntry) -> Bool) -> Int {
            var lo = 0, hi = entries.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if isPast(entries[mid]) { hi = mid } else { lo = mid + 1 }
            }
            return lo
        }

        mutating func insert(_ e: IndexEntry) {
            entries.insert(e, at: firstIndex { IndexTreeTests.order($0, e) > 0 })
        }

        mutating func remove(_ e: IndexEntry) -> Bool {
            let i = firstIndex { IndexTreeTests.order($0, e) >= 0 }
            guard i < entries.count, IndexTreeTests.order(entries[i], e) == 0 else { return false }
            entries.remove(at: i)
            return true
        }

        func range(_ lower: IndexBound?, _ upper: IndexBound?) -> [IndexEntry] {
            entries.filter { e in
                if let lower {
                    let c = IndexTreeTests.prefixOrder(e.key, lower.values)
                    if lower.isInclusive ? c < 0 : c <= 0 { return false }
                }
                if let upper {
                    let c = IndexTreeTests.prefixOrder(e.key, upper.values)
                    if upper.isInclusive ? c > 0 : c >= 0 { return false }
                }
                return true
            }
        }
    }

    /// Entries are interchangeable when they are equal in the index order (`.int(2)` and `.double(2)` are).
    static func same(_ a: [IndexEntry], _ b: [IndexEntry]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { order($0, $1) == 0 }
    }

    static func scan(_ tree: IndexTree, _ lower: IndexBound? = nil, _ upper: IndexBound? = nil,
                     reverse: Bool = false, limit: Int = .max) -> [IndexEntry] {
        var out: [IndexEntry] = []
        guard limit > 0 else { return out }
        tree.scan(from: lower, to: upper, reverse: reverse) { out.append($0); return out.count < limit }
        return out
    }

    static func checkLayout(_ tree: IndexTree) {
        let sizes = tree.chunkSizes
        #expect(sizes.reduce(0, +) == tree.count)
        #expect(sizes.allSatisfy { $0 >= 1 && $0 <= tree.chunkCapacity })
    }

    // MARK: - Random data

    /// Value pools. Decimals compare with other numbers through a conversion, and NaN is unordered against
    /// decimals, so the two live in separate pools; each pool is a total order under `StoredValue.compare`.
    enum Pool: String, CaseIterable, Sendable {
        case mixed, numeric

        var values: [StoredValue] {
            switch self {
            case .mixed:
                let big: Int64 = 1 << 60
                let u1 = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 1))
                let u2 = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 2))
                return [
                    .null, .bool(false), .bool(true),
                    .int(-2), .int(0), .int(1), .int(2), .int(big), .int(big + 1), .int(-big), .uint(3), .uint(.max),
                    .double(-1.5), .double(-0.0), .double(0.5), .double(2.0), .double(.infinity),
                    .double(-.infinity), .double(.nan),
                    .string(""), .string("a"), .string("ab"), .string("b"), .string("é"), .string("e\u{301}"),
                    .date(Date(timeIntervalSinceReferenceDate: -1)), .date(Date(timeIntervalSinceReferenceDate: 0)),
                    .date(Date(timeIntervalSinceReferenceDate: 1e9)),
                    .date(Date(timeIntervalSinceReferenceDate: 1e9 + 0.001)),
                    .uuid(u1), .uuid(u2), .data(Data([1, 2])), .data(Data([1, 3])),
                    .array([.int(1)]), .array([.int(1), .string("x")]),
                ]
            case .numeric:
                return [
                    .null, .int(-3), .int(0), .int(7), .uint(7), .double(-3.0), .double(0.25), .double(2.5),
                    .decimal(-3), .decimal(Decimal(2.5)), .decimal(7), .decimal(Decimal(0.25)), .bool(true),
                ]
            }
        }
    }

    static func identifiers(_ count: Int, using rng: inout SeededGenerator) -> [PersistentIdentifier] {
        // A long entity name is a heap string; a short one is stored inline. Both orders are exercised.
        let names = ["Note", "Tag", "NotebookAttachmentWithALongName"]
        return (0..<count).map { _ in
            let (a, b) = (rng.next(), rng.next())
            let uuid = withUnsafeBytes(of: (a, b)) { UUID(uuid: $0.load(as: uuid_t.self)) }
            return PersistentIdentifier(entityName: names.randomElement(using: &rng)!, primaryKey: uuid)
        }
    }

    // MARK: - Tests

    @Test("Random inserts and removes match a sorted array", arguments: Pool.allCases, [8, 512])
    func modelTest(pool: Pool, chunkCapacity: Int) {
        var rng = SeededGenerator(seed: UInt64(chunkCapacity) &* 31 &+ (pool == .mixed ? 1 : 2))
        let values = pool.values
        let ids = Self.identifiers(60, using: &rng)
        func randomKey() -> [StoredValue] { (0..<2).map { _ in values.randomElement(using: &rng)! } }
        func randomBound(_ ref: Reference) -> IndexBound? {
            if Int.random(in: 0..<5, using: &rng) == 0 { return nil }
            var key = ref.entries.randomElement(using: &rng)?.key ?? randomKey()
            if Bool.random(using: &rng) { key = randomKey() }
            return IndexBound(values: Array(key.prefix(Int.random(in: 0...2, using: &rng))),
                              isInclusive: Bool.random(using: &rng))
        }

        var tree = IndexTree(keyCount: 2, chunkCapacity: chunkCapacity)
        var ref = Reference()
        var sawSplit = false, removedPresent = 0, removedMissing = 0
        for step in 1...6000 {
            // Grow for the first half, shrink for the second, so chunks both split and merge.
            let insertChance = step <= 3000 ? 70 : 25
            if Int.random(in: 0..<100, using: &rng) < insertChance {
                let e = IndexEntry(key: randomKey(), id: ids.randomElement(using: &rng)!)
                tree.insert(key: e.key, id: e.id)
                ref.insert(e)
            } else {
                let e = Bool.random(using: &rng) && !ref.entries.isEmpty
                    ? ref.entries.randomElement(using: &rng)!
                    : IndexEntry(key: randomKey(), id: ids.randomElement(using: &rng)!)
                let expected = ref.remove(e)
                let removed = tree.remove(key: e.key, id: e.id)
                #expect(removed == expected)
                if expected { removedPresent += 1 } else { removedMissing += 1 }
            }
            sawSplit = sawSplit || tree.chunkSizes.count > 1
            guard step % 500 == 0 else { continue }

            #expect(tree.count == ref.entries.count)
            Self.checkLayout(tree)
            #expect(Self.same(Self.scan(tree), ref.entries))
            #expect(Self.same(Self.scan(tree, reverse: true), ref.entries.reversed()))
            for _ in 0..<25 {
                let lower = randomBound(ref), upper = randomBound(ref)
                let expected = ref.range(lower, upper)
                #expect(Self.same(Self.scan(tree, lower, upper), expected))
                #expect(Self.same(Self.scan(tree, lower, upper, reverse: true), expected.reversed()))
                #expect(tree.count(from: lower, to: upper) == expected.count)
                let limit = Int.random(in: 0...5, using: &rng)
                #expect(Self.same(Self.scan(tree, lower, upper, limit: limit), Array(expected.prefix(limit))))
                #expect(Self.same(Self.scan(tree, lower, upper, reverse: true, limit: limit),
                                  Array(expected.reversed().prefix(limit))))
            }
        }
        #expect(sawSplit)
        #expect(removedPresent > 500 && removedMissing > 100)
    }

    @Test("Bulk load equals incremental inserts", arguments: [8, 512])
    func bulkLoad(chunkCapacity: Int) {
        var rng = SeededGenerator(seed: 7)
        let values = Pool.mixed.values
        let ids = Self.identifiers(40, using: &rng)
        let entries = (0..<5000).map { _ in
            IndexEntry(key: [values.randomElement(using: &rng)!, values.randomElement(using: &rng)!],
                       id: ids.randomElement(using: &rng)!)
        }
        var incremental = IndexTree(keyCount: 2, chunkCapacity: chunkCapacity)
        for e in entries { incremental.insert(key: e.key, id: e.id) }
        var loaded = IndexTree(keyCount: 2, chunkCapacity: chunkCapacity)
        loaded.insert(key: [.int(1), .int(2)], id: ids[0])  // replaced by the load
        loaded.bulkLoad(entries)
        #expect(loaded.count == entries.count)
        Self.checkLayout(loaded)
        let all = Self.scan(incremental)
        #expect(Self.same(Self.scan(loaded), all))
        #expect(Self.same(Self.scan(loaded, reverse: true), all.reversed()))

        // Already sorted input, then an empty one.
        var sorted = IndexTree(keyCount: 2, chunkCapacity: chunkCapacity)
        sorted.bulkLoad(all)
        #expect(Self.same(Self.scan(sorted), all))
        sorted.bulkLoad([])
        #expect(sorted.count == 0 && Self.scan(sorted).isEmpty && sorted.chunkSizes.isEmpty)

        // A loaded tree keeps working under inserts and removes.
        let removedAll = entries.prefix(2000).allSatisfy { loaded.remove(key: $0.key, id: $0.id) }
        #expect(removedAll)
        #expect(Self.same(Self.scan(loaded), entries.dropFirst(2000).sorted { Self.order($0, $1) < 0 }))
        Self.checkLayout(loaded)
    }

    @Test("Removing a missing entry returns false")
    func removeMissing() {
        let a = PersistentIdentifier.make(entityName: "Note"), b = PersistentIdentifier.make(entityName: "Note")
        var tree = IndexTree(keyCount: 2)
        var removed = tree.remove(key: [.int(1), .string("a")], id: a)
        #expect(!removed)
        tree.insert(key: [.int(1), .string("a")], id: a)
        removed = tree.remove(key: [.int(1), .string("b")], id: a)
        #expect(!removed, "same id, other key")
        removed = tree.remove(key: [.int(1), .string("a")], id: b)
        #expect(!removed, "same key, other id")
        removed = tree.remove(key: [.int(1)], id: a)
        #expect(!removed, "key of the wrong length")
        #expect(tree.count == 1)
        // Keys equal in the index order name the same entry: 1 and 1.0 compare equal.
        removed = tree.remove(key: [.double(1), .string("a")], id: a)
        #expect(removed)
        removed = tree.remove(key: [.int(1), .string("a")], id: a)
        #expect(!removed, "already removed")
        #expect(tree.count == 0 && tree.chunkSizes.isEmpty)
    }

    @Test("Keys order across kinds: null first, numbers by value")
    func crossKindOrder() {
        let date = Date(timeIntervalSinceReferenceDate: 0)
        let expected: [StoredValue] = [
            .null, .bool(false), .bool(true), .double(-.infinity), .int(-1), .double(-0.5), .uint(1), .double(1.5),
            .int(2), .double(2.5), .uint(3), .int(1 << 60), .uint(.max), .double(.infinity), .double(.nan),
            .string("A"), .string("a"), .date(date),
        ]
        var rng = SeededGenerator(seed: 3)
        var tree = IndexTree(keyCount: 1, chunkCapacity: 4)
        for value in expected.shuffled(using: &rng) {
            tree.insert(key: [value], id: .make(entityName: "Note"))
        }
        let keys = Self.scan(tree).map(\.key[0])
        #expect(keys.map(\.description) == expected.map(\.description))

        var bulk = IndexTree(keyCount: 1)
        bulk.bulkLoad(expected.shuffled(using: &rng).map { IndexEntry(key: [$0], id: .make(entityName: "Note")) })
        #expect(Self.scan(bulk).map(\.key[0].description) == expected.map(\.description))

        // Numbers compare by value across representations.
        let numbers = IndexBound(values: [.double(1)], isInclusive: false)
        let belowThree = IndexBound(values: [.double(3)], isInclusive: false)
        #expect(Self.scan(tree, numbers, belowThree).map(\.key[0].description) == ["1.5", "2", "2.5"])
        #expect(tree.count(from: numbers, to: belowThree) == 3)
    }

    @Test("Prefix bounds select whole groups of a compound key")
    func prefixBounds() {
        var tree = IndexTree(keyCount: 2, chunkCapacity: 4)
        for flag in [false, true] {
            for n in 1...5 { tree.insert(key: [.bool(flag), .int(Int64(n))], id: .make(entityName: "Note")) }
        }
        func keys(_ lower: IndexBound?, _ upper: IndexBound?, reverse: Bool = false) -> [String] {
            Self.scan(tree, lower, upper, reverse: reverse).map { "\($0.key[0])\($0.key[1])" }
        }
        let isTrue = IndexBound(values: [.bool(true)], isInclusive: true)
        let afterTrue = IndexBound(values: [.bool(true)], isInclusive: false)
        let afterFalse = IndexBound(values: [.bool(false)], isInclusive: false)
        #expect(keys(isTrue, isTrue) == ["true1", "true2", "true3", "true4", "true5"])
        #expect(keys(isTrue, nil, reverse: true) == ["true5", "true4", "true3", "true2", "true1"])
        #expect(keys(afterTrue, nil).isEmpty)
        #expect(keys(afterFalse, nil) == keys(isTrue, nil))
        #expect(keys(nil, IndexBound(values: [.bool(true)], isInclusive: false)).count == 5)
        #expect(keys(IndexBound(values: [.bool(true), .int(2)], isInclusive: false),
                     IndexBound(values: [.bool(true), .int(4)], isInclusive: true)) == ["true3", "true4"])
        #expect(tree.count(from: isTrue, to: isTrue) == 5)
        #expect(tree.count(from: afterTrue, to: nil) == 0)
        #expect(tree.count(from: isTrue, to: afterFalse) == 0)  // lower above upper
        // An empty bound compares equal to every key.
        let everything = IndexBound(values: [], isInclusive: true)
        #expect(tree.count(from: everything, to: everything) == 10)
        #expect(tree.count(from: IndexBound(values: [], isInclusive: false), to: nil) == 0)
    }

    @Test("An underfull chunk borrows from a full neighbour on either side")
    func rebalancing() {
        var tree = IndexTree(keyCount: 1, chunkCapacity: 8)
        var rows: [Double: PersistentIdentifier] = [:]
        func insert(_ x: Double) {
            let id = PersistentIdentifier.make(entityName: "Note")
            rows[x] = id
            tree.insert(key: [.double(x)], id: id)
        }
        func remove(_ x: Double) {
            let removed = tree.remove(key: [.double(x)], id: rows.removeValue(forKey: x)!)
            #expect(removed)
        }
        func chunk(_ c: Int) -> [Double] {
            let start = tree.chunkSizes.prefix(c).reduce(0, +)
            return Self.scan(tree).dropFirst(start).prefix(tree.chunkSizes[c]).map {
                guard case .double(let x) = $0.key[0] else { fatalError() }
                return x
            }
        }
        /// Grows chunk `c` with keys between its first two, or shrinks it from its front.
        func resize(_ c: Int, to size: Int) {
            while tree.chunkSizes[c] < size { let keys = chunk(c); insert((keys[0] + keys[1]) / 2) }
            while tree.chunkSizes[c] > size { remove(chunk(c)[0]) }
        }
        func check() {
            Self.checkLayout(tree)
            #expect(tree.chunkSizes.allSatisfy { $0 >= 2 })
            let all = Self.scan(tree)
            #expect(all.map { $0.key[0].doubleValue! } == rows.keys.sorted())
            #expect(all.allSatisfy { rows[$0.key[0].doubleValue!] == $0.id })
        }
        for i in 0..<24 { insert(Double(i)) }
        #expect(tree.chunkSizes.count >= 3)

        // A middle chunk down to one entry, its left neighbour full: entries move right.
        resize(0, to: 8); resize(2, to: 8); resize(1, to: 2)
        let before = tree.chunkSizes.count
        remove(chunk(1)[0])
        #expect(tree.chunkSizes.count == before)
        check()

        // The first chunk down to one entry, its right neighbour full: entries move left.
        resize(1, to: 8); resize(0, to: 2)
        remove(chunk(0)[0])
        #expect(tree.chunkSizes.count == before)
        check()

        // Neighbours with room: the chunk merges away.
        resize(1, to: 3); resize(0, to: 2)
        remove(chunk(0)[0])
        #expect(tree.chunkSizes.count == before - 1)
        check()
    }

    @Test("A copy is an independent snapshot")
    func copyOnWrite() {
        var tree = IndexTree(keyCount: 1, chunkCapacity: 8)
        let ids = (0..<100).map { _ in PersistentIdentifier.make(entityName: "Note") }
        for (i, id) in ids.enumerated() { tree.insert(key: [.int(Int64(i))], id: id) }
        let snapshot = tree
        tree.remove(key: [.int(0)], id: ids[0])
        tree.insert(key: [.int(1000)], id: ids[0])
        #expect(snapshot.count == 100 && tree.count == 100)
        #expect(Self.scan(snapshot, limit: 1).first?.key == [.int(0)])
        #expect(Self.scan(snapshot, reverse: true, limit: 1).first?.key == [.int(99)])
        #expect(Self.scan(tree, reverse: true, limit: 1).first?.key == [.int(1000)])
    }
}
