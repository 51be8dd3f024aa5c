#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The migration NoteKit infers between a stored schema and today's, without any old model code: it compares the
/// two descriptions and converts stored rows to the new layout.
///
/// What it can do: add or remove an entity, attribute or relationship; add an attribute that has a default or is
/// optional; make a required attribute optional; make an optional attribute required when it has a default (or no
/// stored value is nil); widen an integer or a `Float`; rename an entity, attribute or relationship through its
/// `originalName`; change delete rules and indexes. What it refuses, before anything is written, with a readable
/// ``SchemaDiff``: any other type change, a to-one becoming a to-many or pointing elsewhere, a required attribute with
/// no default where stored values are missing, a new unique constraint over stored duplicates, count bounds that
/// stored objects break. Stored data (the objects of a removed entity, the values of a removed attribute, the links
/// of a removed relationship) is dropped only when ``mayDropStoredData``.
package struct LightweightMigration: Sendable {
    /// The schema the rows are stored in.
    package let source: Schema
    /// The schema they are converted to.
    package let destination: Schema
    /// What changes, entity by entity.
    package let diff: SchemaDiff
    /// Whether the conversion may drop stored data: only when the destination declares a higher version than the
    /// source (``Schema/isVersioned``), which says the removal is meant. Otherwise ``convert(_:)`` refuses to drop
    /// any stored object, value or link; a removed property that holds nothing is still removed.
    package let mayDropStoredData: Bool
    private let plans: [String: EntityPlan]

    /// How one stored entity's rows become rows of a destination entity.
    struct EntityPlan: Sendable {
        let destination: Schema.Entity
        /// For each destination attribute: where its value comes from.
        let attributes: [AttributeSource]
        /// For each destination relationship: the source relationship slot, or nil for a new, empty one.
        let relationships: [Int?]
    }

    enum AttributeSource: Sendable {
        /// The stored value at this slot; `nilReplacement` fills a nil when the attribute became required.
        case stored(slot: Int, nilReplacement: StoredValue?)
        /// A new attribute: its constant default (or nil for an optional one).
        case constant(StoredValue)
        /// A new attribute whose default is generated per object: a value must be supplied per row.
        case generated
    }

    /// Infers the migration from `source` to `destination`.
    ///
    /// - Throws: ``MigrationError/refused(_:)`` when a change cannot be made without code.
    /// - Complexity: O(entities × properties); no rows are read.
    package init(from source: Schema, to destination: Schema) throws {
        try self.init(from: source, to: destination,
                      mayDropStoredData: destination.isVersioned && destination.version > source.version)
    }

    /// A migration a store recorded, replayed: it was accepted when it was made, so it may drop what it dropped then.
    ///
    /// - Throws: ``MigrationError/refused(_:)`` when a change cannot be made without code.
    package init(replaying source: Schema, to destination: Schema) throws {
        try self.init(from: source, to: destination, mayDropStoredData: true)
    }

    private init(from source: Schema, to destination: Schema, mayDropStoredData: Bool) throws {
        self.source = source
        self.destination = destination
        self.mayDropStoredData = mayDropStoredData
        var diff = SchemaDiff(from: source.version, to: destination.version)
        var plans: [String: EntityPlan] = [:]
        let entityMap = Self.matchEntities(source: source, destination: destination)
        let removed = source.entities.map(\.name).filter { !entityMap.values.contains($0) }
        let added = destination.entities.map(\.name).filter { entityMap[$0] == nil }
        for stored in removed {
            diff.changes.append(.init(entity: stored, change: "entity removed; its objects are dropped"
                                          + (added.isEmpty ? "" : " (a renamed model declares originalEntityName)")))
        }
        if !source.entities.isEmpty && entityMap.isEmpty {
            let names = "stored: \(removed.joined(separator: ", ")); new: \(added.joined(separator: ", "))"
            diff.changes.append(.init(entity: "*", change: "no stored entity is in the new schema (\(names))",
                                      refusal: Self.renameAdvice(removed: removed, added: added)))
        }
        for entity in destination.entities {
            guard let storedName = entityMap[entity.name], let stored = source.entity(named: storedName) else {
                diff.changes.append(.init(entity: entity.name, change: "entity added"))
                continue
            }
            if storedName != entity.name {
                diff.changes.append(.init(entity: entity.name, change: "renamed from \(storedName)"))
            }
            plans[storedName] = Self.plan(entity, from: stored, entityMap: entityMap, diff: &diff)
        }
        self.diff = diff
        self.plans = plans
        if diff.isRefused { throw MigrationError.refused(diff) }
    }

    /// What to declare when a model was renamed without saying so, else what the refusal means.
    private static func renameAdvice(removed: [String], added: [String]) -> String {
        let attribute = "and `@Attribute(originalName: \"…\")` on each attribute renamed with it"
        if removed.count == 1, added.count == 1 {
            return "if \(added[0]) is \(removed[0]) renamed, declare `static var originalEntityName: String? "
                + "{ \"\(removed[0])\" }` on \(added[0]) \(attribute); otherwise this is another application's store"
        }
        return "a renamed model declares the name it had, `static var originalEntityName: String? { \"<old name>\" }` "
            + "(one of \(removed.joined(separator: ", "))), \(attribute); otherwise this is another application's store"
    }

    /// Which stored entity each destination entity continues (by name, or its original name).
    private static func matchEntities(source: Schema, destination: Schema) -> [String: String] {
        var map: [String: String] = [:]
        for entity in destination.entities {
            if source.entity(named: entity.name) != nil {
                map[entity.name] = entity.name
            } else if let original = entity.originalName, source.entity(named: original) != nil {
                map[entity.name] = original
            }
        }
        return map
    }

    private static func plan(_ entity: Schema.Entity, from stored: Schema.Entity, entityMap: [String: String],
                             diff: inout SchemaDiff) -> EntityPlan {
        EntityPlan(destination: entity,
                   attributes: planAttributes(entity, from: stored, diff: &diff),
                   relationships: planRelationships(entity, from: stored, entityMap: entityMap, diff: &diff))
    }

    /// Where each of `entity`'s attributes takes its values from: a stored attribute (by name, or its original
    /// name) or, for one added, a constant or a generated default; each difference goes into `diff`.
    private static func planAttributes(_ entity: Schema.Entity, from stored: Schema.Entity,
                                       diff: inout SchemaDiff) -> [AttributeSource] {
        var sources: [AttributeSource] = []
        var usedAttributes = Set<Int>()
        for attribute in entity.attributes {
            let slot = stored.attributeIndex(named: attribute.name)
                ?? attribute.originalName.flatMap(stored.attributeIndex(named:))
            guard let slot, !usedAttributes.contains(slot) else {
                sources.append(addedAttributeSource(attribute, of: entity, diff: &diff))
                continue
            }
            usedAttributes.insert(slot)
            sources.append(keptAttributeSource(attribute, of: entity, storedAs: stored.attributes[slot], slot: slot,
                                               diff: &diff))
        }
        for (slot, old) in stored.attributes.enumerated() where !usedAttributes.contains(slot) {
            diff.changes.append(.init(entity: entity.name, change: "attribute \(old.name) removed; its values are dropped"))
        }
        return sources
    }

    /// The values of an attribute the store does not have: its default, a generated one, or nil; refused when
    /// it is required and has no default.
    private static func addedAttributeSource(_ attribute: Schema.Attribute, of entity: Schema.Entity,
                                             diff: inout SchemaDiff) -> AttributeSource {
        if let defaultValue = attribute.defaultValue, !defaultValue.isNull {
            diff.changes.append(.init(entity: entity.name, change: "attribute \(attribute.name) added "
                                      + "(\(attribute.type), default \(defaultValue))"))
            return .constant(defaultValue)
        } else if attribute.hasGeneratedDefault {
            diff.changes.append(.init(entity: entity.name, change: "attribute \(attribute.name) added "
                                      + "(\(attribute.type), a generated default for each object)"))
            return .generated
        } else if attribute.isOptional {
            diff.changes.append(.init(entity: entity.name,
                                      change: "attribute \(attribute.name) added (\(attribute.type), nil)"))
            return .constant(.null)
        } else {
            diff.changes.append(.init(entity: entity.name,
                                      change: "attribute \(attribute.name) added (\(attribute.type))",
                                      refusal: "it is required and has no default value"))
            return .constant(.null)
        }
    }

    /// The values of an attribute the store has as `old` at `slot`: what changes (name, type, optionality,
    /// external storage) goes into `diff`, refused when the type does not widen.
    private static func keptAttributeSource(_ attribute: Schema.Attribute, of entity: Schema.Entity,
                                            storedAs old: Schema.Attribute, slot: Int,
                                            diff: inout SchemaDiff) -> AttributeSource {
        if old.name != attribute.name {
            diff.changes.append(.init(entity: entity.name,
                                      change: "attribute \(old.name) renamed to \(attribute.name)"))
        }
        var nilReplacement: StoredValue?
        if !Self.typeCanWiden(old.type.nonOptional, to: attribute.type.nonOptional) {
            diff.changes.append(.init(entity: entity.name,
                                      change: "attribute \(attribute.name) changes type "
                                          + "\(old.type) → \(attribute.type)",
                                      refusal: "a type change needs a custom migration stage"))
        } else if old.type.nonOptional != attribute.type.nonOptional {
            diff.changes.append(.init(entity: entity.name, change: "attribute \(attribute.name) widens "
                                      + "\(old.type.nonOptional) → \(attribute.type.nonOptional)"))
        }
        if old.isOptional && !attribute.isOptional {
            nilReplacement = attribute.defaultValue
            diff.changes.append(.init(entity: entity.name, change: "attribute \(attribute.name) becomes required"
                                      + (attribute.defaultValue.map { " (nil becomes \($0))" } ?? "")))
        } else if !old.isOptional && attribute.isOptional {
            diff.changes.append(.init(entity: entity.name, change: "attribute \(attribute.name) becomes optional"))
        }
        if old.has(.externalStorage) != attribute.has(.externalStorage) {
            diff.changes.append(.init(entity: entity.name,
                                      change: "attribute \(attribute.name) "
                                          + (attribute.has(.externalStorage) ? "moves to" : "leaves")
                                          + " external storage"))
        }
        return .stored(slot: slot, nilReplacement: nilReplacement)
    }

    /// The stored relationship each of `entity`'s relationships continues (nil for one added, empty); each
    /// difference goes into `diff`, refused when the number of targets or the destination changes.
    private static func planRelationships(_ entity: Schema.Entity, from stored: Schema.Entity,
                                          entityMap: [String: String], diff: inout SchemaDiff) -> [Int?] {
        var relationshipSources: [Int?] = []
        var usedRelationships = Set<Int>()
        for relationship in entity.relationships {
            let slot = stored.relationshipIndex(named: relationship.name)
                ?? relationship.originalName.flatMap(stored.relationshipIndex(named:))
            guard let slot, !usedRelationships.contains(slot) else {
                relationshipSources.append(nil)
                diff.changes.append(.init(entity: entity.name, change: "relationship \(relationship.name) added "
                                          + "(\(relationship.isToMany ? "[\(relationship.destination)]" : "\(relationship.destination)?"), empty)"))
                continue
            }
            usedRelationships.insert(slot)
            compare(relationship, of: entity, storedAs: stored.relationships[slot], entityMap: entityMap, diff: &diff)
            relationshipSources.append(slot)
        }
        for (slot, old) in stored.relationships.enumerated() where !usedRelationships.contains(slot) {
            diff.changes.append(.init(entity: entity.name,
                                      change: "relationship \(old.name) removed; its links are dropped"))
        }
        return relationshipSources
    }

    /// What changes between a stored relationship and the one that continues it, into `diff`.
    private static func compare(_ relationship: Schema.Relationship, of entity: Schema.Entity,
                                storedAs old: Schema.Relationship, entityMap: [String: String],
                                diff: inout SchemaDiff) {
        if old.name != relationship.name {
            diff.changes.append(.init(entity: entity.name,
                                      change: "relationship \(old.name) renamed to \(relationship.name)"))
        }
        if old.isToMany != relationship.isToMany {
            diff.changes.append(.init(entity: entity.name,
                                      change: "relationship \(relationship.name) changes from "
                                          + (old.isToMany ? "to-many to to-one" : "to-one to to-many"),
                                      refusal: "the number of targets changes meaning; use a custom stage"))
        }
        if entityMap[relationship.destination] != old.destination {
            diff.changes.append(.init(entity: entity.name,
                                      change: "relationship \(relationship.name) points at \(relationship.destination) "
                                          + "instead of \(old.destination)",
                                      refusal: "its stored targets are objects of another entity"))
        }
        if old.deleteRule != relationship.deleteRule {
            diff.changes.append(.init(entity: entity.name, change: "relationship \(relationship.name) delete rule "
                                      + "\(old.deleteRule) → \(relationship.deleteRule)"))
        }
    }

    /// Whether stored values of `old` read as `new` without conversion: the same type, a wider integer, a `Float`
    /// as `Double`, or enums with the same raw type.
    private static func typeCanWiden(_ old: Schema.AttributeType, to new: Schema.AttributeType) -> Bool {
        if old == new { return true }
        let signed: [Schema.AttributeType] = [.int8, .int16, .int32, .int64]
        let unsigned: [Schema.AttributeType] = [.uint8, .uint16, .uint32, .uint64]
        func rank(_ type: Schema.AttributeType, in list: [Schema.AttributeType]) -> Int? {
            type == .int ? (list == signed ? 3 : nil) : type == .uint ? (list == unsigned ? 3 : nil)
                : list.firstIndex(of: type)
        }
        if let a = rank(old, in: signed), let b = rank(new, in: signed) { return a <= b }
        if let a = rank(old, in: unsigned), let b = rank(new, in: unsigned) { return a <= b }
        if let a = rank(old, in: unsigned), let b = rank(new, in: signed) { return a < b }
        if old == .float && new == .double { return true }
        if case .rawRepresentable(_, let a) = old, case .rawRepresentable(_, let b) = new { return typeCanWiden(a, to: b) }
        if case .array(let a) = old, case .array(let b) = new { return typeCanWiden(a, to: b) }
        if case .dictionary(let a) = old, case .dictionary(let b) = new { return typeCanWiden(a, to: b) }
        return false
    }

    /// The migrated rows, and the cells whose value must still be generated (new attributes with generated
    /// defaults), to be filled by ``fillUpdates(for:generate:)``.
    ///
    /// - Throws: ``MigrationError/refused(_:)`` when the stored data cannot take the new schema: a nil where an
    ///   attribute became required without a default, duplicates under a new unique constraint, relationships
    ///   outside new count bounds. The diff then names each problem with an example.
    /// - Complexity: O(rows × properties).
    package func convert(_ rows: [ModelSnapshot]) throws -> [ModelSnapshot] {
        var diff = self.diff
        var renamed: [String: String] = [:]
        for (storedName, plan) in plans { renamed[storedName] = plan.destination.name }
        var converted: [ModelSnapshot] = []
        converted.reserveCapacity(rows.count)
        var missingValues: [String: Int] = [:]
        for row in rows {
            guard let plan = plans[row.id.entityName] else { continue }
            let id = PersistentIdentifier(entityName: plan.destination.name, primaryKey: row.id.primaryKey)
            var attributes: [StoredValue] = []
            attributes.reserveCapacity(plan.attributes.count)
            for (slot, source) in plan.attributes.enumerated() {
                switch source {
                case let .stored(storedSlot, nilReplacement):
                    var value = row.attributes[storedSlot]
                    if value.isNull && !plan.destination.attributes[slot].isOptional {
                        if let nilReplacement { value = nilReplacement } else {
                            missingValues["\(plan.destination.name).\(plan.destination.attributes[slot].name)", default: 0] += 1
                        }
                    }
                    attributes.append(value)
                case .constant(let value):
                    attributes.append(value)
                case .generated:
                    attributes.append(.null)
                }
            }
            let relationships = plan.relationships.enumerated().map { slot, source -> RelationshipTargets in
                let isToMany = plan.destination.relationships[slot].isToMany
                guard let source else { return isToMany ? .toMany([]) : .toOne(nil) }
                return Self.renaming(row.relationships[source], entities: renamed)
            }
            converted.append(ModelSnapshot(id: id, attributes: attributes, relationships: relationships,
                                           transactionNumber: row.transactionNumber))
        }
        for (property, count) in missingValues.sorted(by: { $0.key < $1.key }) {
            diff.changes.append(.init(entity: String(property.prefix { $0 != "." }),
                                      change: "\(property) is now required",
                                      refusal: "\(count) stored object\(count == 1 ? " has" : "s have") no value and "
                                          + "there is no default"))
        }
        if !mayDropStoredData { refuseDataLoss(rows, diff: &diff) }
        // Dangling targets of dropped entities go; constraints and bounds are checked on the result.
        converted = Self.droppingDanglingTargets(converted)
        Self.checkConstraints(converted, source: source, destination: destination, plans: plans, diff: &diff)
        if diff.isRefused { throw MigrationError.refused(diff) }
        return converted
    }

    /// Adds a refusal for every stored object, value and link the conversion would drop: dropping stored data must
    /// be meant, by a schema that declares a higher version.
    private func refuseDataLoss(_ rows: [ModelSnapshot], diff: inout SchemaDiff) {
        let reason = "a schema that removes stored data must declare it: a VersionedSchema with a version higher than "
            + "\(source.version) (listed in the migration plan, if there is one) removes it on purpose"
        let byEntity = Dictionary(grouping: rows, by: \.id.entityName)
        func plural(_ count: Int, _ noun: String) -> String { "\(count) stored \(noun)\(count == 1 ? "" : "s")" }
        for (entity, objects) in byEntity.sorted(by: { $0.key < $1.key }) {
            guard let stored = source.entity(named: entity) else { continue }
            guard let plan = plans[entity] else {
                diff.changes.append(.init(entity: entity, change: "\(plural(objects.count, "object")) would be dropped",
                                          refusal: reason + " (or was a model left out of the container?)"))
                continue
            }
            var keptAttributes = Set<Int>()
            for case .stored(let slot, _) in plan.attributes { keptAttributes.insert(slot) }
            for (slot, attribute) in stored.attributes.enumerated() where !keptAttributes.contains(slot) {
                let holding = objects.filter { !$0.attributes[slot].isNull }.count
                guard holding > 0 else { continue }
                diff.changes.append(.init(entity: entity, change: "attribute \(attribute.name) removed; "
                                              + "\(plural(holding, "value")) would be dropped", refusal: reason))
            }
            let keptRelationships = Set(plan.relationships.compactMap { $0 })
            for (slot, relationship) in stored.relationships.enumerated() where !keptRelationships.contains(slot) {
                let holding = objects.filter { $0.relationships[slot].count > 0 }.count
                guard holding > 0 else { continue }
                diff.changes.append(.init(entity: entity, change: "relationship \(relationship.name) removed; the "
                                              + "links of \(plural(holding, "object")) would be dropped", refusal: reason))
            }
        }
    }

    /// Updates that give each cell of a generated-default attribute a value, made by `generate` (which creates a
    /// fresh object of the entity, as inserting one would).
    package func fillUpdates(for rows: [ModelSnapshot],
                            generate: (_ entity: String, _ attribute: Int) -> StoredValue) -> [ModelUpdate] {
        var generatedSlots: [String: [Int]] = [:]
        for plan in plans.values {
            let slots = plan.attributes.indices.filter { if case .generated = plan.attributes[$0] { true } else { false } }
            if !slots.isEmpty { generatedSlots[plan.destination.name] = slots }
        }
        guard !generatedSlots.isEmpty else { return [] }
        return rows.compactMap { row in
            guard let slots = generatedSlots[row.id.entityName] else { return nil }
            return ModelUpdate(id: row.id, attributes: slots.map {
                AttributeChange(index: $0, value: generate(row.id.entityName, $0))
            }, relationships: [])
        }
    }

    private static func renaming(_ targets: RelationshipTargets, entities: [String: String]) -> RelationshipTargets {
        func rename(_ id: PersistentIdentifier) -> PersistentIdentifier {
            guard let name = entities[id.entityName], name != id.entityName else { return id }
            return PersistentIdentifier(entityName: name, primaryKey: id.primaryKey)
        }
        switch targets {
        case .toOne(let id): return .toOne(id.map(rename))
        case .toMany(let ids): return .toMany(ids.map(rename))
        }
    }

    private static func droppingDanglingTargets(_ rows: [ModelSnapshot]) -> [ModelSnapshot] {
        let present = Set(rows.map(\.id))
        return rows.map { row in
            var row = row
            for (slot, targets) in row.relationships.enumerated() {
                switch targets {
                case .toOne(let id?) where !present.contains(id): row.relationships[slot] = .toOne(nil)
                case .toMany(let ids) where ids.contains(where: { !present.contains($0) }):
                    row.relationships[slot] = .toMany(ids.filter(present.contains))
                default: break
                }
            }
            return row
        }
    }

    /// New unique constraints must hold over the stored objects, and relationship bounds must too.
    private static func checkConstraints(_ rows: [ModelSnapshot], source: Schema, destination: Schema,
                                         plans: [String: EntityPlan], diff: inout SchemaDiff) {
        let byEntity = Dictionary(grouping: rows, by: \.id.entityName)
        for entity in destination.entities {
            let entityRows = byEntity[entity.name] ?? []
            let storedName = plans.first { $0.value.destination.name == entity.name }?.key
            let plan = storedName.flatMap { plans[$0] }
            let stored = storedName.flatMap(source.entity(named:))
            for constraint in entity.uniqueConstraints {
                let slots = constraint.compactMap(entity.attributeIndex(named:))
                // The constraint existed when every attribute is a stored one and the stored entity had the same set.
                let storedNames = slots.compactMap { slot -> String? in
                    guard let plan, let stored, case .stored(let storedSlot, _) = plan.attributes[slot] else { return nil }
                    return stored.attributes[storedSlot].name
                }
                let existed = storedNames.count == slots.count
                    && (stored?.uniqueConstraints.contains { Set($0) == Set(storedNames) } ?? false)
                guard !existed else { continue }
                var seen: [[StoredValue]: Int] = [:]
                for row in entityRows {
                    let key = slots.map { row.attributes[$0] }
                    guard !key.contains(where: \.isNull) else { continue }
                    seen[key, default: 0] += 1
                }
                if let duplicate = seen.first(where: { $0.value > 1 }) {
                    diff.changes.append(.init(
                        entity: entity.name, change: "unique constraint (\(constraint.joined(separator: ", "))) added",
                        refusal: "\(duplicate.value) stored objects share \(duplicate.key.map(\.description).joined(separator: ", "))"
                            + "; remove the duplicates in a custom stage's willMigrate"))
                }
            }
            for (slot, relationship) in entity.relationships.enumerated() {
                let minimum = relationship.minimumModelCount, maximum = relationship.maximumModelCount
                guard minimum > 0 || maximum != nil else { continue }
                let outside = entityRows.filter { row in
                    let count = row.relationships[slot].count
                    return count < minimum || (maximum.map { count > $0 } ?? false)
                }
                if !outside.isEmpty {
                    diff.changes.append(.init(entity: entity.name,
                                              change: "relationship \(relationship.name) bounds \(minimum)...\(maximum.map(String.init) ?? "")",
                                              refusal: "\(outside.count) stored object\(outside.count == 1 ? "" : "s") "
                                                  + "would be outside them"))
                }
            }
        }
    }
}

/// What changes between two schemas, one line per change, each allowed or refused with its reason.
public struct SchemaDiff: Sendable, Hashable, CustomStringConvertible {
    /// One change between the schemas, and its refusal when a lightweight migration cannot make it.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// The entity the change concerns.
        public var entity: String
        /// What changes, in words (`attribute serial added (UUID, a generated default for each object)`).
        public var change: String
        /// Why the change cannot be made without code; nil when a lightweight migration makes it.
        public var refusal: String?

        /// A change of `entity`, refused for `refusal` when one is given.
        package init(entity: String, change: String, refusal: String? = nil) {
            self.entity = entity
            self.change = change
            self.refusal = refusal
        }

        /// One line of the diff: `✗ ` before a refused change, its entity and change, then the refusal in
        /// parentheses.
        public var description: String {
            "\(refusal == nil ? "  " : "✗ ")\(entity): \(change)" + (refusal.map { " (refused: \($0))" } ?? "")
        }
    }

    /// The version of the schema migrated from (the store's).
    public var from: Schema.Version
    /// The version of the schema migrated to (the code's).
    public var to: Schema.Version
    /// Every change, allowed or refused.
    public var changes: [Change] = []

    /// An empty diff between two versions; the migration appends the changes it finds.
    package init(from: Schema.Version, to: Schema.Version) {
        self.from = from
        self.to = to
    }

    /// Whether any change is refused.
    public var isRefused: Bool { changes.contains { $0.refusal != nil } }
    /// The refused changes.
    public var refusals: [Change] { changes.filter { $0.refusal != nil } }

    /// The diff as the error messages print it: a `schema FROM → TO:` line, then one line per change, refused ones
    /// marked `✗`.
    public var description: String {
        (["schema \(from) → \(to):"] + changes.map(\.description)).joined(separator: "\n")
    }
}

/// A migration NoteKit cannot perform. Each case says whether the store was left as it was.
public enum MigrationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What a migration plan wrote to the store before a later step was refused.
    public enum WrittenStep: Sendable, Hashable, CustomStringConvertible {
        /// A custom stage's `willMigrate` saved changes; the store stayed at the stage's old schema.
        case willMigrateSaved(from: Schema.Version, to: Schema.Version)
        /// A stage completed: the store moved to its new schema.
        case stageCompleted(from: Schema.Version, to: Schema.Version)

        /// A sentence naming the stage (`the willMigrate of stage 1.0.0 → 2.0.0 saved its changes`).
        public var description: String {
            switch self {
            case let .willMigrateSaved(from, to): "the willMigrate of stage \(from) → \(to) saved its changes"
            case let .stageCompleted(from, to): "stage \(from) → \(to) completed"
            }
        }
    }

    /// A change needs code (a custom stage); the diff lists every change and marks the refused ones. Nothing was
    /// written.
    case refused(SchemaDiff)
    /// A change was refused after steps of the migration plan had written to the store, which stays as they left
    /// it: at schema `diff.from`, with what `written` lists.
    case refusedAfterWriting(SchemaDiff, written: [WrittenStep])
    /// The store was written by a schema with a higher version than this code's: migrating backwards would lose
    /// data. Nothing was written.
    case storeIsNewer(stored: Schema.Version, current: Schema.Version)
    /// This code's schema (content hash `hash`) is one the store was written with before it moved on to a later
    /// schema (`stored`, `storedHash`): this code is older than the store, and migrating backwards would lose data.
    /// Nothing was written.
    case schemaIsOlderThanStore(hash: String, stored: Schema.Version, storedHash: String)
    /// A custom stage threw.
    case stageFailed(from: Schema.Version, to: Schema.Version, reason: String)

    /// A sentence saying what was refused and why, whether the store was left untouched or what it now holds, and
    /// what to do (the diff follows on the next lines for a refusal).
    public var description: String {
        switch self {
        case .refused(let diff):
            "a lightweight migration cannot make these changes; the store is untouched.\n\(diff)"
        case let .refusedAfterWriting(diff, written):
            "a lightweight migration cannot make these changes, after the migration plan had already written to the "
                + "store: " + written.map(\.description).joined(separator: "; ") + ". That stays in the store, which "
                + "is at schema \(diff.from). Change the stage so that the refused changes can be made (its "
                + "willMigrate can remove what they refuse) and open again: the stage runs again, so write it to "
                + "run twice without harm.\n\(diff)"
        case let .storeIsNewer(stored, current):
            "the store was written with schema \(stored), newer than this code's \(current); it is left untouched"
        case let .schemaIsOlderThanStore(hash, stored, storedHash):
            "this code's schema (\(hash.prefix(12))) is one the store was written with before it moved on to a later "
                + "schema (\(stored), \(storedHash.prefix(12))): this code is older than the store, and opening it "
                + "would migrate it backwards and lose data, so it is left untouched. Open it with the later models, "
                + "or, to go back on purpose, declare a VersionedSchema with a version higher than \(stored)"
        case let .stageFailed(from, to, reason):
            "the migration stage \(from) → \(to) failed: \(reason)"
        }
    }
}
