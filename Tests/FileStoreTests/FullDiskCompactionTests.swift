import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Full disk: a compaction that fails for lack of space leaves nothing behind, and is not retried on every save")
struct FullDiskCompactionTests {
    private func segmentFiles(_ url: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path).sorted()
    }

    private func folderNames(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<Folder>()).map(\.name).sorted()
    }

    @Test("An explicit compaction that meets ENOSPC throws, removes its partial segment at once, and saves go on")
    func explicitCompactionAtFullDisk() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.fileSystem = fileSystem
        }
        let context = ModelContext(container)
        let folder = Folder(name: "0")
        context.insert(folder)
        for round in 1...20 {
            folder.name = "\(round)"
            try context.save()
        }
        let store = StoreFiles.store(container)
        let before = try segmentFiles(url)
        // The compaction's new segment is the next number: a full disk for it, not for the segment saves append to.
        let next = segmentName(store.statistics.segments.last! + 1)
        fileSystem.arm(.init(.write, nth: 1, persistent: true, failure: .error(ENOSPC), pathContaining: next))
        #expect(throws: StoreIOError.self) { try store.compact() }
        let after = try segmentFiles(url)
        #expect(after == before, "the failed compaction left \(after)")
        #expect(!FileManager.default.fileExists(atPath: url.appendingPathComponent("MANIFEST.tmp").path))
        folder.name = "after"
        try context.save()
        fileSystem.disarm()
        try store.compact()
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try folderNames(reopened) == ["after"])
        try StoreFiles.close(reopened)
    }

    @Test("A compaction whose manifest cannot be written for lack of space removes the segment it wrote")
    func manifestAtFullDisk() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.fileSystem = fileSystem
        }
        let context = ModelContext(container)
        context.insert(Folder(name: "kept"))
        try context.save()
        let before = try segmentFiles(url)
        fileSystem.arm(.init(.write, nth: 1, persistent: true, failure: .error(ENOSPC), pathContaining: "MANIFEST.tmp"))
        #expect(throws: StoreIOError.self) { try StoreFiles.store(container).compact() }
        #expect(try segmentFiles(url) == before)
        #expect(!FileManager.default.fileExists(atPath: url.appendingPathComponent("MANIFEST.tmp").path))
        fileSystem.disarm()
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try folderNames(reopened) == ["kept"])
        try StoreFiles.close(reopened)
    }

    @Test("Automatic compaction at a full disk backs off after a failure: a few attempts over 300 saves, not one per save")
    func automaticCompactionBacksOff() throws {
        let url = TemporaryStores.newURL()
        let fileSystem = FaultyFileSystem()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = .init(minimumLogSize: 4096, garbageRatio: 0.5)
            $0.fileSystem = fileSystem
        }
        let store = StoreFiles.store(container)
        let context = ModelContext(container)
        let folder = Folder(name: "0")
        context.insert(folder)
        try context.save()
        let next = segmentName(store.statistics.segments.last! + 1)
        fileSystem.arm(.init(.write, nth: 1, persistent: true, failure: .error(ENOSPC), pathContaining: next))
        fileSystem.clearLog()
        let saves = 300
        for round in 1...saves {
            folder.name = "\(round)"
            try context.save()
        }
        let attempts = fileSystem.calls.filter { $0.operation == .create && $0.path.hasSuffix(next) }.count
        #expect(store.statistics.lastCompactionError != nil)
        #expect(attempts >= 2, "automatic compaction gave up altogether")
        #expect(attempts <= 12, "\(attempts) compaction attempts in \(saves) saves at a full disk")
        TestOutput.summary("Full disk: \(attempts) automatic compaction attempts in \(saves) saves at a full disk")
        let left = try segmentFiles(url)
        #expect(left == [segmentName(1)], "a partial segment was left: \(left)")
        // Space again: a later save compacts, and every acknowledged save is kept.
        fileSystem.disarm()
        var round = saves
        while store.statistics.segments == [1], round < saves * 4 {
            round += 1
            folder.name = "\(round)"
            try context.save()
        }
        #expect(store.statistics.segments != [1], "no compaction once space was back")
        #expect(store.statistics.lastCompactionError == nil)
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, NotesSchema.models)
        #expect(try folderNames(reopened) == ["\(round)"])
        #expect(StoreFiles.store(reopened).transactionNumber == UInt64(round + 1))
        try StoreFiles.close(reopened)
    }
}

/// `000042.seg`, as the format names segment files.
private func segmentName(_ number: Int) -> String {
    let digits = String(number)
    return String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".seg"
}
