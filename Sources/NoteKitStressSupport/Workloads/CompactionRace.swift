import Foundation
import NoteKit
import NoteKitFileStore

/// One row of the store that readers read while other processes compact it (`notekit-stress compactor`).
public final class RaceEntry: PersistentModel {
    @Attribute(.unique) public var number = 0
    @Attribute public var title = ""
    @Attribute public var body = ""
    @Attribute public var revision = 0

    public required init() {}
}

/// The writing side of the readers' race test: rounds of a few saves that rotate segments, each followed by a
/// compaction through `StoreInspector.openForWriting`, the path `notekit compact` takes. Run by `notekit-stress
/// compactor` in other processes, so that the readers of the test process see manifests replaced and segments
/// removed under them, as a user's `notekit verify` beside a compacting app does.
public enum CompactionRace {
    public static let models: [any PersistentModel.Type] = [RaceEntry.self]

    /// Small segments, so that each round's saves rotate and the store has several segments between compactions.
    public static func configuration(_ url: URL) -> FileStoreConfiguration {
        FileStoreConfiguration(url: url, maximumSegmentSize: 8 << 10, automaticCompaction: nil)
    }

    /// Creates the store at `url` with `entries` rows of about 300 bytes each.
    public static func create(at url: URL, entries: Int) throws {
        let container = try ModelContainer(for: Schema(models), configurations: [configuration(url)])
        let context = ModelContext(container)
        for number in 0..<entries {
            let entry = RaceEntry()
            entry.number = number
            entry.title = "entry \(number)"
            entry.body = String(repeating: "race \(number) ", count: 300 / (7 + String(number).count))
            context.insert(entry)
        }
        try context.save()
        try (container.store as? FileStore)?.close()
    }

    /// How a round went.
    public enum Outcome: Sendable, Equatable {
        /// Saved and compacted.
        case compacted
        /// Another process held the store's lock (another compactor): nothing was done.
        case locked
    }

    /// Opens the store for writing, saves `saves` revisions of a few rows (each save its own transaction), closes
    /// it, then compacts it as `notekit compact` does.
    ///
    /// - Throws: what opening, saving or compacting throws, except that another process's lock is ``Outcome/locked``.
    public static func round(at url: URL, saves: Int, round: Int) throws -> Outcome {
        do {
            let container = try ModelContainer(for: Schema(models), configurations: [configuration(url)])
            let context = ModelContext(container)
            let entries = try context.fetch(FetchDescriptor<RaceEntry>(sortBy: [SortDescriptor(\.number)]))
            for save in 0..<saves where !entries.isEmpty {
                for offset in 0..<8 {
                    let entry = entries[(round * 31 + save * 8 + offset) % entries.count]
                    entry.revision += 1
                    entry.title = "entry \(entry.number) revision \(entry.revision)"
                }
                try context.save()
            }
            try (container.store as? FileStore)?.close()
            let store = try StoreInspector.openForWriting(at: url)
            defer { try? store.close() }
            try store.compact()
            return .compacted
        } catch let error as FileStoreError {
            if case .locked = error { return .locked }
            throw error
        }
    }
}
