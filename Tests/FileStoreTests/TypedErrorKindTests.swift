import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitNotes
import NoteKitTestSupport
import Testing

/// Issue 36, item 5: a `FileStoreError` a caller may branch on carries a typed kind beside its sentence, so that a
/// caller can tell, without reading text, which write stopped the store, which segment rule an open refused, and why
/// a salvage found nothing.
@Suite("Typed errors: the file store's errors carry a kind a caller can branch on")
struct TypedErrorKindTests {
    @Test("After a failed flush, the store's refusal of the next save says the flush stopped writes")
    func failedFlushStopsWritesWithItsKind() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = fileSystem }
        let context = ModelContext(container)
        context.insert(Note.titled("acknowledged"))
        try context.save()
        context.insert(Note.titled("unsure"))
        fileSystem.arm(.init(.fsync))
        #expect(throws: StoreIOError.self) { try context.save() }
        fileSystem.disarm()
        #expect {
            try context.save()
        } throws: { error in
            guard case let FileStoreError.writesStopped(kind, reason) = error else { return false }
            return kind == .flush && reason.contains("flushing")
        }
        try? StoreFiles.close(container)
    }

    @Test("An open of a store whose listed segment is gone is refused as a missing segment, naming it")
    func missingSegmentHasItsKind() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.maximumSegmentSize = 200 }
            let context = ModelContext(container)
            for title in ["a", "b", "c"] {
                context.insert(Note.titled(title))
                try context.save()
            }
            try StoreFiles.close(container)
        }
        try FileManager.default.removeItem(at: StoreFiles.segment(url, 2))
        #expect {
            _ = try StoreFiles.open(url, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.inconsistentSegments(file, kind, _) = error else { return false }
            return kind == .segmentMissing && file.hasSuffix("000002.seg")
        }
    }

    @Test("A segment holding text that is not NoteKit's is refused as not a NoteKit file")
    func foreignFileHasItsKind() throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        try StoreFiles.close(StoreFiles.open(url, NotesSchema.models))
        try Data("just some notes, not a store\n".utf8).write(to: StoreFiles.segment(url))
        #expect {
            _ = try StoreFiles.open(url, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.notAStoreFile(file, kind, _) = error else { return false }
            return kind == .notNoteKit && file.hasSuffix("000001.seg")
        }
    }

    @Test("A salvage of a store with no readable segment says no segment holds a readable schema")
    func salvageOfNothingHasItsKind() throws {
        let url = TemporaryStores.newURL()
        let destination = TemporaryStores.newURL("salvaged")
        defer {
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: destination)
        }
        try StoreFiles.close(StoreFiles.open(url, NotesSchema.models))
        try FileManager.default.removeItem(at: StoreFiles.segment(url))
        #expect {
            _ = try FileStore.salvage(from: url, to: destination)
        } throws: { error in
            guard case let FileStoreError.nothingToSalvage(path, kind, _) = error else { return false }
            return kind == .noReadableSchema && path == url.path
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path), "a refused salvage creates nothing")
    }
}
