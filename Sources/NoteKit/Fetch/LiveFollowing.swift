import Synchronization

/// What ``LiveQuery`` and ``LiveAggregate`` share: a subscription to the store's transactions, on the actor that owns
/// the object, that computes the results again when a transaction touches an entity they read.
protocol LiveFollowing: AnyObject {
    /// The context the object computes with.
    var context: ModelContext { get }
    /// The entities whose changes can change the results.
    var relevantEntities: Set<String> { get }
    /// The transaction number the last computation saw: transactions up to it are in the results already.
    var computedTransactionNumber: UInt64 { get }
    /// Computes the results again, whatever was committed.
    func recompute()
}

/// Makes `owner` follow `transactions` on `isolation` (the actor it belongs to) until it is released or the
/// stream ends; returns the task doing it, for the object to cancel when it goes.
///
/// Subscribe before the first computation, so that nothing committed in between is missed.
func followTransactions<Owner: LiveFollowing>(_ owner: Owner, _ transactions: AsyncStream<HistoryRecord>,
                                  isolation: isolated any Actor) -> Task<Void, Never> {
    Task { [weak owner] in
        _ = isolation   // the task runs on the owner's actor: it captures the isolated parameter
        for await record in transactions {
            guard let owner else { return }
            owner.receive(record)
        }
    }
}

extension LiveFollowing {
    /// Computes again when `record` is newer than the last computation and touches a relevant entity.
    func receive(_ record: HistoryRecord) {
        guard record.number > computedTransactionNumber else { return }
        let relevant = relevantEntities
        let touches = record.inserted.contains { relevant.contains($0.entityName) }
            || record.updated.contains { relevant.contains($0.id.entityName) }
            || record.deleted.contains { relevant.contains($0.id.entityName) }
        if touches { recompute() }
    }
}

/// Which entities a live object's results depend on.
enum LiveRelevance {
    /// The descriptor's entity and, when its predicate or sort reads through relationships or is evaluated on
    /// objects (which may), every entity reachable from it.
    static func entities<Model: PersistentModel>(read descriptor: FetchDescriptor<Model>,
                                                 context: ModelContext) -> Set<String> {
        guard let metadata = context.runtime.metadataByName[Model.entityName] else { return [Model.entityName] }
        let compiled = descriptor.compiled(for: metadata)
        guard !compiled.isStoreEvaluable || compiled.readsOtherRows else { return [metadata.entityName] }
        return reachable(from: metadata)
    }

    /// The entities `keyPaths` read from `Model`: its own, and those of the relationships each path goes through
    /// (every reachable entity for a key path the metadata cannot resolve, such as a computed property).
    static func entities<Model: PersistentModel>(read keyPaths: [AnyKeyPath], of model: Model.Type,
                                                 context: ModelContext) -> Set<String> {
        guard let metadata = context.runtime.metadataByName[Model.entityName] else { return [Model.entityName] }
        var entities: Set<String> = [metadata.entityName]
        for keyPath in keyPaths {
            guard let path = metadata.propertyPath(for: keyPath) else { return reachable(from: metadata) }
            var holder = metadata
            for hop in path.hops {
                holder = holder.relationships[hop].destinationMetadata
                entities.insert(holder.entityName)
            }
        }
        return entities
    }

    private static func reachable(from metadata: ModelMetadata) -> Set<String> {
        var entities: Set<String> = [metadata.entityName]
        var pending = [metadata]
        while let next = pending.popLast() {
            for relationship in next.relationships {
                let destination = relationship.destinationMetadata
                if entities.insert(destination.entityName).inserted { pending.append(destination) }
            }
        }
        return entities
    }
}
