import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Issue 18, item 4: unique constraints across machines. Two devices that insert the same unique key end with one
/// object on every store, the one created first, with each field from whichever wrote it last, and every reference
/// to the other pointed at it (the local upsert rule, applied by the server at the push that brings the second).
@Suite("Unique keys across machines", .enabled(if: TemporaryPostgres.runsServerTests,
                                               Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorUniqueKeyTests {
    typealias Zone = MirrorZone

    /// A zone of the labelled FieldNotes schema (labels unique by name, boards and pins).
    static func zone(_ kind: StoreKind) throws -> MirrorZone {
        try MirrorZone(kind, zone: "labels", models: ModelContainer.labelledFieldNotesModels)
    }

    /// The labels of a store with their stickers, as text, sorted.
    static func labels(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<LabelRecord>()).map { label in
            "\(label.persistentModelID.primaryKey) \(label.name) \(label.color) \(label.rank) ["
                + label.stickers.map(\.text).sorted().joined(separator: ",") + "]"
        }.sorted()
    }

    static func stickers(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<StickerRecord>()).map {
            "\($0.text) -> \($0.label?.name ?? "-")"
        }.sorted()
    }

    /// Inserts a label with one sticker and saves.
    @discardableResult
    static func insertLabel(_ container: ModelContainer, name: String, color: String, rank: Int = 0,
                            sticker: String) throws -> PersistentIdentifier {
        let context = ModelContext(container)
        let label = LabelRecord(name: name, color: color)
        label.rank = rank
        context.insert(label)
        label.stickers.append(StickerRecord(text: sticker))
        try context.save()
        return label.persistentModelID
    }

    @Test("Two devices inserting one unique key end with one object, the first created, on every store",
          arguments: StoreKind.allCases, [false, true])
    func collidingInsertsBecomeOneObject(kind: StoreKind, laterSentFirst: Bool) throws {
        let zone = try Self.zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let first = try Self.insertLabel(a, name: "work", color: "red", sticker: "from A")
        Thread.sleep(forTimeInterval: 0.01)
        // B's insert is the later one: its values win where it wrote them (all of them, here).
        try Self.insertLabel(b, name: "work", color: "blue", rank: 2, sticker: "from B")

        let order = laterSentFirst ? [mirrorB, mirrorA, mirrorB, mirrorA] : [mirrorA, mirrorB, mirrorA, mirrorB]
        for mirror in order { try mirror.sync() }

        let expected = ["\(first.primaryKey) work blue 2 [from A,from B]"]
        #expect(try Self.labels(a) == expected)
        #expect(try Self.labels(b) == expected)
        #expect(try Self.stickers(b) == ["from A -> work", "from B -> work"])
        let live = try zone.query("""
            SELECT id FROM notekit."e_LabelRecord" WHERE zone = 'labels' AND merged_into IS NULL
              AND (deleted_clock IS NULL OR created_clock > deleted_clock)
            """)
        #expect(live == [[first.primaryKey.uuidString.lowercased()]], "one live row a key on the server")
        // Nothing is pending, and syncing again changes nothing.
        #expect(try mirrorA.sync().importedChanges == 0)
        #expect(try mirrorB.sync().importedChanges == 0)
        #expect(try Self.labels(a) == expected)
    }

    @Test("A device that had not heard of the merge: its edits of the loser and references to it reach the survivor",
          arguments: StoreKind.allCases)
    func writesToTheLoserReachTheSurvivor(kind: StoreKind) throws {
        let zone = try Self.zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let (c, mirrorC) = try zone.device()
        let survivor = try Self.insertLabel(a, name: "home", color: "red", sticker: "from A")
        Thread.sleep(forTimeInterval: 0.01)
        let loser = try Self.insertLabel(b, name: "home", color: "blue", sticker: "from B")
        try mirrorB.sync()
        try mirrorC.sync()
        // C has B's label; A's push merges it into A's, and C, not knowing, edits it and files a sticker under it.
        try mirrorA.sync()
        let context = ModelContext(c)
        let label = try #require(try context.fetch(FetchDescriptor<LabelRecord>()).first)
        #expect(label.persistentModelID == loser)
        Thread.sleep(forTimeInterval: 0.01)
        label.color = "green"
        label.stickers.append(StickerRecord(text: "from C"))
        try context.save()

        try mirrorC.sync()
        try mirrorA.sync()
        try mirrorB.sync()
        let expected = ["\(survivor.primaryKey) home green 0 [from A,from B,from C]"]
        for store in [a, b, c] { #expect(try Self.labels(store) == expected) }
    }

    @Test("Keys that differ, or that one device gives up before the other takes them, merge nothing",
          arguments: StoreKind.allCases)
    func distinctKeysStayDistinct(kind: StoreKind) throws {
        let zone = try Self.zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let renamed = try Self.insertLabel(a, name: "draft", color: "red", sticker: "one")
        try mirrorA.sync()
        try mirrorB.sync()
        let context = ModelContext(a)
        let label = try #require(try context.fetch(FetchDescriptor<LabelRecord>()).first)
        label.name = "final"
        try context.save()
        try mirrorA.sync()
        try mirrorB.sync()
        // The key is free again: B takes it, and both labels live.
        let taken = try Self.insertLabel(b, name: "draft", color: "blue", sticker: "two")
        try mirrorB.sync()
        try mirrorA.sync()
        let expected = ["\(renamed.primaryKey) final red 0 [one]", "\(taken.primaryKey) draft blue 0 [two]"].sorted()
        #expect(try Self.labels(a) == expected)
        #expect(try Self.labels(b) == expected)
    }
}
