#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A unit of work over a ``ModelContainer``: it inserts, deletes and fetches model objects, tracks what changed,
/// and saves it all in one transaction.
///
/// ```swift
/// let context = ModelContext(container)
/// let work = Folder(name: "Work")
/// context.insert(work)
/// try context.save()
/// let roots = try context.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.parent == nil }))
/// ```
///
/// A context and its objects belong to one isolation domain (one actor or thread); it is not `Sendable`. Pass
/// ``PersistentIdentifier``s to other actors and give each its own context. Each object is loaded into a
/// context at most once: every fetch and relationship returns the same instance for the same identifier.
///
/// Changes are tracked as they are made, not found by comparing objects at save: a property setter marks its
/// object changed, and ``save()`` sends the changed properties of changed objects only.
///
/// An object keeps its context alive, and the context keeps its container, so the results of
/// `try ModelContext(container).fetch(…)` can be read, relationships included, and saved through
/// `modelContext` after the code that made the context is gone. The context does not keep its saved objects, so a
/// context and its objects are freed once nothing references any of them. Two things the context holds strongly
/// keep it alive with them, because they hold its objects: unsaved changes (until ``save()`` or ``rollback()``),
/// and the actions of an ``undoManager`` (until they are removed or the manager is unassigned).
///
/// ## Topics
/// - ``insert(_:)``
/// - ``delete(_:)``
/// - ``delete(model:where:)``
/// - ``save()``
/// - ``rollback()``
/// - ``transaction(block:)``
/// - ``undoManager``
/// - ``processPendingChanges()``
/// - ``fetch(_:)``
/// - ``fetchCount(_:)``
/// - ``fetchIdentifiers(_:)``
/// - ``enumerate(_:batchSize:allowEscapingMutations:block:)``
/// - ``enumerate(_:batchSize:allowEscapingMutations:stoppingWith:)``
/// - ``fetch(_:batchSize:)``
/// - ``fetchIdentifiers(_:batchSize:)``
/// - ``model(for:)``
/// - ``explain(_:)``
public final class ModelContext {
    /// The container whose store this context reads and writes.
    ///
    /// A context keeps its container alive, except the container's ``ModelContainer/mainContext``, which the
    /// container keeps instead. A main context used after its container was released returns a closed stand-in
    /// for it (``ModelContainer/isClosed`` is true), so that code holding only the main context fails with
    /// ``ModelContainerError/closed(store:)`` instead of stopping the process.
    public var container: ModelContainer {
        if let ownContainer { return ownContainer }
        if let mainContainer { return mainContainer }
        return ModelContainer(releasedContainerOf: core)
    }
    /// The container of a context created with ``init(_:)``; nil for the main context.
    private let ownContainer: ModelContainer?
    /// The container of the main context.
    private weak var mainContainer: ModelContainer?
    /// The store and schema, shared with the container.
    let core: ContainerCore

    /// Recorded with each save in the store's history.
    public var author: String?
    /// When set, ``save()`` commits only if the store is still at this transaction number
    /// (``ChangeSet/expectedTransactionNumber``) and throws ``TransactionNumberMoved`` otherwise: an import of another
    /// replica's changes (``applyReplicaChanges(_:deleting:merging:)``), which must not overwrite what it has not seen.
    package var expectedTransactionNumber: UInt64?
    /// Whether the context saves by itself, shortly after changes (SwiftData's `autosaveEnabled`): true for
    /// ``ModelContainer/mainContext``, false for contexts created with ``init(_:)`` (a model actor's included).
    ///
    /// The first change after a save schedules a save 0.25 seconds later (``autosaveDelay``), on the context's
    /// actor: the main actor for the main context, the executor's queue for a ``ModelActor``'s context. Changes
    /// made until then are saved together; the delay does not restart with each change, so steady editing still
    /// saves every quarter second. Calling ``save()`` earlier saves at once and leaves the autosave nothing to do.
    /// Closing or releasing the container saves a last time (see ``ModelContainer/close()``).
    ///
    /// An autosave that fails keeps every change pending (as any failed ``save()`` does), sets
    /// ``lastAutosaveError``, posts ``autosaveFailed`` and writes a line to standard error; the next change
    /// schedules another attempt.
    ///
    /// A context created with ``init(_:)`` and used outside a model actor belongs to no actor NoteKit can schedule
    /// on: turning autosave on there writes a warning to standard error and saves nothing by itself; call
    /// ``save()``, or use the main context or a ``ModelActor``.
    public var autosaveEnabled: Bool {
        didSet { if autosaveEnabled != oldValue { _autosaveEnabledDidChange() } }
    }
    /// Schedules this context's autosaves on its actor; nil for a context that belongs to no known actor.
    var autosaver: Autosaver?
    /// The error of the last autosave, or nil when it succeeded (or none ran). See ``autosaveEnabled``.
    public internal(set) var lastAutosaveError: (any Error)?
    /// Records this context's changes so they can be undone and redone; nil (the default) records nothing.
    ///
    /// Assign a ``ModelUndoManager`` to turn undo on for this context, or create the container with
    /// `isUndoEnabled: true` to give its ``ModelContainer/mainContext`` one. A manager serves one context for
    /// its whole life. Setting this to nil stops recording (as SwiftData suggests for a large import) and keeps
    /// the manager's actions; assigning the manager again resumes. See ``ModelUndoManager`` for how changes are
    /// grouped and what undo restores.
    public var undoManager: ModelUndoManager? {
        didSet { _undoManagerDidChange(from: oldValue) }
    }

    /// Stored values that could not be decoded when read (a missing external blob, a promised one not fetched yet,
    /// a `Codable` type that no longer decodes its stored form). Such a property reads as its declared
    /// default (empty `Data`, nil, …), never as a value the store holds: the stored value is kept, a save of the
    /// object's other changes leaves it as it is, and a save that would write that default back over it throws
    /// ``SaveError/unreadValueOverwritten(model:property:)``. A later read that succeeds (the blob fetched) returns
    /// the stored value.
    public private(set) var readFailures: [ReadFailure] = []
    /// Per object, the attributes whose last read failed, with the stored value that read could not decode: a save
    /// that would write the attribute's default over that same value is refused.
    var unreadValues: [PersistentIdentifier: [Int: StoredValue]] = [:]

    /// Every object this context knows, by identifier, without keeping it: objects keep their context (so that
    /// results outlive the code that fetched them). Objects with unsaved changes are kept by the change lists below.
    var registry = ObjectRegistry()
    /// Objects in the order they were inserted, changed or deleted; entries whose state has moved on are skipped.
    var insertedOrder: [ModelObject] = []
    var changedOrder: [ModelObject] = []
    var deletedOrder: [ModelObject] = []
    /// The state of each object before the current ``transaction(block:)`` first touched it.
    var journal: [ObjectIdentifier: JournalEntry]?

    var store: any DataStore { core.store }
    var runtime: SchemaRuntime { core.runtime }

    /// A new, empty context over `container`, which it keeps alive. It does not autosave (see
    /// ``autosaveEnabled``).
    public init(_ container: ModelContainer) {
        ownContainer = container
        core = container.core
        autosaveEnabled = false
    }

    /// The main context of `container`, which autosaves on the main actor.
    init(mainContextOf container: ModelContainer) {
        ownContainer = nil
        mainContainer = container
        core = container.core
        autosaveEnabled = true
        autosaver = Autosaver(context: self, actor: .main)
        core.register(autosaver!)
    }

    // MARK: State

    /// Whether the context has inserted, changed or deleted objects it has not saved.
    public var hasChanges: Bool {
        insertedOrder.contains { $0._$state == .inserted && $0._$context === self }
            || changedOrder.contains { $0._$isChanged && $0._$state == .registered && $0._$context === self }
            || deletedOrder.contains { $0._$state == .deleted && $0._$context === self }
    }

    /// The objects inserted and not saved yet, in insertion order.
    public var insertedModelsArray: [any PersistentModel] {
        insertedObjects.map { $0 as! any PersistentModel }
    }

    /// The saved objects changed and not saved yet.
    public var changedModelsArray: [any PersistentModel] {
        changedObjects.map { $0 as! any PersistentModel }
    }

    /// The saved objects deleted and not saved yet (objects inserted and deleted before a save are forgotten).
    public var deletedModelsArray: [any PersistentModel] {
        deletedObjects.map { $0 as! any PersistentModel }
    }

    var insertedObjects: [ModelObject] {
        insertedOrder.filter { $0._$state == .inserted && $0._$context === self }
    }

    var changedObjects: [ModelObject] {
        changedOrder.filter { $0._$isChanged && $0._$state == .registered && $0._$context === self }
    }

    var deletedObjects: [ModelObject] {
        deletedOrder.filter { $0._$state == .deleted && $0._$context === self }
    }

    /// Appends `object` to one of the lists, once: an object listed already (say, inserted, deleted and inserted
    /// again before a save) is not listed twice; the list's filter on state does the rest.
    func list(_ object: ModelObject, in list: ModelObject.Listing) {
        if autosaveEnabled { scheduleAutosave() }
        guard !object._$listed.contains(list) else { return }
        object._$listed.insert(list)
        switch list {
        case .inserted: insertedOrder.append(object)
        case .changed: changedOrder.append(object)
        default: deletedOrder.append(object)
        }
    }

    /// Empties the three lists.
    func clearLists() {
        for object in insertedOrder { object._$listed.remove(.inserted) }
        for object in changedOrder { object._$listed.remove(.changed) }
        for object in deletedOrder { object._$listed.remove(.deleted) }
        insertedOrder.removeAll()
        changedOrder.removeAll()
        deletedOrder.removeAll()
    }

    // MARK: Inserting

    /// Inserts `model`, and every object it reaches through relationships that is not in a context yet.
    ///
    /// Inserting an object that is already in this context does nothing; inserting one deleted in this context
    /// (and not saved) brings it back. Whether a duplicate of a unique key updates the existing object or is
    /// refused is decided at ``save()`` (see ``UniquenessPolicy``).
    ///
    /// - Precondition: `model` does not belong to another context.
    public func insert<T: PersistentModel>(_ model: T) {
        _insertGraph(model)
    }

    /// Inserts `object` and the unmanaged objects its relationships reach.
    func _insertGraph(_ object: ModelObject) {
        var pending = [object]
        while let next = pending.popLast() {
            switch next._$state {
            case .unmanaged:
                precondition(next._$context == nil || next._$context === self,
                             "\(next) belongs to another context")
                record(next)
                next._$insert(into: self)
                registry[next._$id] = next
                list(next, in: .inserted)
                // Only objects still related are inserted; one set and later replaced stays out.
                if !next._$unmanagedTargets.isEmpty {
                    let related = Set(next._$relationships.flatMap(\.identifiers))
                    pending.append(contentsOf: next._$unmanagedTargets.values.filter { related.contains($0._$id) })
                    next._$unmanagedTargets = [:]
                }
            case .deleted where next._$context === self:
                record(next)
                next._$undelete()
                registry[next._$id] = next
                if next._$state == .inserted { list(next, in: .inserted) }
            case .deleted:
                // Deleted and saved elsewhere: insert it again as a new object with the same identity.
                record(next)
                next._$insert(into: self)
                registry[next._$id] = next
                list(next, in: .inserted)
            case .inserted, .registered:
                precondition(next._$context === self, "\(next) belongs to another context")
            }
        }
    }

    // MARK: Looking objects up

    /// The object with identifier `id`: the one this context already has, or one loaded from the store.
    /// Nil when the store does not have it.
    ///
    /// - Complexity: O(1).
    public func model(for id: PersistentIdentifier) -> (any PersistentModel)? {
        _object(for: id, refresh: true).map { $0 as! any PersistentModel }
    }

    /// The object with identifier `id`, as a `T`; nil when the store does not have it or it is not a `T`.
    public subscript<T: PersistentModel>(id: PersistentIdentifier, as type: T.Type = T.self) -> T? {
        _object(for: id, refresh: true) as? T
    }

    /// The object this context has registered for `id`, without loading anything.
    public func registeredModel<T: PersistentModel>(for id: PersistentIdentifier) -> T? {
        registry[id] as? T
    }

    /// The object for `id`, loading it from the store if the context does not have it.
    ///
    /// - Parameter refresh: whether to reload a registered object without changes when the store has newer values.
    func _object(for id: PersistentIdentifier, refresh: Bool = false) -> ModelObject? {
        if let known = registry[id] {
            if refresh, known._$state == .registered, !known._$isChanged,
               let stored = store.rows(for: [id]).first ?? nil {
                _refresh(known, from: stored)
            }
            return known
        }
        guard let stored = store.rows(for: [id]).first ?? nil else { return nil }
        return _materialize(stored)
    }

    /// The object of a relationship's target `id`: the registered one, or a new one that holds only its identifier
    /// (a whole-row fault, as SwiftData's relationship faults): its row is read when one of its properties is first
    /// read or changed, so that `folder.notes.count`, `isEmpty` or reading the first few notes reads no other note.
    /// A fault whose row is gone by then (deleted in another context) reads as its declared defaults, recorded in
    /// ``readFailures``.
    func _target(_ id: PersistentIdentifier) -> ModelObject? {
        if let known = registry[id] { return known }
        guard store.containedIdentifiers([id]).first == true else { return nil }
        return _fault(id)
    }

    /// The objects of a relationship's targets `ids`, in order, as ``_target(_:)`` gives each: the store is asked
    /// once which of those not registered it still has.
    func _targets(_ ids: [PersistentIdentifier]) -> [ModelObject] {
        var objects: [ModelObject?] = ids.map { registry[$0] }
        let unknown = objects.indices.filter { objects[$0] == nil }
        guard !unknown.isEmpty else { return objects.map { $0! } }
        let held = store.containedIdentifiers(unknown.map { ids[$0] })
        for (index, isHeld) in zip(unknown, held) where isHeld { objects[index] = _fault(ids[index]) }
        return objects.compactMap { $0 }
    }

    /// A new registered object for `id` holding nothing but its identifier: a whole-row fault.
    private func _fault(_ id: PersistentIdentifier) -> ModelObject? {
        guard let metadata = runtime.metadataByName[id.entityName] else { return nil }
        let object = _materialize(metadata.faultRow(id))
        object._$fault = metadata.wholeRowFault
        return object
    }

    /// The registered object for a snapshot the store returned, loading or refreshing it as needed.
    func _object(for snapshot: ModelSnapshot) -> ModelObject {
        if let known = registry[snapshot.id] {
            if known._$state == .registered, !known._$isChanged { _refresh(known, from: snapshot) }
            return known
        }
        return _materialize(snapshot)
    }

    /// The registered object for a snapshot the store returned, partial when `fault` lists its loaded attributes
    /// (nil: a whole row, ``_object(for:)``): a new object gets the others when first read; a registered one is
    /// never unloaded (a newer version of it is read whole).
    func _object(for snapshot: ModelSnapshot, partial fault: PartialFault?) -> ModelObject {
        guard let fault else { return _object(for: snapshot) }
        if let known = registry[snapshot.id] {
            guard known._$state == .registered, !known._$isChanged else { return known }
            if let committed = known._$committed, snapshot.transactionNumber > committed.transactionNumber {
                if known._$fault != nil {
                    _fulfill(known)
                } else if let stored = store.rows(for: [snapshot.id]).first ?? nil {
                    _refresh(known, from: stored)
                }
            }
            return known
        }
        let object = _materialize(snapshot)
        object._$fault = fault
        return object
    }

    /// Loads the attributes a partial fetch left out of `object` from its row in the store (one row read), all
    /// at once, and any newer saved values of the others (telling observers). A row the store no longer has (another
    /// context deleted it) leaves each unloaded attribute at its declared default, recorded in ``readFailures``.
    func _fulfill(_ object: ModelObject) {
        guard object._$fault != nil else { return }
        _fill(object, from: store.rows(for: [object._$id]).first ?? nil)
    }

    /// Fills the unloaded attributes of `object` from `row`, its whole saved row (nil: gone), then refreshes it.
    private func _fill(_ object: ModelObject, from row: ModelSnapshot?) {
        guard object._$fault != nil else { return }
        object._$fillUnloaded { slot in
            if let row { return row.attributes[slot] }
            let attribute = object._$metadata.attributes[slot]
            _recordReadFailure(.init(model: object._$id, property: attribute.name,
                                     reason: "the object was deleted from the store before this property, which "
                                         + "its fetch did not load (propertiesToFetch), was first read"))
            return attribute.encodedFallback
        }
        if let row { _refresh(object, from: row) }
    }

    /// Loads a newer saved version of an unchanged object, telling observers what changed; fills the attributes a
    /// partial fetch left out first (`snapshot` is a whole row).
    private func _refresh(_ object: ModelObject, from snapshot: ModelSnapshot) {
        if object._$fault != nil { return _fill(object, from: snapshot) }
        guard let committed = object._$committed, snapshot.transactionNumber > committed.transactionNumber else {
            return
        }
        object._$takeSaved(snapshot)
    }

    /// Creates the object for a stored row without evaluating its declared defaults, and registers it (or, when
    /// `registering` is false, makes a detached copy that reads like the saved object but is not this context's).
    func _materialize(_ snapshot: ModelSnapshot, registering: Bool = true) -> ModelObject {
        guard let metadata = runtime.metadataByName[snapshot.id.entityName] else {
            preconditionFailure("the store returned \(snapshot.id), whose entity the container's schema lacks")
        }
        let object: ModelObject
        if metadata.isDynamic {
            object = DynamicModel(metadata: metadata)
        } else {
            let stack = ConstructionStack.current
            stack.materialization = .init(type: ObjectIdentifier(metadata.type),
                                          attributeFrame: stack.attributeValues.count,
                                          relationshipFrame: stack.relationshipValues.count)
            object = metadata.type.init()
            stack.materialization = nil
            object._$isMaterializing = false
        }
        object._$attach(to: snapshot, in: self, registering: registering)
        guard registering else { return object }
        registry[snapshot.id] = object
        return object
    }

    // MARK: Change tracking

    /// Called before any change to `object`'s values.
    func _willChange(_ object: ModelObject) {
        if autosaveEnabled { scheduleAutosave() }
        record(object)
        if object._$noteChange() { list(object, in: .changed) }
    }

    func _recordReadFailure(_ failure: ReadFailure) {
        readFailures.append(failure)
    }

    /// Records that reading attribute `slot` of `object` failed: the failure, and the stored value it could not read,
    /// so that a save does not write the default the read returned back over that value.
    func _readFailed(_ object: ModelObject, slot: Int, failure: ReadFailure) {
        _recordReadFailure(failure)
        unreadValues[object._$id, default: [:]][slot] = object._$attributes[slot]
    }

    /// Forgets a failed read of attribute `slot` of `object` once a read of it succeeds.
    func _readSucceeded(_ object: ModelObject, slot: Int) {
        guard unreadValues[object._$id]?.removeValue(forKey: slot) != nil else { return }
        if unreadValues[object._$id]?.isEmpty == true { unreadValues[object._$id] = nil }
    }

    /// Whether a read of some attribute failed and no later read of it succeeded.
    var hasUnreadValues: Bool { !unreadValues.isEmpty }

    // MARK: Rollback and transactions

    /// Discards every unsaved change: inserted objects leave the context, changed and deleted ones get their
    /// saved values back (observers are told). Removes every undo and redo action, as Core Data does.
    public func rollback() {
        undoManager?.removeAllActions()
        for object in insertedObjects {
            registry[object._$id] = nil
            object._$leave(deleted: false)
        }
        for object in changedObjects + deletedObjects {
            object._$revert()
            registry[object._$id] = object
        }
        clearLists()
        journal = journal.map { _ in [:] }
    }

    /// Runs `block`, then saves. If `block` throws, the changes it made are undone (changes made before the
    /// transaction stay pending) and the error is rethrown; nothing is saved.
    ///
    /// - Throws: what `block` throws, or what ``save()`` throws.
    public func transaction(block: () throws -> Void) throws {
        guard journal == nil else {
            // Nested: the outer transaction owns the savepoint and the save.
            try block()
            return
        }
        journal = [:]
        do {
            try block()
        } catch {
            restoreJournal()
            journal = nil
            throw error
        }
        journal = nil
        try save()
    }

    /// What an object looked like before the current transaction first touched it.
    struct JournalEntry {
        let object: ModelObject
        let attributes: AttributeValues
        let relationships: RelationshipValues
        let state: ModelObject.State
        let isChanged: Bool
        let context: ModelContext?
        let unmanagedTargets: [PersistentIdentifier: ModelObject]
    }

    /// Called before any change to `object`: remembers its state for the open undo group and the transaction.
    /// An object a partial fetch left unloaded is loaded first, so that every change applies to a whole object.
    func record(_ object: ModelObject) {
        if object._$fault != nil { _fulfill(object) }
        undoManager?._record(object)
        guard journal != nil, journal![ObjectIdentifier(object)] == nil else { return }
        journal![ObjectIdentifier(object)] = JournalEntry(
            object: object, attributes: object._$attributes, relationships: object._$relationships,
            state: object._$state, isChanged: object._$isChanged, context: object._$context,
            unmanagedTargets: object._$unmanagedTargets)
    }

    private func restoreJournal() {
        for entry in (journal ?? [:]).values {
            let object = entry.object
            object._$load(ModelSnapshot(id: object._$id, attributes: entry.attributes,
                                       relationships: entry.relationships), notify: true)
            object._$restore(state: entry.state, isChanged: entry.isChanged, context: entry.context)
            object._$unmanagedTargets = entry.unmanagedTargets
            registry[object._$id] = entry.context === self && entry.state != .unmanaged ? object : nil
        }
    }
}

/// A stored value that could not be decoded when a property read it.
public struct ReadFailure: Sendable, Hashable, CustomStringConvertible {
    /// The object whose property was read.
    public let model: PersistentIdentifier
    /// The property's name.
    public let property: String
    /// Why the value could not be decoded.
    public let reason: String

    /// `Entity/KEY.property could not be read: reason`.
    public var description: String { "\(model).\(property) could not be read: \(reason)" }
}
