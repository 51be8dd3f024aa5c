// SortDescriptor (HistoryDescriptor.sortBy) is in Foundation proper on Linux.
import Foundation

/// A position in a store's history (SwiftData's `HistoryToken`): tokens of later transactions compare greater.
public protocol HistoryToken: Comparable, Codable, Hashable, Sendable {}

/// The token of one transaction: its number in the store, which increases with every save for the store's whole
/// life (compaction and reopening keep numbering). Keep the last token you processed and ask for what came after.
///
/// Tokens are `Codable`, so a consumer can store its position between launches.
public struct DefaultHistoryToken: HistoryToken, CustomStringConvertible {
    /// The transaction's number.
    public let transactionNumber: UInt64

    /// The token of transaction `transactionNumber`.
    public init(transactionNumber: UInt64) { self.transactionNumber = transactionNumber }

    /// A token is earlier than another when its transaction was committed earlier (a smaller number).
    public static func < (lhs: DefaultHistoryToken, rhs: DefaultHistoryToken) -> Bool {
        lhs.transactionNumber < rhs.transactionNumber
    }

    /// The transaction number as `#42`.
    public var description: String { "#\(transactionNumber)" }
}

/// A transaction of a store's history, as ``ModelContext/fetchHistory(_:)`` returns it (SwiftData's
/// `HistoryTransaction`). NoteKit's transactions are ``DefaultHistoryTransaction``s.
public protocol HistoryTransaction: Hashable, Identifiable, Sendable {
    /// The kind of token that orders the transactions (``DefaultHistoryToken`` for NoteKit's stores).
    associatedtype TokenType: HistoryToken
    /// Where the transaction stands in the history.
    var token: TokenType { get }
    /// The saving context's ``ModelContext/author``.
    var author: String? { get }
    /// When the transaction was committed.
    var timestamp: Date { get }
    /// What it changed: inserts, then updates, then deletes.
    var changes: [HistoryChange] { get }
}

/// One saved transaction: who made it, when, and which objects it inserted, updated and deleted.
///
/// ```swift
/// for change in transaction.changes {
///     if case .delete(let deletion as DefaultHistoryDelete<NoteRecord>) = change,
///        let id = deletion.tombstone[\.id] as? UUID { … }
/// }
/// ```
public struct DefaultHistoryTransaction: HistoryTransaction, CustomStringConvertible {
    /// The record the store keeps (untyped: entity and property names).
    public let record: HistoryRecord
    private let container: ModelContainer

    /// The transaction a store recorded as `record`, with changes typed by `container`'s models.
    package init(record: HistoryRecord, container: ModelContainer) {
        self.record = record
        self.container = container
    }

    /// The transaction's position in the history, to keep and pass back in a ``HistoryDescriptor``'s predicate.
    public var token: DefaultHistoryToken { DefaultHistoryToken(transactionNumber: record.number) }
    /// The transaction's identity: its token, since each number is committed once.
    public var id: DefaultHistoryToken { token }
    /// The ``ModelContext/author`` of the context that saved, or nil when it had none.
    public var author: String? { record.author }
    /// When the store committed the transaction.
    public var timestamp: Date { record.timestamp }
    /// The store's name (its configuration's).
    public var storeIdentifier: String { container.configuration.name }

    /// The changes, each typed by its model (`DefaultHistoryInsert<Note>`, …): inserts, then updates, then
    /// deletes, each in the order they were saved. Objects of entities the container's schema no longer has
    /// (removed by a migration) are left out; ``record`` still names them.
    ///
    /// - Complexity: O(changes), computed on each access.
    public var changes: [HistoryChange] {
        let models = container.runtime.metadataByName
        var changes: [HistoryChange] = []
        changes.reserveCapacity(record.changeCount)
        for id in record.inserted {
            guard let type = models[id.entityName]?.type else { continue }
            changes.append(.insert(Self.insert(type, id: id, token: token)))
        }
        for update in record.updated {
            guard let type = models[update.id.entityName]?.type else { continue }
            changes.append(.update(Self.update(type, update: update, token: token)))
        }
        for deletion in record.deleted {
            guard let type = models[deletion.id.entityName]?.type else { continue }
            changes.append(.delete(Self.delete(type, deletion: deletion, token: token)))
        }
        return changes
    }

    private static func insert<Model: PersistentModel>(_: Model.Type, id: PersistentIdentifier,
                                                       token: DefaultHistoryToken) -> any HistoryInsert {
        DefaultHistoryInsert<Model>(changedPersistentIdentifier: id, token: token)
    }

    private static func update<Model: PersistentModel>(_: Model.Type, update: HistoryRecord.Update,
                                                       token: DefaultHistoryToken) -> any HistoryUpdate {
        DefaultHistoryUpdate<Model>(changedPersistentIdentifier: update.id, token: token,
                                    updatedPropertyNames: update.properties)
    }

    private static func delete<Model: PersistentModel>(_: Model.Type, deletion: ModelDeletion,
                                                       token: DefaultHistoryToken) -> any HistoryDelete {
        DefaultHistoryDelete<Model>(changedPersistentIdentifier: deletion.id, token: token,
                                    tombstone: HistoryTombstone(deletion.tombstone))
    }

    /// Two transactions are equal when they are the same stored record: same number, time, author and changes.
    public static func == (lhs: DefaultHistoryTransaction, rhs: DefaultHistoryTransaction) -> Bool {
        lhs.record == rhs.record
    }

    /// Hashes the stored record, consistently with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(record) }

    /// One line: the token, the author and the numbers of inserts, updates and deletes.
    public var description: String {
        "transaction \(token) by \(author ?? "nobody"): \(record.inserted.count) inserted, "
            + "\(record.updated.count) updated, \(record.deleted.count) deleted"
    }
}

/// A change of one object in a transaction (SwiftData's `HistoryChange`).
public enum HistoryChange: Sendable {
    /// The object was inserted.
    case insert(any HistoryInsert)
    /// Some of the object's attributes or relationships changed.
    case update(any HistoryUpdate)
    /// The object was deleted.
    case delete(any HistoryDelete)

    /// The object that changed.
    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case .insert(let change): change.changedPersistentIdentifier
        case .update(let change): change.changedPersistentIdentifier
        case .delete(let change): change.changedPersistentIdentifier
        }
    }
}

/// An insert in a transaction.
public protocol HistoryInsert<Model>: Hashable, Sendable {
    /// The model type of the inserted object.
    associatedtype Model: PersistentModel
    /// The inserted object.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The transaction's token.
    var token: DefaultHistoryToken { get }
}

/// An update in a transaction.
public protocol HistoryUpdate<Model>: Hashable, Sendable {
    /// The model type of the updated object.
    associatedtype Model: PersistentModel
    /// The updated object.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The transaction's token.
    var token: DefaultHistoryToken { get }
    /// The names of the attributes and relationships that changed.
    var updatedPropertyNames: [String] { get }
}

/// A delete in a transaction.
public protocol HistoryDelete<Model>: Hashable, Sendable {
    /// The model type of the deleted object.
    associatedtype Model: PersistentModel
    /// The deleted object.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The transaction's token.
    var token: DefaultHistoryToken { get }
    /// The values the deleted object left behind.
    var tombstone: HistoryTombstone<Model> { get }
}

/// An object of type `Model` was inserted.
public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert {
    /// The inserted object's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The token of the transaction that inserted it.
    public let token: DefaultHistoryToken
}

/// Properties of an object of type `Model` changed.
public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate {
    /// The updated object's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The token of the transaction that updated it.
    public let token: DefaultHistoryToken
    /// The names of the attributes, then of the relationships, that the save changed, in declaration order. Use
    /// ``updated(_:)`` to ask about one property by key path.
    public let updatedPropertyNames: [String]

    /// Whether the persisted property `keyPath` reads is among the changed ones.
    ///
    /// - Complexity: O(changed properties) after the key path's first use.
    public func updated<Value>(_ keyPath: KeyPath<Model, Value>) -> Bool {
        let metadata = ModelMetadata.of(Model.self)
        let name: String? = switch metadata.property(for: keyPath) {
        case .attribute(let slot)?: metadata.attributes[slot].name
        case .relationship(let slot)?: metadata.relationships[slot].name
        case nil: nil
        }
        return name.map(updatedPropertyNames.contains) ?? false
    }
}

/// An object of type `Model` was deleted.
public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete {
    /// The deleted object's identifier (no object of the context has it any longer).
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The token of the transaction that deleted it.
    public let token: DefaultHistoryToken
    /// The values of its attributes marked `.preserveValueOnDeletion`, as last saved.
    public let tombstone: HistoryTombstone<Model>
}

/// What a deleted object left behind: the values of its attributes marked `.preserveValueOnDeletion`, as they
/// were last saved.
public struct HistoryTombstone<Model: PersistentModel>: Sendable, Hashable {
    /// The preserved values, by attribute name, as stored.
    public let storedValues: [String: StoredValue]

    /// A tombstone of the given stored values, by attribute name (as a store reads them back).
    package init(_ storedValues: [String: StoredValue]) { self.storedValues = storedValues }

    /// The preserved value of the attribute `keyPath` reads, as SwiftData returns it (`Any`, to cast); nil when
    /// the attribute was not preserved.
    public subscript<Value>(_ keyPath: KeyPath<Model, Value>) -> Any? {
        value(of: keyPath)
    }

    /// The preserved value of the attribute `keyPath` reads; nil when it was not preserved or no longer reads as
    /// `Value` (its type changed since).
    public func value<Value>(of keyPath: KeyPath<Model, Value>) -> Value? {
        let metadata = ModelMetadata.of(Model.self)
        guard let slot = metadata.attributeSlot(for: keyPath),
              let stored = storedValues[metadata.attributes[slot].name] else { return nil }
        return try? metadata.codec(at: slot, as: Value.self).decode(stored)
    }
}

/// Which transactions to fetch or delete, in which order and how many (SwiftData's `HistoryDescriptor`).
///
/// ```swift
/// var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
/// descriptor.predicate = #Predicate { $0.token > lastToken }
/// descriptor.fetchLimit = 100
/// let transactions = try context.fetchHistory(descriptor)
/// ```
///
/// ``ModelContext/fetchHistory(_:)`` applies the three together, as SwiftData does: the transactions the
/// ``predicate`` accepts, in the order of ``sortBy``, of which the first ``fetchLimit``. The ten newest
/// transactions of one author:
///
/// ```swift
/// var newest = HistoryDescriptor<DefaultHistoryTransaction>(
///     predicate: #Predicate { $0.author == "importer" },
///     sortBy: [SortDescriptor(\.token, order: .reverse)])
/// newest.fetchLimit = 10
/// ```
public struct HistoryDescriptor<Transaction: HistoryTransaction>: Sendable {
    /// Which transactions; nil for every transaction kept.
    public var predicate: Predicate<Transaction>?
    /// The order of the transactions ``ModelContext/fetchHistory(_:)`` returns; empty (the default) for the order
    /// they were committed in, oldest first.
    ///
    /// Any key path a `SortDescriptor` accepts sorts as the descriptor's own `compare(_:_:)` orders it, in memory:
    /// `\.token` (or `\.id`, the same) orders by transaction number, `\.timestamp` by commit time, `\.author`
    /// by the saving context's ``ModelContext/author`` (with the descriptor's string comparator; a transaction
    /// without an author comes first in `.forward` order, as Foundation orders nil). The descriptors apply in
    /// order; transactions they leave tied stay in the order they were committed, oldest first.
    /// ``ModelContext/deleteHistory(_:)`` ignores the order.
    public var sortBy: [SortDescriptor<Transaction>]
    /// The most transactions ``ModelContext/fetchHistory(_:)`` returns: the first ones in the order of ``sortBy``
    /// (the oldest, without one); nil or 0 for no limit.
    public var fetchLimit: Int?

    /// A descriptor of the transactions `predicate` accepts (all kept, when nil), oldest first.
    public init(predicate: Predicate<Transaction>? = nil) {
        self.init(predicate: predicate, sortBy: [])
    }

    /// A descriptor of the transactions `predicate` accepts (all kept, when nil), in the order of `sortBy`
    /// (oldest first, when empty).
    public init(predicate: Predicate<Transaction>? = nil, sortBy: [SortDescriptor<Transaction>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// History that cannot be given.
public enum HistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The descriptor selects transactions that were deleted from history: the consumer's token is older than
    /// the history kept. Start over from the current state and ``ModelContext/currentHistoryToken()``.
    case historyTokenExpired(oldestRetained: DefaultHistoryToken?)
    /// The store keeps no history (a custom ``DataStore`` that does not implement it).
    case unsupported(store: String)

    /// A sentence saying what was asked for and what the store has: the oldest transaction kept, or that the store
    /// keeps no history.
    public var description: String {
        switch self {
        case .historyTokenExpired(let oldest):
            "the history asked for was deleted; the oldest transaction kept is " + (oldest.map { "\($0)" } ?? "none")
        case .unsupported(let store): "the store \(store) keeps no history"
        }
    }
}
