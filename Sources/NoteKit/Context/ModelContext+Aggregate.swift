#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ModelContext {
    /// Aggregates of the objects `descriptor` matches, computed by the store without making them: counts, sums,
    /// minimums, maximums and means of persisted attributes (or of attributes reached through to-one relationships),
    /// each typed as the attribute is.
    ///
    /// ```swift
    /// let pinned = FetchDescriptor<Note>(predicate: #Predicate { $0.isPinned })
    /// let (count, oldest, newest) = try context.aggregate(pinned, .count, .min(\.createdAt), .max(\.createdAt))
    /// ```
    ///
    /// The descriptor's predicate selects the objects, as for ``fetch(_:)`` (its sort, limit and offset do not
    /// apply); unsaved inserts, changes and deletes count unless `includePendingChanges` is false. A predicate part
    /// the store cannot run (``FetchPlan/objectParts``) is evaluated on objects first, as a fetch does, unless the
    /// descriptor or the container refuses that (``ObjectEvaluation``).
    ///
    /// - Throws: ``FetchError/invalidAggregate(entity:reason:)`` for a key path that is not a persisted attribute (or
    ///   one reached through to-one relationships); what ``fetch(_:)`` throws; ``FetchError/predicateFailed(entity:reason:)``
    ///   for a sum that overflows its type.
    /// - Complexity: a count with no predicate is the entity's size; otherwise one pass over the matching rows, found
    ///   as a fetch finds them (an index range, a relationship plan), reading only the attributes aggregated.
    public func aggregate<T: PersistentModel, each Value>(_ descriptor: FetchDescriptor<T>,
                                                         _ aggregates: repeat Aggregate<T, each Value>) throws
        -> (repeat each Value) {
        var operations: [StoreAggregateRequest.Operation] = []
        let metadata = try aggregateMetadata(for: T.self)
        for aggregate in repeat each aggregates { operations.append(try operation(aggregate, metadata)) }
        let result = try runAggregate(descriptor, metadata: metadata, groupBy: nil, operations: operations,
                                      order: .key(ascending: true), limit: nil)
        let values = result.groups.first?.values ?? operations.map { _ in .null }
        var next = 0
        func take() -> StoredValue {
            defer { next += 1 }
            return values[next]
        }
        return (repeat try (each aggregates).decode(take()))
    }

    /// Aggregates of the objects `descriptor` matches, per value of `key`: an attribute, a to-one relationship (the
    /// groups' keys are its targets, as objects of this context), or an attribute reached through to-one
    /// relationships (`\.folder?.name`). Groups come in `order`, at most `limit` of them.
    ///
    /// ```swift
    /// let perFolder = try context.aggregate(FetchDescriptor<Note>(), groupedBy: \.folder?.name, .count)
    /// for group in perFolder { print(group.key ?? "unfiled", group.values) }
    /// let busiest = try context.aggregate(FetchDescriptor<Note>(), groupedBy: \.folder,
    ///                                     order: .aggregate(0, .reverse), limit: 3, .count, .max(\.updatedAt))
    /// ```
    ///
    /// A group holds at least one object: a folder without notes has no group. The objects with no value for the key
    /// (no target, or nil) form the group of key nil. Counts per target of a to-one relationship over every object
    /// (no predicate) are read from the targets' stored inverse references, without reading the objects.
    ///
    /// - Throws: as ``aggregate(_:_:)``; ``FetchError/invalidAggregate(entity:reason:)`` also for a key that is a
    ///   to-many relationship, or an order naming no aggregate.
    public func aggregate<T: PersistentModel, Key, each Value>(
        _ descriptor: FetchDescriptor<T>, groupedBy key: KeyPath<T, Key>, order: AggregateOrder = .key(.forward),
        limit: Int? = nil, _ aggregates: repeat Aggregate<T, each Value>
    ) throws -> [AggregateGroup<Key, repeat each Value>] {
        let metadata = try aggregateMetadata(for: T.self)
        var operations: [StoreAggregateRequest.Operation] = []
        for aggregate in repeat each aggregates { operations.append(try operation(aggregate, metadata)) }
        let (groupBy, decodeKey) = try groupKey(key, metadata)
        let storeOrder: StoreAggregateRequest.GroupOrder
        switch order {
        case .key(let direction): storeOrder = .key(ascending: direction == .forward)
        case let .aggregate(position, direction):
            guard operations.indices.contains(position) else {
                throw FetchError.invalidAggregate(entity: metadata.entityName,
                                                  reason: "the order names aggregate \(position) of \(operations.count)")
            }
            storeOrder = .aggregate(position, ascending: direction == .forward)
        }
        let result = try runAggregate(descriptor, metadata: metadata, groupBy: groupBy, operations: operations,
                                      order: storeOrder, limit: limit)
        return try result.groups.map { group in
            var next = 0
            func take() -> StoredValue {
                defer { next += 1 }
                return group.values[next]
            }
            return AggregateGroup(key: try decodeKey(group.key), values: (repeat try (each aggregates).decode(take())))
        }
    }

    private func aggregateMetadata<T: PersistentModel>(for type: T.Type) throws -> ModelMetadata {
        try core.checkOpen()
        guard let metadata = runtime.metadataByName[T.entityName], metadata.describes(T.self) else {
            throw FetchError.unknownEntity(T.entityName)
        }
        return metadata
    }

    /// The store's operation for `aggregate`.
    private func operation<T, V>(_ aggregate: Aggregate<T, V>, _ metadata: ModelMetadata) throws
        -> StoreAggregateRequest.Operation {
        guard let keyPath = aggregate.keyPath else { return .init(aggregate.kind) }
        guard let operand = attributeOperand(keyPath, metadata) else {
            throw FetchError.invalidAggregate(entity: metadata.entityName,
                                              reason: "\(keyPath) is not a persisted attribute, nor one reached through "
                                                  + "to-one relationships")
        }
        return .init(aggregate.kind, operand)
    }

    /// The operand of a key path to a persisted attribute, directly or through to-one relationships.
    private func attributeOperand(_ keyPath: AnyKeyPath, _ metadata: ModelMetadata) -> FetchOperand? {
        guard let path = metadata.propertyPath(for: keyPath), case .attribute(let slot) = path.leaf else { return nil }
        return path.hops.reversed().reduce(FetchOperand.attribute(slot)) { .related($1, $0, required: false) }
    }

    /// The grouping operand of `key`, and how a group's stored key becomes a `Key`.
    private func groupKey<T, Key>(_ key: KeyPath<T, Key>, _ metadata: ModelMetadata) throws
        -> (FetchOperand, (StoredValue) throws -> Key) {
        guard let path = metadata.propertyPath(for: key) else {
            throw FetchError.invalidAggregate(entity: metadata.entityName,
                                              reason: "\(key) is not a persisted property, nor one reached through "
                                                  + "to-one relationships")
        }
        var holder = metadata
        for hop in path.hops { holder = holder.relationships[hop].destinationMetadata }
        let leaf: FetchOperand
        let decode: (StoredValue) throws -> Key
        switch path.leaf {
        case .attribute(let slot):
            leaf = .attribute(slot)
            decode = { stored in try decodeStored(stored, as: Key.self) }
        case .relationship(let slot) where !holder.relationships[slot].isToMany:
            leaf = .toOne(slot)
            let destination = holder.relationships[slot].destinationMetadata.entityName
            decode = { [unowned self] stored in
                guard case .uuid(let key) = stored,
                      let object = self._target(PersistentIdentifier(entityName: destination, primaryKey: key)) else {
                    return try decodeNil(Key.self, entity: metadata.entityName)
                }
                guard let typed = object as? Key else {
                    throw FetchError.invalidAggregate(entity: metadata.entityName, reason: "a key of type \(Key.self)")
                }
                return typed
            }
        case .relationship:
            throw FetchError.invalidAggregate(entity: metadata.entityName,
                                              reason: "\(key) is a to-many relationship: group by a to-one one")
        }
        let operand = path.hops.reversed().reduce(leaf) { .related($1, $0, required: false) }
        return (operand, decode)
    }

    /// Runs an aggregation of `descriptor`'s objects: the compiled predicate in the store, with this context's
    /// unsaved changes counted as they are now.
    private func runAggregate<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, metadata: ModelMetadata,
                                                  groupBy: FetchOperand?,
                                                  operations: [StoreAggregateRequest.Operation],
                                                  order: StoreAggregateRequest.GroupOrder,
                                                  limit: Int?) throws -> StoreAggregateResult {
        let compiled = descriptor.compiled(for: metadata)
        var request = StoreAggregateRequest(entity: metadata.entityName, groupBy: groupBy, operations: operations,
                                            order: order, limit: limit)
        if compiled.residual.isEmpty {
            request.filter = compiled.filter
        } else {
            // What the store cannot run narrows on objects first, as a fetch does (and is refused as a fetch is).
            var matching = descriptor
            matching.sortBy = []
            matching.fetchLimit = nil
            matching.fetchOffset = nil
            let ids = try fetchIdentifiers(matching)
            request.filter = .isIn(.identifier, ids.map { .uuid($0.primaryKey) })
        }
        if descriptor.includePendingChanges {
            let pending = (insertedObjects + changedObjects + deletedObjects)
                .filter { $0._$metadata.entityName == metadata.entityName }
            request.excluding = Set(pending.map(\._$id))
            request.additionalRows = pending.filter { $0._$state != .deleted }.map(\._$row)
            let readsOthers = compiled.readsOtherRows || (groupBy?.readsOtherRows ?? false)
                || operations.contains { $0.operand?.readsOtherRows ?? false }
            if readsOthers && hasChanges {
                var overlay: [PersistentIdentifier: ModelSnapshot?] = [:]
                for object in insertedObjects + changedObjects { overlay[object._$id] = .some(object._$row) }
                for object in deletedObjects { overlay[object._$id] = .some(nil) }
                request.overlay = overlay
            }
        }
        do {
            return try store.aggregate(request)
        } catch FetchError.predicateFailed(_, let reason) {
            throw FetchError.predicateFailed(entity: metadata.entityName, reason: reason)
        }
    }
}

/// The `Key` a group of objects without a key value has: nil.
private func decodeNil<Key>(_ type: Key.Type, entity: String) throws -> Key {
    guard let nothing = Optional<Any>.none as Any as? Key else {
        throw FetchError.invalidAggregate(entity: entity, reason: "a group without a value for a key of type \(Key.self)")
    }
    return nothing
}
