import Foundation
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// A vault whose keys forbid deleting it (`.deny`), and keys that need a vault: the rules the other test models lack.
final class VaultRecord: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .deny, inverse: \KeyRecord.vault) var keys: [KeyRecord] = []
    required init() {}
}

final class KeyRecord: PersistentModel {
    @Attribute var code = 0
    @Relationship var vault: VaultRecord?
    required init() {}
}

/// A store opened by its recorded schema alone (what `notekit mirror sync` does beside an app) applies another
/// replica's changes exactly as the app's own model types do: the same delete rules, inverses, unique upserts and
/// merges, to the same rows (issue 18, the CLI's sync).
@Suite("Dynamic models: a store's own schema, without the app's types")
struct DynamicModelTests {
    static let types: [any PersistentModel.Type] = ModelContainer.labelledFieldNotesModels
        + [VaultRecord.self, KeyRecord.self]

    /// A container over a new store of `kind` with the app's types, and one over a new store of the same kind
    /// opened by the schema that store records (a decoded schema with dynamic models).
    static func pair(_ kind: StoreKind) throws -> (typed: ModelContainer, dynamic: ModelContainer) {
        let typed = try kind.makeContainer(types)
        let recorded = try Schema(version: typed.schema.version, entities: typed.schema.entities)
        let configuration: any DataStoreConfiguration = switch kind {
        case .inMemory: ModelConfiguration(isStoredInMemoryOnly: true)
        case .file: FileStoreConfiguration(url: TemporaryStores.newURL())
        }
        let dynamic = try ModelContainer(for: try recorded.withDynamicModels(), configurations: [configuration])
        return (typed, dynamic)
    }

    /// Every row of every entity, by identifier.
    static func rows(_ container: ModelContainer) throws -> [PersistentIdentifier: ModelSnapshot] {
        var rows: [PersistentIdentifier: ModelSnapshot] = [:]
        for entity in container.schema.entities {
            let ids = try container.store.fetch(StoreFetchRequest(entity: entity.name, resultType: .identifiers))
                .identifiers
            for (id, snapshot) in zip(ids, container.store.rows(for: ids)) {
                var row = try #require(snapshot)
                row.transactionNumber = 0
                rows[id] = row
            }
        }
        return rows
    }

    // A file store only: the schema comes from what the store records on disk.
    @Test("A decoded schema with dynamic models opens the store its app wrote and runs its cascade")
    func dynamicContainerOpensTheAppsStore() throws {
        let url = TemporaryStores.newURL()
        do {
            let app = try ModelContainer(for: Schema(Self.types), configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(app)
            let note = NoteKitStressSupport.NoteRecord()
            note.title = "kept"
            context.insert(note)
            let photo = NoteKitStressSupport.PhotoRecord()
            photo.fileName = "a.jpg"
            note.photos.append(photo)
            try context.save()
        }
        let recorded = try #require(try StoreInspector.schemaHistory(at: url).last)
        let tool = try ModelContainer(for: try recorded.withDynamicModels(),
                                      configurations: [FileStoreConfiguration(url: url)])
        let notes = try tool.store.fetch(StoreFetchRequest(entity: "NoteRecord", resultType: .identifiers)).identifiers
        #expect(notes.count == 1)
        // Deleting the note through the dynamic model runs its cascade, as the app's type would.
        let context = ModelContext(tool)
        let object = try #require(context.model(for: notes[0]))
        try context.delete(object)
        try context.save()
        #expect(try tool.store.fetch(StoreFetchRequest(entity: "PhotoRecord", resultType: .identifiers)).identifiers.isEmpty)
    }

    @Test("Random incoming batches leave identical rows through the app's types and through dynamic models",
          arguments: StoreKind.allCases)
    func incomingChangesAgreeWithTheAppsTypes(kind: StoreKind) throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("DynamicModelTests seed \(seed) (\(kind))")
        var random = SeededGenerator(seed: seed)
        let (typed, dynamic) = try Self.pair(kind)
        let entities = typed.schema.entities
        var pool: [String: [PersistentIdentifier]] = [:]
        for entity in entities {
            // From the seed, so that a printed seed replays the run.
            pool[entity.name] = (0..<6).map { _ in
                let (a, b) = (random.next(), random.next())
                let bytes = withUnsafeBytes(of: (a, b)) { Array($0) }
                return PersistentIdentifier(entityName: entity.name, primaryKey: UUID(uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                    bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15])))
            }
        }
        func target(_ entity: String) -> PersistentIdentifier { pool[entity]!.randomElement(using: &random)! }

        var denied = 0, cascaded = 0, refused = 0
        for batch in 0..<120 {
            var objects: [ReplicaObject] = []
            for _ in 0..<Int.random(in: 1...5, using: &random) {
                let entity = entities.randomElement(using: &random)!
                var object = ReplicaObject(id: target(entity.name))
                // An object new to the stores comes with every attribute, as the mirror's import gives it (its
                // creator wrote them all); an update names some. (An attribute a creator did not know falls back
                // to its prototype's value on the app's types and to the declared default or zero on dynamic
                // models: the two differ only for a generated default.)
                let isNew = typed.store.rows(for: [object.id]).first! == nil
                    && !objects.contains { $0.id == object.id }
                for attribute in entity.attributes where isNew || Bool.random(using: &random) {
                    object.attributes[attribute.name] = Self.value(attribute, batch: batch, using: &random)
                }
                for relationship in entity.relationships where Int.random(in: 0..<3, using: &random) == 0 {
                    if relationship.isToMany {
                        object.toMany[relationship.name] = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                            target(relationship.destination)
                        }
                    } else {
                        object.toOne[relationship.name] = Bool.random(using: &random) ? target(relationship.destination) : nil
                    }
                }
                objects.append(object)
            }
            let deletions = (0..<Int.random(in: 0...2, using: &random)).map { _ in
                target(entities.randomElement(using: &random)!.name)
            }
            var merges: [PersistentIdentifier: PersistentIdentifier] = [:]
            if Int.random(in: 0..<8, using: &random) == 0 {
                let loser = target("LabelRecord"), survivor = target("LabelRecord")
                if loser != survivor { merges[loser] = survivor }
            }
            var outcomes: [String] = []
            for container in [typed, dynamic] {
                let context = ModelContext(container)
                let outcome = try context.applyReplicaChanges(objects, deleting: deletions, merging: merges)
                do {
                    try context.save()
                    outcomes.append("saved \(outcome.deniedDeletions.sorted()) \(outcome.cascadedForMissingTarget.sorted())")
                    if container === typed {
                        denied += outcome.deniedDeletions.count
                        cascaded += outcome.cascadedForMissingTarget.count
                    }
                } catch {
                    // A batch the context refuses (a relationship count, a unique key in the batch twice) must be
                    // refused by both, with the same error.
                    outcomes.append("refused \(error)")
                    if container === typed { refused += 1 }
                }
            }
            #expect(outcomes[0] == outcomes[1], "batch \(batch), seed \(seed)")
            let typedRows = try Self.rows(typed), dynamicRows = try Self.rows(dynamic)
            #expect(typedRows == dynamicRows, "batch \(batch), seed \(seed)")
            if typedRows != dynamicRows { break }
        }
        print("DynamicModelTests: \(try Self.rows(typed).count) rows, \(denied) denied, \(cascaded) cascaded, "
              + "\(refused) refused")
        #expect(try Self.rows(typed).count > 5)
    }

    @Test("An attribute nothing gave a value holds its type's zero, which the file store writes and reads back, for every type",
          arguments: StoreKind.allCases)
    func zeroValuesRoundTrip(kind: StoreKind) throws {
        // A schema as a store records it, with no declared defaults (as for a generated `UUID()` or `Date.now`).
        let types: [Schema.AttributeType] = [
            .bool, .int, .int8, .int16, .int32, .int64, .uint, .uint8, .uint16, .uint32, .uint64, .double, .float,
            .string, .date, .data, .uuid, .url, .decimal, .optional(.string), .array(.string), .dictionary(.int),
            .rawRepresentable(typeName: "Mood", rawType: .int), .rawRepresentable(typeName: "Tint", rawType: .string),
            .codable(typeName: "Place"),
        ]
        let attributes = types.enumerated().map { index, type in
            Schema.Attribute(name: "a\(index)", type: type, defaultValue: nil, hasGeneratedDefault: true)
        }
        let recorded = try Schema(version: Schema.Version(1, 0, 0), entities: [
            Schema.Entity(name: "Sample", attributes: attributes + [
                Schema.Attribute(name: "label", type: .string, defaultValue: .string("none")),
            ], relationships: []),
        ])
        let url = TemporaryStores.newURL()
        func open() throws -> ModelContainer {
            let configuration: any DataStoreConfiguration = switch kind {
            case .inMemory: ModelConfiguration(isStoredInMemoryOnly: true)
            case .file: FileStoreConfiguration(url: url)
            }
            return try ModelContainer(for: try recorded.withDynamicModels(), configurations: [configuration])
        }
        let id = PersistentIdentifier(entityName: "Sample", primaryKey: UUID())
        var container = try open()
        let context = ModelContext(container)
        // A new object from a replica that knew none of the attributes.
        _ = try context.applyReplicaChanges([ReplicaObject(id: id)], deleting: [])
        try context.save()
        if kind == .file {
            // Replayed from the record: every value must decode as its type.
            try container.close()
            container = try open()
        }
        let row = try #require(container.store.rows(for: [id]).first ?? nil)
        let entity = try #require(container.schema.entity(named: "Sample"))
        for (slot, attribute) in entity.attributes.enumerated() {
            let expected = attribute.defaultValue ?? attribute.type.zeroValue
            #expect(row.attributes[slot] == expected, "\(attribute.name): \(attribute.type)")
        }
        #expect(row.attributes[entity.attributes.firstIndex { $0.name == "label" }!] == .string("none"))
    }

    /// A value of `attribute`'s type, from a small range so that unique keys collide.
    static func value(_ attribute: Schema.Attribute, batch: Int, using random: inout SeededGenerator) -> StoredValue {
        switch attribute.type.nonOptional {
        case .string: .string(["a", "b", "c", "work", "home"].randomElement(using: &random)!)
        case .int, .int64: .int(Int64.random(in: 0...3, using: &random))
        case .bool: .bool(Bool.random(using: &random))
        case .double: .double(Double(Int.random(in: 0...9, using: &random)))
        case .date: .date(Date(timeIntervalSinceReferenceDate: Double(batch)))
        case .uuid: .uuid(UUID(uuid: (UInt8.random(in: 0...255, using: &random), 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0,
                                      UInt8(truncatingIfNeeded: batch))))
        case .data: .data(Data((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case .array: .array([.string("t\(Int.random(in: 0...2, using: &random))")])
        default: attribute.type.isOptional ? .null : .string("")
        }
    }
}

