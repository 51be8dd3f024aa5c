#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ModelContext {
    /// Calls `block` with each object that matches `fetch`, in its order, creating `batchSize` objects at a time
    /// (SwiftData's `enumerate(_:batchSize:allowEscapingMutations:block:)`).
    ///
    /// The matches are decided when the call starts, as ``fetch(_:)`` decides them (its limit, offset and pending
    /// changes apply); the context then creates one batch of objects, passes them to `block` one by one, and lets
    /// them go before it creates the next batch. An object of a finished batch stays alive only if it has unsaved
    /// changes or something else (the block, say) keeps it. An object deleted after the walk started (by the
    /// block, or by a save elsewhere) is skipped when its turn comes.
    ///
    /// Unless `allowEscapingMutations` is true, a batch must leave no unsaved changes behind: the context keeps
    /// every changed, inserted or deleted object until it is saved, so changes that pile up batch after batch
    /// would keep the whole walk in memory. At the end of each batch (and when the walk ends early) the context
    /// checks that every change made since the call began was saved, and throws
    /// ``FetchError/mutationsEscaped(entity:batch:models:)`` if not. Changes pending before the call are not
    /// counted. To change objects as you go, either call ``save()`` in the block, or pass `true` and save after
    /// the walk.
    ///
    /// To stop early, throw from `block` (the error comes out of this method unchanged), or use
    /// ``enumerate(_:batchSize:allowEscapingMutations:stoppingWith:)``.
    ///
    /// - Parameters:
    ///   - fetch: which objects, in which order.
    ///   - batchSize: how many objects are created at a time; at least 1. The default, 5,000, is SwiftData's.
    ///   - allowEscapingMutations: whether the block may leave unsaved changes behind.
    ///   - block: called once per object.
    /// - Throws: ``FetchError/invalidBatchSize(_:)`` for a batch size below 1 (before anything is read);
    ///   ``FetchError/mutationsEscaped(entity:batch:models:)`` as above (the changes stay pending, to save or roll
    ///   back); what `block` throws; and what ``fetch(_:)`` throws.
    /// - Complexity: finding the matches costs what ``fetchIdentifiers(_:)`` costs (a predicate or sort the store
    ///   cannot evaluate creates each object of the entity once, and lets it go before the walk starts); then one
    ///   store read per batch. The store's rows stay in memory as they always do: batches bound the model objects,
    ///   not the rows.
    public func enumerate<T: PersistentModel>(_ fetch: FetchDescriptor<T>, batchSize: Int = 5_000,
                                              allowEscapingMutations: Bool = false,
                                              block: (T) throws -> Void) throws {
        try enumerate(fetch, batchSize: batchSize, allowEscapingMutations: allowEscapingMutations,
                      stoppingWith: { model, _ in try block(model) })
    }

    /// ``enumerate(_:batchSize:allowEscapingMutations:block:)`` with a way to stop: set `stop` to true and no
    /// further object is passed to `block`. A NoteKit addition; SwiftData's block takes the object alone.
    ///
    /// - Throws: as ``enumerate(_:batchSize:allowEscapingMutations:block:)``; the check for unsaved changes also
    ///   runs when the walk stops.
    public func enumerate<T: PersistentModel>(_ fetch: FetchDescriptor<T>, batchSize: Int = 5_000,
                                              allowEscapingMutations: Bool = false,
                                              stoppingWith block: (T, _ stop: inout Bool) throws -> Void) throws {
        let identifiers = try batchedIdentifiers(fetch, batchSize: batchSize)
        // Held, so that their identities are not reused while the walk compares against them.
        let pendingBefore = insertedObjects + changedObjects + deletedObjects
        let before = Set(pendingBefore.map(ObjectIdentifier.init))
        var stop = false
        var start = 0
        while start < identifiers.count, !stop {
            let end = min(start + batchSize, identifiers.count)
            do {
                let batch = _objects(for: identifiers[start..<end])
                for object in batch {
                    // Deleted since the walk began: skipped. (One deleted before can be a match, when pending
                    // changes are excluded.)
                    guard let object, object._$context === self,
                          object._$state != .deleted || before.contains(ObjectIdentifier(object)) else { continue }
                    try block(unsafeDowncast(object, to: T.self), &stop)
                    if stop { break }
                }
            }
            if !allowEscapingMutations {
                let escaped = (insertedObjects + changedObjects + deletedObjects)
                    .filter { !before.contains(ObjectIdentifier($0)) }
                if !escaped.isEmpty {
                    throw FetchError.mutationsEscaped(entity: T.entityName, batch: start / batchSize,
                                                      models: escaped.map(\._$id))
                }
            }
            start = end
        }
        withExtendedLifetime(pendingBefore) {}
    }

    /// The objects that match `descriptor`, as a collection that creates them `batchSize` at a time when they
    /// are read (SwiftData's `fetch(_:batchSize:)`).
    ///
    /// The matching identifiers are found now, as ``fetch(_:)`` finds them (limit, offset and pending changes
    /// apply), and the collection keeps them; no object is created until an element is read. Reading element `i`
    /// creates (or finds) the objects of `i`'s batch and lets the previous batch go, so walking the collection
    /// keeps about one batch alive besides what the caller keeps. The collection keeps this context alive.
    ///
    /// Each element is this context's one instance for its identifier. An object deleted and saved after the
    /// fetch, and no longer in memory, reads as a stand-in whose ``ModelObject/isDeleted`` is true and whose
    /// properties hold their declared defaults; check `isDeleted` when objects may be deleted while you hold the
    /// collection.
    ///
    /// - Throws: ``FetchError/invalidBatchSize(_:)`` for a batch size below 1; what ``fetch(_:)`` throws.
    /// - Complexity: finding the matches costs what ``fetchIdentifiers(_:)`` costs; then one store read per batch
    ///   reached. Batches bound the model objects, not the store's rows, which stay in memory.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>,
                                          batchSize: Int) throws -> FetchResultsCollection<T> {
        let identifiers = try batchedIdentifiers(descriptor, batchSize: batchSize)
        return FetchResultsCollection(identifiers: identifiers, batchSize: batchSize) { [self] batch in
            zip(batch, _objects(for: batch)).map { id, object in
                guard let object else {
                    let standIn = T()
                    standIn._$becomeStandIn(forDeleted: id)
                    return standIn
                }
                return unsafeDowncast(object, to: T.self)
            }
        }
    }

    /// The identifiers of the objects that match `descriptor`, in its order, as a collection (SwiftData's
    /// `fetchIdentifiers(_:batchSize:)`). NoteKit holds identifiers in memory in any case, so the batch size
    /// is checked and otherwise changes nothing.
    ///
    /// - Throws: ``FetchError/invalidBatchSize(_:)`` for a batch size below 1; what ``fetch(_:)`` throws.
    public func fetchIdentifiers<T: PersistentModel>(
        _ descriptor: FetchDescriptor<T>, batchSize: Int) throws -> FetchResultsCollection<PersistentIdentifier> {
        let identifiers = try batchedIdentifiers(descriptor, batchSize: batchSize)
        return FetchResultsCollection(identifiers: identifiers, batchSize: batchSize) { Array($0) }
    }

    private func batchedIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>,
                                                         batchSize: Int) throws -> [PersistentIdentifier] {
        guard batchSize > 0 else { throw FetchError.invalidBatchSize(batchSize) }
        return try run(descriptor, wanting: .identifiers).identifiers
    }

    /// The context's objects for `ids`, in order, created from one store read for those it has not loaded;
    /// nil for an identifier neither the context nor the store has (any more). Unchanged objects are refreshed
    /// from newer saved rows, as a fetch refreshes them.
    func _objects(for ids: ArraySlice<PersistentIdentifier>) -> [ModelObject?] {
        zip(ids, store.rows(for: Array(ids))).map { id, row in
            if let row { return _object(for: row) }
            return registry[id]
        }
    }
}

/// The results of ``ModelContext/fetch(_:batchSize:)`` or ``ModelContext/fetchIdentifiers(_:batchSize:)``: a
/// random-access collection of the matches, in the descriptor's order, whose elements are created a batch at a
/// time when read (SwiftData's `FetchResultsCollection`).
///
/// The collection holds the matching identifiers and the batch last read; its count and order are fixed when
/// the fetch runs. Copies share the batch last read. Like the context that made it, it belongs to one isolation
/// domain.
///
/// - Complexity: `count` and `indices` are O(1); reading an element is O(1) within the batch last read and one
///   store read of a batch otherwise, so reading in order (or in reverse) reads each batch once.
public struct FetchResultsCollection<Element>: RandomAccessCollection {
    /// The identifiers of the matches, in order.
    private let identifiers: [PersistentIdentifier]
    private let batches: Batches

    init(identifiers: [PersistentIdentifier], batchSize: Int,
         load: @escaping (ArraySlice<PersistentIdentifier>) -> [Element]) {
        self.identifiers = identifiers
        batches = Batches(size: batchSize, load: load)
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// The number of matches.
    public var endIndex: Int { identifiers.count }

    /// The match at `position`, creating its batch if it is not the batch last read.
    ///
    /// - Precondition: `position` is a valid index, as for an array.
    public subscript(position: Int) -> Element {
        batches.element(at: position, of: identifiers)
    }

    /// The batch last read, shared by copies of the collection.
    private final class Batches {
        let size: Int
        let load: (ArraySlice<PersistentIdentifier>) -> [Element]
        var start = 0
        var elements: [Element] = []

        init(size: Int, load: @escaping (ArraySlice<PersistentIdentifier>) -> [Element]) {
            self.size = size
            self.load = load
        }

        func element(at position: Int, of identifiers: [PersistentIdentifier]) -> Element {
            if position >= start, position - start < elements.count { return elements[position - start] }
            precondition(identifiers.indices.contains(position), "index \(position) out of range")
            let batchStart = position / size * size
            // The previous batch goes first, so that no more than one is alive here.
            elements = []
            elements = load(identifiers[batchStart..<Swift.min(batchStart + size, identifiers.count)])
            start = batchStart
            return elements[position - batchStart]
        }
    }
}
