import Foundation
@testable import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 35, item 3: a to-many relationship's value holds objects made for its targets without reading their rows
/// (SwiftData's faults): `folder.notes.count`, `isEmpty` and reading the first few notes read no other note, and a
/// fault behaves as the object it stands for as soon as anything of it is read or changed.
@Suite("Relationship faults: a to-many relationship read without reading every target")
struct RelationshipFaultTests {
    final class FaultFolder: PersistentModel {
        @Attribute var name = ""
        @Relationship(deleteRule: .nullify, inverse: \FaultNote.folder) var notes: [FaultNote] = []
        required init() {}
    }

    final class FaultNote: PersistentModel {
        @Attribute var title = ""
        @Attribute var body = ""
        @Relationship var folder: FaultFolder?
        required init() {}
    }

    static let notes = 2_000

    /// A store holding one folder with ``notes`` notes (each body 200 characters), compacted so that it reopens
    /// through its checkpoint, whose rows are read on demand.
    static func store(_ kind: StoreKind) throws -> (ModelContainer, CountingFileSystem?) {
        let url = TemporaryStores.newURL("faults")
        let container: ModelContainer
        switch kind {
        case .inMemory:
            container = try kind.makeContainer([FaultFolder.self, FaultNote.self])
        case .file:
            container = try StoreFiles.open(url, [FaultFolder.self, FaultNote.self])
        }
        let context = ModelContext(container)
        let folder = FaultFolder()
        folder.name = "Work"
        context.insert(folder)
        for index in 0..<notes {
            let note = FaultNote()
            note.title = "note \(index)"
            note.body = String(repeating: "x", count: 200)
            note.folder = folder
        }
        try context.save()
        guard kind == .file else { return (container, nil) }
        try StoreFiles.store(container).compact()
        try StoreFiles.close(container)
        let counting = CountingFileSystem()
        return (try StoreFiles.open(url, [FaultFolder.self, FaultNote.self]) { $0.fileSystem = counting }, counting)
    }

    @Test("Item 3: count, isEmpty and the first few targets read no other target's row; the targets are faults",
          arguments: StoreKind.allCases)
    func countReadsNoTarget(kind: StoreKind) throws {
        let (container, counting) = try Self.store(kind)
        let context = ModelContext(container)
        let folder = try #require(try context.fetch(FetchDescriptor<FaultFolder>()).first)
        counting?.reset()
        let notes = folder.notes
        #expect(notes.count == Self.notes)
        #expect(!folder.notes.isEmpty)
        let firstTitles = notes.prefix(3).map(\.title)
        #expect(firstTitles == ["note 0", "note 1", "note 2"])
        if let counting, let url = (container.store as? FileStore)?.configuration.url {
            let segments = try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path)
            let read = segments.reduce(0) { $0 + counting.bytesRead(url.appendingPathComponent("segments/\($1)").path) }
            // Three notes' rows and their pages, not 2,000 rows of over 200 bytes each.
            #expect(read < 64 * 1024, "reading the count and three titles read \(read) bytes of segments")
        }
        #expect(notes.dropFirst(3).allSatisfy { $0.isFault }, "the other notes are still faults")
        #expect(!notes[0].isFault)
    }

    @Test("Item 3: a fault behaves as its object: reads, a relationship read, a change and its save, a delete rule",
          arguments: StoreKind.allCases)
    func faultsBehaveAsObjects(kind: StoreKind) throws {
        let (container, _) = try Self.store(kind)
        let context = ModelContext(container)
        let folder = try #require(try context.fetch(FetchDescriptor<FaultFolder>()).first)
        let note = folder.notes[10]
        #expect(note.isFault)
        #expect(note.folder === folder, "a relationship read loads the fault")
        #expect(!note.isFault)
        let other = folder.notes[11]
        other.title = "changed"
        #expect(!other.isFault && other.body.count == 200, "a change loads the row first: nothing else is lost")
        try context.save()
        let again = ModelContext(container)
        let changed = try again.fetch(FetchDescriptor<FaultNote>(predicate: #Predicate { $0.title == "changed" }))
        #expect(changed.count == 1 && changed[0].body.count == 200)
        // Deleting the folder nullifies every note, faults included, and the store agrees.
        try context.delete(folder)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<FaultNote>(predicate: #Predicate { $0.folder == nil }))
                == Self.notes)
    }
}

extension ModelObject {
    /// Whether the object is a fault that has not read its row yet.
    var isFault: Bool { _$fault != nil }
}
