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

    @Test("A store whose creation stopped before its manifest was in place is created by the next open, not refused")
    func interruptedCreation() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let mark = disk.mark()
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk })
        var interrupted = 0
        for crash in disk.images(since: mark, kinds: [.processCrash, .powerLoss]) {
            let crashed = SimulatedDisk(image: crash.image)
            guard !crashed.exists(url.path + "/MANIFEST") else { continue }
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
            let context = ModelContext(container)
            context.insert(Note.titled("saved"))
            try context.save()
            try StoreFiles.close(container)
            let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
            #expect(try ModelContext(reopened).fetchCount(FetchDescriptor<Note>()) == 1, "\(crash.kind) at \(crash.step)")
            interrupted += 1
        }
        #expect(interrupted > 5)
    }
}
