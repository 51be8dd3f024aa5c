import NoteKit

/// Why a transaction of a log does not apply to the state before it: its number does not follow, or its changes
/// conflict with the rows (``ChangeConflict``, what the applier every store shares finds).
///
/// A replay or a refresh refuses the record with it (``FileStoreError/danglingReference(file:offset:kind:reason:)``), a
/// verification reports it, a salvage leaves the transaction out; each says ``description``, and names the record's
/// file and offset.
enum TransactionConflict: Error, Hashable, CustomStringConvertible {
    /// Transaction `number` comes after transaction `last`, and is not the next one (or, where a gap is allowed, not
    /// a later one).
    case outOfSequence(number: UInt64, last: UInt64)
    /// The changes of transaction `number` do not apply.
    case changes(number: UInt64, ChangeConflict)

    /// A sentence naming the transaction and the object concerned: "transaction 4 updates Note/…, which does not
    /// exist".
    var description: String {
        switch self {
        case let .outOfSequence(number, last):
            return "transaction \(number) follows transaction \(last)"
        case let .changes(number, conflict):
            switch conflict {
            case .unknownEntity(let id):
                return "transaction \(number) inserts \(id), whose entity the schema does not have"
            case .insertedRowExists(let id):
                return "transaction \(number) inserts \(id), which already exists"
            case .updatedRowMissing(let id):
                return "transaction \(number) updates \(id), which does not exist"
            case .deletedRowMissing(let id):
                return "transaction \(number) deletes \(id), which does not exist"
            case let .missingTarget(source, _, target):
                return "transaction \(number) sets \(source) to point at \(target), which does not exist"
            // A log's records passed the checks of types and unique keys when they were saved, and a replay does not
            // make them again; a refresh applies records to a store's rows, which do
            // (``FileStore/apply(_:to:lastTransactionNumber:operationsLogged:layout:)``), and says what a save would
            // have thrown.
            case let .uniqueKeyTaken(entity, properties, values, existing):
                let error = SaveError.uniqueConstraintViolation(entity: entity, properties: properties, values: values,
                                                                existing: existing)
                return "transaction \(number): \(error)"
            case let .valueDoesNotMatchType(model, property, expected, found):
                let error = SaveError.valueDoesNotMatchType(model: model, property: property, expected: expected,
                                                            found: found)
                return "transaction \(number): \(error)"
            }
        }
    }

    /// The kind a ``FileStoreError/danglingReference(file:offset:kind:reason:)`` gives it.
    var kind: TransactionConflictKind {
        switch self {
        case .outOfSequence: .outOfSequence
        case .changes(_, let conflict):
            switch conflict {
            case .unknownEntity: .unknownEntity
            case .insertedRowExists: .objectExists
            case .updatedRowMissing, .deletedRowMissing: .objectMissing
            case .missingTarget: .targetMissing
            case .uniqueKeyTaken: .uniqueKeyTaken
            case .valueDoesNotMatchType: .valueDoesNotMatchType
            }
        }
    }
}
