import FoundationEssentials

extension ModelContext {
    /// The objects that match `descriptor`, in its order.
    ///
    /// Saved objects come from the store; unless `includePendingChanges` is false, objects inserted, changed or
    /// deleted in this context and not saved count as they are now. Each object is the context's one instance for
    /// its identifier. A save made by another context of the same container is seen by the next fetch.
    ///
    /// - Throws: ``FetchError`` (a forced unwrap in the predicate met `nil`, an entity the schema lacks, a
    ///   predicate evaluated on objects that threw).
    /// - Complexity: with a compiled predicate, the store's cost (an index range, or one pass over the entity's
    ///   saved values without creating objects) plus one object per result; otherwise one object per saved object
    ///   of the entity (see ``explain(_:)``).
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        try run(descriptor, wanting: .snapshots).objects.map { unsafeDowncast($0, to: T.self) }
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
        try run(descriptor, wanting: .identifiers).plan
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

    func run<T: PersistentModel>(_ descriptor: FetchDescriptor<T>,
                                 wanting resultType: StoreFetchRequest.ResultType) throws -> FetchOutcome {
        let metadata = try metadata(for: T.self)
        let compiled = descriptor.compiled(for: metadata)
        guard compiled.isStoreEvaluable, let sort = compiled.sort else {
            return try runOnObjects(descriptor, metadata: metadata, wanting: resultType)
        }
        let offset = max(0, descriptor.fetchOffset ?? 0)
        let pending = descriptor.includePendingChanges ? pendingObjects(of: metadata) : []
        if pending.isEmpty {
            let result = try store.fetch(StoreFetchRequest(
                entity: metadata.entityName, filter: compiled.filter, sort: sort, offset: offset,
                limit: descriptor.fetchLimit, resultType: resultType))
            var outcome = FetchOutcome(identifiers: result.identifiers, count: result.count, plan: result.plan)
            outcome.objects = result.snapshots.map(_object(for:))
            return outcome
        }

        // Unsaved objects count as they are now: their saved rows are replaced in place (keeping the store's
        // order), dropped when deleted or no longer matching, and the rest are appended.
        let result = try store.fetch(StoreFetchRequest(
            entity: metadata.entityName, filter: compiled.filter, sort: sort, resultType: .snapshots))
        var pendingByID: [PersistentIdentifier: ModelObject] = [:]
        for object in pending { pendingByID[object._$id] = object }
        func current(_ object: ModelObject) throws -> ModelSnapshot? {
            guard object._$state != .deleted else { return nil }
            let snapshot = object._$snapshot
            do {
                return try compiled.filter?.matches(snapshot) ?? true ? snapshot : nil
            } catch is UnwrappedNil {
                throw FetchError.unwrappedNil(entity: metadata.entityName, model: object._$id)
            }
        }
        var merged: [ModelSnapshot] = []
        for snapshot in result.snapshots {
            guard let object = pendingByID.removeValue(forKey: snapshot.id) else {
                merged.append(snapshot)
                continue
            }
            if let now = try current(object) { merged.append(now) }
        }
        for object in pending where pendingByID[object._$id] != nil {
            if let now = try current(object) { merged.append(now) }
        }
        if !sort.isEmpty { try EntityTable.sortRows(&merged, by: sort, entity: metadata.entityName) }
        let slice = Array(merged.dropFirst(offset).prefix(descriptor.fetchLimit ?? .max))
        var outcome = FetchOutcome(count: slice.count, plan: result.plan)
        outcome.plan.recordsReturned = slice.count
        switch resultType {
        case .snapshots: outcome.objects = slice.map { registry[$0.id] ?? _object(for: $0) }
        case .identifiers: outcome.identifiers = slice.map(\.id)
        case .count: break
        }
        return outcome
    }

    /// The objects of `metadata`'s entity that this context inserted, changed or deleted and has not saved.
    private func pendingObjects(of metadata: ModelMetadata) -> [ModelObject] {
        let entity = metadata.entityName
        return (insertedObjects + changedObjects + deletedObjects).filter { $0._$metadata.entityName == entity }
    }

    /// Evaluates a predicate or sort the store cannot run, on model objects.
    private func runOnObjects<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, metadata: ModelMetadata,
                                                  wanting resultType: StoreFetchRequest.ResultType) throws
        -> FetchOutcome {
        let stored = try store.fetch(StoreFetchRequest(entity: metadata.entityName))
        var objects = stored.snapshots.map(_object(for:))
        if descriptor.includePendingChanges {
            objects = objects.filter { $0._$state != .deleted }
                + insertedObjects.filter { $0._$metadata.entityName == metadata.entityName }
        }
        var models = objects.map { unsafeDowncast($0, to: T.self) }
        if let predicate = descriptor.predicate {
            do {
                models = try models.filter { try predicate.evaluate($0) }
            } catch {
                throw FetchError.predicateFailed(entity: metadata.entityName, reason: "\(error)")
            }
        }
        if !descriptor.sortBy.isEmpty {
            models.sort { a, b in
                for comparator in descriptor.sortBy {
                    switch comparator.compare(a, b) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                return a._$id < b._$id
            }
        }
        let offset = max(0, descriptor.fetchOffset ?? 0)
        let slice = Array(models.dropFirst(offset).prefix(descriptor.fetchLimit ?? .max))
        var plan = stored.plan
        plan.evaluatedInMemory = true
        plan.recordsReturned = slice.count
        var outcome = FetchOutcome(count: slice.count, plan: plan)
        switch resultType {
        case .snapshots: outcome.objects = slice
        case .identifiers: outcome.identifiers = slice.map(\._$id)
        case .count: break
        }
        return outcome
    }
}
