import Foundation
import NoteKitFileStore
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

@Suite("Container lifecycle: closing and releasing a container, objects that outlive their context")
struct ContainerLifecycleTests {
    /// A store at `url` with one folder holding two notes.
    private func writeFolder(at url: URL) throws {
        let container = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                           configurations: FileStoreConfiguration(url: url))
        let context = ModelContext(container)
        let work = TutorialFolder(name: "Work")
        context.insert(work)
        context.insert(TutorialNote(title: "Agenda", folder: work))
        context.insert(TutorialNote(title: "Minutes", folder: work))
        try context.save()
        try container.close()
    }

    @Test("close() releases the file store: another container reopens the same URL in the same process")
    func closeThenReopen() throws {
        let url = TemporaryStores.newURL()
        try writeFolder(at: url)
        let reopened = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                          configurations: FileStoreConfiguration(url: url))
        let notes = try ModelContext(reopened).fetch(FetchDescriptor<TutorialNote>(sortBy: [SortDescriptor(\.title)]))
        #expect(notes.map(\.title) == ["Agenda", "Minutes"])
        #expect(notes.first?.folder?.name == "Work")
        try reopened.close()
        // And once more: a store closed twice, then reopened, is still the same store.
        try reopened.close()
        let third = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                       configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(third).fetchCount(FetchDescriptor<TutorialFolder>()) == 1)
    }

    @Test("After close(), every context's fetch and save throw ModelContainerError.closed; close() again does nothing",
          arguments: StoreKind.allCases)
    func useAfterClose(kind: StoreKind) throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let before = ModelContext(container)
        before.insert(TutorialNote(title: "Saved"))
        try before.save()
        let pending = TutorialNote(title: "Pending")
        before.insert(pending)

        try container.close()
        try container.close()
        #expect(container.isClosed)
        let after = ModelContext(container)
        for context in [before, after] {
            #expect(throws: ModelContainerError.closed(store: container.configuration.name)) {
                try context.fetch(FetchDescriptor<TutorialNote>())
            }
            #expect(throws: ModelContainerError.closed(store: container.configuration.name)) {
                try context.fetchCount(FetchDescriptor<TutorialNote>())
            }
        }
        #expect(throws: ModelContainerError.closed(store: container.configuration.name)) { try before.save() }
        #expect(before.hasChanges, "the refused save keeps the pending insert")
        #expect("\(ModelContainerError.closed(store: "notes"))".contains("closed"))
    }

    @MainActor
    @Test("Dropping the last reference to a container releases its store, even after its main context was used")
    func releaseOnLastReference() throws {
        let url = TemporaryStores.newURL()
        weak var released: ModelContainer?
        do {
            let container = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                               configurations: FileStoreConfiguration(url: url))
            released = container
            container.mainContext.insert(TutorialNote(title: "Main"))
            try container.mainContext.save()
        }
        #expect(released == nil, "the container is freed")
        let reopened = try ModelContainer(for: TutorialNote.self, TutorialFolder.self,
                                          configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<TutorialNote>()).map(\.title) == ["Main"])
    }

    @MainActor
    @Test("The main context outliving its container reports the container closed instead of stopping")
    func mainContextOutlivesContainer() throws {
        let context = try StoreKind.inMemory.makeContainer([TutorialNote.self, TutorialFolder.self]).mainContext
        context.insert(TutorialNote(title: "Orphan"))
        #expect(throws: ModelContainerError.self) { try context.save() }
        #expect(context.container.isClosed)
    }

    // MARK: Objects that outlive the context that fetched them (issue 13, item 11)

    @Test("Results of ModelContext(container).fetch read their to-one and to-many relationships",
          arguments: StoreKind.allCases)
    func resultsOutliveTheirContext(kind: StoreKind) throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        do {
            let context = ModelContext(container)
            let work = TutorialFolder(name: "Work")
            context.insert(work)
            context.insert(TutorialNote(title: "Agenda", folder: work))
            context.insert(TutorialNote(title: "Minutes", folder: work))
            try context.save()
        }
        let notes = try ModelContext(container).fetch(FetchDescriptor<TutorialNote>(sortBy: [SortDescriptor(\.title)]))
        let folder = try #require(notes.first?.folder, "to-one")
        #expect(folder.name == "Work")
        #expect(folder.notes.map(\.title).sorted() == ["Agenda", "Minutes"], "to-many")
        #expect(folder.notes.contains { $0 === notes[1] }, "one instance per identifier: the context is the same")

        // The objects' context is still there to save an edit.
        notes[0].title = "Agenda, v2"
        try #require(notes[0].modelContext).save()
        #expect(try ModelContext(container).fetch(FetchDescriptor<TutorialNote>()).map(\.title).sorted()
                == ["Agenda, v2", "Minutes"])
    }

    /// Fetches every note through a context that only the results reference, reads their relationships, and
    /// returns weak references to the context and the objects.
    private func fetchAndDrop(_ container: ModelContainer, edit: Bool)
        throws -> (context: WeakReference<ModelContext>, objects: [WeakReference<ModelObject>]) {
        let context = ModelContext(container)
        let notes = try context.fetch(FetchDescriptor<TutorialNote>())
        let folders = notes.compactMap(\.folder)
        _ = folders.map(\.notes)
        if edit {
            notes.first?.title = "Edited"
            try context.save()
        }
        return (WeakReference(context), (notes as [ModelObject] + folders).map { WeakReference($0) })
    }

    @Test("A context and its objects are freed when the user drops both (no cycle between them)",
          arguments: StoreKind.allCases)
    func noLeak(kind: StoreKind) throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let writer = ModelContext(container)
        let work = TutorialFolder(name: "Work")
        writer.insert(work)
        writer.insert(TutorialNote(title: "Agenda", folder: work))
        try writer.save()

        for edit in [false, true] {
            let (context, objects) = try fetchAndDrop(container, edit: edit)
            #expect(context.object == nil, "the context is freed (edited and saved: \(edit))")
            #expect(objects.allSatisfy { $0.object == nil }, "its objects are freed (edited and saved: \(edit))")
        }
    }
}

/// A weak reference, to check that something was freed.
struct WeakReference<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

// MARK: Seed 003's migration test: write with the previous version, close, reopen with this one

/// Seed 003's schema V1: a note with a title and a body.
enum TutorialSchemaV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Note.self] }
    final class Note: PersistentModel {
        @Attribute var title = ""
        @Attribute var body = ""
        required init() {}
    }
}

/// Seed 003's schema V2: `body` renamed to `content`.
enum TutorialSchemaV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Note.self] }
    final class Note: PersistentModel {
        @Attribute var title = ""
        @Attribute(originalName: "body") var content = ""
        required init() {}
    }
}

enum TutorialMigrationPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [TutorialSchemaV1.self, TutorialSchemaV2.self] }
    static var stages: [MigrationStage] { [.lightweight(fromVersion: TutorialSchemaV1.self, toVersion: TutorialSchemaV2.self)] }
}

extension ContainerLifecycleTests {
    @MainActor
    @Test("Seed 003: a store written by the previous version reopens migrated in the same process after close()")
    func migrationTestInOneProcess() throws {
        let url = TemporaryStores.newURL()
        let old = try ModelContainer(for: TutorialSchemaV1.Note.self, migrationPlan: TutorialMigrationPlan.self,
                                     configurations: FileStoreConfiguration(url: url))
        let note = TutorialSchemaV1.Note()
        note.title = "Groceries"
        note.body = "Milk, eggs"
        old.mainContext.insert(note)
        try old.close()     // the main context's pending insert is saved first

        let new = try ModelContainer(for: TutorialSchemaV2.Note.self, migrationPlan: TutorialMigrationPlan.self,
                                     configurations: FileStoreConfiguration(url: url))
        let migrated = try new.mainContext.fetch(FetchDescriptor<TutorialSchemaV2.Note>())
        #expect(migrated.map(\.content) == ["Milk, eggs"])
    }
}
