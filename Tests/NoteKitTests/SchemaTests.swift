import Foundation
import Testing
@testable import NoteKit

/// The error `build` throws, if it is a ``SchemaError``; records an issue when it throws nothing or something else.
private func schemaError(_ build: () throws -> Any, sourceLocation: SourceLocation = #_sourceLocation) -> SchemaError? {
    do {
        _ = try build()
        Issue.record("expected a SchemaError, but the schema was built", sourceLocation: sourceLocation)
    } catch let error as SchemaError {
        return error
    } catch {
        Issue.record("expected a SchemaError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A stored description of a schema, as a store would read it back.
private func decodedSchema(_ json: String) throws -> Schema {
    try JSONDecoder().decode(Schema.self, from: Data(json.utf8))
}

@Suite("Schema")
struct SchemaTests {
    // MARK: Closure over relationships

    @Test("A schema is closed over relationships: naming any one model registers every model it reaches")
    func closedOverRelationships() throws {
        let fromAuthor = try Schema([Author.self])
        #expect(fromAuthor.entities.map(\.name) == ["Author", "Book", "Shelf"])
        let fromBook = try Schema([Book.self])
        #expect(fromBook.entities == fromAuthor.entities)
        let fromShelf = try Schema([Shelf.self])
        #expect(fromShelf.contentHash == fromAuthor.contentHash)
        #expect(try Schema([Book.self, Author.self, Shelf.self, Book.self]) == fromAuthor, "duplicates are harmless")
        let unrelated = try Schema([Author.self, TransientSpecimen.self])
        #expect(unrelated.entities.map(\.name) == ["Author", "Book", "Shelf", "TransientSpecimen"])
        #expect(fromAuthor.entity(named: "TransientSpecimen") == nil)
    }

    @Test("A schema built from model types opens a container; one decoded from a store cannot create objects")
    func decodedSchemaHasNoModelTypes() throws {
        let schema = try Schema([Author.self])
        let decoded = try JSONDecoder().decode(Schema.self, from: JSONEncoder().encode(schema))
        #expect(throws: ModelContainerError.schemaWithoutModelTypes) {
            try ModelContainer(for: decoded, configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        }
        _ = try ModelContainer(for: schema, configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
    }

    // MARK: Validation of model declarations

    @Test("An inverse that does not point back is refused, naming both relationships")
    func inverseDoesNotPointBack() throws {
        let error = schemaError { try Schema([MisdirectedInverse.Team.self]) }
        #expect(error == .inverseDoesNotPointBack(entity: "Team", property: "players", inverse: "Player.team"))
        #expect(error?.description == "Team.players names Player.team as its inverse, but Player.team names "
                + "another inverse")
    }

    @Test("An inverse whose relationship points at a third entity is refused")
    func inverseTypeMismatch() throws {
        let error = schemaError { try Schema([MismatchedInverse.Garden.self]) }
        #expect(error == .inverseTypeMismatch(entity: "Garden", property: "plants", inverse: "Plant.bed",
                                              expected: "Garden", found: "Bed"))
        #expect(error?.description == "the inverse of Garden.plants is Plant.bed, which points at Bed instead of "
                + "Garden")
    }

    @Test("An inverse key path that names an attribute is refused")
    func inverseNotARelationship() throws {
        let error = schemaError { try Schema([AttributeAsInverse.Kennel.self]) }
        guard case let .inverseNotARelationship(entity, property, destination, keyPath)? = error else {
            Issue.record("expected inverseNotARelationship, got \(String(describing: error))")
            return
        }
        #expect(entity == "Kennel" && property == "dogs" && destination == "Dog")
        #expect(keyPath == String(describing: \AttributeAsInverse.Dog.name as AnyKeyPath))
    }

    @Test("Two undeclared relationships to the same entity make the inverse ambiguous")
    func ambiguousInverse() throws {
        let error = schemaError { try Schema([AmbiguousInverse.Stop.self]) }
        #expect(error == .ambiguousInverse(entity: "Route", property: "origin", candidates: ["Stop.routes"]))
        #expect(error?.description.contains("declare it with `inverse:`") == true)
        #expect(error?.description.contains("Route.origin") == true)
    }

    @Test("Two relationships claiming the same inverse make it ambiguous")
    func doublyClaimedInverse() throws {
        let error = schemaError { try Schema([DoublyClaimedInverse.Volume.self]) }
        guard case let .ambiguousInverse(entity, property, candidates)? = error else {
            Issue.record("expected ambiguousInverse, got \(String(describing: error))")
            return
        }
        #expect(entity == "Volume" && property == "chapters")
        #expect(candidates == ["Chapter.volume", "Chapter.firstVolume"])
    }

    @Test("Two model types with one entity name are refused: by type name or by entityName")
    func duplicateEntityNames() throws {
        let byTypeName = schemaError { try Schema([FirstCatalog.Entry.self, SecondCatalog.Entry.self]) }
        #expect(byTypeName == .duplicateEntityName("Entry", types: [
            String(reflecting: FirstCatalog.Entry.self), String(reflecting: SecondCatalog.Entry.self),
        ].sorted()))
        let byEntityName = schemaError { try Schema([SecondCatalog.Listing.self, FirstCatalog.Entry.self]) }
        #expect(byEntityName == .duplicateEntityName("Entry", types: [
            String(reflecting: FirstCatalog.Entry.self), String(reflecting: SecondCatalog.Listing.self),
        ].sorted()))
        #expect(byTypeName?.description.hasPrefix("entity name Entry is declared by more than one model type") == true)
        #expect(try Schema([SecondCatalog.Listing.self]).entities.map(\.name) == ["Entry"])
    }

    @Test("An original name that is another property's name, or is claimed twice, is refused")
    func duplicatePropertyNames() throws {
        #expect(schemaError { try Schema([RenamedOntoExisting.self]) }
                == .duplicatePropertyName(entity: "RenamedOntoExisting", property: "title"))
        let twice = schemaError { try Schema([RenamedTwice.self]) }
        #expect(twice == .duplicatePropertyName(entity: "RenamedTwice", property: "name"))
        #expect(twice?.description == "RenamedTwice has two properties named name (counting original names)")
    }

    @Test("An attribute type NoteKit cannot store is refused, naming the type")
    func unsupportedAttributeTypes() throws {
        let aClass = schemaError { try Schema([HoldsAClass.self]) }
        #expect(aClass == .unsupportedAttributeType(entity: "HoldsAClass", property: "handle",
                                                    type: String(describing: OpaqueHandle.self)))
        #expect(aClass?.description.hasPrefix("HoldsAClass.handle has type OpaqueHandle, which cannot be stored")
                == true)
        #expect(schemaError { try Schema([HoldsANonCodableStruct.self]) }
                == .unsupportedAttributeType(entity: "HoldsANonCodableStruct", property: "point", type: "PlainPoint"))
        #expect(schemaError { try Schema([HoldsANestedOptional.self]) }
                == .unsupportedAttributeType(entity: "HoldsANestedOptional", property: "maybe",
                                             type: String(describing: Int??.self)))
    }

    @Test("External storage on anything but Data is refused")
    func externalStorageRequiresData() throws {
        let error = schemaError { try Schema([ExternalText.self]) }
        #expect(error == .externalStorageRequiresData(entity: "ExternalText", property: "body", type: "String"))
        #expect(error?.description == "ExternalText.body uses .externalStorage but has type String; external "
                + "storage holds Data only")
        #expect(try Schema([OptionsSpecimen.self]).entity(named: "OptionsSpecimen")?.attribute(named: "thumbnail")?
            .has(.externalStorage) == true, "Data? is accepted")
    }

    @Test("A unique constraint or index on a relationship is refused: to-many or to-one")
    func constraintsOnRelationships() throws {
        let toMany = schemaError { try Schema([Basket.self]) }
        #expect(toMany == .uniqueOnToMany(entity: "Basket", property: "items"))
        #expect(toMany?.description == "a unique constraint of Basket includes the to-many relationship items")
        #expect(schemaError { try Schema([UniqueOnToOne.self]) }
                == .constraintOnRelationship(entity: "UniqueOnToOne", kind: .unique, property: "target"))
        let index = schemaError { try Schema([IndexedOnRelationship.self]) }
        #expect(index == .constraintOnRelationship(entity: "IndexedOnRelationship", kind: .index, property: "targets"))
        #expect(index?.description == "an index of IndexedOnRelationship includes the relationship targets; only "
                + "attributes can be constrained or indexed")
    }

    @Test("An index or constraint on a key path that is not a persisted attribute is refused, with its position")
    func constraintsOnMissingProperties() throws {
        let computed = schemaError { try Schema([IndexedOnComputed.self]) }
        #expect(computed == .indexOnMissingProperty(entity: "IndexedOnComputed", position: 1,
                                                    keyPath: String(describing: \IndexedOnComputed.shouted as AnyKeyPath)))
        #expect(computed?.description.hasPrefix("an index of IndexedOnComputed names ") == true)
        #expect(computed?.description.hasSuffix("(key path 2), which is not a persisted attribute") == true)
        #expect(schemaError { try Schema([IndexedOnTransient.self]) } == .indexOnMissingProperty(
            entity: "IndexedOnTransient", position: 0,
            keyPath: String(describing: \IndexedOnTransient.scratch as AnyKeyPath)))
        #expect(schemaError { try Schema([UniqueOnComputed.self]) } == .constraintOnMissingProperty(
            entity: "UniqueOnComputed", position: 0,
            keyPath: String(describing: \UniqueOnComputed.shouted as AnyKeyPath)))
        #expect(schemaError { try Schema([EmptyIndex.self]) } == .emptyConstraint(entity: "EmptyIndex", kind: .index))
    }

    @Test("Impossible relationship count bounds are refused")
    func invalidRelationshipCounts() throws {
        let inverted = schemaError { try Schema([InvertedBounds.self]) }
        #expect(inverted == .invalidRelationshipCount(entity: "InvertedBounds", property: "members", minimum: 3,
                                                      maximum: 1))
        #expect(inverted?.description == "InvertedBounds.members has impossible count bounds 3...1")
        #expect(schemaError { try Schema([ToOneWithMaximumTwo.self]) }
                == .invalidRelationshipCount(entity: "ToOneWithMaximumTwo", property: "target", minimum: 0, maximum: 2))
        #expect(schemaError { try Schema([NegativeMinimum.self]) }
                == .invalidRelationshipCount(entity: "NegativeMinimum", property: "members", minimum: -1, maximum: nil))
        #expect(try Schema([Person.self]).entity(named: "Person")?.relationship(named: "pets")?.maximumModelCount == 2)
    }

    @Test("A model class inheriting another class than ModelObject is refused")
    func inheritance() throws {
        let error = schemaError { try Schema([SpecimenSubclass.self]) }
        #expect(error == .inheritanceNotSupported(entity: "SpecimenSubclass", superclass: "SpecimenBase"))
        #expect(error?.description.contains("declare `final class SpecimenSubclass: PersistentModel`") == true)
    }

    @Test("A model class inheriting attributes is refused with a typed error, not a crash")
    func inheritedAttributesDoNotCrash() async {
        await #expect(processExitsWith: .success) {
            do {
                _ = try Schema([AttributedSubclass.self])
                exit(2)
            } catch SchemaError.inheritanceNotSupported(entity: "AttributedSubclass", superclass: "AttributedBase") {
                exit(0)
            } catch {
                exit(3)
            }
        }
    }

    // MARK: Codable

    @Test("A schema encodes to JSON and decodes to an equal schema with the same content hash")
    func codableRoundTrip() throws {
        // No attribute here has a nil default: see optionalDefaultsSurviveCoding for those.
        let schema = try Schema([Expedition.self, ScalarSpecimen.self, FloatingSpecimen.self, GaugeV2.Gauge.self,
                                 TextSpecimen.self],
                                version: Schema.Version(3, 1, 4))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let json = try encoder.encode(schema)
        let decoded = try JSONDecoder().decode(Schema.self, from: json)
        #expect(decoded == schema)
        #expect(decoded.contentHash == schema.contentHash)
        #expect(decoded.version == Schema.Version(3, 1, 4))
        #expect(decoded.entities.map(\.name) == ["Camp", "Climber", "Expedition", "FloatingSpecimen", "Gauge",
                                                 "ScalarSpecimen", "TextSpecimen"])
        #expect(decoded.entity(named: "ScalarSpecimen")?.attribute(named: "blob")?.options == [.externalStorage])
        #expect(decoded.entity(named: "Camp")?.relationship(named: "expedition")?.minimumModelCount == 1)
        #expect(try encoder.encode(decoded) == json, "encoding is deterministic")

        // The text is readable: types as declared, versions as dotted numbers.
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"3.1.4\""))
        #expect(text.contains("\"UInt64\""))
        #expect(text.contains("\"noAction\""))

        let rebuilt = try Schema(version: decoded.version, entities: decoded.entities.reversed())
        #expect(rebuilt == schema, "a decoded description builds a schema, entities sorted by name")
    }

    @Test("Attributes whose default is nil survive encoding, with the same content hash")
    func optionalDefaultsSurviveCoding() throws {
        let schema = try Schema([OptionalSpecimen.self, CustomValueSpecimen.self, OptionsSpecimen.self,
                                 DefaultsSpecimen.self, CollectionSpecimen.self, Author.self])
        #expect(schema.entity(named: "OptionalSpecimen")?.attribute(named: "date")?.defaultValue == .null)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = try encoder.encode(schema)
        let decoded = try JSONDecoder().decode(Schema.self, from: json)
        // What does survive: names, types, options, generated defaults.
        #expect(decoded.entities.map(\.name) == schema.entities.map(\.name))
        #expect(decoded.entities.map { $0.attributes.map(\.type) } == schema.entities.map { $0.attributes.map(\.type) })
        #expect(decoded.entity(named: "CustomValueSpecimen")?.attribute(named: "route")?.type
                == .array(.codable(typeName: "Location")))
        #expect(decoded.entity(named: "OptionsSpecimen")?.attribute(named: "username")?.options
                == [.preserveValueOnDeletion, .unique])
        #expect(decoded.entity(named: "DefaultsSpecimen")?.attribute(named: "id")?.hasGeneratedDefault == true)
        #expect(decoded.entity(named: "DefaultsSpecimen")?.attribute(named: "title")?.defaultValue
                == .string("Untitled"))
        let reencoded = try encoder.encode(decoded)
        #expect(decoded.entity(named: "OptionalSpecimen")?.attribute(named: "date")?.defaultValue == .null)
        #expect(decoded == schema)
        #expect(decoded.contentHash == schema.contentHash)
        #expect(reencoded == json)
    }

    @Test("A schema built from a stored description is validated")
    func decodedDescriptionIsValidated() throws {
        // Route.legs says its inverse is Stop.route, but Stop.route says its inverse is Route.spare.
        let json = """
            {"version": "1.0.0", "entities": [
              {"name": "Route", "attributes": [], "uniqueConstraints": [], "indexes": [], "relationships": [
                {"name": "legs", "destination": "Stop", "isToMany": true, "inverse": "route",
                 "deleteRule": "nullify", "minimumModelCount": 0},
                {"name": "spare", "destination": "Stop", "isToMany": false, "inverse": "route",
                 "deleteRule": "nullify", "minimumModelCount": 0}]},
              {"name": "Stop", "attributes": [], "uniqueConstraints": [], "indexes": [], "relationships": [
                {"name": "route", "destination": "Route", "isToMany": false, "inverse": "spare",
                 "deleteRule": "nullify", "minimumModelCount": 0}]}
            ]}
            """
        // Decoding validates, and reports the schema error as the underlying error.
        do {
            _ = try decodedSchema(json)
            Issue.record("an inconsistent description must not decode")
        } catch let DecodingError.dataCorrupted(context) {
            #expect(context.underlyingError as? SchemaError
                    == .inverseDoesNotPointBack(entity: "Route", property: "legs", inverse: "Stop.route"))
        }

        let valid = try Schema([Author.self])
        var entities = valid.entities
        let book = try #require(entities.firstIndex { $0.name == "Book" })
        entities[book].relationships[1].destination = "Publisher"
        #expect(throws: SchemaError.missingDestination(entity: "Book", property: "shelves", destination: "Publisher")) {
            try Schema(version: valid.version, entities: entities)
        }
        entities = valid.entities
        entities[book].indexes.append(["isbn"])
        #expect(throws: SchemaError.unknownAttributeInConstraint(entity: "Book", kind: .index, attribute: "isbn")) {
            try Schema(version: valid.version, entities: entities)
        }
        entities = valid.entities
        entities[book].uniqueConstraints.append(["shelves"])
        #expect(throws: SchemaError.uniqueOnToMany(entity: "Book", property: "shelves")) {
            try Schema(version: valid.version, entities: entities)
        }
        entities = valid.entities
        entities[book].attributes[0].options = [.externalStorage]
        #expect(throws: SchemaError.externalStorageRequiresData(entity: "Book", property: "title", type: "String")) {
            try Schema(version: valid.version, entities: entities)
        }
        entities = valid.entities
        entities[book].attributes[1].name = "title"
        #expect(throws: SchemaError.duplicatePropertyName(entity: "Book", property: "title")) {
            try Schema(version: valid.version, entities: entities)
        }
    }

    @Test("Decoding an inconsistent stored description is refused")
    func decodingValidates() throws {
        let json = """
            {"version": "1.0.0", "entities": [
              {"name": "Lonely", "attributes": [], "uniqueConstraints": [], "indexes": [], "relationships": [
                {"name": "friend", "destination": "Nobody", "isToMany": false,
                 "deleteRule": "nullify", "minimumModelCount": 0}]}
            ]}
            """
        do {
            _ = try decodedSchema(json)
            Issue.record("an inconsistent description must not decode")
        } catch let DecodingError.dataCorrupted(context) {
            #expect(context.underlyingError as? SchemaError
                    == .missingDestination(entity: "Lonely", property: "friend", destination: "Nobody"))
        }
    }

    @Test("A malformed stored description is a decoding error naming what is wrong")
    func malformedDescriptions() throws {
        #expect(throws: DecodingError.self) {
            try decodedSchema(#"{"version": "1.0", "entities": []}"#)
        }
        #expect(throws: DecodingError.self) {
            try decodedSchema("""
                {"version": "1.0.0", "entities": [{"name": "E", "uniqueConstraints": [], "indexes": [],
                  "relationships": [], "attributes": [
                    {"name": "a", "type": "Int128", "hasGeneratedDefault": false, "options": []}]}]}
                """)
        }
    }

    // MARK: Content hash

    @Test("The content hash does not depend on the order types are registered in, nor on the version")
    func contentHashIsStable() throws {
        let forward = try Schema([Author.self, Expedition.self, OptionsSpecimen.self])
        let backward = try Schema([OptionsSpecimen.self, Expedition.self, Author.self], version: Schema.Version(9, 0, 0))
        let middle = try Schema([Expedition.self, OptionsSpecimen.self, Book.self])
        #expect(forward.contentHash == backward.contentHash)
        #expect(forward.contentHash == middle.contentHash)
        #expect(forward != backward, "the version is part of the schema's identity, not of its content")
        #expect(forward.entities == backward.entities)
        #expect(forward.contentHash.count == 64)
        #expect(forward.contentHash.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(forward.description.hasPrefix("Schema 1.0.0 (\(forward.contentHash.prefix(12)))"))

        let reversed = try Schema(version: forward.version, entities: forward.entities.reversed())
        #expect(reversed.contentHash == forward.contentHash)
        #expect(try Schema([Author.self]).contentHash != forward.contentHash)
    }

    @Test("The content hash is the same in another process")
    func contentHashAcrossProcesses() async throws {
        // Hashing seeds differ between processes: a hash that depended on dictionary order would differ too.
        let here = try Schema([DefaultsSpecimen.self, OptionsSpecimen.self, Author.self, Expedition.self]).contentHash
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            let schema = try? Schema([Expedition.self, Author.self, OptionsSpecimen.self, DefaultsSpecimen.self])
            print(schema?.contentHash ?? "no schema", terminator: "")
        }
        let there = String(decoding: try #require(result).standardOutputContent, as: UTF8.self)
        #expect(there == here)
    }

    @Test("Adding an attribute changes the content hash")
    func contentHashSeesAttributes() throws {
        let v1 = try Schema([GaugeV1.Gauge.self], version: Schema.Version(1, 0, 0))
        let v2 = try Schema([GaugeV2.Gauge.self], version: Schema.Version(1, 0, 0))
        #expect(v1.entities.map(\.name) == ["Gauge"] && v2.entities.map(\.name) == ["Gauge"])
        #expect(v1.contentHash != v2.contentHash)
        #expect(v1 != v2)

        // Any change of the description changes it: a default, an option, a delete rule.
        var entities = v1.entities
        entities[0].attributes[0].defaultValue = .double(1)
        #expect(try Schema(version: v1.version, entities: entities).contentHash != v1.contentHash)
        entities = v1.entities
        entities[0].attributes[0].options = [.unique]
        #expect(try Schema(version: v1.version, entities: entities).contentHash != v1.contentHash)
        let library = try Schema([Author.self])
        entities = library.entities
        entities[0].relationships[0].deleteRule = .nullify
        #expect(try Schema(version: library.version, entities: entities).contentHash != library.contentHash)
    }

    // MARK: Attribute types

    @Test("An attribute type parses what it prints", arguments: [
        Schema.AttributeType.bool, .int, .int8, .int16, .int32, .int64, .uint, .uint8, .uint16, .uint32, .uint64,
        .double, .float, .string, .date, .data, .uuid, .url, .decimal,
        .optional(.date), .array(.string), .dictionary(.int), .optional(.array(.optional(.uuid))),
        .array(.array(.dictionary(.optional(.int)))), .dictionary(.array(.optional(.date))),
        .rawRepresentable(typeName: "Priority", rawType: .string),
        .optional(.rawRepresentable(typeName: "Level", rawType: .int)),
        .array(.rawRepresentable(typeName: "Priority", rawType: .string)),
        .dictionary(.rawRepresentable(typeName: "Priority", rawType: .string)),
        .codable(typeName: "Location"), .optional(.codable(typeName: "Location")),
        .array(.codable(typeName: "Location")), .dictionary(.codable(typeName: "Pair<Int, String>")),
    ])
    func attributeTypeRoundTrip(type: Schema.AttributeType) throws {
        #expect(Schema.AttributeType(parsing: type.description) == type)
        let json = try JSONEncoder().encode([type])
        #expect(try JSONDecoder().decode([Schema.AttributeType].self, from: json) == [type])
        #expect(String(decoding: json, as: UTF8.self) == "[\"\(type.description)\"]", "stored as the text it prints")
    }

    @Test("Attribute types print as declared")
    func attributeTypeDescriptions() {
        #expect(Schema.AttributeType.array(.dictionary(.optional(.int))).description == "[[String: Int?]]")
        #expect(Schema.AttributeType.optional(.array(.optional(.uuid))).description == "[UUID?]?")
        #expect(Schema.AttributeType.rawRepresentable(typeName: "Priority", rawType: .string).description
                == "Priority(String)")
        #expect(Schema.AttributeType.codable(typeName: "Location").description == "codable Location")
        #expect(Schema.AttributeType.optional(.string).isOptional && !Schema.AttributeType.string.isOptional)
        #expect(Schema.AttributeType.optional(.date).nonOptional == .date)
        #expect(Schema.AttributeType.rawRepresentable(typeName: "Level", rawType: .int).isScalar)
        #expect(!Schema.AttributeType.array(.int).isScalar && !Schema.AttributeType.codable(typeName: "X").isScalar)
    }

    @Test("Text that is not an attribute type does not parse", arguments: [
        "", "Int128", "int", "Optional<Int>", "[String", "String]", "[String: ]", "?", "[Int: String]", "()",
    ])
    func attributeTypeRejects(text: String) {
        #expect(Schema.AttributeType(parsing: text) == nil)
    }
}
