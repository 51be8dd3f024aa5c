import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 35, item 2: `SortDescriptor(\.folder?.name)` with a `fetchLimit` runs in the store group by group (the folders
/// sorted by name, then each group's notes through the inverse `notes`), and answers exactly as the same fetch
/// without a limit, cut to the window: the same notes in the same order, ties included, notes in no folder first
/// ascending and last descending, with and without a predicate, on both stores.
@Suite("Queries: a sort through a to-one relationship with a limit answers as the whole sort does")
struct SortThroughRelationshipTests {
    static func descriptors(rng: inout SeededGenerator) -> [(String, FetchDescriptor<QueryNote>)] {
        let predicates: [(String, Predicate<QueryNote>?)] = [
            ("every note", nil),
            ("pinned", #Predicate { $0.isPinned }),
            ("in a folder named Work", #Predicate { $0.folder?.name == "Work" }),
            ("rated", #Predicate { $0.rating > 1 }),
        ]
        let rests: [(String, [SortDescriptor<QueryNote>])] = [
            ("", []),
            (", newest", [SortDescriptor(\.createdAt, order: .reverse)]),
            (", rating", [SortDescriptor(\.rating)]),
            (", title then rating", [SortDescriptor(\.title), SortDescriptor(\.rating, order: .reverse)]),
        ]
        var descriptors: [(String, FetchDescriptor<QueryNote>)] = []
        for (filterName, predicate) in predicates {
            for (restName, rest) in rests {
                for order in [SortOrder.forward, .reverse] {
                    var descriptor = FetchDescriptor(predicate: predicate,
                                                     sortBy: [SortDescriptor(\.folder?.name, order: order)] + rest)
                    descriptor.fetchLimit = Int.random(in: 1...25, using: &rng)
                    descriptor.fetchOffset = Bool.random(using: &rng) ? Int.random(in: 0...30, using: &rng) : nil
                    descriptors.append(("\(filterName), folder name \(order == .forward ? "ascending" : "descending")"
                                        + restName, descriptor))
                }
            }
        }
        return descriptors
    }

    @Test("A limited sort through a folder's name equals the whole sort cut to its window, and runs group by group",
          arguments: StoreKind.allCases)
    func limitedSortMatchesTheWholeSort(kind: StoreKind) throws {
        for seed in QueryFormTests.seeds {
            var rng = SeededGenerator(seed: seed)
            let graph = try QueryFormTests.makeGraph(kind, rng: &rng)
            for round in 0..<2 {
                let context = ModelContext(graph.context.container)
                for (name, descriptor) in Self.descriptors(rng: &rng) {
                    var whole = descriptor
                    whole.fetchLimit = nil
                    whole.fetchOffset = nil
                    let all = try context.fetch(whole).map(\.persistentModelID)
                    let expected = Array(all.dropFirst(descriptor.fetchOffset ?? 0).prefix(descriptor.fetchLimit!))
                    #expect(try context.fetch(descriptor).map(\.persistentModelID) == expected,
                            "seed \(seed), round \(round), \(kind): \(name)")
                    let plan = try context.explain(descriptor)
                    #expect(plan.relationshipPlan?.hasPrefix("the sort by QueryNote.folder.name") == true,
                            "seed \(seed), \(kind): \(name): \(plan)")
                    #expect(!plan.evaluatedInMemory)
                }
                // Saved edits: notes moved between folders and out of them, folders renamed to share a name.
                for note in graph.notes.prefix(20) {
                    note.folder = Bool.random(using: &rng) ? nil : graph.folders.randomElement(using: &rng)
                    note.createdAt = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<5, using: &rng)))
                }
                graph.folders[4].name = graph.folders[1].name
                try graph.context.save()
            }
        }
    }
}
