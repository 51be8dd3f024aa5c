import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 35, item 7: what an upsert does to relationships. The inserted object's values update the object that holds
/// its unique key: a relationship set on the inserted object replaces the survivor's (its dropped targets no longer
/// point back, and no delete rule runs on them); one it was not given keeps the survivor's targets, and gains those
/// that other objects linked to the inserted object through the inverse.
@Suite("Uniqueness: what an upsert does to relationships")
struct UpsertRelationshipTests {
    private static let types: [any PersistentModel.Type] = [Member.self, Crew.self, Desk.self, Memo.self]

    /// Whether the saving context holds the saved member (the duplicate merges into it and leaves the context) or
    /// never loaded it (the duplicate takes its identity): the two ways a save resolves a duplicate.
    enum Survivor: String, CaseIterable, CustomTestStringConvertible {
        case loaded, unloaded
        var testDescription: String { "survivor \(rawValue)" }
    }

    /// A store holding ada (in crews red and blue, at desk d1, author of memos m1 and m2), crew green and desk d2;
    /// `context` is where the test inserts the duplicate.
    private struct World {
        let container: ModelContainer
        let context: ModelContext
        /// The saved member, kept alive while the test runs when the context is to hold it.
        let held: Member?
        let survivor: Survivor

        func crew(_ name: String) throws -> Crew {
            try #require(try context.fetch(FetchDescriptor<Crew>(predicate: #Predicate { $0.name == name })).first)
        }

        func desk(_ label: String) throws -> Desk {
            try #require(try context.fetch(FetchDescriptor<Desk>(predicate: #Predicate { $0.label == label })).first)
        }

        /// Inserts `duplicate`, saves, and checks which way the save resolved it.
        func upsert(_ duplicate: Member) throws {
            context.insert(duplicate)
            try context.save()
            #expect(try context.fetchCount(FetchDescriptor<Member>()) == 1)
            #expect((duplicate.modelContext === context) == (survivor == .unloaded),
                    "an unloaded survivor's identity is taken over; a loaded one absorbs the duplicate")
        }
    }

    private func world(_ kind: StoreKind, _ survivor: Survivor) throws -> World {
        let container = try kind.makeContainer(Self.types)
        let setup = ModelContext(container)
        let ada = Member(handle: "ada", name: "Ada")
        ada.crews = [Crew(name: "red"), Crew(name: "blue")]
        ada.desk = Desk(label: "d1")
        ada.memos = [Memo(text: "m1"), Memo(text: "m2")]
        setup.insert(ada)
        setup.insert(Crew(name: "green"))
        setup.insert(Desk(label: "d2"))
        try setup.save()
        return switch survivor {
        case .loaded: World(container: container, context: setup, held: ada, survivor: survivor)
        case .unloaded: World(container: container, context: ModelContext(container), held: nil, survivor: survivor)
        }
    }

    /// Every object of the store and what it points at, both sides of every relationship, as `context` sees them.
    private static func describe(_ context: ModelContext) throws -> [String] {
        func list(_ names: [String]) -> String { names.sorted().joined(separator: ",") }
        let members = try context.fetch(FetchDescriptor<Member>()).map { member in
            "member \(member.handle) \(member.name): crews \(list(member.crews.map(\.name))); "
                + "desk \(member.desk?.label ?? "-"); memos \(list(member.memos.map(\.text)))"
        }
        let crews = try context.fetch(FetchDescriptor<Crew>(sortBy: [SortDescriptor(\.name)])).map {
            "crew \($0.name): \(list($0.members.map(\.handle)))"
        }
        let desks = try context.fetch(FetchDescriptor<Desk>(sortBy: [SortDescriptor(\.label)])).map {
            "desk \($0.label): \($0.occupant?.handle ?? "-")"
        }
        let memos = try context.fetch(FetchDescriptor<Memo>(sortBy: [SortDescriptor(\.text)])).map {
            "memo \($0.text): \($0.author?.handle ?? "-")"
        }
        return members + crews + desks + memos
    }

    /// Checks the store as the saving context and as a fresh context see it.
    private func expectStore(_ world: World, _ expected: [String],
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try Self.describe(world.context) == expected, "as the saving context sees it",
                sourceLocation: sourceLocation)
        let reader = ModelContext(world.container)
        #expect(try Self.describe(reader) == expected, "as a fresh context reads it", sourceLocation: sourceLocation)
    }

    @Test("A to-many set on the inserted object replaces the survivor's; a crew it drops no longer lists the member",
          arguments: StoreKind.allCases, Survivor.allCases)
    func toManySetReplaces(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada L.")
        duplicate.crews = [try world.crew("blue"), try world.crew("green")]
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada L.: crews blue,green; desk d1; memos m1,m2",
            "crew blue: ada", "crew green: ada", "crew red: ",
            "desk d1: ada", "desk d2: -",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("An empty to-many set on the inserted object empties the survivor's", arguments: StoreKind.allCases,
          Survivor.allCases)
    func emptyToManySetEmpties(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada")
        duplicate.crews = []
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada: crews ; desk d1; memos m1,m2",
            "crew blue: ", "crew green: ", "crew red: ",
            "desk d1: ada", "desk d2: -",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("Targets an upsert drops are not deleted, whatever the delete rule: their inverse reads nil",
          arguments: StoreKind.allCases, Survivor.allCases)
    func droppedTargetsAreNotDeleted(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada")
        duplicate.memos = [Memo(text: "m3")]   // memos cascade when a member is deleted; none is deleted here
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada: crews blue,red; desk d1; memos m3",
            "crew blue: ada", "crew green: ", "crew red: ada",
            "desk d1: ada", "desk d2: -",
            "memo m1: -", "memo m2: -", "memo m3: ada",
        ])
    }

    @Test("A to-many not set on the inserted object, filled only as other objects' inverse, adds to the survivor's",
          arguments: StoreKind.allCases, Survivor.allCases)
    func toManyFilledByInverseAdds(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada")
        try world.crew("green").members.append(duplicate)
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada: crews blue,green,red; desk d1; memos m1,m2",
            "crew blue: ada", "crew green: ada", "crew red: ada",
            "desk d1: ada", "desk d2: -",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("A to-one set on the inserted object replaces the survivor's; the desk it leaves has no occupant",
          arguments: StoreKind.allCases, Survivor.allCases)
    func toOneSetReplaces(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada")
        duplicate.desk = try world.desk("d2")
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada: crews blue,red; desk d2; memos m1,m2",
            "crew blue: ada", "crew green: ", "crew red: ada",
            "desk d1: -", "desk d2: ada",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("A to-one set to nil on the inserted object clears the survivor's, as a nil attribute does",
          arguments: StoreKind.allCases, Survivor.allCases)
    func toOneSetToNilClears(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        let duplicate = Member(handle: "ada", name: "Ada")
        duplicate.desk = nil
        try world.upsert(duplicate)
        try expectStore(world, [
            "member ada Ada: crews blue,red; desk -; memos m1,m2",
            "crew blue: ada", "crew green: ", "crew red: ada",
            "desk d1: -", "desk d2: -",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("Relationships not set on the inserted object keep the survivor's targets; its attributes still win",
          arguments: StoreKind.allCases, Survivor.allCases)
    func relationshipsNotSetAreKept(kind: StoreKind, survivor: Survivor) throws {
        let world = try world(kind, survivor)
        try world.upsert(Member(handle: "ada", name: "Ada Lovelace"))
        try expectStore(world, [
            "member ada Ada Lovelace: crews blue,red; desk d1; memos m1,m2",
            "crew blue: ada", "crew green: ", "crew red: ada",
            "desk d1: ada", "desk d2: -",
            "memo m1: ada", "memo m2: ada",
        ])
    }

    @Test("Two inserts of one key in one save: the later one's relationships, where it set them, win",
          arguments: StoreKind.allCases)
    func twoInsertsInOneSave(kind: StoreKind) throws {
        let container = try kind.makeContainer(Self.types)
        let context = ModelContext(container)
        let first = Member(handle: "bob", name: "Bob")
        first.crews = [Crew(name: "red"), Crew(name: "blue")]
        first.desk = Desk(label: "d1")
        let second = Member(handle: "bob", name: "Robert")
        second.crews = [Crew(name: "green")]
        context.insert(first)
        context.insert(second)
        try context.save()
        let reader = ModelContext(container)
        #expect(try Self.describe(reader) == [
            "member bob Robert: crews green; desk d1; memos ",
            "crew blue: ", "crew green: bob", "crew red: ",
            "desk d1: bob",
        ])
    }

    @Test("What an upsert needs to know costs a saved object nothing, and an object without a unique key nothing",
          arguments: StoreKind.allCases)
    func assignmentsAreForgottenAtSave(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer(Self.types))
        let ada = Member(handle: "ada")
        let red = Crew(name: "red")
        ada.crews = [red]
        red.members = [ada]
        context.insert(ada)
        #expect(ada._$assignedRelationships == [0], "crews, set on a member not saved yet")
        #expect(red._$assignedRelationships.isEmpty, "a crew has no unique key: nothing to record")
        try context.save()
        #expect(ada._$assignedRelationships.isEmpty)
        #expect(ada._$sideAllocations.extra == false && red._$sideAllocations.extra == false,
                "the side allocation that held their unsaved links is gone")
        ada.crews = []
        #expect(ada._$assignedRelationships.isEmpty, "a saved member records nothing")
    }
}
