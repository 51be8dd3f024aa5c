#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Plans across relationships: a fetch whose filter constrains the rows a relationship reaches finds those rows
/// first, in their own entity (by its indexes when one fits), and follows the stored inverse references back,
/// instead of reading every row of the fetched entity and following its references forward.
///
/// Three conjuncts of a filter are answered so, each exactly (the candidates are the rows that satisfy it):
/// - `$0.folder?.name == "Work"` (an equality on a to-one path, of any depth): the folders named "Work", then the
///   notes their inverse `notes` lists;
/// - `$0.folder == work` (a to-one relationship equal to an object): that folder's `notes`;
/// - `$0.notes.contains { $0.isPinned }` (a condition on a to-many relationship): the pinned notes, by their own
///   index, then the folders their inverse `folder` points at.
/// A relationship without an inverse is answered by reading the rows, as any other condition.
extension RowStorage {
    /// The rows of the fetched entity that satisfy the conjuncts of `filter` a relationship plan answers (their
    /// intersection, in no particular order), the conjuncts left for the rows, and a description of the plan; nil
    /// when no conjunct can be answered so.
    struct RelationshipCandidates {
        var ids: Set<PersistentIdentifier>
        var remaining: [FetchFilter]
        var description: String
        var examined: Int
    }

    /// Narrows `request` through relationships, when its filter allows it.
    ///
    /// - Throws: ``RowBaseFailure``, or what a fetch of a target entity throws.
    func relationshipCandidates(_ request: StoreFetchRequest) throws -> RelationshipCandidates? {
        guard let filter = request.filter, let entity = schema.entity(named: request.entity) else { return nil }
        var found: RelationshipCandidates?
        var remaining: [FetchFilter] = []
        for conjunct in filter.conjuncts {
            guard let (ids, description, examined) = try candidates(for: conjunct, in: entity) else {
                remaining.append(conjunct)
                continue
            }
            if var narrowed = found {
                narrowed.ids.formIntersection(ids)
                narrowed.description += "; " + description
                narrowed.examined += examined
                found = narrowed
            } else {
                found = RelationshipCandidates(ids: ids, remaining: [], description: description, examined: examined)
            }
        }
        found?.remaining = remaining
        return found
    }

    /// The count of a fetch whose whole filter is an equality on a path through a to-one relationship with an inverse
    /// (`$0.folder?.name == "Work"`): the lengths of the matching targets' inverse lists added up, without collecting
    /// the rows they name (a row has one target, so no row is in two lists). Nil for any other request.
    ///
    /// - Throws: ``RowBaseFailure``, or what the fetch of the targets throws.
    func countThroughToOne(_ request: StoreFetchRequest) throws -> StoreFetchResult? {
        guard request.resultType == .count, request.excluding.isEmpty, request.overlay.isEmpty,
              case let .compare(lhs, .equal, rhs)? = request.filter,
              let entity = schema.entity(named: request.entity) else { return nil }
        let (path, value): (FetchOperand, StoredValue)
        if case .value(let constant) = rhs { (path, value) = (lhs, constant) }
        else if case .value(let constant) = lhs { (path, value) = (rhs, constant) }
        else { return nil }
        guard !value.isNull, case let .related(slot, inner, _) = path, !inner.readsEnclosingScope,
              !entity.relationships[slot].isToMany, let (inverse, destination) = inverse(of: slot, in: entity) else {
            return nil
        }
        let targets = try fetch(StoreFetchRequest(entity: destination.name,
                                                  filter: .compare(inner, .equal, .value(value)),
                                                  resultType: .identifiers))
        var count = 0
        for row in try rows(for: targets.identifiers) { count += row?.relationships[inverse].count ?? 0 }
        var plan = FetchPlan(entity: entity.name)
        plan.relationshipPlan = "\(entity.name).\(entity.relationships[slot].name): \(targets.plan) where "
            + "\(inner) == \(value), then the lengths of the inverse \(destination.name)."
            + destination.relationships[inverse].name
        plan.rowsExamined = targets.plan.rowsExamined + targets.identifiers.count
        var result = StoreFetchResult(plan: plan)
        result.count = max(0, min(count - request.offset, request.limit ?? .max))
        result.plan.rowsReturned = result.count
        return result
    }

    /// The rows of `entity` that satisfy `conjunct`, when a relationship plan answers it.
    private func candidates(for conjunct: FetchFilter, in entity: Schema.Entity) throws
        -> (Set<PersistentIdentifier>, String, Int)? {
        switch conjunct {
        case let .compare(lhs, .equal, rhs):
            let (path, value): (FetchOperand, StoredValue)
            if case .value(let constant) = rhs { (path, value) = (lhs, constant) }
            else if case .value(let constant) = lhs { (path, value) = (rhs, constant) }
            else { return nil }
            guard !value.isNull else { return nil }
            switch path {
            case let .related(slot, inner, _) where !inner.readsEnclosingScope:
                // The targets whose path equals the value, then their sources.
                guard let (inverse, destination) = inverse(of: slot, in: entity) else { return nil }
                let targets = try fetch(StoreFetchRequest(entity: destination.name,
                                                          filter: .compare(inner, .equal, .value(value)),
                                                          resultType: .identifiers))
                let sources = try sources(of: targets.identifiers, through: inverse, in: destination)
                return (sources, "\(entity.name).\(entity.relationships[slot].name): \(targets.plan) where "
                        + "\(inner) == \(value), then the inverse \(destination.name)."
                        + destination.relationships[inverse].name,
                        targets.plan.rowsExamined + targets.identifiers.count)
            case .toOne(let slot):
                guard case .uuid(let key) = value, let (inverse, destination) = inverse(of: slot, in: entity) else {
                    return nil
                }
                let target = PersistentIdentifier(entityName: destination.name, primaryKey: key)
                let sources = try sources(of: [target], through: inverse, in: destination)
                return (sources, "\(entity.name).\(entity.relationships[slot].name) == \(target), through the inverse "
                        + "\(destination.name).\(destination.relationships[inverse].name)", 1)
            default:
                return nil
            }
        case let .any(slot, inner) where !inner.readsEnclosingScope:
            // The targets that match, by their own plan, then the objects they belong to.
            guard let (inverse, destination) = inverse(of: slot, in: entity) else { return nil }
            let targets = try fetch(StoreFetchRequest(entity: destination.name, filter: inner, resultType: .identifiers))
            let sources = try sources(of: targets.identifiers, through: inverse, in: destination)
            return (sources, "\(entity.name).\(entity.relationships[slot].name) contains a target where \(inner): "
                    + "\(targets.plan), then the inverse \(destination.name)."
                    + destination.relationships[inverse].name,
                    targets.plan.rowsExamined + targets.identifiers.count)
        default:
            return nil
        }
    }

    /// The relationship of the destination of `entity`'s relationship `slot` that is its inverse, and the
    /// destination; nil without an inverse.
    func inverse(of slot: Int, in entity: Schema.Entity) -> (Int, Schema.Entity)? {
        let relationship = entity.relationships[slot]
        guard let name = relationship.inverse, let destination = schema.entity(named: relationship.destination),
              let inverse = destination.relationshipIndex(named: name) else { return nil }
        return (inverse, destination)
    }

    /// The rows the inverse relationship `inverse` of the rows `targets` (of `destination`) points at.
    private func sources(of targets: [PersistentIdentifier], through inverse: Int,
                         in destination: Schema.Entity) throws -> Set<PersistentIdentifier> {
        var sources = Set<PersistentIdentifier>()
        for row in try rows(for: targets) {
            guard let row else { continue }
            for id in row.relationships[inverse].identifiers { sources.insert(id) }
        }
        return sources
    }
}

extension FetchFilter {
    /// Whether the filter reads a scope below the one it is evaluated in (``FetchOperand/scope(_:_:)``): such a
    /// condition on targets depends on the row that holds them, and cannot be run on the targets alone.
    var readsEnclosingScope: Bool {
        switch self {
        case .constant: false
        case .and(let parts), .or(let parts): parts.contains(where: \.readsEnclosingScope)
        case .not(let inner): inner.readsEnclosingScope
        case let .compare(lhs, _, rhs), let .text(lhs, _, rhs), let .contains(lhs, element: rhs):
            lhs.readsEnclosingScope || rhs.readsEnclosingScope
        case .isIn(let operand, _), .containsMatch(let operand, _): operand.readsEnclosingScope
        case .any(_, let inner), .all(_, let inner): inner.readsEnclosingScope
        case let .anyElement(collection, inner), let .allElements(collection, inner):
            collection.readsEnclosingScope || inner.readsEnclosingScope
        }
    }
}

extension FetchOperand {
    /// Whether the operand reads a scope below the one it is evaluated in.
    var readsEnclosingScope: Bool {
        switch self {
        case .scope: true
        case .attribute, .toOne, .toMany, .relationshipCount, .identifier, .value, .element: false
        case let .related(_, inner, _): inner.readsEnclosingScope
        case .countWhere(_, let filter), .condition(let filter): filter.readsEnclosingScope
        case let .coalesce(a, b), let .arithmetic(a, _, b), let .subscripted(a, b), let .textComparison(a, b, _):
            a.readsEnclosingScope || b.readsEnclosingScope
        case .unwrap(let a), .count(let a), .negated(let a), .minimum(let a), .maximum(let a): a.readsEnclosingScope
        case let .filteredElements(a, filter): a.readsEnclosingScope || filter.readsEnclosingScope
        case let .conditional(filter, a, b): filter.readsEnclosingScope || a.readsEnclosingScope || b.readsEnclosingScope
        case let .subscriptedWithDefault(a, b, c), let .slice(a, b, c, _):
            a.readsEnclosingScope || b.readsEnclosingScope || c.readsEnclosingScope
        }
    }
}
