import Foundation
import NoteKit
import Synchronization

/// A store that delegates to an in-memory store but fails the next saves on request, to prove that a failed save
/// changes nothing and leaves the context's changes pending.
final class FailingStore: DataStore {
    struct InjectedFailure: Error, Equatable {}

    let base: InMemoryStore
    let failuresLeft = Mutex(0)
    var schema: Schema { base.schema }
    var generation: UInt64 { base.generation }

    init(schema: Schema) { base = InMemoryStore(schema: schema) }

    func snapshots(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] { base.snapshots(for: ids) }
    func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult { try base.fetch(request) }
    func identifier(entity: String, uniqueConstraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        base.identifier(entity: entity, uniqueConstraint: uniqueConstraint, key: key)
    }
    func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) -> [PersistentIdentifier] {
        base.identifiers(entity: entity, relationship: relationship, referencing: target)
    }
    func save(_ changes: ChangeSet) throws -> SaveResult {
        let fail = failuresLeft.withLock { left in
            guard left > 0 else { return false }
            left -= 1
            return true
        }
        if fail { throw InjectedFailure() }
        return try base.save(changes)
    }
}

struct FailingStoreConfiguration: DataStoreConfiguration {
    final class Holder: Sendable {
        let store = Mutex<FailingStore?>(nil)
        func withLock<R>(_ body: (inout FailingStore?) -> R) -> R { store.withLock { body(&$0) } }
    }

    let name = "failing"
    let holder = Holder()

    func makeStore(schema: Schema) throws -> any DataStore {
        let store = FailingStore(schema: schema)
        holder.withLock { $0 = store }
        return store
    }
}
