import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitNotes
import NoteKitTestSupport
import Testing

/// Issue 36, item 5: a `FileStoreError` a caller may branch on carries a typed kind beside its sentence, so that a
/// caller can tell, without reading text, what an open refused and why a salvage found nothing. (The kind of a
/// stopped write is checked in `FileStoreWritingTests`, of a missing or foreign segment in `FileStoreRecoveryTests`.)
@Suite("Typed errors: the file store's errors carry a kind a caller can branch on")
struct TypedErrorKindTests {
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
