import Foundation
import NoteKit
import Synchronization

/// A store that delegates to an in-memory store but fails the next saves on request, to prove that a failed save
/// changes nothing and leaves the context's changes pending.
public final class FailingStore: DataStore {
    public struct InjectedFailure: Error, Equatable { public init() {} }

    public let base: InMemoryStore
    public let failuresLeft = Mutex(0)
    public var schema: Schema { base.schema }
    public var transactionNumber: UInt64 { base.transactionNumber }

    public init(schema: Schema) { base = InMemoryStore(schema: schema) }

    public func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] { base.rows(for: ids) }
    public func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult { try base.fetch(request) }
    public func identifier(entity: String, uniqueConstraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        base.identifier(entity: entity, uniqueConstraint: uniqueConstraint, key: key)
    }
    public func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) -> [PersistentIdentifier] {
        base.identifiers(entity: entity, relationship: relationship, referencing: target)
    }
    public func save(_ changes: ChangeSet) throws -> SaveResult {
        let fail = failuresLeft.withLock { left in
            guard left > 0 else { return false }
            left -= 1
            return true
        }
        if fail { throw InjectedFailure() }
        return try base.save(changes)
    }
}

public struct FailingStoreConfiguration: DataStoreConfiguration {
    public final class Holder: Sendable {
        public let store = Mutex<FailingStore?>(nil)
        public func withLock<R>(_ body: (inout FailingStore?) -> R) -> R { store.withLock { body(&$0) } }
    }

    public let name = "failing"
    public let holder = Holder()

    public init() {}

    public func makeStore(schema: Schema) throws -> any DataStore {
        let store = FailingStore(schema: schema)
        holder.withLock { $0 = store }
        return store
    }
}
