import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// I/O faults on a ``SimulatedDisk``: a failing call throws, the store stays consistent, and nothing acknowledged is
/// lost, even to a power loss right after.
@Suite("Fault injection: each I/O call fails in turn; saves throw, the store stays consistent")
struct FaultInjectionTests {
    @Test("A failed flush is never retried as success: the record is cut off, writes stop until reopened, a power loss loses nothing acknowledged")
    func failedFlushStopsWrites() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        context.insert(Note.titled("acknowledged"))
        try context.save()
        context.insert(Note.titled("unsure"))
        disk.faults.arm(.init(.fsync, pathContaining: ".seg"))
        #expect(throws: StoreIOError.self) { try context.save() }
        disk.faults.disarm()
        #expect(context.hasChanges)
        #expect(throws: FileStoreError.self) { try context.save() }
        #expect(throws: FileStoreError.self) { try StoreFiles.store(container).compact() }
        try? StoreFiles.close(container)

        // The bytes of the failed flush never reach the disk: a reopened store must not build on them.
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let reader = ModelContext(reopened)
        #expect(try reader.fetch(FetchDescriptor<Note>()).map(\.title) == ["acknowledged"])
        reader.insert(Note.titled("later"))
        try reader.save()
        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let afterPowerLoss = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        #expect(try ModelContext(afterPowerLoss).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
                    .map(\.title) == ["acknowledged", "later"])
    }

    @Test("A blob whose directory flush failed is written and flushed again, never assumed durable")
    func failedBlobDirectoryFlush() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        let note = NoteEditor(context: context).createNote(.init(title: "drawn"))
        try context.save()
        try NoteEditor(context: context).setDrawing(Data(repeating: 7, count: 64), on: note)
        disk.faults.arm(.init(.syncDirectory, pathContaining: "/blobs"))
        #expect(throws: (any Error).self) { try context.save() }
        disk.faults.disarm()
        // Saved again, here or in a reopened store, the drawing survives a power loss.
        do { try context.save() } catch {
            #expect(error is FileStoreError)
            try? StoreFiles.close(container)
            let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
            let retry = ModelContext(reopened)
            let drawn = try #require(try retry.fetch(FetchDescriptor<Note>()).first)
            try NoteEditor(context: retry).setDrawing(Data(repeating: 7, count: 64), on: drawn)
            try retry.save()
        }
        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let afterPowerLoss = ModelContext(try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed })
        #expect(try afterPowerLoss.fetch(FetchDescriptor<NoteDrawing>()).map(\.data) == [Data(repeating: 7, count: 64)])
        #expect(afterPowerLoss.readFailures.isEmpty)
    }
}
