import Foundation
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// The seam a mirror's import uses (issue 18): a save that commits only at the transaction number it was computed
/// at, and changes applied by entity and property name with the context's rules.
@Suite("Changes applied from another replica")
struct ReplicaChangeTests {
    @Test("A conditional save is refused once another context or container has committed", arguments: StoreKind.allCases)
    func conditionalSaveSeesEveryCommit(kind: StoreKind) throws {
        let container = try ModelContainer.fieldNotes(on: kind)
        let first = ModelContext(container)
        first.insert(NoteKitStressSupport.NoteRecord())
        try first.save()

        let importer = ModelContext(container)
        importer.expectedTransactionNumber = container.store.transactionNumber
        let note = try #require(try importer.fetch(FetchDescriptor<NoteKitStressSupport.NoteRecord>()).first)
        note.title = "from the server"
        // Another writer commits in between: on a file store, through another container (as another process would,
        // seen only once the save catches up under the lock).
        let other: ModelContainer
        if let store = container.store as? FileStore {
            other = try ModelContainer(for: container.schema,
                                       configurations: [FileStoreConfiguration(url: store.configuration.url)])
        } else {
            other = container
        }
        let writer = ModelContext(other)
        writer.insert(NoteKitStressSupport.NoteRecord())
        try writer.save()

        #expect(throws: TransactionNumberMoved.self) { try importer.save() }
        #expect(importer.hasChanges, "a refused save keeps its changes")
        importer.expectedTransactionNumber = other.store.transactionNumber
        try importer.save()
        #expect(try ModelContext(other).fetch(FetchDescriptor<NoteKitStressSupport.NoteRecord>()).contains { $0.title == "from the server" })
    }

    @Test("Incoming objects are created with their identifiers, linked in both directions, and deleted with rules",
          arguments: StoreKind.allCases)
    func incomingObjectsFollowTheContextsRules(kind: StoreKind) throws {
        let container = try ModelContainer.fieldNotes(on: kind)
        let notebookID = PersistentIdentifier(entityName: "NotebookRecord", primaryKey: UUID())
        let noteID = PersistentIdentifier(entityName: "NoteRecord", primaryKey: UUID())
        let photoID = PersistentIdentifier(entityName: "PhotoRecord", primaryKey: UUID())
        let context = ModelContext(container)
        // The note comes before its notebook in the batch: relationships are set once every object exists.
        _ = try context.applyReplicaChanges([
            ReplicaObject(id: noteID, attributes: ["title": .string("incoming")], toOne: ["notebook": notebookID]),
            ReplicaObject(id: notebookID, attributes: ["name": .string("Trips")]),
            ReplicaObject(id: photoID, attributes: ["fileName": .string("a.jpg")], toOne: ["note": noteID]),
        ], deleting: [])
        try context.save()
        let check = ModelContext(container)
        let note = try #require(check.model(for: noteID) as? NoteKitStressSupport.NoteRecord)
        #expect(note.title == "incoming" && note.body == "" && note.notebook?.name == "Trips")
        #expect(note.notebook?.notes.map(\.persistentModelID) == [noteID])
        #expect(note.photos.map(\.persistentModelID) == [photoID])

        // A target this store does not have: the photo's inverse (NoteRecord.photos) cascades, so the photo goes;
        // the note's (NotebookRecord.notes) nullifies, so the note stays without a notebook.
        let gone = PersistentIdentifier(entityName: "NoteRecord", primaryKey: UUID())
        let goneNotebook = PersistentIdentifier(entityName: "NotebookRecord", primaryKey: UUID())
        let outcome = try context.applyReplicaChanges([
            ReplicaObject(id: photoID, toOne: ["note": gone]),
            ReplicaObject(id: noteID, toOne: ["notebook": goneNotebook]),
        ], deleting: [])
        try context.save()
        #expect(outcome.cascadedForMissingTarget == [photoID])
        let after = ModelContext(container)
        #expect(after.model(for: photoID) == nil)
        #expect((after.model(for: noteID) as? NoteKitStressSupport.NoteRecord)?.notebook == nil)

        // A deletion applies the delete rules: the notebook's notes are nullified, not deleted.
        _ = try context.applyReplicaChanges([], deleting: [notebookID])
        try context.save()
        #expect(ModelContext(container).model(for: notebookID) == nil)
        #expect(ModelContext(container).model(for: noteID) != nil)
    }
    @Test("A merged object's references move to its survivor and nothing cascades from it; the survivor takes its key",
          arguments: StoreKind.allCases)
    func mergeMovesReferencesToTheSurvivor(kind: StoreKind) throws {
        let container = try kind.makeContainer(ModelContainer.labelledFieldNotesModels)
        let context = ModelContext(container)
        let loser = LabelRecord(name: "work", color: "blue")
        context.insert(loser)
        loser.stickers.append(StickerRecord(text: "kept"))
        try context.save()

        // Another replica's label of the same name survives; this store has never seen it.
        let survivorID = PersistentIdentifier(entityName: "LabelRecord", primaryKey: UUID())
        let importer = ModelContext(container)
        _ = try importer.applyReplicaChanges([ReplicaObject(id: survivorID, attributes: ["name": .string("work"),
                                                                                   "color": .string("red")])],
                                       deleting: [], merging: [loser.persistentModelID: survivorID])
        try importer.save()

        let check = ModelContext(container)
        let labels = try check.fetch(FetchDescriptor<LabelRecord>())
        #expect(labels.map(\.persistentModelID) == [survivorID])
        #expect(labels.first?.stickers.map(\.text) == ["kept"], "the cascade rule did not run on the merged label")
        #expect(try check.fetch(FetchDescriptor<StickerRecord>()).first?.label?.persistentModelID == survivorID)
    }
}
