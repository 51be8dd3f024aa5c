import Foundation
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing
@testable import NoteKit

/// Waits until `condition` holds, checking every 20 milliseconds for at most `seconds` (a generous deadline: the
/// behaviour promises "shortly", and the whole test suite shares two cores). Returns whether it held.
@MainActor
func eventually(within seconds: Double = 30, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    await Task.yield()
    return try condition()
}

/// The notes a fresh context of `container` reads from the store.
private func storedTitles(_ container: ModelContainer) throws -> [String] {
    try ModelContext(container).fetch(FetchDescriptor<TutorialNote>()).map(\.title).sorted()
}

/// A model actor whose context autosaves, as a SwiftData user would turn it on inside the actor.
private actor AutosavingImporter: ModelActor {
    nonisolated let modelContainer: ModelContainer
    nonisolated let modelExecutor: any ModelExecutor

    init(modelContainer: ModelContainer) {
        self.modelContainer = modelContainer
        modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
    }

    func insert(_ title: String, autosave: Bool) {
        modelContext.autosaveEnabled = autosave
        modelContext.insert(TutorialNote(title: title))
    }

    var hasChanges: Bool { modelContext.hasChanges }
}

@Suite("Autosave: the main context saves by itself shortly after changes; other contexts only when asked")
@MainActor
struct AutosaveTests {
    @Test("The main context autosaves an insert without save(); a fresh context sees it", arguments: StoreKind.allCases)
    func mainContextAutosaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        #expect(container.mainContext.autosaveEnabled, "on by default for the main context")
        container.mainContext.insert(TutorialNote(title: "New note"))
        #expect(try await eventually { try storedTitles(container) == ["New note"] })
        #expect(!container.mainContext.hasChanges)

        // A change after the autosave is saved too: each first change schedules its own save.
        let note = try #require(container.mainContext.fetch(FetchDescriptor<TutorialNote>()).first)
        note.title = "Renamed"
        #expect(try await eventually { try storedTitles(container) == ["Renamed"] })
    }

    @Test("A context created with ModelContext(container) does not autosave", arguments: StoreKind.allCases)
    func otherContextsDoNot(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let context = ModelContext(container)
        #expect(!context.autosaveEnabled, "off by default, as in SwiftData")
        context.insert(TutorialNote(title: "Unsaved"))
        try await Task.sleep(for: ModelContext.autosaveDelay * 4)
        #expect(try storedTitles(container).isEmpty)
        #expect(context.hasChanges)
    }

    @Test("Turning autosave off stops it; turning it on again saves what is pending", arguments: StoreKind.allCases)
    func turningItOff(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let main = container.mainContext
        main.autosaveEnabled = false
        main.insert(TutorialNote(title: "Manual"))
        try await Task.sleep(for: ModelContext.autosaveDelay * 4)
        #expect(try storedTitles(container).isEmpty)
        #expect(main.hasChanges)

        main.autosaveEnabled = true
        #expect(try await eventually { try storedTitles(container) == ["Manual"] })
    }

    @Test("A failing autosave keeps the changes pending and reports the error")
    func failingAutosave() async throws {
        let configuration = FailingStoreConfiguration()
        let container = try ModelContainer(for: TutorialNote.self, configurations: configuration)
        configuration.holder.withLock { $0?.failuresLeft.withLock { $0 = 1 } }
        let reported = Mutex<[String]>([])
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.autosaveFailed,
                                                              object: container.mainContext, queue: nil) { note in
            let error = note.userInfo?[ModelContext.autosaveErrorKey]
            reported.withLock { $0.append("\(error.map { "\($0)" } ?? "none")") }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        container.mainContext.insert(TutorialNote(title: "Kept"))
        #expect(await eventually { container.mainContext.lastAutosaveError != nil })
        #expect(container.mainContext.lastAutosaveError is FailingStore.InjectedFailure)
        #expect(reported.withLock { $0 } == ["\(FailingStore.InjectedFailure())"], "posted once")
        #expect(container.mainContext.hasChanges, "the insert is still pending")
        #expect(try storedTitles(container).isEmpty)

        // The next change schedules another attempt, which succeeds and saves both.
        container.mainContext.insert(TutorialNote(title: "Next"))
        #expect(try await eventually { try storedTitles(container) == ["Kept", "Next"] })
        #expect(container.mainContext.lastAutosaveError == nil)
    }

    @Test("close() saves the main context's pending changes first")
    func closeSaves() throws {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: TutorialNote.self, configurations: FileStoreConfiguration(url: url))
        container.mainContext.insert(TutorialNote(title: "Last words"))
        try container.close()
        let reopened = try ModelContainer(for: TutorialNote.self, configurations: FileStoreConfiguration(url: url))
        #expect(try storedTitles(reopened) == ["Last words"])
    }

    @Test("Releasing the container saves the main context's pending changes first")
    func releaseSaves() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try ModelContainer(for: TutorialNote.self,
                                               configurations: FileStoreConfiguration(url: url))
            container.mainContext.insert(TutorialNote(title: "Released"))
        }
        let reopened = try ModelContainer(for: TutorialNote.self, configurations: FileStoreConfiguration(url: url))
        #expect(try storedTitles(reopened) == ["Released"])
    }

    @Test("A model actor's context autosaves on its executor when the actor turns it on",
          arguments: StoreKind.allCases)
    func modelActorAutosaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer([TutorialNote.self, TutorialFolder.self])
        let importer = AutosavingImporter(modelContainer: container)
        await importer.insert("Off", autosave: false)
        try await Task.sleep(for: ModelContext.autosaveDelay * 4)
        #expect(try storedTitles(container).isEmpty, "off by default")
        #expect(await importer.hasChanges)

        await importer.insert("On", autosave: true)
        #expect(try await eventually { try storedTitles(container) == ["Off", "On"] })
        #expect(await !importer.hasChanges)
    }
}
