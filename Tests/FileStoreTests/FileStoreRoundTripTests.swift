import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

@Suite("File store: what is saved comes back after reopening")
struct FileStoreRoundTripTests {
    @Test("Every attribute type survives closing and reopening the store, exactly")
    func everyType() throws {
        let url = TemporaryStores.newURL()
        let samples = (0..<10).map(EveryType.sample)
        let expected = samples.map(\.storedValues)
        do {
            let container = try StoreFiles.open(url, [EveryType.self])
            let context = ModelContext(container)
            for sample in samples { context.insert(sample) }
            try context.save()
            try StoreFiles.close(container)
        }
        let container = try StoreFiles.open(url, [EveryType.self])
        let context = ModelContext(container)
        let loaded = try context.fetch(FetchDescriptor<EveryType>())
        #expect(loaded.map(\.persistentModelID) == samples.map(\.persistentModelID))
        for (object, values) in zip(loaded, expected) {
            #expect(object.storedValues == values)
            #expect(object.double.bitPattern == values[11].doubleBits)
        }
        #expect(context.readFailures.isEmpty)
    }

    @Test("Updates and deletes replay: the reopened store equals the one that was closed")
    func updatesReplay() throws {
        let url = TemporaryStores.newURL()
        var before: [ModelSnapshot] = []
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            let editor = NoteEditor(context: context)
            let folder = Folder(name: "Inbox")
            context.insert(folder)
            var notes: [Note] = []
            for index in 0..<20 {
                notes.append(editor.createNote(.init(title: "n\(index)", body: "body \(index)"), in: folder))
                try context.save()
            }
            for note in notes where note.title.hasSuffix("3") { editor.commit(.init(title: "edited"), to: note) }
            try context.save()
            for note in notes.prefix(5) { try context.delete(note) }
            notes[10].folder = nil
            try context.save()
            before = allRows(container)
            try StoreFiles.close(container)
        }
        let container = try StoreFiles.open(url, NotesSchema.models)
        #expect(allRows(container) == before)
    }

    @Test("A store replays across many segments, each rotated at the configured size")
    func manySegments() throws {
        let url = TemporaryStores.newURL()
        var before: [ModelSnapshot] = []
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) {
                $0.maximumSegmentSize = 600
                $0.automaticCompaction = nil
            }
            let context = ModelContext(container)
            let editor = NoteEditor(context: context)
            for index in 0..<60 {
                let note = editor.createNote(.init(title: "note \(index)"))
                try context.save()
                if index % 3 == 0 {
                    editor.commit(.init(title: "note \(index) edited", body: "more"), to: note)
                    try context.save()
                }
                if index % 7 == 0 {
                    try context.delete(note)
                    try context.save()
                }
            }
            #expect(StoreFiles.store(container).statistics.segments.count > 20)
            before = allRows(container)
            try StoreFiles.close(container)
        }
        let segments = try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path)
        #expect(segments.count > 20)
        let container = try StoreFiles.open(url, NotesSchema.models)
        #expect(allRows(container) == before)
        #expect(StoreFiles.store(container).statistics.lastTransactionNumber > 60)
    }

    @Test("A cyclic folder graph is saved and reopened (DOMAIN.md R6)")
    func cyclicFolders() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            let a = Folder(name: "A"), b = Folder(name: "B"), c = Folder(name: "C")
            context.insert(a)
            b.parent = a
            c.parent = b
            a.parent = c
            try context.save()
            try StoreFiles.close(container)
        }
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        let folders = try context.fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)]))
        #expect(folders.map { $0.parent?.name } == ["C", "A", "B"])
        let hierarchy = FolderHierarchy(context: context)
        #expect(try !hierarchy.isForest())
        #expect(hierarchy.descendants(of: folders[0]).map(\.name) == ["B", "C"])
    }

    @Test("Blobs are read only when the property is read, never by fetching")
    func lazyBlobs() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            let editor = NoteEditor(context: context)
            for index in 0..<5 {
                let note = editor.createNote(.init(title: "drawn \(index)"))
                try editor.setDrawing(Data(repeating: UInt8(index), count: 10_000 + index), on: note)
            }
            try context.save()
            try StoreFiles.close(container)
        }
        let blobFiles = try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("blobs").path)
        #expect(blobFiles.count == 5)

        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = fileSystem }
        let context = ModelContext(container)
        let notes = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
        _ = notes.map { ($0.title, $0.updatedAt, $0.drawing?.id) }
        let drawings = try context.fetch(FetchDescriptor<NoteDrawing>())
        #expect(drawings.count == 5)
        let blobReads = { fileSystem.calls.filter { $0.operation == .read && $0.path.contains("/blobs/") }.count }
        #expect(blobReads() == 0, "opening and fetching read no blob file")
        #expect(notes[2].drawing?.data == Data(repeating: 2, count: 10_002))
        #expect(blobReads() == 1, "reading the property reads its blob once")
        _ = notes[2].drawing?.data
        #expect(blobReads() == 1, "and keeps it")
    }

    @Test("A blob damaged on disk, its size unchanged, is reported as a read failure, never read as the value")
    func damagedBlobIsNotRead() throws {
        let url = TemporaryStores.newURL()
        let bytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        do {
            let container = try StoreFiles.open(url, NotesSchema.models)
            let context = ModelContext(container)
            let editor = NoteEditor(context: context)
            try editor.setDrawing(bytes, on: editor.createNote(.init(title: "drawn")))
            try context.save()
            try StoreFiles.close(container)
        }
        let blobs = url.appendingPathComponent("blobs")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: blobs.path).first)
        var damaged = bytes
        damaged[1000] ^= 0x40
        try damaged.write(to: blobs.appendingPathComponent(name))

        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        let note = try #require(try context.fetch(FetchDescriptor<Note>()).first)
        #expect(note.drawing?.data == Data(), "the attribute's default, not the damaged bytes")
        let failure = try #require(context.readFailures.first)
        #expect(failure.property == "data")
        #expect(failure.reason.contains(name) && failure.reason.contains("do not hash to its name"))
    }

    @Test("Identical bytes share one blob file, and compaction retires blobs no object references")
    func blobLifecycle() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        let editor = NoteEditor(context: context)
        let bytes = Data(repeating: 7, count: 4096)
        let first = editor.createNote(.init(title: "1")), second = editor.createNote(.init(title: "2"))
        try editor.setDrawing(bytes, on: first)
        try editor.setDrawing(bytes, on: second)
        try context.save()
        let blobs = url.appendingPathComponent("blobs")
        #expect(try FileManager.default.contentsOfDirectory(atPath: blobs.path).count == 1)
        try editor.setDrawing(Data([1]), on: first)
        try editor.setDrawing(nil, on: second)
        try context.save()
        #expect(try FileManager.default.contentsOfDirectory(atPath: blobs.path).count == 2)
        let report = try StoreFiles.store(container).compact()
        #expect(report.blobsRemoved.count == 1)
        let files = try FileManager.default.contentsOfDirectory(atPath: blobs.path)
        #expect(files.filter { $0.hasSuffix(".blob") }.count == 1)
        #expect(files.count == 2 && files.contains { $0.hasPrefix("retired-") && $0.hasSuffix("-" + report.blobsRemoved[0]) },
                "the other is retired, kept for readers for the grace period")
        #expect(first.drawing?.data == Data([1]))
    }

    private func allRows(_ container: ModelContainer) -> [ModelSnapshot] {
        var rows: [ModelSnapshot] = []
        for entity in container.schema.entities {
            let result = try? container.store.fetch(StoreFetchRequest(entity: entity.name))
            rows += result?.rows ?? []
        }
        return rows
    }
}

extension StoredValue {
    var doubleBits: UInt64? {
        if case .double(let value) = self { return value.bitPattern }
        return nil
    }
}
