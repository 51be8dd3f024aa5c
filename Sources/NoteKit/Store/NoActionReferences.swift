#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The references a `.noAction` delete leaves behind, which every store drops when it applies the delete.
///
/// A `.noAction` rule changes nothing in the context: the deleted object's targets are not marked changed and no
/// history records them. Their inverse would still name the deleted object in the stored rows, though, while
/// reading that relationship skips it (the object is gone): a predicate on the inverse (`$0.folder == nil`) would
/// then disagree with the property. Dropping those references when the delete is applied, in every store and in
/// every replay of a log (so stores written before this rule existed read the same), gives a property and a
/// predicate on it one meaning.
package struct NoActionReferences: Sendable {
    /// A `.noAction` relationship with an inverse: where its targets point back.
    private struct Link: Sendable {
        let slot: Int
        let destination: String
        let inverseSlot: Int
    }

    /// Per entity, its `.noAction` relationships that have an inverse.
    private let links: [String: [Link]]

    /// The links of `schema`.
    package init(schema: Schema) {
        var links: [String: [Link]] = [:]
        for entity in schema.entities {
            for (slot, relationship) in entity.relationships.enumerated() where relationship.deleteRule == .noAction {
                guard let inverse = relationship.inverse, let destination = schema.entity(named: relationship.destination),
                      let inverseSlot = destination.relationshipIndex(named: inverse) else { continue }
                links[entity.name, default: []].append(
                    Link(slot: slot, destination: relationship.destination, inverseSlot: inverseSlot))
            }
        }
        self.links = links
    }

    /// Whether the schema has no `.noAction` relationship with an inverse (then there is never anything to drop).
    package var isEmpty: Bool { links.isEmpty }

    /// The targets of `row`'s `.noAction` relationships that have an inverse: the rows a delete of `row` updates.
    package func targets(of row: ModelSnapshot) -> [PersistentIdentifier] {
        guard let entityLinks = links[row.id.entityName] else { return [] }
        return entityLinks.flatMap { row.relationships[$0.slot].identifiers }
    }

    /// The updates that remove each of `deleted` from the inverse of its `.noAction` relationships' targets.
    ///
    /// - Parameter row: the stored row of an identifier, before the deletions are applied.
    /// - Complexity: O(targets of the deleted objects' `.noAction` relationships).
    package func updates(deleting deleted: [ModelDeletion],
                         row: (PersistentIdentifier) -> ModelSnapshot?) -> [ModelUpdate] {
        guard !links.isEmpty else { return [] }
        var updates: [ModelUpdate] = []
        for deletion in deleted {
            guard let entityLinks = links[deletion.id.entityName], let source = row(deletion.id) else { continue }
            for link in entityLinks {
                for target in source.relationships[link.slot].identifiers {
                    guard let targetRow = row(target) else { continue }
                    let kind: RelationshipChange.Kind
                    switch targetRow.relationships[link.inverseSlot] {
                    case .toOne(let current) where current == deletion.id: kind = .toOne(nil)
                    case .toMany(let ids) where ids.contains(deletion.id):
                        kind = .toMany(added: [], removed: [deletion.id])
                    default: continue
                    }
                    let change = RelationshipChange(index: link.inverseSlot, kind: kind)
                    updates.append(ModelUpdate(id: target, attributes: [], relationships: [change]))
                }
            }
        }
        return updates
    }
}
