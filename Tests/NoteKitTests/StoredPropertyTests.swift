import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// The error building a schema of `types` on `kind` throws, if it is a ``SchemaError``.
private func schemaError(_ types: [any PersistentModel.Type], on kind: StoreKind,
                         sourceLocation: SourceLocation = #_sourceLocation) -> SchemaError? {
    do {
        _ = try kind.makeContainer(types)
        Issue.record("expected a SchemaError, but the container opened", sourceLocation: sourceLocation)
    } catch let error as SchemaError {
        return error
    } catch {
        Issue.record("expected a SchemaError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

@Suite("Stored properties: persisted or declared transient")
struct StoredPropertyTests {
    @Test("A stored property without a wrapper is refused, naming it and both fixes", arguments: StoreKind.allCases)
    func unwrappedStoredPropertyIsRefused(kind: StoreKind) throws {
        let error = schemaError([PortedNote.self], on: kind)
        #expect(error == .storedPropertyWithoutWrapper(entity: "PortedNote", property: "isExpanded"))
        let message = try #require(error).description
        #expect(message.contains("PortedNote.isExpanded"))
        #expect(message.contains("@Attribute var isExpanded"), "the fix that persists it: \(message)")
        #expect(message.contains("@Transient var isExpanded"), "the fix that keeps it out: \(message)")
    }

    @Test("A constant without a wrapper is refused like a variable", arguments: StoreKind.allCases)
    func unwrappedConstantIsRefused(kind: StoreKind) {
        #expect(schemaError([ConstantHolder.self], on: kind)
            == .storedPropertyWithoutWrapper(entity: "ConstantHolder", property: "kind"))
    }

    @Test("A model reached only through a relationship is checked too", arguments: StoreKind.allCases)
    func reachedModelIsChecked(kind: StoreKind) {
        #expect(schemaError([UnwrappedDestinationOwner.self], on: kind)
            == .storedPropertyWithoutWrapper(entity: "UnwrappedDestination", property: "pending"))
    }

    @Test("@Transient properties are left out of the schema and reset when the object is loaded again",
          arguments: StoreKind.allCases)
    func transientPropertiesAreNotPersisted(kind: StoreKind) throws {
        let container = try kind.makeContainer([ExpandableNote.self])
        let entity = try #require(container.schema.entity(named: "ExpandableNote"))
        #expect(entity.attributes.map(\.name) == ["title", "createdAt"])

        let writer = ModelContext(container)
        let note = ExpandableNote(title: "Groceries")
        note.isExpanded = true
        note.draft = "milk"
        writer.insert(note)
        try writer.save()
        note.isExpanded = false
        #expect(!writer.hasChanges, "changing a transient property is not a change")

        let copy = try #require(try ModelContext(container).fetch(FetchDescriptor<ExpandableNote>()).first)
        #expect(copy.title == "Groceries" && copy.summary == "Gro")
        #expect(!copy.isExpanded && copy.draft == nil, "a loaded object starts with the initial values")
    }

    @Test("A lazy property is derived state: not in the schema, computed again after a reload",
          arguments: StoreKind.allCases)
    func lazyPropertyIsDerived(kind: StoreKind) throws {
        let container = try kind.makeContainer([LazySummary.self])
        #expect(try #require(container.schema.entity(named: "LazySummary")).attributes.map(\.name) == ["title"])
        let writer = ModelContext(container)
        writer.insert(LazySummary(title: "quiet"))
        try writer.save()
        let copy = try #require(try ModelContext(container).fetch(FetchDescriptor<LazySummary>()).first)
        #expect(copy.shouted == "QUIET")
    }
}
