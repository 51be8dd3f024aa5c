import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 35, item 1: every predicate form `#Predicate` builds over a model runs in the store, on stored values,
/// never on model objects, and answers as Swift does.
///
/// Each form is checked on random folder trees, notes and attachments (a seeded store of each kind), three times: after
/// a save, after saved edits, and with unsaved edits pending (renamed folders, moved notes, attachments added and
/// removed), where a condition through a relationship must see the other objects as they are now. The reference is
/// `Predicate.evaluate` on the model objects; every fetch must report that nothing ran on objects.
///
/// Replay a failure with `NOTEKIT_QUERY_SEED=<seed> swift test --filter QueryFormTests`.
@Suite("Queries: every predicate form runs in the store and answers as Swift does")
struct QueryFormTests {
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["NOTEKIT_QUERY_SEED"], let seed = UInt64(text) { return [seed] }
        return [0x35_0001, 0x35_0002]
    }()

    /// A random store: a tree of folders, notes filed in them (some unfiled), attachments.
    struct Graph {
        let context: ModelContext
        var folders: [QueryFolder] = []
        var notes: [QueryNote] = []
        var attachments: [QueryAttachment] = []
    }

    static let words = ["Alpha", "alpha", "Beta", "Café", "cafe", "Straße", "Zürich", "note 12", "note 7", "", "Ω",
                        "m", "Work", "Root"]
    static let tags = ["red", "blue", "b", "big", "z"]

    static func makeGraph(_ kind: StoreKind, rng: inout SeededGenerator) throws -> Graph {
        let container = try kind.makeContainer([QueryFolder.self, QueryNote.self, QueryAttachment.self])
        var graph = Graph(context: ModelContext(container))
        let root = QueryFolder("Root", rank: 1)
        graph.context.insert(root)
        graph.folders.append(root)
        for index in 0..<9 {
            let parent = index < 3 ? root : graph.folders.randomElement(using: &rng)!
            let folder = QueryFolder(["Work", "Home", "Archive", "Work"][index % 4] + (index > 3 ? " \(index)" : ""),
                                     rank: Int.random(in: 0...4, using: &rng), parent: Bool.random(using: &rng) || index < 3 ? parent : nil)
            graph.context.insert(folder)
            graph.folders.append(folder)
        }
        for index in 0..<60 {
            let note = QueryNote()
            randomize(note, index: index, graph: &graph, rng: &rng)
            graph.context.insert(note)
            graph.notes.append(note)
        }
        try graph.context.save()
        return graph
    }

    static func randomize(_ note: QueryNote, index: Int, graph: inout Graph, rng: inout SeededGenerator) {
        note.title = words.randomElement(using: &rng)!
        note.body = Bool.random(using: &rng) ? "lorem ipsum \(index)" : ""
        note.rating = Int.random(in: -2...6, using: &rng)
        note.score = Bool.random(using: &rng) ? Double.random(in: 0...6, using: &rng).rounded() : nil
        note.isPinned = Int.random(in: 0..<4, using: &rng) == 0
        note.createdAt = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<50, using: &rng)))
        note.tags = (0..<Int.random(in: 0...3, using: &rng)).map { _ in tags.randomElement(using: &rng)! }
        note.points = (0..<Int.random(in: 0...4, using: &rng)).map { _ in Int.random(in: -1...7, using: &rng) }
        note.counts = Bool.random(using: &rng) ? ["a": Int.random(in: 0...3, using: &rng)] : [:]
        note.folder = Int.random(in: 0..<5, using: &rng) == 0 ? nil : graph.folders.randomElement(using: &rng)
        for attachment in note.attachments where Bool.random(using: &rng) { note.attachments.removeAll { $0 === attachment } }
        for _ in 0..<Int.random(in: 0...2, using: &rng) {
            let attachment = QueryAttachment("file \(Int.random(in: 0..<20, using: &rng))",
                                             size: Int.random(in: 0..<1000, using: &rng))
            note.attachments.append(attachment)
            graph.attachments.append(attachment)
        }
    }

    static func noteForms(_ graph: Graph) -> [(String, Predicate<QueryNote>)] {
        let someAttachment = graph.attachments.first!.persistentModelID
        let picked = Array(graph.notes.prefix(5).map(\.persistentModelID))
        let range = 1..<4
        let since = Date(timeIntervalSinceReferenceDate: 20)
        let same = ComparisonResult.orderedSame, ascending = ComparisonResult.orderedAscending
        return [
            ("to-one path", #Predicate { $0.folder?.name == "Work" }),
            ("two-hop path", #Predicate { $0.folder?.parent?.name == "Root" }),
            ("path is nil", #Predicate { $0.folder == nil }),
            ("two-hop nil", #Predicate { $0.folder?.parent == nil }),
            ("coalesce through a path", #Predicate { ($0.folder?.name ?? "-") == "-" }),
            ("flatMap", #Predicate { $0.folder.flatMap { $0.rank > 1 } ?? false }),
            ("forced unwrap after a check", #Predicate { $0.folder != nil && $0.folder!.rank >= 2 }),
            ("path compared", #Predicate { ($0.folder?.rank ?? 0) > 2 }),
            ("to-many contains(where:)", #Predicate { $0.attachments.contains { $0.size > 500 } }),
            ("to-many allSatisfy", #Predicate { $0.attachments.allSatisfy { $0.size < 900 } }),
            ("to-many isEmpty", #Predicate { $0.attachments.isEmpty }),
            ("to-many not isEmpty", #Predicate { !$0.attachments.isEmpty }),
            ("to-many count", #Predicate { $0.attachments.count >= 2 }),
            ("to-many filter count", #Predicate { $0.attachments.filter { $0.size > 300 }.count == 1 }),
            ("to-many contains an object", #Predicate { $0.attachments.contains { $0.persistentModelID == someAttachment } }),
            ("correlated", #Predicate { note in note.attachments.contains { attachment in attachment.size > note.rating * 100 } }),
            ("identifier in a list", #Predicate { picked.contains($0.persistentModelID) }),
            ("string isEmpty", #Predicate { $0.title.isEmpty }),
            ("string not isEmpty", #Predicate { !$0.body.isEmpty }),
            ("string count", #Predicate { $0.title.count > 4 }),
            ("starts(with:)", #Predicate { $0.title.starts(with: "Al") }),
            ("contains", #Predicate { $0.body.contains("ipsum") }),
            ("localizedStandardContains", #Predicate { $0.title.localizedStandardContains("CAFE") }),
            ("caseInsensitiveCompare", #Predicate { $0.title.caseInsensitiveCompare("alpha") == same }),
            ("localizedCompare", #Predicate { $0.title.localizedCompare("m") == ascending }),
            ("regex contains", #Predicate { $0.title.contains(/[0-9]+/) }),
            ("arithmetic", #Predicate { $0.rating * 2 + 1 > 7 }),
            ("remainder", #Predicate { $0.rating % 3 == 1 }),
            ("integer division", #Predicate { $0.rating / 2 == 2 }),
            ("negation", #Predicate { -$0.rating < -4 }),
            ("float division", #Predicate { ($0.score ?? 0) / 2 > 1.5 }),
            ("conditional", #Predicate { ($0.isPinned ? $0.rating : 0) > 2 }),
            ("closed range", #Predicate { (2...4).contains($0.rating) }),
            ("half-open range", #Predicate { (2..<4).contains($0.rating) }),
            ("captured range", #Predicate { range.contains($0.rating) }),
            ("subscript", #Predicate { $0.tags.count > 0 && $0.tags[0] == "red" }),
            ("dictionary subscript", #Predicate { $0.counts["a"] == 2 }),
            ("dictionary default", #Predicate { $0.counts["a", default: 0] > 1 }),
            ("max", #Predicate { ($0.points.max() ?? 0) > 5 }),
            ("min", #Predicate { $0.points.min() == 1 }),
            ("string max", #Predicate { $0.tags.max() == "red" }),
            ("elements contains(where:)", #Predicate { $0.tags.contains { $0.starts(with: "b") } }),
            ("elements allSatisfy", #Predicate { $0.points.allSatisfy { $0 > 0 } }),
            ("elements filter count", #Predicate { $0.points.filter { $0 > 3 }.count >= 2 }),
            ("array contains", #Predicate { $0.tags.contains("red") }),
            ("value in a list", #Predicate { ["Alpha", "Beta"].contains($0.title) }),
            ("date and pin", #Predicate { $0.isPinned && $0.createdAt > since }),
            ("path and to-many", #Predicate { $0.folder?.name == "Work" && $0.attachments.contains { $0.size > 100 } }),
            ("or across relationships", #Predicate { $0.folder?.rank == 4 || $0.attachments.count > 1 }),
        ]
    }

    static func folderForms(_ graph: Graph) -> [(String, Predicate<QueryFolder>)] {
        [
            ("notes contains pinned", #Predicate { $0.notes.contains { $0.isPinned } }),
            ("notes count", #Predicate { $0.notes.count > 6 }),
            ("children named", #Predicate { $0.children.contains { $0.name == "Work" } }),
            ("grandparent nil", #Predicate { $0.parent?.parent == nil }),
            ("nested quantifier", #Predicate { $0.notes.contains { $0.attachments.contains { $0.size > 800 } } }),
            ("count through two levels", #Predicate { $0.notes.filter { $0.attachments.isEmpty }.count >= 2 }),
            ("all notes rated", #Predicate { $0.notes.allSatisfy { $0.rating >= 0 } }),
            ("folder and its notes", #Predicate { folder in folder.notes.contains { $0.rating > folder.rank } }),
        ]
    }

    /// Checks `predicate` on `context` against `Predicate.evaluate` on the objects, in the order of `sort`.
    static func check<M: PersistentModel>(_ name: String, _ predicate: Predicate<M>, sort: [SortDescriptor<M>],
                                          in context: ModelContext, phase: String, seed: UInt64) throws {
        let label = "\(name), \(phase), seed \(seed)"
        var descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
        let plan = try context.explain(descriptor)
        #expect(!plan.evaluatedInMemory && plan.objectParts.isEmpty, "\(label): \(plan)")
        let found = try context.fetch(descriptor).map(\.persistentModelID)
        var reference = try context.fetch(FetchDescriptor<M>()).filter { try predicate.evaluate($0) }
        reference.sort { a, b in
            for comparator in sort {
                switch comparator.compare(a, b) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return sort.last?.order == .reverse ? b.persistentModelID < a.persistentModelID
                : a.persistentModelID < b.persistentModelID
        }
        #expect(found == reference.map(\.persistentModelID), "\(label)")
        #expect(try context.fetchCount(descriptor) == reference.count, "\(label): count")
        descriptor.fetchLimit = 3
        descriptor.fetchOffset = 1
        #expect(try context.fetch(descriptor).map(\.persistentModelID)
                    == Array(reference.dropFirst().prefix(3).map(\.persistentModelID)), "\(label): window")
    }

    static func checkAll(_ graph: Graph, phase: String, seed: UInt64) throws {
        for (name, predicate) in noteForms(graph) {
            try check(name, predicate, sort: [SortDescriptor(\.createdAt), SortDescriptor(\.title)], in: graph.context,
                      phase: phase, seed: seed)
        }
        // A sort through a to-one relationship, and the top k of it.
        try check("sort by a path", #Predicate<QueryNote> { $0.rating >= 0 },
                  sort: [SortDescriptor(\.folder?.name), SortDescriptor(\.createdAt, order: .reverse)],
                  in: graph.context, phase: phase, seed: seed)
        try check("sort by a two-hop path", #Predicate<QueryNote> { $0.rating >= -2 },
                  sort: [SortDescriptor(\.folder?.parent?.name, order: .reverse), SortDescriptor(\.title)],
                  in: graph.context, phase: phase, seed: seed)
        for (name, predicate) in folderForms(graph) {
            try check(name, predicate, sort: [SortDescriptor(\.name)], in: graph.context, phase: phase, seed: seed)
        }
    }

    @Test("Item 1: every form, on random stores, saved, edited, and with unsaved edits pending",
          arguments: StoreKind.allCases, seeds)
    func everyForm(kind: StoreKind, seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        var graph = try Self.makeGraph(kind, rng: &rng)
        try Self.checkAll(graph, phase: "saved", seed: seed)

        for (index, note) in graph.notes.enumerated() where Bool.random(using: &rng) {
            Self.randomize(note, index: index, graph: &graph, rng: &rng)
        }
        for folder in graph.folders.dropFirst() where Bool.random(using: &rng) {
            folder.name = Self.words.randomElement(using: &rng)!
            folder.rank = Int.random(in: 0...4, using: &rng)
        }
        try graph.context.save()
        try Self.checkAll(graph, phase: "after saved edits", seed: seed)

        // Unsaved: a folder renamed, notes moved, attachments changed, a note deleted, one inserted.
        graph.folders[1].name = "Work"
        graph.folders[2].name = "Renamed"
        for (index, note) in graph.notes.enumerated() where Int.random(in: 0..<4, using: &rng) == 0 {
            Self.randomize(note, index: index, graph: &graph, rng: &rng)
        }
        try graph.context.delete(graph.notes.removeLast())
        let inserted = QueryNote()
        Self.randomize(inserted, index: 99, graph: &graph, rng: &rng)
        graph.context.insert(inserted)
        graph.notes.append(inserted)
        try Self.checkAll(graph, phase: "with unsaved edits", seed: seed)
    }

    @Test("Item 7: a fetch that refuses object evaluation throws, naming the part, per descriptor or per container",
          arguments: StoreKind.allCases)
    func strictMode(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: 7)
        let graph = try Self.makeGraph(kind, rng: &rng)
        var descriptor = FetchDescriptor<QueryNote>(predicate: #Predicate { $0.isPinned && $0.ratingTwice > 4 })
        #expect(try graph.context.explain(descriptor).objectParts.count == 1)
        descriptor.objectEvaluation = .refused
        #expect {
            try graph.context.fetch(descriptor)
        } throws: { error in
            guard case let .notRunInStore(entity, parts) = error as? FetchError else { return false }
            return entity == "QueryNote" && parts.count == 1 && parts[0].contains("computed")
        }
        // Per container: every descriptor that does not say otherwise.
        let container = graph.context.container
        container.objectEvaluation = .refused
        defer { container.objectEvaluation = .allowed }
        let plain = FetchDescriptor<QueryNote>(predicate: #Predicate { $0.ratingTwice > 4 })
        #expect(throws: FetchError.self) { try graph.context.fetchCount(plain) }
        // A form the store runs is untouched by it.
        #expect(try graph.context.fetchCount(FetchDescriptor<QueryNote>(predicate: #Predicate { $0.folder?.name == "Work" })) >= 0)
        var allowed = plain
        allowed.objectEvaluation = .allowed
        #expect(try graph.context.fetchCount(allowed) == graph.notes.filter { $0.ratingTwice > 4 }.count)
    }
}
