#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A sort through a to-one relationship with a limit (`SortDescriptor(\.notebook?.name)`, first 20), answered
/// group by group instead of by reading every row.
///
/// The targets (the notebooks) are sorted by the attribute; those with equal values form a group, and the groups come
/// in the sort's order. Each group's rows are the sources the targets' stored inverse lists (`Notebook.notes`), read
/// as a relationship plan reads its candidates, ordered by the sort's other keys (by an index that gives that order,
/// when one does), until the window is full: the first 20 notes by notebook name read the notebooks, then about 20
/// notes. The rows whose value is null (no notebook, or a notebook without a name) sort first ascending and last
/// descending, as null does everywhere; they are found by a scan, only when there are any and the window reaches them.
extension RowStorage {
    /// `request` answered group by group, when it is sorted first by an attribute read through a to-one relationship
    /// that has an inverse, has a limit, and its entity has at least four rows a target; nil otherwise.
    ///
    /// - Throws: ``RowBaseFailure``, or what a fetch of the rows or the targets throws.
    func fetchSortedThroughRelationship(_ request: StoreFetchRequest) throws -> StoreFetchResult? {
        guard request.overlay.isEmpty, request.resultType != .count, request.attributes == nil,
              let requested = request.limit, let first = request.sort.first,
              case let .related(slot, .attribute(attribute), required: false) = first.operand,
              let entity = schema.entity(named: request.entity), let number = numbers[request.entity],
              let (inverse, destination) = inverse(of: slot, in: entity),
              attribute < destination.attributes.count else { return nil }
        let rowCount = tables[number].count
        guard count(of: destination.name) * 4 <= rowCount else { return nil }
        let limit = request.offset + requested
        // The filter's conjuncts a relationship plan answers narrow every group; the others are checked on its rows.
        let narrowed = try relationshipCandidates(request)
        let remaining = narrowed?.remaining ?? request.filter?.conjuncts ?? []
        // Within a group, the sort's other keys; with none, the identifiers in the direction of the first key (the
        // tie order of every sort).
        let rest = request.sort.count > 1 ? Array(request.sort.dropFirst())
            : [FetchSortKey(.identifier, ascending: first.ascending)]

        let byValue = FetchSortKey(.attribute(attribute), ascending: first.ascending)
        let targets = try fetch(StoreFetchRequest(entity: destination.name, sort: [byValue]))
        let (groups, referenced, nullValued) = Self.groups(of: targets.rows, byValueOf: attribute,
                                                           inverse: inverse)
        var plan = FetchPlan(entity: entity.name)
        plan.rowsExamined = targets.plan.rowsExamined
        var rows: [ModelSnapshot] = []
        var groupsRead = 0

        /// Adds the rows whose value is null: those without a target (whatever no target lists), and those of
        /// targets without the value, by a scan of the rows.
        func addNullGroup() throws {
            guard nullValued || referenced < rowCount, rows.count < limit else { return }
            let isNull = FetchFilter.compare(first.operand, .equal, .value(.null))
            let found = try tables[number].fetch(
                StoreFetchRequest(entity: entity.name, filter: .and([isNull] + (request.filter.map { [$0] } ?? [])),
                                  sort: rest, limit: limit - rows.count, excluding: request.excluding),
                lookup: lookup(over: [:]))
            plan.rowsExamined += found.plan.rowsExamined
            rows += found.rows
            groupsRead += 1
        }
        if first.ascending { try addNullGroup() }
        for group in groups where rows.count < limit {
            var ids = Set<PersistentIdentifier>()
            for target in group { ids.formUnion(target.relationships[inverse].identifiers) }
            if let narrowed { ids.formIntersection(narrowed.ids) }
            groupsRead += 1
            guard !ids.isEmpty else { continue }
            let found = try tables[number].fetch(
                StoreFetchRequest(entity: entity.name, sort: rest, limit: limit - rows.count,
                                  excluding: request.excluding),
                candidates: RelationshipCandidates(ids: ids, remaining: remaining, description: "", examined: 0),
                lookup: lookup(over: [:]))
            plan.rowsExamined += found.plan.rowsExamined
            rows += found.rows
        }
        if !first.ascending { try addNullGroup() }

        let path = "\(entity.name).\(entity.relationships[slot].name).\(destination.attributes[attribute].name)"
        plan.relationshipPlan = "the sort by \(path): \(destination.name) sorted by "
            + "\(destination.attributes[attribute].name) (\(groupsRead) groups of equal values read), each "
            + "group's rows through the inverse \(destination.name).\(destination.relationships[inverse].name)"
            + (narrowed.map { "; " + $0.description } ?? "")
        return Self.window(of: rows, request: request, limit: limit, plan: plan)
    }

    /// The targets, sorted by `attribute`, in groups of equal non-null values; how many sources their `inverse`
    /// lists name; and whether any target's value is null.
    private static func groups(of targets: [ModelSnapshot], byValueOf attribute: Int, inverse: Int)
        -> (groups: [[ModelSnapshot]], referenced: Int, nullValued: Bool) {
        var groups: [[ModelSnapshot]] = []
        var referenced = 0, nullValued = false
        for target in targets {
            referenced += target.relationships[inverse].identifiers.count
            let value = target.attributes[attribute]
            if value.isNull {
                nullValued = true
            } else if let last = groups.last?.first, StoredValue.compare(last.attributes[attribute], value) == 0 {
                groups[groups.count - 1].append(target)
            } else {
                groups.append([target])
            }
        }
        return (groups, referenced, nullValued)
    }

    /// The answer to `request` from its rows in order: its window (offset and limit), as its result type asks.
    private static func window(of rows: [ModelSnapshot], request: StoreFetchRequest, limit: Int, plan: FetchPlan)
        -> StoreFetchResult {
        var result = StoreFetchResult(plan: plan)
        let window = request.offset < rows.count ? rows[request.offset..<min(rows.count, limit)] : []
        result.count = window.count
        switch request.resultType {
        case .rows: result.rows = Array(window)
        case .identifiers: result.identifiers = window.map(\.id)
        case .count: break
        }
        result.plan.rowsReturned = window.count
        return result
    }
}
