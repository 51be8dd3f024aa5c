import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

/// Issue 17, item 2: an open that replays the log takes the tables its replay built as the store's own. The
/// rows a replay rebuilt, record by record, must be exactly the rows the live store held: each entity's rows in
/// insertion order (deletions leave holes that are squeezed out later), every index and unique key rebuilt.
@Suite("Replay builds the store's tables")
struct ReplayTablesTests {
    /// Runs `operations` random changes on a store at `url` (saving every few), with a compaction halfway when
    /// `compactHalfway`, and returns what the live store holds before it closes.
    private func build(_ url: URL, seed: UInt64, operations: Int, compactHalfway: Bool) throws -> Observed {
        var random = SeededGenerator(seed: seed)
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        let context = ModelContext(container)
        var shelves: [ReplayShelf] = [], volumes: [ReplayVolume] = [], crates: [ReplayCrate] = []
        var code = 0
        for step in 0..<operations {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<8:
                code += 1
                let shelf = ReplayShelf(code: "s\(code)")
                context.insert(shelf)
                shelves.append(shelf)
            case 8..<12:
                let crate = ReplayCrate(label: "c\(step)")
                context.insert(crate)
                crates.append(crate)
            case 12..<50:
                let volume = ReplayVolume(title: "v\(step)", rank: Int.random(in: 0..<40, using: &random),
                                          weight: Double(Int.random(in: 0..<1000, using: &random)) / 8)
                context.insert(volume)
                volume.shelf = shelves.isEmpty || random.chance(0.2) ? nil : random.pick(shelves)
                volume.crate = crates.isEmpty || random.chance(0.5) ? nil : random.pick(crates)
                volumes.append(volume)
            case 50..<65 where !volumes.isEmpty:
                let volume = random.pick(volumes)
                volume.rank = Int.random(in: 0..<40, using: &random)
                if random.chance(0.5) { volume.title += "'" }
            case 65..<72 where !volumes.isEmpty:
                random.pick(volumes).shelf = shelves.isEmpty ? nil : random.pick(shelves)
            case 72..<92 where !volumes.isEmpty:
                // Many deletions of one entity: the replay's holes pass the squeeze threshold.
                let index = Int.random(in: 0..<volumes.count, using: &random)
                try context.delete(volumes.remove(at: index))
            case 92..<96 where !shelves.isEmpty:
                try context.delete(shelves.remove(at: Int.random(in: 0..<shelves.count, using: &random)))  // nullify
            case 96..<100 where !crates.isEmpty:
                // `.noAction` leaves the volumes' links for the store to drop: only volumes saved before it may
                // keep one, so save first.
                try context.save()
                try context.delete(crates.remove(at: Int.random(in: 0..<crates.count, using: &random)))
            default:
                break
            }
            if step == operations * 3 / 4 {
                // Most volumes go at once: the holes they leave pass the threshold at which a table squeezes them out.
                while volumes.count > 40 { try context.delete(volumes.removeLast()) }
            }
            if step % 5 == 4 { try context.save() }
            if compactHalfway, step == operations / 2 {
                try context.save()
                try StoreFiles.store(container).compact()
            }
        }
        try context.save()
        let observed = try Observed(container)
        try StoreFiles.close(container)
        return observed
    }

    @Test("A replayed store holds the live store's rows: each entity's in insertion order, with its indexes and unique keys",
          arguments: [false, true])
    func replayedEqualsLive(compactHalfway: Bool) throws {
        let seed = UInt64(20_261_202)
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let live = try build(url, seed: seed, operations: 1_500, compactHalfway: compactHalfway)
        #expect(live.volumes.count > 60, "seed \(seed): enough rows to matter")
        // Without the checkpoint the open replays the log (the compaction's snapshot, then the saves after it).
        try? FileManager.default.removeItem(at: url.appendingPathComponent("CHECKPOINT"))
        let container = try StoreFiles.open(url, ReplayShelf.models) { $0.automaticCompaction = nil }
        defer { try? StoreFiles.close(container) }
        var replayed = try Observed(container), expected = live
        if compactHalfway {
            // A compaction's snapshot records no row versions: a row it holds replays at the snapshot's
            // transaction (as it does through the checkpoint), while the live store kept the version that wrote it.
            replayed.versions = []
            expected.versions = []
        }
        #expect(replayed.difference(from: expected) == nil, "seed \(seed)")

        // The unique key was rebuilt: saving a shelf with a code a saved one holds updates that one (upsert).
        let context = ModelContext(container)
        let taken = try #require(live.shelfCodes.first)
        let twin = ReplayShelf(code: taken)
        context.insert(twin)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<ReplayShelf>()) == live.shelfCodes.count)
    }
}

/// What a store answers, compared before closing and after reopening.
private struct Observed: Equatable {
    var shelves: [ModelSnapshot], volumes: [ModelSnapshot], crates: [ModelSnapshot]
    /// Volume titles in index order (rank, then weight descending through the second index).
    var byRank: [String], byWeight: [String]
    var heavyCount: Int
    var shelfCodes: [String]
    /// The transaction number of every row, in the order of the rows above.
    var versions: [UInt64] = []

    /// The first thing that differs from `other`, described; nil when nothing does.
    func difference(from other: Observed) -> String? {
        func first<T: Equatable>(_ name: String, _ mine: [T], _ theirs: [T]) -> String? {
            guard mine != theirs else { return nil }
            guard let at = zip(mine, theirs).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset else {
                return "\(name): \(mine.count) here, \(theirs.count) there"
            }
            return "\(name)[\(at)]: \(mine[at]) here, \(theirs[at]) there"
        }
        return first("shelves", shelves, other.shelves) ?? first("volumes", volumes, other.volumes)
            ?? first("crates", crates, other.crates) ?? first("by rank", byRank, other.byRank)
            ?? first("by weight", byWeight, other.byWeight) ?? first("heavy", [heavyCount], [other.heavyCount])
            ?? first("shelf codes", shelfCodes, other.shelfCodes) ?? first("versions", versions, other.versions)
    }

    init(_ container: ModelContainer) throws {
        func rows(_ entity: String) throws -> [ModelSnapshot] {
            try container.store.fetch(StoreFetchRequest(entity: entity)).rows
        }
        func unversioned(_ rows: [ModelSnapshot]) -> [ModelSnapshot] {
            rows.map { ModelSnapshot(id: $0.id, attributes: $0.attributes, relationships: $0.relationships) }
        }
        let all = [try rows("ReplayShelf"), try rows("ReplayVolume"), try rows("ReplayCrate")]
        versions = all.flatMap { $0.map(\.transactionNumber) }
        (shelves, volumes, crates) = (unversioned(all[0]), unversioned(all[1]), unversioned(all[2]))
        let context = ModelContext(container)
        byRank = try context.fetch(FetchDescriptor<ReplayVolume>(sortBy: [SortDescriptor(\.rank),
                                                                          SortDescriptor(\.title)])).map(\.title)
        byWeight = try context.fetch(FetchDescriptor<ReplayVolume>(
            predicate: #Predicate { $0.weight >= 40 && $0.weight < 90 },
            sortBy: [SortDescriptor(\.weight, order: .reverse), SortDescriptor(\.title)])).map(\.title)
        heavyCount = try context.fetchCount(FetchDescriptor<ReplayVolume>(predicate: #Predicate { $0.weight >= 100 }))
        shelfCodes = try context.fetch(FetchDescriptor<ReplayShelf>(sortBy: [SortDescriptor(\.code)])).map(\.code)
    }
}

final class ReplayShelf: PersistentModel {
    @Attribute(.unique) var code = ""
    @Relationship(deleteRule: .nullify, inverse: \ReplayVolume.shelf) var volumes: [ReplayVolume] = []
    required init() {}
    convenience init(code: String) {
        self.init()
        self.code = code
    }

    static let models: [any PersistentModel.Type] = [ReplayShelf.self, ReplayVolume.self, ReplayCrate.self]
}

final class ReplayVolume: PersistentModel {
    @Attribute var title = ""
    @Attribute var rank = 0
    @Attribute var weight = 0.0
    @Relationship var shelf: ReplayShelf?
    @Relationship var crate: ReplayCrate?
    static var indexes: [[PartialKeyPath<ReplayVolume>]] { [[\.rank], [\.weight, \.title]] }
    required init() {}
    convenience init(title: String, rank: Int, weight: Double) {
        self.init()
        self.title = title
        self.rank = rank
        self.weight = weight
    }
}

final class ReplayCrate: PersistentModel {
    @Attribute var label = ""
    @Relationship(deleteRule: .noAction, inverse: \ReplayVolume.crate) var volumes: [ReplayVolume] = []
    required init() {}
    convenience init(label: String) {
        self.init()
        self.label = label
    }
}
