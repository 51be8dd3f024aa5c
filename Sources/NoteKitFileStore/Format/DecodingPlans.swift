#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// What decoding an entity's rows needs, taken out of the schema once: reading `entity.attributes[i]` for every value
/// would copy the attribute's description (its name, options, default) each time.
final class EntityDecodingPlan {
    let name: String
    /// The entity's name and its relationships' destinations, interned once for the identifiers decoded.
    let interned: InternedEntityName
    /// The attributes' and relationships' names in UTF-8, as rows' keys are compared with them.
    let attributeNames: [[UInt8]]
    let relationshipNames: [[UInt8]]
    let attributeTypes: [Schema.AttributeType]
    let external: [Bool]
    /// Whether each attribute is text (a string or URL, optional or not), whose bytes a row packs as read.
    let text: [Bool]
    let toMany: [Bool]
    let destinations: [InternedEntityName]

    init(_ entity: Schema.Entity) {
        name = entity.name
        interned = InternedEntityName(entity.name)
        attributeNames = entity.attributes.map { Array($0.name.utf8) }
        relationshipNames = entity.relationships.map { Array($0.name.utf8) }
        attributeTypes = entity.attributes.map(\.type)
        external = entity.attributes.map { $0.has(.externalStorage) }
        text = entity.attributes.map { attribute in
            guard !attribute.has(.externalStorage) else { return false }
            switch attribute.type {
            case .string, .url, .optional(.string), .optional(.url): return true
            default: return false
            }
        }
        toMany = entity.relationships.map(\.isToMany)
        destinations = entity.relationships.map { InternedEntityName($0.destination) }
    }
}

/// The decoding plans of the entities met so far, by entity description (a stored schema can change mid-log).
///
/// Within one record the schema does not change, so a plan checked against its entity once in a record
/// (``beginRecord()`` starts one) is taken by name for the rest of it: comparing entity descriptions for every
/// row of a 100,000-row record would compare their attributes 100,000 times. Every entry point of a decoder begins
/// a record, so a decoder that meets another description of an entity (a migration later in the log, a caller's
/// other schema) checks its plan again.
final class DecodingPlans {
    private var plans: [String: (entity: Schema.Entity, plan: EntityDecodingPlan, record: Int)] = [:]
    private var record = 0
    /// The plan last handed out in this record: rows of one entity come in runs.
    private var last: EntityDecodingPlan?

    /// Where rows are packed as they are read (``AttributePacker``), its room kept from row to row.
    var packer = AttributePacker()

    /// Starts the decoding of a record.
    func beginRecord() {
        record &+= 1
        last = nil
    }

    func plan(for entity: Schema.Entity) -> EntityDecodingPlan {
        if let last, last.name == entity.name { return last }
        let plan: EntityDecodingPlan
        if let known = plans[entity.name], known.record == record || known.entity == entity {
            plans[entity.name]!.record = record
            plan = known.plan
        } else {
            plan = EntityDecodingPlan(entity)
            plans[entity.name] = (entity, plan, record)
        }
        last = plan
        return plan
    }
}

/// Which of `count` positions were seen, without allocating for up to 64.
struct PresenceSet {
    private var bits: UInt64 = 0
    private var overflow: [Bool]
    let count: Int

    init(count: Int) {
        self.count = count
        overflow = count > 64 ? [Bool](repeating: false, count: count) : []
    }

    /// Marks `index`; false when it was marked already.
    mutating func insert(_ index: Int) -> Bool {
        if count > 64 {
            if overflow[index] { return false }
            overflow[index] = true
            return true
        }
        let bit: UInt64 = 1 << UInt64(index)
        if bits & bit != 0 { return false }
        bits |= bit
        return true
    }

    /// The first position not marked.
    var firstMissing: Int? {
        if count > 64 { return overflow.firstIndex(of: false) }
        let all: UInt64 = count == 64 ? .max : (1 << UInt64(count)) - 1
        let missing = ~bits & all
        return missing == 0 ? nil : missing.trailingZeroBitCount
    }
}
