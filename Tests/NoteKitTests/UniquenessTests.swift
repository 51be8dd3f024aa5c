import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

@Suite("Uniqueness: upsert by default, or a typed error")
struct UniquenessTests {
    @Test("Seed 002: inserting the same unique email twice leaves one record, updated", arguments: StoreKind.allCases)
    func seed002Upsert(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        context.insert(Contact(email: "alice@example.com", name: "Alice"))
        try context.save()
        let updated = Contact(email: "alice@example.com", name: "Alice Smith")
        context.insert(updated)
        try context.save()

        let reader = ModelContext(container)
        let contacts = try reader.fetch(FetchDescriptor<Contact>())
        #expect(contacts.map(\.name) == ["Alice Smith"])
    }

    @Test("Upsert keeps the stored object's identity, and the inserted object stays usable", arguments: StoreKind.allCases)
    func upsertKeepsIdentity(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let writer = ModelContext(container)
        let original = Contact(email: "bob@example.com", name: "Bob")
        original.phone = "555"
        writer.insert(original)
        try writer.save()

        // A second context that never loaded Bob inserts a duplicate (a sync arriving twice).
        let sync = ModelContext(container)
        let duplicate = Contact(email: "bob@example.com", name: "Robert")
        sync.insert(duplicate)
        try sync.save()
        #expect(duplicate.persistentModelID == original.persistentModelID, "the stored identity is kept")
        #expect(duplicate.modelContext === sync && !duplicate.hasChanges)
        #expect(duplicate.phone == nil, "every attribute of the inserted object wins, nil included")
        duplicate.name = "Rob"
        try sync.save()

        let reader = ModelContext(container)
        let stored = try reader.fetch(FetchDescriptor<Contact>())
        #expect(stored.map(\.name) == ["Rob"])
        #expect(stored.first?.persistentModelID == original.persistentModelID)
    }

    @Test("Upsert into an object the context already holds updates that object", arguments: StoreKind.allCases)
    func upsertIntoRegistered(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        let carol = Contact(email: "carol@example.com", name: "Carol")
        let friends = ContactGroup(title: "Friends")
        context.insert(carol)
        context.insert(friends)
        try context.save()

        let again = Contact(email: "carol@example.com", name: "Caroline")
        again.groups = [friends]
        context.insert(again)
        try context.save()
        #expect(carol.name == "Caroline", "the held object shows the new values")
        #expect(carol.groups.map(\.title) == ["Friends"], "and takes the relationships set on the inserted object")
        #expect(friends.members.count == 1 && friends.members.first === carol)
        #expect(again.modelContext == nil && again.persistentModelID == carol.persistentModelID)
        #expect(try context.fetchCount(FetchDescriptor<Contact>()) == 1)
    }

    @Test("Two inserts of one key in the same save become one object, the later values winning",
          arguments: StoreKind.allCases)
    func duplicateInsertsInOneSave(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        context.insert(Contact(email: "dan@example.com", name: "Dan"))
        context.insert(Contact(email: "dan@example.com", name: "Daniel"))
        try context.save()
        let reader = ModelContext(container)
        #expect(try reader.fetch(FetchDescriptor<Contact>()).map(\.name) == ["Daniel"])
    }

    @Test("The reject policy throws a typed error and leaves the changes pending", arguments: StoreKind.allCases)
    func rejectPolicy(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self], uniquenessPolicy: .reject)
        let context = ModelContext(container)
        let first = Contact(email: "eve@example.com", name: "Eve")
        context.insert(first)
        try context.save()
        let second = Contact(email: "eve@example.com", name: "Evelyn")
        context.insert(second)
        do {
            try context.save()
            Issue.record("a duplicate email must be refused")
        } catch let SaveError.uniqueConstraintViolation(entity, properties, values, existing) {
            #expect(entity == "Contact" && properties == ["email"])
            #expect(values == [.string("eve@example.com")] && existing == first.persistentModelID)
        }
        #expect(context.hasChanges && second.modelContext === context)
        second.email = "evelyn@example.com"
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Contact>()) == 2)
    }

    @Test("Changing a saved object onto another's key is refused by the store", arguments: StoreKind.allCases)
    func updateCollision(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        let a = Contact(email: "a@example.com", name: "A"), b = Contact(email: "b@example.com", name: "B")
        context.insert(a)
        context.insert(b)
        try context.save()
        b.email = "a@example.com"
        #expect(throws: SaveError.self) { try context.save() }
        // Swapping keys within one save is fine: each releases the key the other takes.
        b.email = "a@example.com"
        a.email = "b@example.com"
        try context.save()
        let reader = ModelContext(container)
        #expect(try reader.fetch(FetchDescriptor<Contact>(sortBy: [SortDescriptor(\.email)])).map(\.name) == ["B", "A"])
    }

    @Test("Seed 001 QuickNote: compound unique (title, createdAt), unique slug, transient flag not persisted",
          arguments: StoreKind.allCases)
    func quickNote(kind: StoreKind) throws {
        let container = try kind.makeContainer([QuickNote.self], uniquenessPolicy: .reject)
        let entity = try #require(container.schema.entity(named: "QuickNote"))
        #expect(entity.uniqueConstraints == [["slug"], ["title", "createdAt"]])
        #expect(entity.attribute(named: "isExpanded") == nil, "transient properties are not in the schema")

        let context = ModelContext(container)
        let moment = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let note = QuickNote(title: "Untitled", createdAt: moment)
        note.isExpanded = true
        context.insert(note)
        try context.save()

        // Same title and time: the compound constraint refuses it even with a different slug.
        let twin = QuickNote(title: "Untitled", createdAt: moment)
        twin.slug = "another-slug"
        context.insert(twin)
        #expect(throws: SaveError.self) { try context.save() }
        try context.delete(twin)

        // Same slug, another title: the single constraint refuses it.
        let sameSlug = QuickNote(title: "Other", createdAt: moment.addingTimeInterval(1))
        sameSlug.slug = note.slug
        context.insert(sameSlug)
        #expect(throws: SaveError.self) { try context.save() }
        try context.delete(sameSlug)

        // Same title a second later is a different note.
        context.insert(QuickNote(title: "Untitled", createdAt: moment.addingTimeInterval(1)))
        try context.save()

        let reader = ModelContext(container)
        let notes = try reader.fetch(FetchDescriptor<QuickNote>(sortBy: [SortDescriptor(\.createdAt)]))
        #expect(notes.count == 2)
        #expect(notes.allSatisfy { !$0.isExpanded }, "the transient flag comes back at its initial value")
    }

    @Test("A unique key with a nil value constrains nothing, as in SQL", arguments: StoreKind.allCases)
    func nilKeys(kind: StoreKind) throws {
        let container = try kind.makeContainer([Optionally.self], uniquenessPolicy: .reject)
        let context = ModelContext(container)
        context.insert(Optionally())
        context.insert(Optionally())
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Optionally>()) == 2)
    }
}

final class Optionally: PersistentModel {
    @Attribute(.unique) var code: String?
    required init() {}
}
