import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

@Suite("Notes: attachments and drawings (R8–R10)")
struct NoteAttachmentTests {
    @Test("R9: attachment bytes live in the attachments directory; the record holds name, original name, type, size",
          arguments: StoreKind.allCases)
    func r9Storage(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "with file"))
        let bytes = Data((0..<1000).map { UInt8($0 % 251) })
        let attachment = try f.attachments.add(bytes, originalName: "Scan 1.PDF", contentType: "application/pdf",
                                               to: note)
        #expect(f.filesOnDisk == [attachment.fileName])
        #expect(attachment.fileName.hasSuffix(".PDF") && attachment.fileName != "Scan 1.PDF")
        #expect(try Data(contentsOf: f.attachmentsURL.appendingPathComponent(attachment.fileName)) == bytes)
        let entity = try #require(f.container.schema.entity(named: "NoteAttachment"))
        #expect(Set(entity.attributes.map(\.name)) == ["id", "fileName", "originalName", "contentType", "size"])
        let stored = try #require(try f.reader().fetch(FetchDescriptor<NoteAttachment>()).first)
        #expect(stored.originalName == "Scan 1.PDF" && stored.contentType == "application/pdf" && stored.size == 1000)
    }

    @Test("R9: opening or previewing an attachment changes nothing at all", arguments: StoreKind.allCases)
    func r9Open(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "n"))
        let attachment = try f.attachments.add(Data("hello".utf8), originalName: "h.txt", contentType: "text/plain",
                                               to: note)
        let before = NoteState(note), transactionNumber = f.container.store.transactionNumber
        let url = f.attachments.url(of: attachment)
        let modified = try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date
        f.clock.advance(by: 1000)
        #expect(try f.attachments.data(of: attachment) == Data("hello".utf8))
        #expect(NoteState(note) == before && !f.context.hasChanges
                && f.container.store.transactionNumber == transactionNumber)
        #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date == modified)
    }

    @Test("R8: deleting a note saves the removal first, then deletes its files", arguments: StoreKind.allCases)
    func r8Delete(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "doomed"))
        let keep = f.editor.createNote(.init(title: "kept"))
        for index in 0..<3 {
            try f.attachments.add(Data([UInt8(index)]), originalName: "f\(index).bin", contentType: "x", to: note)
        }
        let kept = try f.attachments.add(Data([9]), originalName: "k.bin", contentType: "x", to: keep)
        let cleanup = try NoteAttachments.delete(note, in: f.context, using: f.directory)
        #expect(cleanup.removed.count == 3 && cleanup.leftBehind.isEmpty)
        #expect(f.filesOnDisk == [kept.fileName])
        #expect(try f.reader().fetch(FetchDescriptor<NoteAttachment>()).map(\.fileName) == [kept.fileName])
    }

    @Test("R8: an interruption between the save and the file deletion leaves only unreferenced files, which the sweep removes",
          arguments: StoreKind.allCases)
    func r8Interrupted(kind: StoreKind) throws {
        let f = try NotesFixture(kind, fileSystem: FailingRemovalFileSystem())
        let note = f.editor.createNote(.init(title: "doomed"))
        let keep = f.editor.createNote(.init(title: "kept"))
        let files = try (0..<2).map {
            try f.attachments.add(Data([UInt8($0)]), originalName: "f\($0)", contentType: "x", to: note).fileName
        }
        let kept = try f.attachments.add(Data([9]), originalName: "k", contentType: "x", to: keep).fileName
        let cleanup = try NoteAttachments.delete(note, in: f.context, using: f.directory)
        #expect(cleanup.removed.isEmpty && Set(cleanup.leftBehind) == Set(files))

        // Every record still stored points at a file; the files left over are referenced by nothing.
        let reader = f.reader()
        let referenced = Set(try reader.fetch(FetchDescriptor<NoteAttachment>()).map(\.fileName))
        #expect(referenced == [kept] && referenced.isSubset(of: f.filesOnDisk))
        #expect(f.filesOnDisk.subtracting(referenced) == Set(files))

        let sweeper = NoteAttachments(context: reader, directory: AttachmentDirectory(url: f.attachmentsURL))
        #expect(Set(try sweeper.sweep()) == Set(files))
        #expect(f.filesOnDisk == [kept])
    }

    @Test("R8: a save that fails deletes no file, and adding writes the file before the record")
    func r8SaveFails() throws {
        let configuration = FailingStoreConfiguration()
        let container = try ModelContainer(for: Schema(NotesSchema.models), configurations: [configuration])
        let store = try #require(configuration.holder.withLock { $0 })
        let context = ModelContext(container)
        let directory = AttachmentDirectory(url: FileManager.default.temporaryDirectory
            .appendingPathComponent("notekit-r8-\(UUID().uuidString)"))
        defer { try? FileManager.default.removeItem(at: directory.url) }
        let attachments = NoteAttachments(context: context, directory: directory)
        let note = NoteEditor(context: context).createNote(.init(title: "n"))
        let attachment = try attachments.add(Data([1]), originalName: "a", contentType: "x", to: note)
        let onDisk = { Set((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []) }

        // The save of a deletion fails: the record stays, and so does its file.
        store.failuresLeft.withLock { $0 = 1 }
        #expect(throws: FailingStore.InjectedFailure.self) {
            try NoteAttachments.delete(note, in: context, using: directory)
        }
        #expect(onDisk() == [attachment.fileName])
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteAttachment>()) == 1)
        context.rollback()

        // The save of an addition fails: the file is on disk before any record, and saving again completes it.
        store.failuresLeft.withLock { $0 = 1 }
        #expect(throws: FailingStore.InjectedFailure.self) {
            try attachments.add(Data([2]), originalName: "b", contentType: "x", to: note)
        }
        #expect(onDisk().count == 2)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteAttachment>()) == 1)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteAttachment>()) == 2)
    }

    @Test("R10: listing and fetching notes does not load their drawings", arguments: StoreKind.allCases)
    func r10(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        for index in 0..<5 {
            let note = f.editor.createNote(.init(title: "n\(index)"))
            try f.editor.setDrawing(Data(repeating: UInt8(index), count: 4096), on: note)
        }
        try f.context.save()
        let reader = f.reader()
        let notes = try reader.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
        #expect(notes.map(\.title) == ["n0", "n1", "n2", "n3", "n4"])
        _ = notes.map { ($0.body, $0.updatedAt, $0.folder) }
        #expect(reader.registry.keys.allSatisfy { $0.entityName == "Note" }, "no drawing was loaded")
        #expect(notes[3].drawing?.data == Data(repeating: 3, count: 4096), "until one is asked for")
    }
}
