import Foundation
import NoteKit
import NoteKitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@testable import NoteKitFileStore

/// A reader that read an object before another process's compaction dropped its external data still reads the
/// bytes: the compaction (or a writable open's cleanup) retires an unreferenced blob under a name that carries the
/// time, and deletes it only once it has been retired longer than the grace period (docs/FORMAT.md, *External
/// storage*).
@Suite("Retired blobs: external data a reader read outlives the compaction that dropped it, for a grace period")
struct RetiredBlobTests {
    final class Sketch: PersistentModel {
        @Attribute var title = ""
        @Attribute(.externalStorage) var drawing: Data?

        required init() {}

        convenience init(_ title: String, drawing: Data?) {
            self.init()
            self.title = title
            self.drawing = drawing
        }
    }

    /// Where the store lives.
    enum Disk: String, CaseIterable, CustomStringConvertible, Sendable {
        case simulated, real
        var description: String { rawValue }
    }

    /// What the other open does to the drawing the reader read.
    enum Change: String, CaseIterable, CustomStringConvertible, Sendable {
        case replaced, deleted
        var description: String { rawValue }
    }

    /// A store on one disk, and the clock its opens read.
    struct Place {
        let url = TemporaryStores.newURL("retired-blobs")
        let fileSystem: any StoreFileSystem
        let clock = SteppingWallClock()

        init(_ disk: Disk) { fileSystem = disk == .real ? POSIXFileSystem() : SimulatedDisk() }

        func configuration(readOnly: Bool = false) -> FileStoreConfiguration {
            var configuration = FileStoreConfiguration(url: url, mode: readOnly ? .readOnly : .readWrite(createIfMissing: true),
                                                       automaticCompaction: nil, fileSystem: fileSystem)
            configuration.clocks = clock.clocks
            return configuration
        }

        func open(readOnly: Bool = false) throws -> ModelContainer {
            try ModelContainer(for: Schema([Sketch.self]), configurations: [configuration(readOnly: readOnly)])
        }

        /// The entries of `blobs/`.
        func blobFiles() throws -> [String] { try fileSystem.contentsOfDirectory(url.path + "/blobs").sorted() }

        /// The retired copies of `data`'s blob in `blobs/`.
        func retiredCopies(of data: Data) throws -> [String] {
            try blobFiles().filter { StoreLayout.retiredBlob($0)?.name == SHA256Digest.hexString(data) }
        }

        /// Whether `data`'s blob is in its place.
        func holdsBlob(of data: Data) throws -> Bool {
            try blobFiles().contains(StoreLayout.blobFileName(SHA256Digest.hexString(data)))
        }
    }

    static let old = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    static let new = Data(repeating: 9, count: 2000)

    /// A store holding one sketch whose drawing is ``old``, and a writer open on it.
    private func writerWithSketch(_ place: Place) throws -> (ModelContainer, ModelContext) {
        let writer = try place.open()
        let context = ModelContext(writer)
        context.insert(Sketch("one", drawing: Self.old))
        try context.save()
        return (writer, context)
    }

    /// Replaces or deletes the drawing through `context`, saves, and compacts.
    private func change(_ change: Change, _ context: ModelContext, _ writer: ModelContainer) throws {
        let sketch = try #require(try context.fetch(FetchDescriptor<Sketch>()).first)
        switch change {
        case .replaced: sketch.drawing = Self.new
        case .deleted: try context.delete(sketch)
        }
        try context.save()
        try StoreFiles.store(writer).compact()
    }

    @Test("Within the grace period, a read-only open loads the old bytes of a drawing another open replaced or deleted and compacted away",
          arguments: Disk.allCases, Change.allCases)
    func oldBytesWithinGrace(disk: Disk, change: Change) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        let reader = try place.open(readOnly: true)
        let reading = ModelContext(reader)
        let sketch = try #require(try reading.fetch(FetchDescriptor<Sketch>()).first)

        try self.change(change, writing, writer)
        #expect(!(try place.blobFiles()).contains(SHA256Digest.hexString(Self.old) + ".blob"),
                "the compaction took the old blob out of its place")

        #expect(sketch.drawing == Self.old)
        #expect(reading.readFailures.isEmpty, "\(reading.readFailures)")
    }

    /// The grace period of the configurations here, which the tests step the wall clock past.
    static let grace = FileStoreConfiguration(url: URL(fileURLWithPath: "/")).retiredBlobGracePeriod

    @Test("Past the grace period a compaction deletes the retired blob, and the stale load gets a typed error saying to fetch again",
          arguments: Disk.allCases)
    func typedErrorAfterGrace(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        let reader = try place.open(readOnly: true)
        let reading = ModelContext(reader)
        let sketch = try #require(try reading.fetch(FetchDescriptor<Sketch>()).first)
        try change(.replaced, writing, writer)
        #expect(try place.retiredCopies(of: Self.old).count == 1)

        // Not yet: a compaction a little before the period ends keeps the copy.
        place.clock.step(by: Self.grace - 10)
        #expect(try StoreFiles.store(writer).compact().retiredBlobsDeleted.isEmpty)
        #expect(try place.retiredCopies(of: Self.old).count == 1)
        place.clock.step(by: 11)
        let report = try StoreFiles.store(writer).compact()
        #expect(report.retiredBlobsDeleted.count == 1)
        #expect(try place.retiredCopies(of: Self.old).isEmpty)
        #expect(try place.holdsBlob(of: Self.new), "the blob the store names stays")

        let name = SHA256Digest.hexString(Self.old)
        let expected = FileStoreError.blobRemoved(name: name, path: place.url.path + "/blobs/" + name + ".blob")
        #expect(throws: expected) { try StoreFiles.store(reader).blobs.load(name: name, size: Self.old.count) }
        #expect(sketch.drawing == nil)
        #expect(reading.readFailures.map(\.reason)
                    == ["\(StoredValueError.externalDataUnreadable(name: name, reason: "\(expected)"))"])
        #expect("\(expected)".contains("another process's compaction removed it after this open read the object"))
        #expect("\(expected)".contains("fetch again to read the current value"))
        let current = try #require(try ModelContext(try place.open(readOnly: true)).fetch(FetchDescriptor<Sketch>()).first)
        #expect(current.drawing == Self.new, "fetching again reads the current value")
    }

    @Test("A writable open's cleanup retires an unreferenced blob, keeps it within the grace period and deletes it after",
          arguments: Disk.allCases)
    func cleanupAtOpen(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        let reader = try place.open(readOnly: true)
        let sketch = try #require(try ModelContext(reader).fetch(FetchDescriptor<Sketch>()).first)
        try #require(try writing.fetch(FetchDescriptor<Sketch>()).first).drawing = Self.new
        try writing.save()
        try StoreFiles.close(writer)
        // A save leaves the blob it replaced in place: only a compaction or a writable open's cleanup reclaims it.
        #expect(try place.holdsBlob(of: Self.old))

        let first = try place.open()
        #expect(try !place.holdsBlob(of: Self.old))
        #expect(try place.retiredCopies(of: Self.old).count == 1, "retired, not deleted")
        #expect(StoreFiles.store(first).recovery.removedLeftovers.isEmpty)
        try StoreFiles.close(first)
        #expect(sketch.drawing == Self.old, "the reader still loads what it fetched")

        place.clock.step(by: Self.grace - 10)
        try StoreFiles.close(try place.open())
        #expect(try place.retiredCopies(of: Self.old).count == 1, "kept within the grace period")
        place.clock.step(by: 11)
        let late = try place.open()
        let removed = StoreFiles.store(late).recovery.removedLeftovers
        #expect(removed.count == 1 && removed.allSatisfy {
            $0.hasPrefix(place.url.path + "/blobs/")
                && StoreLayout.retiredBlob(String($0.dropFirst(place.url.path.count + 7)))?.name
                    == SHA256Digest.hexString(Self.old)
        }, "the retired copy is deleted, and reported: \(removed)")
        #expect(try place.retiredCopies(of: Self.old).isEmpty)
        #expect(try place.holdsBlob(of: Self.new))
        try StoreFiles.close(late)
    }

    @Test("verify finds nothing wrong in a store holding retired blobs, and stats counts only the blobs in use",
          arguments: Disk.allCases)
    func verifyIsClean(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        try change(.replaced, writing, writer)
        #expect(try place.retiredCopies(of: Self.old).count == 1)
        let report = try StoreVerifier.verify(at: place.url, fileSystem: place.fileSystem)
        #expect(report.ok, "\(report.problems)")
        let statistics = try StoreInspector.statistics(at: place.url, fileSystem: place.fileSystem)
        #expect(statistics.blobs == 1 && statistics.blobBytes == Self.new.count)
        #expect(statistics.bytes >= statistics.segmentBytes + Self.new.count + Self.old.count,
                "the retired file's bytes are the store's")
    }

    @Test("A blob written again with the content of a retired one is stored afresh and outlives the retired copy",
          arguments: Disk.allCases)
    func rewrittenWhileRetired(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        try change(.replaced, writing, writer)
        #expect(try place.retiredCopies(of: Self.old).count == 1)
        try #require(try writing.fetch(FetchDescriptor<Sketch>()).first).drawing = Self.old
        try writing.save()
        #expect(try place.holdsBlob(of: Self.old))
        place.clock.step(by: Self.grace + 1)
        let report = try StoreFiles.store(writer).compact()
        #expect(report.retiredBlobsDeleted.count == 1 && report.blobsRemoved == [SHA256Digest.hexString(Self.new)])
        #expect(try place.holdsBlob(of: Self.old))
        #expect(try place.retiredCopies(of: Self.old).isEmpty)
        let verified = try StoreVerifier.verify(at: place.url, fileSystem: place.fileSystem)
        #expect(verified.ok, "\(verified.problems)")
        let reading = ModelContext(try place.open(readOnly: true))
        #expect(try reading.fetch(FetchDescriptor<Sketch>()).first?.drawing == Self.old)
        #expect(reading.readFailures.isEmpty)
    }

    @Test("A retirement time ahead of the wall clock counts as now: the copy is kept for a whole grace period from then",
          arguments: Disk.allCases)
    func retiredInTheFuture(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        place.clock.step(by: 86_400)
        try change(.replaced, writing, writer)
        place.clock.step(by: -86_400)
        let compacted = try StoreFiles.store(writer).compact()
        #expect(compacted.retiredBlobsDeleted.isEmpty)
        let copies = try place.retiredCopies(of: Self.old)
        #expect(copies.count == 1)
        let stamped = try #require(copies.first.flatMap(StoreLayout.retiredBlob)).retiredAt
        #expect(Double(stamped) <= Date().timeIntervalSince1970 + 5, "stamped with the clock's time again")
        place.clock.step(by: Self.grace + 1)
        #expect(try StoreFiles.store(writer).compact().retiredBlobsDeleted.count == 1)
        #expect(try place.retiredCopies(of: Self.old).isEmpty)
    }

    @Test("A link or a special file with a retired blob's name is neither read, followed nor deleted, and verify names it")
    func hostileRetiredNames() throws {
        let place = Place(.real)
        let (writer, writing) = try writerWithSketch(place)
        let reader = try place.open(readOnly: true)
        let reading = ModelContext(reader)
        let sketch = try #require(try reading.fetch(FetchDescriptor<Sketch>()).first)
        try change(.replaced, writing, writer)
        place.clock.step(by: Self.grace + 1)
        try StoreFiles.store(writer).compact()
        #expect(try place.retiredCopies(of: Self.old).isEmpty)

        let name = SHA256Digest.hexString(Self.old)
        let outside = TemporaryStores.newURL("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let target = outside.appendingPathComponent("drawing")
        try Self.old.write(to: target)
        let link = place.url.path + "/blobs/" + StoreLayout.retiredBlobFileName(name, retiredAt: 1)
        let fifo = place.url.path + "/blobs/" + StoreLayout.retiredBlobFileName(name, retiredAt: 2)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target.path)
        #expect(mkfifo(fifo, 0o644) == 0)

        #expect(try StoreFiles.store(writer).compact().retiredBlobsDeleted.isEmpty)
        try StoreFiles.close(writer)
        try StoreFiles.close(try place.open())
        #expect(try place.retiredCopies(of: Self.old).count == 2, "neither is deleted")
        #expect(FileManager.default.fileExists(atPath: target.path), "nor what the link points at")

        #expect(sketch.drawing == nil, "the bytes behind the link are not read")
        #expect(reading.readFailures.count == 1
                && reading.readFailures[0].reason.contains("\(FileStoreError.blobRemoved(name: name, path: place.url.path + "/blobs/" + name + ".blob"))"),
                "\(reading.readFailures)")
        let problems = try StoreVerifier.verify(at: place.url).problems
        #expect(Set(problems.map(\.file)) == [link, fifo] && problems.allSatisfy { $0.kind == .strayEntry },
                "\(problems)")
    }

    @Test("A salvage reads a blob that a row names from its retired copy, and copies no retired file; verify calls that state damage", arguments: Disk.allCases)
    func salvageUsesRetiredCopies(disk: Disk) throws {
        let place = Place(disk)
        let (writer, writing) = try writerWithSketch(place)
        try change(.replaced, writing, writer)
        try StoreFiles.close(writer)
        // As a reader racing that compaction would find it: the blob the state names only under a retired name.
        let name = SHA256Digest.hexString(Self.new)
        try place.fileSystem.rename(place.url.path + "/blobs/" + StoreLayout.blobFileName(name),
                                    to: place.url.path + "/blobs/" + StoreLayout.retiredBlobFileName(name, retiredAt: 5))
        let problems = try StoreVerifier.verify(at: place.url, fileSystem: place.fileSystem).problems
        #expect(problems.count == 1 && problems[0].kind == .missingBlob
                    && problems[0].message.contains("only a retired copy is left"),
                "a stable state that names a blob found only retired is damage: \(problems)")
        let target = TemporaryStores.newURL("retired-salvage")
        let report = try FileStore.salvage(from: place.url, to: target, fileSystem: place.fileSystem)
        #expect(report.skippedRecords.isEmpty, "\(report.skippedRecords)")
        #expect(try place.fileSystem.contentsOfDirectory(target.path + "/blobs") == [StoreLayout.blobFileName(name)])
        var configuration = FileStoreConfiguration(url: target, mode: .readOnly, fileSystem: place.fileSystem)
        configuration.clocks = place.clock.clocks
        let reading = ModelContext(try ModelContainer(for: Schema([Sketch.self]), configurations: [configuration]))
        #expect(try reading.fetch(FetchDescriptor<Sketch>()).first?.drawing == Self.new)
        #expect(reading.readFailures.isEmpty)
    }
}
