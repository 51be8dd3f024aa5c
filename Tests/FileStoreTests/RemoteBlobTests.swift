import Foundation
import NoteKit
import NoteKitTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@testable import NoteKitFileStore

/// An import brings external-storage bytes that are on a mirror's server as a reference; the file store records a
/// promise of the blob instead of its bytes, and the first read in a process with a source attached fetches them,
/// checks them and puts them in place (docs/FORMAT.md, *Promised blobs*).
@Suite("Blobs on a mirror's server: promised at import, fetched when first read")
struct RemoteBlobTests {
    final class Sketch: PersistentModel {
        @Attribute var title = ""
        @Attribute(.externalStorage) var drawing: Data?
        required init() {}
    }

    /// A server's blobs: counts what it is asked for, and can be made to give other bytes.
    final class CountingSource: RemoteBlobSource {
        let bytes: Data
        let fetched = Mutex(0)
        init(_ bytes: Data) { self.bytes = bytes }
        func fetchBlob(named name: String, size: Int) throws -> Data {
            fetched.withLock { $0 += 1 }
            return bytes
        }
    }

    struct ServerAway: Error {}

    /// How many times a reference's own loader ran.
    final class Loads: Sendable {
        let count = Mutex(0)
    }

    let url = TemporaryStores.newURL("remote-blobs")
    let bytes = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    var name: String { SHA256Digest.hexString(bytes) }
    var blobPath: String { url.path + "/blobs/" + name + ".blob" }
    var promisePath: String { url.path + "/blobs/" + name + ".remote" }

    func open() throws -> ModelContainer {
        try ModelContainer(for: Schema([Sketch.self]),
                           configurations: [FileStoreConfiguration(url: url, automaticCompaction: nil)])
    }

    /// Saves a sketch whose drawing is the import's reference to `bytes` on the server; the reference's own loader
    /// must not run (the save reads nothing).
    @discardableResult
    func importSketch(into container: ModelContainer, loads: Loads = Loads()) throws -> PersistentIdentifier {
        let id = PersistentIdentifier(entityName: "Sketch", primaryKey: UUID())
        let bytes = bytes
        let reference = ExternalData(remoteName: name, size: bytes.count) {
            loads.count.withLock { $0 += 1 }
            return bytes
        }
        let context = ModelContext(container)
        _ = try context.applyReplicaChanges([ReplicaObject(id: id, attributes: ["title": .string("from afar"),
                                                                            "drawing": .external(reference)])],
                                      deleting: [])
        try context.save()
        return id
    }

    func drawing(_ container: ModelContainer, _ id: PersistentIdentifier) throws -> (Data?, [String]) {
        let context = ModelContext(container)
        let sketch = try #require(context.model(for: id) as? Sketch)
        let drawing = sketch.drawing
        return (drawing, context.readFailures.map(\.reason))
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    @Test("A remote reference saved becomes a promise, not bytes: the save reads nothing and verify finds no damage")
    func saveWritesAPromise() throws {
        let loads = Loads()
        let container = try open()
        try importSketch(into: container, loads: loads)
        try container.close()
        #expect(loads.count.withLock { $0 } == 0, "the save fetched the bytes")
        #expect(exists(promisePath) && !exists(blobPath))
        let promise = try String(contentsOfFile: promisePath, encoding: .utf8)
        #expect(promise == #"{"blob":"\#(name)","size":5000}"# + "\n")
        let report = try StoreVerifier.verify(at: url)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    @Test("The first read fetches through the attached source, checks the bytes, puts the blob in place and drops the promise")
    func firstReadFetches() throws {
        let id = try { () throws -> PersistentIdentifier in
            let container = try open()
            defer { try? container.close() }
            return try importSketch(into: container, loads: Loads())
        }()
        let container = try open()
        defer { try? container.close() }
        // No mirror in this process (an extension): a typed failure, the promise kept, nothing lost.
        let (missing, failures) = try drawing(container, id)
        #expect(missing == nil)
        #expect(failures.count == 1 && failures[0].contains("not fetched"), "\(failures)")
        #expect(exists(promisePath) && !exists(blobPath))

        let source = CountingSource(bytes)
        try #require(container.store as? FileStore).attachRemoteBlobSource(source)
        let (read, none) = try drawing(container, id)
        #expect(read == bytes && none.isEmpty, "\(none)")
        #expect(source.fetched.withLock { $0 } == 1)
        #expect(exists(blobPath) && !exists(promisePath))
        let report = try StoreVerifier.verify(at: url)
        #expect(report.problems.isEmpty, "\(report.problems)")
        // From disk from now on: another open, with no source at all, reads it.
        try container.close()
        let again = try open()
        defer { try? again.close() }
        #expect(try drawing(again, id).0 == bytes)
        #expect(source.fetched.withLock { $0 } == 1)
    }

    @Test("An object read before another open stopped naming its promised blob still reads it through the source")
    func staleReaderFetchesAnUnnamedBlob() throws {
        let container = try open()
        defer { try? container.close() }
        let id = try importSketch(into: container)
        let store = try #require(container.store as? FileStore)
        // A reader holds the sketch; then it is deleted and compacted away, and its promise with it.
        let reader = ModelContext(container)
        let stale = try #require(reader.model(for: id) as? Sketch)
        let other = ModelContext(container)
        try other.delete(try #require(other.model(for: id) as? Sketch))
        try other.save()
        _ = try store.compact()
        #expect(!exists(promisePath) && !exists(blobPath))
        let source = CountingSource(bytes)
        store.attachRemoteBlobSource(source)
        #expect(stale.drawing == bytes && reader.readFailures.isEmpty, "\(reader.readFailures)")
        #expect(source.fetched.withLock { $0 } == 1 && !exists(blobPath), "nothing names it: not kept")
    }

    @Test("A writable open keeps a fetching reader's temporary file while it can still be written, and deletes an old one")
    func fetchInFlightIsNotALeftover() throws {
        try open().close()
        let blobs = url.path + "/blobs/"
        try FileManager.default.createDirectory(atPath: blobs, withIntermediateDirectories: true)
        let now = Date()
        let fresh = StoreLayout.partialBlobFileName(name, writer: StoreLayout.fetchWriterTag(now: now))
        let old = StoreLayout.partialBlobFileName(name, writer: StoreLayout.fetchWriterTag(now: now - 3_600))
        let locked = StoreLayout.partialBlobFileName(name)
        for file in [fresh, old, locked] {
            #expect(StoreLayout.partialBlobName(file) == name, "\(file)")
            #expect(FileManager.default.createFile(atPath: blobs + file, contents: Data([1])))
        }
        let reopened = try open()
        try reopened.close()
        #expect(exists(blobs + fresh))
        #expect(!exists(blobs + old) && !exists(blobs + locked))
        #expect(try StoreVerifier.verify(at: url).problems.isEmpty)
    }

    @Test("Bytes from the server that are not the blob's are refused, and the promise stays for a later read")
    func wrongBytesAreRefused() throws {
        let container = try open()
        defer { try? container.close() }
        let id = try importSketch(into: container, loads: Loads())
        let store = try #require(container.store as? FileStore)
        var other = bytes
        other[17] ^= 0xFF
        store.attachRemoteBlobSource(CountingSource(other))
        let (read, failures) = try drawing(container, id)
        #expect(read == nil && failures.count == 1 && failures[0].contains("do not hash"), "\(failures)")
        store.attachRemoteBlobSource(CountingSource(bytes.prefix(10)))
        #expect(try drawing(container, id).1.first?.contains("not the 5000") == true)
        #expect(exists(promisePath) && !exists(blobPath))
        #expect(try store.promisedBlobs().map(\.name) == [name])

        store.attachRemoteBlobSource(CountingSource(bytes))
        try store.fetchPromisedBlob(name: name, size: bytes.count)
        #expect(exists(blobPath) && !exists(promisePath))
        #expect(try store.promisedBlobs().isEmpty)
        #expect(try drawing(container, id).0 == bytes)
    }

    @Test("A promise no object names is deleted by the next cleanup, and so is one whose bytes were saved here")
    func cleanupDropsPromises() throws {
        let container = try open()
        let id = try importSketch(into: container, loads: Loads())
        let store = try #require(container.store as? FileStore)
        // The same bytes saved by this device: the blob is here now, and the promise has nothing left to promise.
        let context = ModelContext(container)
        let local = Sketch()
        local.drawing = bytes
        context.insert(local)
        try context.save()
        _ = try store.compact()
        #expect(exists(blobPath) && !exists(promisePath))

        // A second import of other bytes, whose object is then deleted: its promise goes with the next compaction.
        let otherName = SHA256Digest.hexString(Data([1, 2, 3]))
        let otherPromise = url.path + "/blobs/" + otherName + ".remote"
        let otherID = PersistentIdentifier(entityName: "Sketch", primaryKey: UUID())
        let incoming = ModelContext(container)
        _ = try incoming.applyReplicaChanges([ReplicaObject(id: otherID, attributes: [
            "drawing": .external(ExternalData(remoteName: otherName, size: 3) { throw ServerAway() }),
        ])], deleting: [])
        try incoming.save()
        #expect(exists(otherPromise))
        let deleting = ModelContext(container)
        try deleting.delete(try #require(deleting.model(for: otherID) as? Sketch))
        try deleting.save()
        _ = try store.compact()
        #expect(!exists(otherPromise))
        #expect(try drawing(container, id).0 == bytes)
        try container.close()
        #expect(try StoreVerifier.verify(at: url).problems.isEmpty)
    }

    @Test("A salvage copies a promise as a promise, and the salvaged store fetches the blob as the original would")
    func salvageKeepsPromises() throws {
        let target = TemporaryStores.newURL("remote-blobs-salvaged")
        let id = try { () throws -> PersistentIdentifier in
            let container = try open()
            defer { try? container.close() }
            return try importSketch(into: container, loads: Loads())
        }()
        let report = try FileStore.salvage(from: url, to: target)
        #expect(report.skippedRecords.isEmpty, "\(report.skippedRecords)")
        #expect(exists(target.path + "/blobs/" + name + ".remote"))
        #expect(try StoreVerifier.verify(at: target).problems.isEmpty)
        let container = try ModelContainer(for: Schema([Sketch.self]),
                                           configurations: [FileStoreConfiguration(url: target)])
        defer { try? container.close() }
        try #require(container.store as? FileStore).attachRemoteBlobSource(CountingSource(bytes))
        #expect(try drawing(container, id).0 == bytes)
    }

    @Test("A link with a promise's name is not trusted: the save refuses it, and verify lists it")
    func linkedPromiseIsRefused() throws {
        let container = try open()
        defer { try? container.close() }
        // The store's first save makes blobs/; then a link takes the promise's name.
        try importSketch(into: container, loads: Loads())
        try FileManager.default.removeItem(atPath: promisePath)
        #expect(symlink("/etc/hostname", promisePath) == 0)
        #expect(throws: FileStoreError.self) { try importSketch(into: container, loads: Loads()) }
        let problems = try StoreVerifier.verify(at: url).problems
        #expect(problems.contains { $0.kind == .strayEntry && $0.file == promisePath }, "\(problems)")
        #expect(problems.contains { $0.kind == .missingBlob }, "a link promises nothing: \(problems)")
    }
}
