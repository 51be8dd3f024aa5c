#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// How an ``IndexTree`` holds its entries' keys: in the digest alone when it determines them exactly, in an array
/// otherwise, and in either case handing back exactly the values it was given.
@Suite("Index tree: keys without an array")
struct IndexKeyStorageTests {
    static let date = Date(timeIntervalSinceReferenceDate: 765_432_109.125)

    /// Keys the digest determines exactly: nulls, booleans, numbers below 2^53 of each case, dates.
    static let exactKeys: [[StoredValue]] = [
        [.bool(true), .date(date)], [.bool(false), .date(Date(timeIntervalSinceReferenceDate: -1e9))],
        [.null, .date(date)], [.null, .null], [.bool(true), .int(5)], [.bool(true), .double(5)],
        [.bool(true), .uint(5)], [.null, .int(-(1 << 52))], [.null, .double(0.5)], [.null, .double(-1e-300)],
        [.null, .double(0)], [.bool(false), .uint(0)], [.date(date), .bool(true)], [.int(0), .null],
        [.date(Date(timeIntervalSinceReferenceDate: .infinity)), .null],
    ]

    /// Keys it does not: strings, UUIDs, data, numbers from 2^53 on, NaN, -0.0, two numbers or dates. (Decimals, which
    /// NaN does not order against, are in IndexTreeTests' numeric pool.)
    static let inexactKeys: [[StoredValue]] = [
        [.bool(true), .string("a")], [.string(""), .null], [.uuid(UUID()), .null], [.null, .data(Data([1]))],
        [.null, .int(1 << 53)], [.null, .uint(.max)], [.null, .double(.nan)], [.null, .double(.infinity)],
        [.null, .double(-0.0)], [.null, .date(Date(timeIntervalSinceReferenceDate: -0.0))],
        [.int(1), .double(2)], [.date(date), .date(date)], [.array([.int(1)]), .null],
    ]

    static func ids(_ n: Int) -> [PersistentIdentifier] { (0..<n).map { _ in .make(entityName: "Note") } }

    /// Every entry's key, by identifier, as the tree hands it out.
    static func keys(_ tree: IndexTree) -> [PersistentIdentifier: [StoredValue]] {
        var keys: [PersistentIdentifier: [StoredValue]] = [:]
        tree.scan(from: nil, to: nil) { keys[$0.id] = $0.key; return true }
        return keys
    }

    @Test("Keys the digest determines hold no array, inserted or bulk-loaded, and read back exactly as stored")
    func exactKeysHoldNoArray() {
        let ids = Self.ids(Self.exactKeys.count)
        var inserted = IndexTree(keyCount: 2, chunkCapacity: 4)
        for (key, id) in zip(Self.exactKeys, ids) { inserted.insert(key: key, id: id) }
        var loaded = IndexTree(keyCount: 2, chunkCapacity: 4)
        loaded.bulkLoad(zip(Self.exactKeys, ids).map { IndexEntry(key: $0, id: $1) })
        var fromRows = IndexTree(keyCount: 2, chunkCapacity: 4)
        // Rows as a table holds them, a removed one's place nil.
        fromRows.bulkLoad([nil] + zip(Self.exactKeys, ids).map { key, id -> ModelSnapshot? in
            ModelSnapshot(id: id, attributes: [.string("x")] + key.reversed(), relationships: [], transactionNumber: 1)
        }, slots: [2, 1])
        // Reloading a tree's own entries, which hold no array, keeps them so.
        var reloaded = IndexTree(keyCount: 2)
        reloaded.bulkLoad(inserted.entries)
        let expected = Dictionary(uniqueKeysWithValues: zip(ids, Self.exactKeys))
        for (name, tree) in [("insert", inserted), ("bulkLoad", loaded), ("rows", fromRows), ("reload", reloaded)] {
            #expect(tree.count == Self.exactKeys.count, "\(name)")
            #expect(tree.outOfLineKeys == 0, "\(name)")
            // `==` is identity: .int(5) is not .double(5), 0.0 keeps its sign.
            #expect(Self.keys(tree) == expected, "\(name)")
        }
    }

    @Test("Keys the digest cannot determine keep their array and read back exactly as stored")
    func inexactKeysKeepTheirArray() {
        let ids = Self.ids(Self.exactKeys.count + Self.inexactKeys.count)
        let all = Self.exactKeys + Self.inexactKeys
        var tree = IndexTree(keyCount: 2, chunkCapacity: 4)
        for (key, id) in zip(all, ids) { tree.insert(key: key, id: id) }
        #expect(tree.outOfLineKeys == Self.inexactKeys.count)
        var loaded = IndexTree(keyCount: 2)
        loaded.bulkLoad(tree.entries)
        #expect(loaded.outOfLineKeys == Self.inexactKeys.count)
        let expected = Dictionary(uniqueKeysWithValues: zip(ids, all))
        #expect(Self.keys(tree) == expected)
        #expect(Self.keys(loaded) == expected)
        // Removing by a key equal in the order (5 for 5.0) finds the entry however it holds its key.
        let removed = tree.remove(key: [.bool(true), .double(5)], id: ids[4])
        #expect(removed)
        #expect(tree.count == all.count - 1)
    }

    @Test("Entries compare the same however they hold their key")
    func orderIgnoresTheRepresentation() {
        let all = Self.exactKeys + Self.inexactKeys
        let ids = Self.ids(all.count)
        var tree = IndexTree(keyCount: 2)
        for (key, id) in zip(all, ids) { tree.insert(key: key, id: id) }
        let held = tree.entries
        #expect(held.contains { $0.values == nil }, "the tree holds some keys in the digest alone")
        // The same entries made from their keys hold arrays and no digest.
        let made = held.map { IndexEntry(key: $0.key, id: $0.id) }
        for (a, x) in zip(held, made) {
            for (b, y) in zip(held, made) {
                let reference = IndexEntry.compare(x, y)
                #expect(IndexEntry.compare(a, b) == reference, "\(x.key) vs \(y.key)")
                #expect(IndexEntry.compare(a, y) == reference, "\(x.key) vs \(y.key)")
                #expect(IndexEntry.compare(x, b) == reference, "\(x.key) vs \(y.key)")
            }
            #expect(a == x && a.hashValue == x.hashValue)
        }
        // Range look-ups compare a bound with keys held either way.
        let bound = IndexBound(values: [.bool(true)], isInclusive: true)
        var inRange: [[StoredValue]] = []
        tree.scan(from: bound, to: bound) { inRange.append($0.key); return true }
        #expect(inRange.count == 5)
        #expect(inRange.allSatisfy { $0.first == .bool(true) })
        #expect(tree.count(from: IndexBound(values: [.null, .double(0)], isInclusive: true),
                           to: IndexBound(values: [.null, .int(1)], isInclusive: false)) == 3)
    }
}
