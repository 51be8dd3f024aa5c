import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Issue 17, item 2 (compact storage per row): the rows a file store reads from disk, by replaying its log or
/// through its checkpoint, hold their attribute values packed in one allocation, and read back the values saved.
@Suite("A file store's rows read from disk are packed")
struct PackedRowsTests {
    /// Saves `count` volumes (every kind of value W1's notes hold) and returns their rows as saved.
    private func build(_ url: URL, count: Int) throws -> [ModelSnapshot] {
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        let context = ModelContext(container)
        let shelf = ReplayShelf(code: "s")
        context.insert(shelf)
        for index in 0..<count {
            // Long text, text the JSON escapes (quotes, control characters, backslashes), and plain short text.
            let title = index % 3 == 0 ? String(repeating: "long title ", count: 30)
                : index % 3 == 1 ? "q\"\n\t\\ caf\u{E9} 🗒️ \u{1}\(index)" : "v\(index)"
            let volume = ReplayVolume(title: title,
                                      rank: index, weight: Double(index) / 4)
            context.insert(volume)
            volume.shelf = index % 2 == 0 ? shelf : nil
        }
        try context.save()
        let saved = try rows(container)
        try StoreFiles.close(container)
        return saved
    }

    private func rows(_ container: ModelContainer) throws -> [ModelSnapshot] {
        try container.store.fetch(StoreFetchRequest(entity: "ReplayVolume")).rows
    }

    @Test("A store opened by replaying its log holds its rows packed, with the values saved")
    func replayedRowsArePacked() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let saved = try build(url, count: 120)
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        defer { try? StoreFiles.close(container) }
        let replayed = try rows(container)
        #expect(replayed == saved)
        #expect(replayed.allSatisfy { $0.attributes.isPacked }, "\(replayed.filter { !$0.attributes.isPacked }.count) not packed")
        #expect(replayed.allSatisfy { $0.relationships.isPacked(with: $0.attributes) },
                "\(replayed.filter { !$0.relationships.isPacked(with: $0.attributes) }.count) without their targets packed")
        // The objects a context makes of them read the same values.
        let titles = try ModelContext(container).fetch(FetchDescriptor<ReplayVolume>(sortBy: [SortDescriptor(\.rank)]))
            .map(\.title)
        #expect(titles == saved.map { if case .string(let title) = $0.attributes[0] { title } else { "?" } })
    }

    @Test("Rows read through a checkpoint are packed, with the values saved")
    func checkpointRowsArePacked() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let saved = try build(url, count: 120)
        do {
            let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
            try StoreFiles.store(container).compact()
            try StoreFiles.close(container)
        }
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        defer { try? StoreFiles.close(container) }
        let read = try rows(container)
        #expect(read.map { ModelSnapshot(id: $0.id, attributes: $0.attributes, relationships: $0.relationships) }
            == saved.map { ModelSnapshot(id: $0.id, attributes: $0.attributes, relationships: $0.relationships) })
        #expect(read.allSatisfy { $0.attributes.isPacked }, "\(read.filter { !$0.attributes.isPacked }.count) not packed")
        #expect(read.allSatisfy { $0.relationships.isPacked(with: $0.attributes) },
                "\(read.filter { !$0.relationships.isPacked(with: $0.attributes) }.count) without their targets packed")
    }

    @Test("Relationship targets are packed with the values when each to-many has at most 8, and again when an attribute changes")
    func targetsPackedWithValues() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let saved = try build(url, count: 40)
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        defer { try? StoreFiles.close(container) }
        // The shelf holds 20 volumes: past 8, its targets stay an array, and read back the same.
        let shelves = try container.store.fetch(StoreFetchRequest(entity: "ReplayShelf")).rows
        #expect(shelves.count == 1)
        #expect(shelves.first.map { !$0.relationships.isPacked && $0.relationships[0].count == 20 } == true)
        // Updates through a context (a relationship moved, an attribute written, both) keep rows packed together
        // and answer what was saved.
        let context = ModelContext(container)
        let volumes = try context.fetch(FetchDescriptor<ReplayVolume>(sortBy: [SortDescriptor(\.rank)]))
        let crate = ReplayCrate()
        context.insert(crate)
        volumes[0].crate = crate
        volumes[1].title = "retitled"
        volumes[2].shelf = nil
        volumes[2].rank = 1_000
        try context.save()
        let after = try rows(container)
        let byID = Dictionary(uniqueKeysWithValues: after.map { ($0.id, $0) })
        // Volume 0's targets alone changed: its values keep their allocation, its targets are an array. Volumes 1
        // and 2 had an attribute written: packed anew, targets and all.
        let first = try #require(byID[volumes[0].persistentModelID])
        #expect(first.attributes.isPacked && !first.relationships.isPacked)
        for volume in volumes[1...2] {
            let row = try #require(byID[volume.persistentModelID])
            #expect(row.relationships.isPacked(with: row.attributes), "\(volume.title)")
        }
        #expect(byID[volumes[0].persistentModelID]?.relationships[1] == .toOne(crate.persistentModelID))
        #expect(byID[volumes[1].persistentModelID]?.attributes[0] == .string("retitled"))
        #expect(byID[volumes[2].persistentModelID]?.relationships[0] == .toOne(nil))
        #expect(byID[volumes[2].persistentModelID]?.attributes[1] == .int(1_000))
        // Every other row is as saved.
        let untouched = Set(volumes.prefix(3).map(\.persistentModelID))
        #expect(after.filter { !untouched.contains($0.id) }.map(\.relationships)
            == saved.filter { !untouched.contains($0.id) }.map(\.relationships))
        // A fresh context reads the moved targets through the packed rows.
        let fresh = try ModelContext(container).fetch(FetchDescriptor<ReplayVolume>(sortBy: [SortDescriptor(\.rank)]))
        #expect(fresh.first?.crate?.persistentModelID == crate.persistentModelID)
        #expect(fresh.filter { $0.shelf != nil }.count == 19)
    }
}
