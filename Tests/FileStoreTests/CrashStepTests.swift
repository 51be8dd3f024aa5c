import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Crashes, on a ``SimulatedDisk``: what a power loss or a process crash at a given step leaves, and what the next
/// open makes of it.
@Suite("Crash at every step: compaction and migrations leave the old or the new state whole")
struct CrashStepTests {
    @Test("A new store's directory is flushed in the directory holding it: a save right after creating it survives a power loss")
    func creationIsDurable() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        context.insert(Note.titled("first"))
        try context.save()

        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        let reopened = try StoreFiles.open(url, NotesSchema.models) {
            $0.mode = .readWrite(createIfMissing: false)
            $0.fileSystem = crashed
        }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).map(\.title) == ["first"])
    }
}
