#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The seam between contexts and storage, shaped like SwiftData's `DataStore`: stores exchange plain `Sendable`
/// rows (``ModelSnapshot``), never model objects.
///
/// NoteKit ships two implementations: ``InMemoryStore`` and the file store (`NoteKitFileStore`). A context's
/// behaviour (delete rules, inverse maintenance, uniqueness, validation) is the same on both, because it lives
/// in ``ModelContext``; a store answers fetches, enforces unique constraints and applies saves atomically.
///
/// Every method may be called from any thread.
public protocol DataStore: AnyObject, Sendable {
    /// The schema the store's rows follow.
    var schema: Schema { get }

    /// The rows of `ids`, in order; nil for an identifier the store does not have.
    func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?]

    /// Runs a fetch over the saved rows.
    ///
    /// - Throws: ``FetchError`` when the filter cannot be evaluated (a forced unwrap of nil).
    func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult

    /// Which of `ids` the store has, in order: what a context needs to make objects for a relationship's targets
    /// without reading their rows. The default reads the rows (``rows(for:)``); NoteKit's stores look the
    /// identifiers up only.
    ///
    /// - Complexity: NoteKit's stores: a hash look-up per identifier (over a checkpoint, its key search), no row read.
    func containedIdentifiers(_ ids: [PersistentIdentifier]) -> [Bool]

    /// Aggregates of the saved rows that match a filter, over all of them or per group (what
    /// ``ModelContext/aggregate(_:_:)`` asks). The default fetches the matching rows and folds them; NoteKit's stores
    /// answer from indexes and stored references where they can (a count per to-one target from its inverse).
    ///
    /// - Throws: ``FetchError`` as ``fetch(_:)`` does.
    func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult

    /// The identifier of the saved object whose unique constraint `constraint` has `key`, if there is one.
    func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier?

    /// The identifiers of saved objects of `entity` whose relationship `relationship` points at `target`.
    ///
    /// - Complexity: O(objects of `entity`); used only for relationships without an inverse.
    func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) -> [PersistentIdentifier]

    /// Applies `changes` atomically: all of them or, when it throws, none.
    ///
    /// - Throws: ``SaveError`` (a unique constraint violated by another context's save, an object that no
    ///   longer exists; in NoteKit's stores also an object the change set inserts twice, deletes twice, or updates
    ///   and deletes: ``SaveError/duplicateIdentifier(_:)``, ``SaveError/objectNotFound(_:)``), or the store's own
    ///   I/O errors. A store never reports success for changes it did not make durable by its own standard.
    /// - Returns: the transaction number the save produced (its transaction's number in both NoteKit stores).
    func save(_ changes: ChangeSet) throws -> SaveResult

    /// A number that changes whenever a save changes the store; contexts use it to skip work. Both NoteKit
    /// stores use the number of the last committed transaction.
    var transactionNumber: UInt64 { get }

    /// The history the store keeps: a record of every committed transaction not deleted from it.
    ///
    /// - Throws: ``HistoryError/unsupported(store:)`` when the store keeps no history (the default).
    /// - Complexity: O(1): the log is copied on write.
    func history() throws -> HistoryLog

    /// Deletes the transactions numbered in `ranges` from the history, durably for a persistent store.
    ///
    /// - Throws: ``HistoryError/unsupported(store:)`` (the default), or the store's own errors (then nothing was
    ///   deleted).
    func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws

    /// Every transaction committed from now on (by any context, or by another process once the store has picked
    /// it up), until the consumer stops iterating or the store closes.
    func transactions() -> AsyncStream<HistoryRecord>

    /// Releases what the store holds (files, locks) and ends its ``transactions()`` streams. Called once, by the
    /// container that opened the store, when it closes (``ModelContainer/close()``) or is released; the
    /// container refuses every fetch and save from then on.
    ///
    /// - Throws: the store's own errors (a failed flush); the store is closed all the same. The default does
    ///   nothing.
    func close() throws
}

extension DataStore {
    /// The default: whether ``rows(for:)`` finds each row.
    public func containedIdentifiers(_ ids: [PersistentIdentifier]) -> [Bool] { rows(for: ids).map { $0 != nil } }

    /// The default for a store that keeps no history.
    ///
    /// - Throws: ``HistoryError/unsupported(store:)``, always.
    public func history() throws -> HistoryLog { throw HistoryError.unsupported(store: "\(Self.self)") }
    /// The default for a store that keeps no history.
    ///
    /// - Throws: ``HistoryError/unsupported(store:)``, always.
    public func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws {
        throw HistoryError.unsupported(store: "\(Self.self)")
    }
    /// The default for a store that keeps no history: a stream that ends at once.
    public func transactions() -> AsyncStream<HistoryRecord> { AsyncStream { $0.finish() } }
    /// The default for a store that holds nothing to release: does nothing and never throws.
    public func close() throws {}
}

/// One object's values as a store holds them: attribute values and relationship targets, in declaration order.
public struct ModelSnapshot: Sendable, Hashable {
    /// The object's identifier (which names its entity).
    public var id: PersistentIdentifier
    /// Attribute values, in the entity's attribute order. A file store's rows hold them packed (see
    /// ``AttributeValues``).
    public var attributes: AttributeValues
    /// Relationship targets, in the entity's relationship order. A file store's rows hold them packed after the
    /// attribute values when their to-many lists are short (see ``RelationshipValues``).
    public var relationships: RelationshipValues
    /// The transaction number that last wrote this row (0 for a row not yet saved).
    public var transactionNumber: UInt64

    /// A row of object `id` with its attribute values and relationship targets in the entity's declaration order;
    /// `transactionNumber` is the transaction number that wrote it (0 for a row not yet saved).
    public init(id: PersistentIdentifier, attributes: [StoredValue], relationships: [RelationshipTargets],
                transactionNumber: UInt64 = 0) {
        self.init(id: id, attributes: AttributeValues(attributes), relationships: RelationshipValues(relationships),
                  transactionNumber: transactionNumber)
    }

    /// A row of object `id` with its attribute values and relationship targets in the entity's declaration order;
    /// `transactionNumber` is the transaction number that wrote it (0 for a row not yet saved).
    public init(id: PersistentIdentifier, attributes: AttributeValues, relationships: [RelationshipTargets],
                transactionNumber: UInt64 = 0) {
        self.init(id: id, attributes: attributes, relationships: RelationshipValues(relationships),
                  transactionNumber: transactionNumber)
    }

    /// A row of object `id` with its attribute values and relationship targets in the entity's declaration order;
    /// `transactionNumber` is the transaction number that wrote it (0 for a row not yet saved).
    public init(id: PersistentIdentifier, attributes: AttributeValues, relationships: RelationshipValues,
                transactionNumber: UInt64 = 0) {
        self.id = id
        self.attributes = attributes
        self.relationships = relationships
        self.transactionNumber = transactionNumber
    }
}

extension ModelSnapshot {
    /// This row with `update` applied: changed attributes replaced, to-one targets set, to-many targets removed
    /// and then appended (each at most once, in order).
    ///
    /// Every store applies updates through this one function, in memory and when replaying a log. A row whose
    /// attributes are packed (``AttributeValues``) stays packed: when attributes change, the values are packed anew
    /// with the targets after them where they can be (``RelationshipValues``); when only targets change, the values
    /// keep their allocation (which the objects that read the row share) and the targets become an array.
    public func applying(_ update: ModelUpdate, transactionNumber: UInt64) -> ModelSnapshot {
        var row = self
        if !update.relationships.isEmpty {
            var targets = relationships.array
            for change in update.relationships {
                switch change.kind {
                case .toOne(let target):
                    targets[change.index] = .toOne(target)
                case let .toMany(added, removed):
                    var ids = targets[change.index].identifiers
                    if !removed.isEmpty {
                        let gone = Set(removed)
                        ids.removeAll { gone.contains($0) }
                    }
                    if !added.isEmpty {
                        var present = Set(ids)
                        for id in added where present.insert(id).inserted { ids.append(id) }
                    }
                    targets[change.index] = .toMany(ids)
                }
            }
            row.relationships = RelationshipValues(targets)
        }
        if !update.attributes.isEmpty {
            var values = attributes.array
            for change in update.attributes { values[change.index] = change.value }
            if attributes.isPacked {
                // Packed anew, with the targets after them when they can be.
                (row.attributes, row.relationships) = AttributeValues.packing(values, relationships: row.relationships.array)
            } else {
                row.attributes = AttributeValues(values)
            }
        }
        row.transactionNumber = transactionNumber
        return row
    }
}

/// The changes of one save: whole new rows, per-property updates, and deletions with their tombstones.
public struct ChangeSet: Sendable, Hashable {
    /// Whole new rows, in the order the objects were inserted.
    public var inserted: [ModelSnapshot]
    /// Changed properties of saved objects, one entry per object.
    public var updated: [ModelUpdate]
    /// Deleted objects, each with its tombstone.
    public var deleted: [ModelDeletion]
    /// Who made the change (``ModelContext/author``), recorded in history.
    public var author: String?
    /// The transaction number the change set was computed at, when it must be applied only there (an import of
    /// another replica's changes, which must not overwrite a save it has not seen): a store then refuses it with
    /// ``TransactionNumberMoved`` if any transaction was committed since, by any context or process. Nil (the
    /// default) applies it whatever the transaction number.
    package var expectedTransactionNumber: UInt64?

    /// A change set of the given parts; an empty one changes nothing.
    public init(inserted: [ModelSnapshot] = [], updated: [ModelUpdate] = [], deleted: [ModelDeletion] = [],
                author: String? = nil) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.author = author
    }

    /// Whether the change set changes nothing.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }

    /// How many objects the change set changes.
    public var changeCount: Int { inserted.count + updated.count + deleted.count }

    /// Checks ``expectedTransactionNumber`` against the store's `transactionNumber`, read under the lock its save
    /// holds.
    ///
    /// - Throws: ``TransactionNumberMoved`` when the change set expects another transaction number.
    package func checkExpectedTransactionNumber(_ transactionNumber: UInt64) throws {
        if let expected = expectedTransactionNumber, expected != transactionNumber {
            throw TransactionNumberMoved(expected: expected, found: transactionNumber)
        }
    }
}

/// A store whose history trimming can be held back (both NoteKit stores): a client that reads the history as a
/// queue, such as NoteKitMirror's export, holds everything after what it has consumed, so that the queue never loses
/// a transaction it has not read.
package protocol HistoryHolding {
    /// Keeps every transaction after `number` from being deleted (by retention or `deleteHistory`) until the hold
    /// moves on; nil releases it.
    func holdHistory(after number: UInt64?) throws
}

/// A conditional save (``ChangeSet/expectedTransactionNumber``) found the store at another transaction number: someone
/// committed in between. Nothing was changed; the caller reads again and retries.
package struct TransactionNumberMoved: Error, Hashable, CustomStringConvertible {
    package var expected: UInt64
    package var found: UInt64
    package var description: String {
        "the store moved on from transaction \(expected) to \(found) while the change set was being made"
    }
}

/// The changed properties of one saved object. Only what changed is sent, so two contexts editing different
/// properties of the same object both keep their edit.
public struct ModelUpdate: Sendable, Hashable {
    /// The changed object's identifier.
    public var id: PersistentIdentifier
    /// New values of changed attributes, by attribute position.
    public var attributes: [AttributeChange]
    /// Changed relationships, by relationship position.
    public var relationships: [RelationshipChange]

    /// An update of object `id`: its changed attributes and relationships, by position.
    public init(id: PersistentIdentifier, attributes: [AttributeChange], relationships: [RelationshipChange]) {
        self.id = id
        self.attributes = attributes
        self.relationships = relationships
    }
}

/// A changed attribute's position and new value.
public struct AttributeChange: Sendable, Hashable {
    /// The attribute's position in the entity (and in a stored row).
    public var index: Int
    /// The attribute's new value.
    public var value: StoredValue
    /// A change of the attribute at position `index` to `value`.
    public init(index: Int, value: StoredValue) {
        self.index = index
        self.value = value
    }
}

/// A changed relationship: the new target of a to-one, or what was added to and removed from a to-many.
///
/// A to-many change is a delta rather than the whole list, so a note added to a folder by one context and
/// another note added by a second context both stay.
public struct RelationshipChange: Sendable, Hashable {
    /// How the relationship's targets change: a to-one is replaced, a to-many gets a delta.
    public enum Kind: Sendable, Hashable {
        /// The to-one relationship now points at this object, or at nothing.
        case toOne(PersistentIdentifier?)
        /// Targets removed, then targets appended (in order).
        case toMany(added: [PersistentIdentifier], removed: [PersistentIdentifier])
    }

    /// The relationship's position in the entity (and in a stored row).
    public var index: Int
    /// How its targets change.
    public var kind: Kind
    /// A change of the relationship at position `index`.
    public init(index: Int, kind: Kind) {
        self.index = index
        self.kind = kind
    }
}

/// A deleted object and the values of its attributes marked ``Schema/Attribute/Option/preserveValueOnDeletion``.
public struct ModelDeletion: Sendable, Hashable {
    /// The deleted object's identifier.
    public var id: PersistentIdentifier
    /// Preserved attribute values, by attribute name.
    public var tombstone: [String: StoredValue]
    /// A deletion of object `id`, with the preserved values of its attributes marked `.preserveValueOnDeletion`.
    public init(id: PersistentIdentifier, tombstone: [String: StoredValue] = [:]) {
        self.id = id
        self.tombstone = tombstone
    }
}

/// What a store returns for a save.
public struct SaveResult: Sendable, Hashable {
    /// The transaction number the save produced (the rows it wrote carry it as theirs).
    public var transactionNumber: UInt64
    /// The rows the store holds right after the save for the objects the change set updated, in the order of
    /// ``ChangeSet/updated``: each update merged into the saved row, with what other contexts saved of its other
    /// properties (nil for an object the store no longer has). Nil when the store does not report them; a context
    /// then reads them back with ``DataStore/rows(for:)``. Both NoteKit stores report them, read under the save's
    /// own lock, so a context's save takes the store's lock no more often than the write needs.
    public var updatedRows: [ModelSnapshot?]?
    /// The result of a save that produced transaction number `transactionNumber`, and, when the store reports
    /// them, the rows it left for the objects the save updated (see ``updatedRows``).
    public init(transactionNumber: UInt64, updatedRows: [ModelSnapshot?]? = nil) {
        self.transactionNumber = transactionNumber
        self.updatedRows = updatedRows
    }
}

/// A save that the store refused; nothing was changed.
public enum SaveError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Another object of `entity` already has `values` for the unique `properties`.
    case uniqueConstraintViolation(entity: String, properties: [String], values: [StoredValue],
                                   existing: PersistentIdentifier)
    /// An update or delete names an object the store does not have (deleted by another context), or one the change
    /// set deletes (an update of it, or a second delete).
    case objectNotFound(PersistentIdentifier)
    /// An insert names an object the store already has, or one the change set inserts twice.
    case duplicateIdentifier(PersistentIdentifier)
    /// A relationship of a saved object would have fewer or more targets than its bounds allow.
    case relationshipCountOutOfRange(model: PersistentIdentifier, property: String, count: Int, minimum: Int,
                                     maximum: Int?)
    /// A relationship was given a target that was deleted (or never saved) before the save.
    case relationshipToMissingModel(model: PersistentIdentifier, property: String, target: PersistentIdentifier)
    /// The store accepts no writes (opened read-only, or stopped after an I/O failure).
    case readOnly(reason: String)
    /// An inserted object's type is not in the container's schema (or another type has its entity name there).
    case modelNotInSchema(model: PersistentIdentifier, type: String)
    /// `property` of `model` could not be read (a promised blob not fetched yet, a damaged value:
    /// ``ModelContext/readFailures`` says why), so it read as its declared default, and this save would write that
    /// default over the stored value the read could not reach. Nothing was written. Read the property again once
    /// its value can be read (the stored value is intact), assign it another value, or roll the change back.
    case unreadValueOverwritten(model: PersistentIdentifier, property: String)
    /// A change writes a value that `property`'s type does not admit (`expected`, the type as the schema records it;
    /// `found`, the kind of value given), or targets of the wrong kind for a relationship: a store would hold a value
    /// it cannot read back, so nothing was written. Typed models never make one; a dynamic model, a custom
    /// ``DataStore`` client or a bug can.
    case valueDoesNotMatchType(model: PersistentIdentifier, property: String, expected: String, found: String)

    /// A sentence naming the object, the property and the values concerned and, where there is one, the fix.
    public var description: String {
        switch self {
        case let .uniqueConstraintViolation(entity, properties, values, existing):
            "another \(entity) (\(existing)) already has \(zip(properties, values).map { "\($0) = \($1)" }.joined(separator: ", "))"
        case let .objectNotFound(id): "\(id) no longer exists in the store"
        case let .duplicateIdentifier(id): "\(id) is already in the store"
        case let .relationshipCountOutOfRange(model, property, count, minimum, maximum):
            "\(model).\(property) has \(count) targets; it must have between \(minimum) and "
                + (maximum.map(String.init) ?? "any number")
        case let .relationshipToMissingModel(model, property, target):
            "\(model).\(property) points at \(target), which is not in the store (it was deleted, or never "
                + "inserted); remove it from the relationship, or insert it, before saving"
        case let .valueDoesNotMatchType(model, property, expected, found):
            "\(model).\(property) is \(expected), and the change gives it \(found), which the store could not read back; "
                + "nothing was written"
        case let .unreadValueOverwritten(model, property):
            "\(model).\(property) could not be read (see the context's readFailures), so it read as its declared "
                + "default, and this save would write that default over the stored value; nothing was written: read it "
                + "again once it can be read, assign it another value, or roll the change back"
        case let .readOnly(reason): "the store accepts no writes: \(reason)"
        case let .modelNotInSchema(model, type):
            "\(model) is a \(type), which is not in the container's schema (its entity name \(model.entityName) is "
                + "unknown there, or names another model type); add \(type) to the types the ModelContainer is "
                + "created with, or insert it into a context of a container that has it"
        }
    }
}
