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

    @Test("A writable open flushes what an earlier process left unflushed: saves after a crash between a rename and its directory flush survive a power loss")
    func openFlushesWhatItBuildsOn() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.fileSystem = disk
        }
        let context = ModelContext(container)
        for index in 0..<3 {
            context.insert(Note.titled("n\(index)"))
            try context.save()
        }
        let mark = disk.mark()
        try StoreFiles.store(container).compact()
        // The process dies right after the new manifest is renamed into place, before the directory is flushed.
        let renamed = try #require(disk.journal(since: mark).firstIndex(of: "rename MANIFEST.tmp to MANIFEST"))
        let crash = try #require(disk.images(since: mark, kinds: [.processCrash]).first { $0.step == renamed + 1 })
        let crashed = SimulatedDisk(image: crash.image)
        let next = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        let later = ModelContext(next)
        later.insert(Note.titled("after the crash"))
        try later.save()
        try StoreFiles.close(next)

        let powerLoss = SimulatedDisk(image: crashed.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: powerLoss).isEmpty)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = powerLoss }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
                == ["after the crash", "n0", "n1", "n2"])
    }

    @Test("With deferred durability, a segment is flushed before a new one starts: a power loss loses no earlier save")
    func deferredRotation() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.maximumSegmentSize = 2_048
            $0.durability = .deferred(interval: 3_600)
            $0.fileSystem = disk
        }
        let context = ModelContext(container)
        NoteEditor(context: context).createNote(.init(title: "fills the segment", body: String(repeating: "f", count: 3_000)))
        try context.save()
        context.insert(Note.titled("in the next segment"))
        try context.save()
        #expect(StoreFiles.store(container).statistics.segments.count >= 2, "the saves rotated")
        try StoreFiles.store(container).sync()

        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
                == ["fills the segment", "in the next segment"])
    }
}
