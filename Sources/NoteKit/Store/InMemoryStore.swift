#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A store that keeps its rows in memory only: for tests, previews and scratch data.
///
/// Created by ``ModelConfiguration`` with `isStoredInMemoryOnly: true`. Everything a context does (delete rules,
/// uniqueness, indexes, fetches) behaves exactly as on the file store; only durability differs.
public final class InMemoryStore: DataStore {
    public let schema: Schema
    private let storage: Locked<RowStorage>
    private let broadcaster = HistoryBroadcaster()

    /// An empty store for `schema`.
    public init(schema: Schema) {
        self.schema = schema
        storage = Locked(RowStorage(schema: schema))
    }

    deinit { broadcaster.finish() }

    public func snapshots(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        storage.withLock { storage in ids.map { storage.snapshot(for: $0) } }
    }

    public func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        try storage.withLock { try $0.fetch(request) }
    }

    public func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        storage.withLock { $0.identifier(entity: entity, uniqueConstraint: constraint, key: key) }
    }

    public func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier)
        -> [PersistentIdentifier] {
        storage.withLock { $0.identifiers(entity: entity, relationship: relationship, referencing: target) }
    }

    public func save(_ changes: ChangeSet) throws -> SaveResult {
        try storage.withLock { storage in
            try storage.validate(changes)
            let record = storage.apply(changes)
            broadcaster.publish([record])
            return SaveResult(generation: record.number)
        }
    }

    public var generation: UInt64 { storage.withLock { $0.generation } }

    /// The history of every save, less what was deleted.
    public func history() throws -> HistoryLog { storage.withLock { $0.history } }

    public func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws {
        storage.withLock { $0.history.delete(ranges, committedThrough: $0.generation) }
    }

    public func transactions() -> AsyncStream<HistoryRecord> { broadcaster.subscribe() }

    /// Ends the ``transactions()`` streams; the rows stay readable.
    public func close() throws { broadcaster.finish() }
}
