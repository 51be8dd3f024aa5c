import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 35, item 4: aggregates computed by the store without making objects, typed as the attributes are, over a
/// fetch descriptor's matches, grouped by an attribute, a to-one relationship or a path through one, ordered and
/// limited. Each answer is checked against the same aggregate computed in Swift on the objects.
@Suite("Aggregates: counts, sums, extremes and means, grouped, from the store")
struct AggregateTests {
    static func graph(_ kind: StoreKind, seed: UInt64 = 0x4_0001) throws -> QueryFormTests.Graph {
        var rng = SeededGenerator(seed: seed)
        return try QueryFormTests.makeGraph(kind, rng: &rng)
    }

    @Test("Item 4: ungrouped aggregates over a predicate's matches equal Swift's over the objects",
          arguments: StoreKind.allCases)
    func ungrouped(kind: StoreKind) throws {
        let graph = try Self.graph(kind)
        let context = graph.context
        let predicates: [Predicate<QueryNote>] = [
            #Predicate { _ in true },
            #Predicate { $0.isPinned },
            #Predicate { $0.folder?.name == "Work" },
            #Predicate { $0.rating > 100 },
        ]
        for predicate in predicates {
            let descriptor = FetchDescriptor(predicate: predicate)
            let objects = try context.fetch(descriptor)
            let (count, oldest, newest, total, mean, scores, lowest) = try context.aggregate(
                descriptor, .count, .min(\.createdAt), .max(\.createdAt), .sum(\.rating), .average(\.rating),
                .sum(\.score), .min(\.score))
            #expect(count == objects.count)
            #expect(oldest == objects.map(\.createdAt).min())
            #expect(newest == objects.map(\.createdAt).max())
            #expect(total == objects.reduce(0) { $0 + $1.rating })
            let expectedMean = objects.isEmpty ? nil : Double(objects.reduce(0) { $0 + $1.rating }) / Double(objects.count)
            #expect(mean.map { abs($0 - expectedMean!) < 1e-9 } ?? (expectedMean == nil))
            #expect(scores == objects.compactMap(\.score).reduce(0, +))
            #expect(lowest == objects.compactMap(\.score).min())
            // Through a to-one relationship.
            let (ranks, top) = try context.aggregate(descriptor, .sum(\QueryNote.folder?.rank), .max(\QueryNote.folder?.name))
            #expect(ranks == objects.compactMap { $0.folder?.rank }.reduce(0, +))
            #expect(top == objects.compactMap { $0.folder?.name }.max())
        }
    }

    @Test("Item 4: grouped by an attribute, a to-one relationship and a path through one; ordered by key or aggregate; limited",
          arguments: StoreKind.allCases)
    func grouped(kind: StoreKind) throws {
        let graph = try Self.graph(kind)
        let context = graph.context
        let all = try context.fetch(FetchDescriptor<QueryNote>())

        let byTitle = try context.aggregate(FetchDescriptor<QueryNote>(), groupedBy: \.title, .count, .max(\.rating))
        let titles = Dictionary(grouping: all, by: \.title)
        #expect(byTitle.map(\.key) == titles.keys.sorted { StoredValue.compare(.string($0), .string($1)) < 0 })
        for group in byTitle {
            #expect(group.values.0 == titles[group.key]!.count)
            #expect(group.values.1 == titles[group.key]!.map(\.rating).max())
        }

        let byFolder = try context.aggregate(FetchDescriptor<QueryNote>(), groupedBy: \.folder, .count)
        let folders = Dictionary(grouping: all) { $0.folder.map(ObjectIdentifier.init) }
        #expect(byFolder.count == folders.count)
        for group in byFolder {
            #expect(group.values == folders[group.key.map(ObjectIdentifier.init)]!.count)
            #expect(group.key == nil || graph.folders.contains { $0 === group.key }, "the key is this context's folder")
        }
        // A count per folder over every note is read from the folders' references, not from the notes.
        let request = StoreAggregateRequest(entity: "QueryNote", groupBy: .toOne(0), operations: [.init(.count)])
        #expect(try context.container.store.aggregate(request).plan.relationshipPlan != nil)

        let byName = try context.aggregate(FetchDescriptor<QueryNote>(predicate: #Predicate { $0.rating >= 0 }),
                                           groupedBy: \.folder?.name, order: .aggregate(0, .reverse), limit: 3,
                                           .count, .average(\.rating))
        let rated = all.filter { $0.rating >= 0 }
        let names = Dictionary(grouping: rated) { $0.folder?.name }
        let expected = names.map { (key: $0.key, count: $0.value.count) }.sorted {
            $0.count != $1.count ? $0.count > $1.count
                : StoredValue.compare($0.key.map(StoredValue.string) ?? .null, $1.key.map(StoredValue.string) ?? .null) < 0
        }.prefix(3)
        #expect(byName.map(\.key) == expected.map(\.key))
        #expect(byName.map(\.values.0) == expected.map(\.count))
    }

    @Test("Item 4: unsaved inserts, changes and deletes count, unless includePendingChanges is false",
          arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let graph = try Self.graph(kind)
        let context = graph.context
        let saved = try context.aggregate(FetchDescriptor<QueryNote>(), .count, .sum(\.rating))
        let added = QueryNote()
        added.rating = 1_000
        context.insert(added)
        graph.notes[0].rating += 10
        try context.delete(graph.notes[1])
        let now = try context.aggregate(FetchDescriptor<QueryNote>(), .count, .sum(\.rating))
        #expect(now.0 == saved.0)
        #expect(now.1 == saved.1 + 1_000 + 10 - graph.notes[1].rating)
        var savedOnly = FetchDescriptor<QueryNote>()
        savedOnly.includePendingChanges = false
        let before = try context.aggregate(savedOnly, .count, .sum(\.rating))
        #expect(before == saved)
        // A folder renamed and not saved: a grouping through it sees the new name.
        let folder = try #require(graph.notes.first { $0.folder != nil }?.folder)
        folder.name = "Renamed now"
        let renamed = try context.aggregate(FetchDescriptor<QueryNote>(), groupedBy: \.folder?.name, .count)
        #expect(renamed.contains { $0.key == "Renamed now" })
    }

    @Test("Item 4: a predicate part the store cannot run narrows on objects first, and a strict descriptor refuses it; a key path that is not a persisted attribute is a typed error",
          arguments: StoreKind.allCases)
    func residualAndErrors(kind: StoreKind) throws {
        let graph = try Self.graph(kind)
        let context = graph.context
        var descriptor = FetchDescriptor<QueryNote>(predicate: #Predicate { $0.ratingTwice > 4 })
        let count = try context.aggregate(descriptor, .count)
        #expect(count == graph.notes.filter { $0.ratingTwice > 4 }.count)
        descriptor.objectEvaluation = .refused
        #expect(throws: FetchError.self) { try context.aggregate(descriptor, .count) }
        #expect {
            try context.aggregate(FetchDescriptor<QueryNote>(), .sum(\.ratingTwice))
        } throws: { error in
            guard case .invalidAggregate(let entity, let reason)? = error as? FetchError else { return false }
            return entity == "QueryNote" && reason.contains("not a persisted attribute")
        }
        #expect(throws: FetchError.self) {
            try context.aggregate(FetchDescriptor<QueryFolder>(), groupedBy: \.notes, .count)
        }
    }

    @Test("Item 4: a count and the extremes of an index's next attribute, under equalities on its first, come from the index entries alone",
          arguments: StoreKind.allCases)
    func fromTheIndex(kind: StoreKind) throws {
        let graph = try Self.graph(kind)
        let context = graph.context
        let pinned = FetchDescriptor<QueryNote>(predicate: #Predicate { $0.isPinned })
        let (count, oldest, newest) = try context.aggregate(pinned, .count, .min(\.createdAt), .max(\.createdAt))
        let objects = graph.notes.filter(\.isPinned)
        #expect(count == objects.count)
        #expect(oldest == objects.map(\.createdAt).min() && newest == objects.map(\.createdAt).max())
        // createdAt is attribute 5, isPinned 4; the (isPinned, createdAt) index answers.
        let request = StoreAggregateRequest(entity: "QueryNote",
                                            filter: .compare(.attribute(4), .equal, .value(.bool(true))),
                                            operations: [.init(.count), .init(.minimum, .attribute(5)),
                                                         .init(.maximum, .attribute(5))])
        let result = try context.container.store.aggregate(request)
        #expect(result.plan.index == ["isPinned", "createdAt"] && result.plan.rowsExamined == objects.count,
                "\(result.plan)")
        #expect(result.groups[0].values[0] == .int(Int64(objects.count)))
    }
}
