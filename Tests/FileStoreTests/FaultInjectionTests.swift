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
}
