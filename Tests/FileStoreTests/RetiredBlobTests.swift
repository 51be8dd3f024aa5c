import Foundation
import NoteKit
import NoteKitTestSupport
import Testing

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
}
