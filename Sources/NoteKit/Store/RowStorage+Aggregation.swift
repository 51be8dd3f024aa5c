#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension RowStorage {
    /// Runs an aggregation: a count per target of a to-one relationship (or per value of a path through one) of
    /// every row is read from the targets' inverse references, without reading a row of the entity; anything else
    /// folds the matching rows (fetched as ``fetch(_:)`` finds them, decoding only what the filter, the key and the
    /// aggregates read).
    ///
    /// - Throws: ``FetchError``, ``RowBaseFailure``.
    package func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult {
        guard let entity = schema.entity(named: request.entity) else { throw FetchError.unknownEntity(request.entity) }
        let lookup = lookup(over: request.overlay)
        if let counted = try countsFromReferences(request, entity: entity, lookup: lookup) { return counted }
        if let indexed = try aggregateFromIndex(request) { return indexed }
        var fetch = StoreFetchRequest(entity: request.entity, filter: request.filter, excluding: request.excluding)
        fetch.overlay = request.overlay
        var marks = [Bool](repeating: false, count: entity.attributes.count)
        request.groupBy?.markAttributes(&marks)
        for operation in request.operations { operation.operand?.markAttributes(&marks) }
        fetch.attributes = marks.indices.filter { marks[$0] }
        let found = try self.fetch(fetch)
        var folding = try AggregateFolding(request, lookup: lookup)
        let filter = try request.filter.map(PreparedFilter.init)
        do {
            for row in found.snapshots { try folding.add(row) }
            for row in request.additionalRows where try filter.map({ try $0.matches(row, lookup: lookup) }) ?? true {
                try folding.add(row)
            }
        } catch let failure as EvaluationFailure {
            throw FetchError.predicateFailed(entity: request.entity, reason: failure.reason)
        } catch is UnwrappedNil {
            throw FetchError.predicateFailed(entity: request.entity, reason: "a forced unwrap met nil")
        }
        return StoreAggregateResult(groups: folding.result(), plan: found.plan)
    }

    /// Counts, minimums and maximums over the rows an index range holds, from the index's entries alone: a filter
    /// made only of equalities on an index's first attributes and a range on the next one, and aggregates that are
    /// counts or extremes of that next attribute (`isPinned == true`, then the count and the oldest and newest
    /// `createdAt` of the `(isPinned, createdAt)` index). Nil when the request is anything else.
    private func aggregateFromIndex(_ request: StoreAggregateRequest) throws -> StoreAggregateResult? {
        guard request.groupBy == nil, request.excluding.isEmpty, request.additionalRows.isEmpty,
              request.overlay.isEmpty, let number = numbers[request.entity] else { return nil }
        let table = tables[number]
        guard let filter = request.filter, let path = table.accessPath(filter: filter, sort: []),
              table.indexConsumes(filter, path) else { return nil }
        let slots = table.indexSlots[path.index]
        let next = path.equalityPrefix < slots.count ? slots[path.equalityPrefix] : nil
        for operation in request.operations where operation.kind != .count {
            guard operation.kind == .minimum || operation.kind == .maximum,
                  case .attribute(let slot)? = operation.operand, slot == next else { return nil }
        }
        var accumulators = request.operations.map { AggregateAccumulator($0.kind) }
        var examined = 0
        try table.forEachIndexEntry(path) { entry in
            examined += 1
            let value = next == nil ? StoredValue.null : entry.key[path.equalityPrefix]
            for index in accumulators.indices { try accumulators[index].add(value) }
            return true
        }
        var plan = FetchPlan(entity: request.entity, index: slots.map { table.entity.attributes[$0].name },
                             indexEqualityPrefix: path.equalityPrefix, indexRange: path.hasRange)
        plan.recordsExamined = examined
        plan.recordsReturned = 1
        return StoreAggregateResult(groups: [.init(key: .null, values: accumulators.map(\.value))], plan: plan)
    }

    /// Counts per target of a to-one relationship with an inverse (`groupBy` its identifier, or a value read on the
    /// target), over every row of the entity: each target's inverse lists its rows, and the rows without a target are
    /// the rest. Nil when the request is anything else.
    private func countsFromReferences(_ request: StoreAggregateRequest, entity: Schema.Entity,
                                      lookup: RowLookup) throws -> StoreAggregateResult? {
        guard request.filter == nil, request.excluding.isEmpty, request.additionalRows.isEmpty,
              request.overlay.isEmpty, !request.operations.isEmpty,
              request.operations.allSatisfy({ $0.kind == .count }), let groupBy = request.groupBy else { return nil }
        let slot: Int, keyOnTarget: FetchOperand?
        switch groupBy {
        case .toOne(let relationship): (slot, keyOnTarget) = (relationship, nil)
        case let .related(relationship, leaf, _) where !leaf.readsOtherRows && !leaf.readsEnclosingScope:
            (slot, keyOnTarget) = (relationship, leaf)
        default: return nil
        }
        let relationship = entity.relationships[slot]
        guard !relationship.isToMany, let inverseName = relationship.inverse,
              let destination = schema.entity(named: relationship.destination),
              let inverse = destination.relationshipIndex(named: inverseName) else { return nil }
        let key = try keyOnTarget.map(PreparedOperand.init)
        var folding = try AggregateFolding(request, lookup: lookup)
        var counted = 0
        let targets = try snapshots(of: destination.name)
        for target in targets {
            let rows = target.relationships[inverse].count
            counted += rows
            let value = try key?.evaluate(target, lookup: lookup) ?? .uuid(target.id.primaryKey)
            folding.add(count: rows, to: value)
        }
        folding.add(count: count(of: entity.name) - counted, to: .null)
        var plan = FetchPlan(entity: entity.name)
        plan.relationshipPlan = "counted from the inverse \(destination.name).\(inverseName) of every \(destination.name)"
        plan.recordsExamined = targets.count
        plan.recordsReturned = folding.groups.count
        return StoreAggregateResult(groups: folding.result(), plan: plan)
    }
}
