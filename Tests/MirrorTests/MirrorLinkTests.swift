import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Issue 18, item 4: to-many relationships merged as additions and removals, for the ones a to-one inverse cannot
/// carry: many-to-many relationships and to-many ones without an inverse, kept in link tables.
@Suite("Many-to-many relationships through the server", .enabled(if: TemporaryPostgres.runsServerTests,
                                                                 Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorLinkTests {

    /// Each board with its pins, and each pin with its boards, as text, sorted.
    static func boards(_ container: ModelContainer) throws -> [String] {
        let context = ModelContext(container)
        var lines = try context.fetch(FetchDescriptor<BoardRecord>()).map { board in
            "board \(board.name): " + board.pins.map(\.text).sorted().joined(separator: ",")
                + " featuring " + board.featured.map(\.name).sorted().joined(separator: ",")
        }
        lines += try context.fetch(FetchDescriptor<PinRecord>()).map { pin in
            "pin \(pin.text): " + pin.boards.map(\.name).sorted().joined(separator: ",")
        }
        return lines.sorted()
    }

    static func board(_ context: ModelContext, _ name: String) throws -> BoardRecord {
        try #require(try context.fetch(FetchDescriptor<BoardRecord>()).first { $0.name == name })
    }

    static func pin(_ context: ModelContext, _ text: String) throws -> PinRecord {
        try #require(try context.fetch(FetchDescriptor<PinRecord>()).first { $0.text == text })
    }

    @Test("Links reach other stores in both directions; concurrent additions and removals of different links all hold",
          arguments: StoreKind.allCases)
    func additionsAndRemovalsMerge(kind: StoreKind) throws {
        let zone = try MirrorUniqueKeyTests.zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let context = ModelContext(a)
        let home = BoardRecord(name: "home"), work = BoardRecord(name: "work")
        let one = PinRecord(text: "one"), two = PinRecord(text: "two"), three = PinRecord(text: "three")
        for model in [home, work] as [any PersistentModel] { context.insert(model) }
        for pin in [one, two, three] { context.insert(pin) }
        home.pins = [one, two]
        three.boards = [work]
        try context.save()
        try mirrorA.sync()
        try mirrorB.sync()
        #expect(try Self.boards(b) == Self.boards(a))
        #expect(try Self.boards(b).contains("pin three: work"))

        // Offline: A takes pin one off home and puts two on work; B puts three on home and takes it off work.
        let contextA = ModelContext(a), contextB = ModelContext(b)
        try Self.board(contextA, "home").pins.removeAll { $0.text == "one" }
        try Self.board(contextA, "work").pins.append(try Self.pin(contextA, "two"))
        try contextA.save()
        try Self.pin(contextB, "three").boards = [try Self.board(contextB, "home")]
        try contextB.save()
        try mirrorA.sync()
        try mirrorB.sync()
        try mirrorA.sync()
        let expected = ["board home: three,two featuring ", "board work: two featuring ",
                        "pin one: ", "pin three: home", "pin two: home,work"]
        #expect(try Self.boards(a) == expected)
        #expect(try Self.boards(b) == expected)
    }

    @Test("A link another device added unseen is not removed by this one's later edit of the same relationship")
    func concurrentAdditionWins() throws {
        let zone = try MirrorUniqueKeyTests.zone(.inMemory)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let context = ModelContext(a)
        let board = BoardRecord(name: "ideas")
        context.insert(board)
        board.pins = [PinRecord(text: "shared")]
        try context.save()
        try mirrorA.sync()
        try mirrorB.sync()

        let contextA = ModelContext(a), contextB = ModelContext(b)
        try Self.board(contextA, "ideas").pins.append(PinRecord(text: "from A"))
        try contextA.save()
        try mirrorA.sync()
        Thread.sleep(forTimeInterval: 0.01)
        // B, not having A's pin, edits the same list later: its push must not take A's pin away.
        try Self.board(contextB, "ideas").pins.append(PinRecord(text: "from B"))
        try contextB.save()
        try mirrorB.sync()
        try mirrorA.sync()
        let expected = ["board ideas: from A,from B,shared featuring ", "pin from A: ideas", "pin from B: ideas",
                        "pin shared: ideas"]
        #expect(try Self.boards(a) == expected)
        #expect(try Self.boards(b) == expected)
    }

    @Test("A relationship without an inverse travels too, and follows a unique-key merge of its targets",
          arguments: StoreKind.allCases)
    func linksWithoutAnInverse(kind: StoreKind) throws {
        let zone = try MirrorUniqueKeyTests.zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let contextA = ModelContext(a)
        let board = BoardRecord(name: "wall")
        contextA.insert(board)
        let first = LabelRecord(name: "urgent", color: "red")
        board.featured = [first]
        try contextA.save()
        Thread.sleep(forTimeInterval: 0.01)
        // B makes a label of the same name and features it on a board of its own.
        let contextB = ModelContext(b)
        let other = BoardRecord(name: "desk")
        contextB.insert(other)
        other.featured = [LabelRecord(name: "urgent", color: "blue")]
        try contextB.save()
        try mirrorA.sync()
        try mirrorB.sync()
        try mirrorA.sync()
        let expected = ["board desk:  featuring urgent", "board wall:  featuring urgent"]
        #expect(try Self.boards(a) == expected)
        #expect(try Self.boards(b) == expected)
        for store in [a, b] {
            let labels = try ModelContext(store).fetch(FetchDescriptor<LabelRecord>())
            #expect(labels.map(\.persistentModelID) == [first.persistentModelID])
            let boards = try ModelContext(store).fetch(FetchDescriptor<BoardRecord>())
            #expect(boards.allSatisfy { $0.featured.map(\.persistentModelID) == [first.persistentModelID] })
        }
    }
}
