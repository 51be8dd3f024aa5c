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
            for row in found.rows { try folding.add(row) }
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
        if table.base != nil {
            // The base's entries are counted by row number, and only the extremes' rows are read; the rows in memory
            // (changed or inserted since) come from the index in memory.
            let summary = try table.baseIndexSummary(path, extremes: next != nil)
            examined = summary.rowsRead
            for index in accumulators.indices {
                switch accumulators[index].kind {
                case .count: accumulators[index].add(count: summary.count)
                case .minimum: if let first = summary.firstNonNull { try accumulators[index].add(first) }
                default: if let last = summary.last { try accumulators[index].add(last) }
                }
            }
            var cursor = table.indexes[path.index].cursor(from: path.lower, to: path.upper)
            while let entry = cursor.entry {
                examined += 1
                let value = next == nil ? StoredValue.null : entry.key[path.equalityPrefix]
                for index in accumulators.indices { try accumulators[index].add(value) }
                cursor.advance()
            }
        } else {
            try table.forEachIndexEntry(path) { entry in
                examined += 1
                let value = next == nil ? StoredValue.null : entry.key[path.equalityPrefix]
                for index in accumulators.indices { try accumulators[index].add(value) }
                return true
            }
        }
        var plan = FetchPlan(entity: request.entity, index: slots.map { table.entity.attributes[$0].name },
                             indexEqualityPrefix: path.equalityPrefix, indexRange: path.hasRange)
        plan.rowsExamined = examined
        plan.rowsReturned = 1
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
        let targets = try rows(of: destination.name)
        for target in targets {
            let rows = target.relationships[inverse].count
            counted += rows
            let value = try key?.evaluate(target, lookup: lookup) ?? .uuid(target.id.primaryKey)
            folding.add(count: rows, to: value)
        }
        folding.add(count: count(of: entity.name) - counted, to: .null)
        var plan = FetchPlan(entity: entity.name)
        plan.relationshipPlan = "counted from the inverse \(destination.name).\(inverseName) of every \(destination.name)"
        plan.rowsExamined = targets.count
        plan.rowsReturned = folding.groups.count
        return StoreAggregateResult(groups: folding.result(), plan: plan)
    }
}

extension EntityTable {
    /// What an aggregate over the base's entries of `path`'s index range needs: how many there are (less those of
    /// rows changed or deleted since), and, when `extremes`, the first non-null and the last value of the attribute
    /// after the range's equalities (the range's minimum and maximum: nulls sort first). Counts by row number,
    /// reading the rows of the extremes alone.
    ///
    /// - Throws: ``RowBaseFailure``.
    func baseIndexSummary(_ path: AccessPath, extremes: Bool) throws
        -> (count: Int, firstNonNull: StoredValue?, last: StoredValue?, rowsRead: Int) {
        guard let base else { return (0, nil, nil, 0) }
        var numbers: [Int] = []
        try reading {
            try base.indexRowNumbers(path.index, from: path.lower, to: path.upper, reverse: false) { number in
                if !isOverridden(number) { numbers.append(number) }
                return true
            }
        }
        guard extremes, !numbers.isEmpty else { return (numbers.count, nil, nil, 0) }
        let slot = indexSlots[path.index][path.equalityPrefix]
        var decoding = [Bool](repeating: false, count: entity.attributes.count)
        decoding[slot] = true
        var rowsRead = 1
        let last = try baseRows([numbers[numbers.count - 1]], decoding: decoding)[0].attributes[slot]
        var firstNonNull: StoredValue?
        // Nulls come first: the first non-null is the first entry but when the attribute is optional.
        for number in numbers where firstNonNull == nil {
            rowsRead += 1
            let value = try baseRows([number], decoding: decoding)[0].attributes[slot]
            if !value.isNull { firstNonNull = value }
            if number == numbers[numbers.count - 1] { break }
        }
        return (numbers.count, firstNonNull, last, rowsRead)
    }
}
