#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ModelContext {
    /// The objects that match `descriptor`, in its order.
    ///
    /// Saved objects come from the store; unless `includePendingChanges` is false, objects inserted, changed or
    /// deleted in this context and not saved count as they are now. Each object is the context's one instance for
    /// its identifier. A save made by another context of the same container is seen by the next fetch.
    ///
    /// - Throws: ``FetchError`` (a forced unwrap in the predicate met `nil`, an entity the schema lacks, a
    ///   predicate evaluated on objects that threw); ``ModelContainerError/closed(store:)`` once the container is
    ///   closed.
    /// - Complexity: with a compiled predicate, the store's cost (an index range, or one pass over the entity's
    ///   saved values without creating objects) plus one object per result; otherwise one object per saved object
    ///   of the entity (see ``explain(_:)``).
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        try run(descriptor, wanting: .rows).objects.map { unsafeDowncast($0, to: T.self) }
    }

    /// How many objects match `descriptor` (its limit and offset apply), without creating objects when the
    /// predicate compiles.
    ///
    /// - Throws: as ``fetch(_:)``.
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        try run(descriptor, wanting: .count).count
    }

    /// The identifiers of the objects that match `descriptor`, in its order.
    ///
    /// - Throws: as ``fetch(_:)``.
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier] {
        try run(descriptor, wanting: .identifiers).identifiers
    }

    /// Runs `descriptor` and reports how: which index answered it and how many stored records were examined.
    ///
    /// - Throws: as ``fetch(_:)``.
    public func explain<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> FetchPlan {
        try run(descriptor, wanting: .identifiers, onlyThePlan: true).plan
    }

    struct FetchOutcome {
        var objects: [ModelObject] = []
        var identifiers: [PersistentIdentifier] = []
        var count = 0
        var plan: FetchPlan
    }

    private func metadata<T: PersistentModel>(for type: T.Type) throws -> ModelMetadata {
        guard let metadata = runtime.metadataByName[T.entityName], metadata.describes(T.self) else {
            throw FetchError.unknownEntity(T.entityName)
        }
        return metadata
    }

    /// Runs `descriptor` for `resultType`. `onlyThePlan` (``explain(_:)``) lets a fetch finished on objects skip
    /// sorting them: its plan is the same in any order (the store's plan of a sorted fetch is not, so it still runs).
    func run<T: PersistentModel>(_ descriptor: FetchDescriptor<T>,
                                 wanting resultType: StoreFetchRequest.ResultType,
                                 onlyThePlan: Bool = false) throws -> FetchOutcome {
        try core.checkOpen()
        let metadata = try metadata(for: T.self)
        let compiled = descriptor.compiled(for: metadata)
        if !compiled.isStoreEvaluable,
           (descriptor.objectEvaluation ?? core.objectEvaluation.withLock { $0 }) == .refused {
            throw FetchError.notRunInStore(entity: metadata.entityName, parts: compiled.objectParts)
        }
        guard compiled.isStoreEvaluable, let sort = compiled.sort else {
            return try runOnObjects(descriptor, compiled: compiled, metadata: metadata,
                                    wanting: onlyThePlan ? .count : resultType)
        }
        let offset = max(0, descriptor.fetchOffset ?? 0)
        let limit = descriptor.effectiveLimit
        let pending = descriptor.includePendingChanges ? pendingObjects(of: metadata) : []
        let overlay = descriptor.includePendingChanges && compiled.readsOtherRows ? pendingOverlay() : [:]
        let loading = descriptor.loading(for: metadata)
        let attributes = resultType == .rows ? loading.attributes : nil
        if pending.isEmpty {
            var request = StoreFetchRequest(entity: metadata.entityName, filter: compiled.filter, sort: sort,
                                            offset: offset, limit: limit, resultType: resultType)
            request.attributes = attributes
            request.overlay = overlay
            return try runInStore(request, metadata: metadata, loading: loading)
        }

        // Unsaved objects count as they are now: their saved rows are replaced in place (keeping the store's
        // order), dropped when deleted or no longer matching, and the rest are appended. A filter or sort that
        // follows relationships reads the other objects as they are now too.
        var request = StoreFetchRequest(entity: metadata.entityName, filter: compiled.filter, sort: sort,
                                        resultType: .rows)
        request.attributes = attributes
        request.overlay = overlay
        let result = try store.fetch(request)
        let fault = PartialFault.of(result.loadedAttributes, metadata: metadata)
        let lookup = lookup(over: overlay)
        let filter = try compiled.filter.map(PreparedFilter.init)
        var pendingByID: [PersistentIdentifier: ModelObject] = [:]
        for object in pending { pendingByID[object._$id] = object }
        var merged = try Self.merge(result.rows, pending: pending, pendingByID: pendingByID, filter: filter,
                                    lookup: lookup, entity: metadata.entityName)
        if !sort.isEmpty {
            try EntityTable.sortRows(&merged, by: sort, entity: metadata.entityName, lookup: lookup,
                                     limit: limit.map { offset + $0 })
        }
        let slice = Array(merged.dropFirst(offset).prefix(limit ?? .max))
        var outcome = FetchOutcome(count: slice.count, plan: result.plan)
        outcome.plan.rowsReturned = slice.count
        switch resultType {
        case .rows:
            // Pending objects are themselves; saved rows go through the lookup that refreshes unchanged objects.
            outcome.objects = slice.map { row in
                pendingByID[row.id] ?? _object(for: row, partial: fault)
            }
            if !loading.prefetched.isEmpty { prefetch(loading.prefetched, of: outcome.objects) }
        case .identifiers: outcome.identifiers = slice.map(\.id)
        case .count: break
        }
        return outcome
    }

    /// `request` run by the store alone (no unsaved object of its entity to count): its rows as objects.
    private func runInStore(_ request: StoreFetchRequest, metadata: ModelMetadata,
                            loading: FetchLoading) throws -> FetchOutcome {
        let result = try store.fetch(request)
        var outcome = FetchOutcome(identifiers: result.identifiers, count: result.count, plan: result.plan)
        let fault = PartialFault.of(result.loadedAttributes, metadata: metadata)
        registry.reserve(adding: result.rows.count)
        outcome.objects = result.rows.map { _object(for: $0, partial: fault) }
        if !loading.prefetched.isEmpty { prefetch(loading.prefetched, of: outcome.objects) }
        return outcome
    }

    /// The saved rows with the unsaved objects as they are now: a saved row of a pending object replaced in place
    /// by its current state, or dropped when it is deleted or no longer matches `filter`, and the other pending
    /// objects that match appended.
    private static func merge(_ saved: [ModelSnapshot], pending: [ModelObject],
                              pendingByID: [PersistentIdentifier: ModelObject], filter: PreparedFilter?,
                              lookup: RowLookup, entity: String) throws -> [ModelSnapshot] {
        func current(_ object: ModelObject) throws -> ModelSnapshot? {
            guard object._$state != .deleted else { return nil }
            let snapshot = object._$row
            guard let filter else { return snapshot }
            return try EntityTable.matches(filter, snapshot, lookup: lookup, entity: entity) ? snapshot : nil
        }
        var merged: [ModelSnapshot] = []
        var seen = Set<PersistentIdentifier>()
        for snapshot in saved {
            seen.insert(snapshot.id)
            if let object = pendingByID[snapshot.id] {
                if let now = try current(object) { merged.append(now) }
            } else {
                merged.append(snapshot)
            }
        }
        for object in pending where !seen.contains(object._$id) {
            if let now = try current(object) { merged.append(now) }
        }
        return merged
    }

    /// This context's unsaved changes of every entity as rows: each inserted or changed object as it is now, nil for
    /// a deleted one.
    private func pendingOverlay() -> [PersistentIdentifier: ModelSnapshot?] {
        var overlay: [PersistentIdentifier: ModelSnapshot?] = [:]
        for object in insertedObjects + changedObjects { overlay[object._$id] = .some(object._$row) }
        for object in deletedObjects { overlay[object._$id] = .some(nil) }
        return overlay
    }

    /// Reads rows as this context sees them: its unsaved changes in `overlay`, the store's rows otherwise.
    private func lookup(over overlay: [PersistentIdentifier: ModelSnapshot?]) -> RowLookup {
        let store = store
        return RowLookup { id in
            if let pending = overlay[id] { return pending }
            return store.rows(for: [id]).first ?? nil
        }
    }

    /// The objects of `metadata`'s entity that this context inserted, changed or deleted and has not saved.
    private func pendingObjects(of metadata: ModelMetadata) -> [ModelObject] {
        let entity = metadata.entityName
        return (insertedObjects + changedObjects + deletedObjects).filter { $0._$metadata.entityName == entity }
    }

    /// Evaluates a predicate or sort the store cannot run, on model objects: the store first narrows the candidates
    /// by the conjuncts of the predicate it can run (``CompiledFetch/filter``), and the whole predicate and the sort
    /// then run on the objects left.
    ///
    /// With pending changes included, the objects are this context's, as they are now (every unsaved object of the
    /// entity is a candidate, whatever its saved values). Without, an object with unsaved changes is judged by a
    /// detached copy holding its saved values, and the result is still this context's object.
    private func runOnObjects<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, compiled: CompiledFetch,
                                                  metadata: ModelMetadata,
                                                  wanting resultType: StoreFetchRequest.ResultType) throws
        -> FetchOutcome {
        var request = StoreFetchRequest(entity: metadata.entityName, filter: compiled.filter)
        if descriptor.includePendingChanges && compiled.readsOtherRows { request.overlay = pendingOverlay() }
        let stored = try store.fetch(request)
        // Each candidate: the object the caller gets, and the object the predicate and sort look at.
        var candidates: [(result: ModelObject, judged: ModelObject)]
        if descriptor.includePendingChanges {
            var seen = Set<PersistentIdentifier>()
            var objects = stored.rows.map { _object(for: $0) }.filter { $0._$state != .deleted }
            for object in objects { seen.insert(object._$id) }
            objects += pendingObjects(of: metadata).filter { $0._$state != .deleted && !seen.contains($0._$id) }
            candidates = objects.map { ($0, $0) }
        } else {
            candidates = stored.rows.map { snapshot in
                let object = _object(for: snapshot)
                let hasPendingChanges = object._$isChanged || object._$state == .deleted
                return (object, hasPendingChanges ? _materialize(snapshot, registering: false) : object)
            }
        }
        if let predicate = descriptor.predicate {
            do {
                candidates = try candidates.filter { try predicate.evaluate(unsafeDowncast($0.judged, to: T.self)) }
            } catch {
                throw FetchError.predicateFailed(entity: metadata.entityName, reason: "\(error)")
            }
        }
        // A count is the same in any order: only what is returned is sorted.
        if resultType != .count, let last = descriptor.sortBy.last {
            // Ties follow the identifier in the direction of the last key, as the store orders them.
            candidates.sort { a, b in
                let x = unsafeDowncast(a.judged, to: T.self), y = unsafeDowncast(b.judged, to: T.self)
                for comparator in descriptor.sortBy {
                    switch comparator.compare(x, y) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                return last.order == .forward ? x._$id < y._$id : y._$id < x._$id
            }
        }
        let offset = max(0, descriptor.fetchOffset ?? 0)
        let slice = Array(candidates.dropFirst(offset).prefix(descriptor.effectiveLimit ?? .max).map(\.result))
        var plan = stored.plan
        plan.evaluatedInMemory = true
        plan.objectParts = compiled.objectParts
        plan.rowsReturned = slice.count
        var outcome = FetchOutcome(count: slice.count, plan: plan)
        switch resultType {
        case .rows:
            outcome.objects = slice
            prefetch(descriptor.loading(for: metadata).prefetched, of: slice)
        case .identifiers: outcome.identifiers = slice.map(\._$id)
        case .count: break
        }
        return outcome
    }
}

extension ModelContext {
    /// Reads the targets of `objects`' relationships at positions `slots` that this context has not registered,
    /// in one store call, and registers them: following those relationships then reads nothing.
    func prefetch(_ slots: [Int], of objects: [ModelObject]) {
        guard !slots.isEmpty, !objects.isEmpty else { return }
        var seen = Set<PersistentIdentifier>()
        var targets: [PersistentIdentifier] = []
        for object in objects {
            for slot in slots {
                for id in object._$relationships[slot].identifiers where registry[id] == nil && seen.insert(id).inserted {
                    targets.append(id)
                }
            }
        }
        guard !targets.isEmpty else { return }
        for row in store.rows(for: targets) {
            if let row { _ = _object(for: row) }
        }
    }
}

extension PartialFault {
    /// What a store's ``StoreFetchResult/loadedAttributes`` says of its rows: nil when they are whole.
    static func of(_ loadedAttributes: [Int]?, metadata: ModelMetadata) -> PartialFault? {
        guard let loadedAttributes else { return nil }
        var loaded = [Bool](repeating: false, count: metadata.attributes.count)
        for slot in loadedAttributes where slot >= 0 && slot < loaded.count { loaded[slot] = true }
        return loaded.contains(false) ? PartialFault(loaded: loaded) : nil
    }
}

extension FetchDescriptor {
    /// The limit as applied: nil for no limit. As in Core Data, under which SwiftData runs, a limit of zero (or
    /// less) means no limit.
    var effectiveLimit: Int? {
        guard let fetchLimit, fetchLimit > 0 else { return nil }
        return fetchLimit
    }
}

extension AttributeMetadata {
    /// The stored form of ``fallbackValue``: what an attribute whose stored value is lost reads as.
    var encodedFallback: StoredValue { storedFallback ?? (try? codec?.encodeAny(fallbackValue)) ?? .null }
}
