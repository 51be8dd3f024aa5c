import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Testing

// Issue 35 (W2's Q1 top 20 and Q7): a window of a relationship's rows in an index's order reads about the window's
// rows, walking the index by row number; a sort through a to-one relationship with a limit reads the targets and the
// first groups' rows. Both over a checkpoint and the changes saved since. The reference is the same fetch without a
// limit (which reads and sorts every candidate), cut to the window.

final class WindowFolder: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .nullify, inverse: \WindowNote.folder) var notes: [WindowNote] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class WindowNote: PersistentModel {
    @Attribute var title = ""
    @Attribute var rating = 0
    @Relationship var folder: WindowFolder?
    static var indexes: [[PartialKeyPath<WindowNote>]] { [[\.rating]] }
    required init() {}
    convenience init(title: String, rating: Int, folder: WindowFolder?) {
        self.init()
        self.title = title
        self.rating = rating
        self.folder = folder
    }
}

@Suite("Queries: a relationship's window and a sort through a relationship read what the window needs")
struct RelationshipWindowTests {
    static let models: [any PersistentModel.Type] = [WindowNote.self, WindowFolder.self]
    static let noteCount = 3000

    /// A store whose rows are all in its checkpoint: 12 folders (two named "F3"), 3,000 notes with ratings that tie,
    /// every 37th note in no folder.
    static func checkpointed() throws -> ModelContainer {
        let url = TemporaryStores.newURL("window")
        let writer = try StoreFiles.open(url, models) { $0.automaticCompaction = nil }
        let context = ModelContext(writer)
        let folders = (0..<12).map { WindowFolder(name: "F\($0 == 11 ? 3 : $0)") }
        for index in 0..<noteCount {
            context.insert(WindowNote(title: "note \(index)", rating: (index * 7919) % 500,
                                      folder: index % 37 == 0 ? nil : folders[index % 12]))
        }
        try context.save()
        try StoreFiles.store(writer).compact()
        try StoreFiles.close(writer)
        let container = try StoreFiles.open(url, models)
        #expect(StoreFiles.store(container).state.withLock { $0.rows.hasBase })
        return container
    }

    /// The titles `descriptor` fetches, and those of the same fetch without its offset and limit, cut to them.
    static func answers(_ descriptor: FetchDescriptor<WindowNote>, in container: ModelContainer) throws
        -> (window: [String], reference: [String]) {
        var whole = descriptor
        whole.fetchLimit = nil
        whole.fetchOffset = nil
        let all = try ModelContext(container).fetch(whole).map(\.title)
        let offset = descriptor.fetchOffset ?? 0
        let reference = Array(all.dropFirst(offset).prefix(descriptor.fetchLimit ?? all.count))
        return (try ModelContext(container).fetch(descriptor).map(\.title), reference)
    }

    /// Saved changes over the checkpoint: ratings changed, notes added, deleted and moved into F5.
    static func change(_ container: ModelContainer) throws {
        let context = ModelContext(container)
        let notes = try context.fetch(FetchDescriptor<WindowNote>(sortBy: [SortDescriptor(\.title)]))
        let f5 = try #require(try context.fetch(FetchDescriptor<WindowFolder>(
            predicate: #Predicate { $0.name == "F5" })).first)
        for note in notes where note.folder === f5 && note.title.hasSuffix("3") { note.rating = 499 }
        for note in notes where note.folder === f5 && note.rating > 480 && note.title.hasSuffix("1") {
            try context.delete(note)
        }
        for note in notes where note.folder?.name == "F6" && note.title.hasSuffix("7") { note.folder = f5 }
        for index in 0..<5 { context.insert(WindowNote(title: "new \(index)", rating: 495 + index, folder: f5)) }
        try context.save()
    }

    @Test("A window of a folder's notes in an index's order reads about the window's rows, before and after changes")
    func folderWindowWalksTheIndex() throws {
        let container = try Self.checkpointed()
        var newest = FetchDescriptor<WindowNote>(predicate: #Predicate { $0.folder?.name == "F5" },
                                                 sortBy: [SortDescriptor(\.rating, order: .reverse)])
        newest.fetchLimit = 10
        newest.fetchOffset = 2
        var lowest = FetchDescriptor<WindowNote>(predicate: #Predicate { $0.folder?.name == "F3" },
                                                 sortBy: [SortDescriptor(\.rating)])
        lowest.fetchLimit = 7
        for round in ["checkpoint", "changes since"] {
            for (name, descriptor) in [("newest in F5", newest), ("lowest in F3", lowest)] {
                let (window, reference) = try Self.answers(descriptor, in: container)
                #expect(window == reference, "\(round), \(name)")
                #expect(window.count == descriptor.fetchLimit)
                let plan = try ModelContext(container).explain(descriptor)
                #expect(plan.relationshipPlan?.contains("in the order of index rating") == true, "\(round): \(plan)")
                // The folders named, then about the window's rows: not the folder's 250 notes (500 for F3).
                #expect(plan.rowsExamined < 40, "\(round), \(name): \(plan)")
            }
            // The count of F3's notes (two folders) adds up the lengths of their stored inverse lists.
            let inF3 = FetchDescriptor<WindowNote>(predicate: #Predicate { $0.folder?.name == "F3" })
            let context = ModelContext(container)
            #expect(try context.fetchCount(inF3)
                    == context.fetch(FetchDescriptor<WindowNote>()).filter { $0.folder?.name == "F3" }.count)
            var counting = try context.container.store.fetch(StoreFetchRequest(
                entity: "WindowNote", filter: .compare(.related(0, .attribute(0), required: false), .equal,
                                                       .value(.string("F3"))), resultType: .count))
            #expect(counting.plan.relationshipPlan?.contains("the lengths of the inverse WindowFolder.notes") == true,
                    "\(round): \(counting.plan)")
            #expect(counting.count == (try context.fetchCount(inF3)))
            counting = try context.container.store.fetch(StoreFetchRequest(
                entity: "WindowNote", filter: .compare(.related(0, .attribute(0), required: false), .equal,
                                                       .value(.string("none"))), resultType: .count))
            #expect(counting.count == 0)
            if round == "checkpoint" { try Self.change(container) }
        }
    }

    @Test("A count and the extremes over an index range count the checkpoint's entries and read the extremes' rows")
    func indexRangeAggregateReadsTheExtremes() throws {
        let container = try Self.checkpointed()
        let rating = try #require(container.schema.entity(named: "WindowNote")?.attributeIndex(named: "rating"))
        let request = StoreAggregateRequest(
            entity: "WindowNote",
            filter: .and([.compare(.attribute(rating), .greaterOrEqual, .value(.int(100))),
                          .compare(.attribute(rating), .less, .value(.int(300)))]),
            operations: [.init(.count), .init(.minimum, .attribute(rating)), .init(.maximum, .attribute(rating))])
        for round in ["checkpoint", "changes since"] {
            let ratings = try ModelContext(container).fetch(FetchDescriptor<WindowNote>()).map(\.rating)
                .filter { $0 >= 100 && $0 < 300 }
            let result = try container.store.aggregate(request)
            #expect(result.groups.map(\.values) == [[.int(Int64(ratings.count)), .int(Int64(ratings.min()!)),
                                                      .int(Int64(ratings.max()!))]], "\(round)")
            // The range holds about 1,200 notes: their rows are not read, the bounds' binary searches and the
            // extremes' are (and the rows changed since, from memory).
            #expect(result.plan.rowsExamined < 200, "\(round): \(result.plan)")
            if round == "checkpoint" { try Self.change(container) }
        }
    }

    @Test("A sort through a to-one relationship with a limit reads the targets and the first groups' rows")
    func sortThroughRelationshipReadsTheFirstGroups() throws {
        let container = try Self.checkpointed()
        var lastFolders = FetchDescriptor<WindowNote>(sortBy: [SortDescriptor(\.folder?.name, order: .reverse),
                                                               SortDescriptor(\.rating)])
        lastFolders.fetchLimit = 15
        lastFolders.fetchOffset = 240
        var byFolderOnly = FetchDescriptor<WindowNote>(predicate: #Predicate { $0.rating < 100 },
                                                       sortBy: [SortDescriptor(\.folder?.name, order: .reverse)])
        byFolderOnly.fetchLimit = 30
        for round in ["checkpoint", "changes since"] {
            for (name, descriptor) in [("last folders", lastFolders), ("by folder only", byFolderOnly)] {
                let (window, reference) = try Self.answers(descriptor, in: container)
                #expect(window == reference, "\(round), \(name)")
                #expect(window.count == descriptor.fetchLimit)
                let plan = try ModelContext(container).explain(descriptor)
                #expect(plan.relationshipPlan?.hasPrefix("the sort by WindowNote.folder.name") == true,
                        "\(round), \(name): \(plan)")
                #expect(plan.rowsExamined < Self.noteCount / 4, "\(round), \(name): \(plan)")
            }
            if round == "checkpoint" { try Self.change(container) }
        }
        // Ascending, the notes in no folder come first: found by a scan, and in the same order as without a limit.
        var firstFolders = FetchDescriptor<WindowNote>(sortBy: [SortDescriptor(\.folder?.name),
                                                                SortDescriptor(\.rating, order: .reverse)])
        firstFolders.fetchLimit = 100
        firstFolders.fetchOffset = 50
        let (window, reference) = try Self.answers(firstFolders, in: container)
        #expect(window == reference)
        #expect(window.contains { $0.hasPrefix("note 0") || $0 == "note 37" } || window.count == 100)
    }
}
