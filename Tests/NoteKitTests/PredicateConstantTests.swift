import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 13, item 5: a sub-expression that reads only captured values is computed once, whatever its form, so
/// the rest of the predicate still runs in the store.
@Suite("Predicates: parts that read no object are computed once")
struct PredicateConstantTests {
    private func container(_ kind: StoreKind) throws -> ModelContainer {
        let container = try kind.makeContainer([NoteRecord.self])
        let context = ModelContext(container)
        let start = Date(timeIntervalSince1970: 1_000_000)
        for (offset, (title, body)) in [("Kingfisher", "by the river"), ("Heron", "grey, patient"),
                                        ("Crème brûlée", "dessert"), ("Budget", "kingfisher feeder")].enumerated() {
            context.insert(NoteRecord(title: title, body: body, createdAt: start + Double(offset)))
        }
        try context.save()
        return container
    }

    /// Seed 001's `RecordSearchResults` predicate.
    private func search(_ searchText: String) -> FetchDescriptor<NoteRecord> {
        let predicate = #Predicate<NoteRecord> { record in
            searchText.isEmpty
                || record.title.localizedStandardContains(searchText)
                || record.body.localizedStandardContains(searchText)
        }
        return FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\NoteRecord.createdAt, order: .reverse)])
    }

    @Test("Seed 001: the search runs in the store, with and without search text", arguments: StoreKind.allCases)
    func seed001Search(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        #expect(!(try context.explain(search("")).evaluatedInMemory))
        #expect(!(try context.explain(search("kingfisher")).evaluatedInMemory))
        #expect(try context.fetch(search("")).map(\.title) == ["Budget", "Crème brûlée", "Heron", "Kingfisher"])
        #expect(try context.fetch(search("KINGFISHER")).map(\.title) == ["Budget", "Kingfisher"])
        #expect(try context.fetch(search("creme")).map(\.title) == ["Crème brûlée"])
    }

    @Test("Captured-only parts of any form are folded: methods, key paths, comparisons, negations",
          arguments: StoreKind.allCases)
    func capturedOnlyForms(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        let words = ["heron", "egret"], limit = 3, flag: Bool? = true, name = "Heron"
        let cases: [(String, Predicate<NoteRecord>, [String])] = [
            ("key path on a capture", #Predicate { !name.isEmpty && $0.title == name }, ["Heron"]),
            ("method on a capture", #Predicate { words.contains("heron") && $0.title == name }, ["Heron"]),
            ("count of a capture", #Predicate { words.count < limit && $0.title == name }, ["Heron"]),
            ("optional capture", #Predicate { (flag ?? false) || $0.title == "none" }, ["Budget", "Crème brûlée",
                                                                                       "Heron", "Kingfisher"]),
            ("false part", #Predicate { name.isEmpty && $0.title.localizedStandardContains("h") }, []),
        ]
        for (label, predicate, expected) in cases {
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\NoteRecord.title)])
            #expect(!(try context.explain(descriptor).evaluatedInMemory), "\(label)")
            #expect(try context.fetch(descriptor).map(\.title) == expected, "\(label)")
        }
    }
}
