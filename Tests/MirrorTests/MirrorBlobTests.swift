import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Issue 18, item 4's last point: external-storage blobs mirror by content hash and are fetched when first read.
/// An import records a blob by its hash and length only; the first read of the value in a process that mirrors the
/// store fetches the bytes from the zone's `blobs` (a file store keeps a promise of the blob until then).
@Suite("Blobs mirror by content hash and are fetched when first read", .serialized,
       .enabled(if: TemporaryPostgres.runsServerTests, Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorBlobTests {
    static let bytes = Data((0..<7_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    static var name: String { SHA256Digest.hexString(bytes) }

    /// A note with a photo of ``bytes``, saved on `container`.
    @discardableResult
    static func savePhoto(_ container: ModelContainer) throws -> UUID {
        let context = ModelContext(container)
        let note = NoteRecord()
        note.title = "with a photo"
        context.insert(note)
        let photo = PhotoRecord(fileName: "ridge.jpg", data: bytes)
        note.photos.append(photo)
        try context.save()
        return photo.id
    }

    static func photo(_ container: ModelContainer, _ id: UUID) throws -> (context: ModelContext, photo: PhotoRecord) {
        let context = ModelContext(container)
        let photo = try #require(try context.fetch(FetchDescriptor<PhotoRecord>(predicate: #Predicate { $0.id == id }))
            .first)
        return (context, photo)
    }

    /// Whether the store holds the photo's bytes yet: for a file store, the blob's file; for an in-memory store, the
    /// stored reference's bytes in memory.
    static func holdsBytes(_ container: ModelContainer, _ id: UUID) throws -> Bool {
        if let store = container.store as? FileStore {
            let blobs = store.configuration.url.appendingPathComponent("blobs")
            let hasBlob = FileManager.default.fileExists(atPath: blobs.appendingPathComponent(name + ".blob").path)
            let hasPromise = FileManager.default.fileExists(atPath: blobs.appendingPathComponent(name + ".remote").path)
            #expect(hasBlob != hasPromise, "a blob or its promise, never both nor neither")
            return hasBlob
        }
        let (_, photo) = try Self.photo(container, id)
        let slot = try #require(container.schema.entity(named: "PhotoRecord")?.attributes.firstIndex { $0.name == "data" })
        let stored = try #require(container.store.rows(for: [photo.persistentModelID]).first ?? nil)
        guard case .external(let external) = stored.attributes[slot] else { return true }
        return external.isLoaded
    }

    @Test("An import records the blob by its hash; the first read fetches it from the server, and a server away at that moment gives a typed read failure that a later read recovers from",
          arguments: StoreKind.allCases)
    func fetchedWhenFirstRead(kind: StoreKind) throws {
        let zone = try MirrorZone(kind, ownServer: true)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let id = try Self.savePhoto(a)
        try mirrorA.sync()
        #expect(try mirrorB.sync().importedChanges == 1)
        #expect(try !Self.holdsBytes(b, id), "the import fetched the bytes")

        // B renames the photo and sends it: the export names the blob by its hash without fetching it.
        let (context, renamed) = try Self.photo(b, id)
        renamed.fileName = "ridge-2.jpg"
        try context.save()
        #expect(try mirrorB.sync().exportedTransactions == 1)
        #expect(try !Self.holdsBytes(b, id), "the export fetched the bytes")
        #expect(try zone.query(#"SELECT count(*) FROM notekit.blobs"#) == [["1"]])
        // A server that forgot B (a baseline: B sends every object as it is now, the photo's bytes too) gets the
        // blob by its hash alone, which it has.
        let device = try mirrorB.status().device.uuidString
        _ = try zone.query(#"DELETE FROM notekit.devices WHERE device = $1::uuid"#, [device])
        #expect(try mirrorB.sync().exportedBaseline)
        #expect(try !Self.holdsBytes(b, id), "the baseline fetched the bytes")

        // The server is away at the first read: the value reads as its default, the failure says why.
        try zone.server.stopServer()
        let (away, unread) = try Self.photo(b, id)
        #expect(unread.data.isEmpty)
        #expect(away.readFailures.count == 1 && away.readFailures[0].reason.contains("cannot talk to"),
                "\(away.readFailures)")
        #expect(try !Self.holdsBytes(b, id))

        try zone.server.start()
        let (back, read) = try Self.photo(b, id)
        #expect(read.data == Self.bytes && back.readFailures.isEmpty, "\(back.readFailures)")
        #expect(try Self.holdsBytes(b, id))
        #expect(try mirrorA.sync().importedChanges == 1)
        #expect(try Self.photo(a, id).photo.fileName == "ridge-2.jpg")
    }

    @Test("A process that does not mirror reads a blob not fetched yet as a typed failure, until notekit mirror fetch-blobs fetches every such blob")
    func extensionsReadAfterFetch() throws {
        let zone = try MirrorZone(.file)
        let (a, mirrorA) = try zone.device()
        let id = try Self.savePhoto(a)
        try mirrorA.sync()
        let url = TemporaryStores.newURL()
        func open() throws -> ModelContainer {
            try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                               configurations: [FileStoreConfiguration(url: url)])
        }
        do {
            let app = try open()
            defer { try? app.close() }
            try StoreMirror(container: app, configuration: zone.configuration).sync()
        }
        do {
            let extensionContainer = try open()
            defer { try? extensionContainer.close() }
            let (context, photo) = try Self.photo(extensionContainer, id)
            #expect(photo.data.isEmpty)
            #expect(context.readFailures.first?.reason.contains("not fetched") == true, "\(context.readFailures)")
            let verify = try StoreVerifier.verify(at: url)
            #expect(verify.problems.isEmpty, "a promised blob is not damage: \(verify.problems)")
        }

        let fetch = ["mirror", "fetch-blobs", url.path, "--zone", zone.configuration.zone,
                     "--server", zone.configuration.connectionString, "--json"]
        let first = try MirrorOperationTests.notekit(fetch)
        #expect(first.status == 0 && MirrorOperationTests.json(first.output)["blobsFetched"] as? Int == 1, "\(first)")
        let again = try MirrorOperationTests.notekit(fetch)
        #expect(MirrorOperationTests.json(again.output)["blobsFetched"] as? Int == 0, "\(again)")

        let extensionContainer = try open()
        defer { try? extensionContainer.close() }
        let (context, photo) = try Self.photo(extensionContainer, id)
        #expect(photo.data == Self.bytes && context.readFailures.isEmpty, "\(context.readFailures)")
    }

    @Test("A blob the server lost is a typed failure at read, naming the zone and the blob; the reference stays")
    func blobLostOnTheServer() throws {
        let zone = try MirrorZone(.file)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let id = try Self.savePhoto(a)
        try mirrorA.sync()
        try mirrorB.sync()
        _ = try zone.query(#"DELETE FROM notekit.blobs"#)
        let (context, photo) = try Self.photo(b, id)
        #expect(photo.data.isEmpty)
        #expect(context.readFailures.first?.reason.contains("has no blob \(Self.name)") == true, "\(context.readFailures)")
        #expect(throws: MirrorError.blobNotOnServer(zone: zone.configuration.zone, name: Self.name)) {
            try mirrorB.fetchRemoteBlobs()
        }
        #expect(try !Self.holdsBytes(b, id))

        // B's later exports do not stall on it, a baseline (every object sent again) included.
        let (edit, photoB) = try Self.photo(b, id)
        photoB.fileName = "kept.jpg"
        try edit.save()
        let device = try mirrorB.status().device.uuidString
        _ = try zone.query(#"DELETE FROM notekit.devices WHERE device = $1::uuid"#, [device])
        let report = try mirrorB.sync()
        #expect(report.exportedBaseline, "\(report)")
        let names = try zone.query(#"SELECT "a_fileName" FROM notekit."e_PhotoRecord""#)
        #expect(names == [[#"{"string": "kept.jpg"}"#]], "\(names)")
    }

    /// Who compacts the store beside the mirroring app, in a process of its own.
    enum Compactor: String, CaseIterable, CustomTestStringConvertible {
        case commandLine = "notekit compact"
        case extensionSave = "an extension's automatic compaction"
        var testDescription: String { rawValue }

        func compact(_ url: URL) throws {
            let result: (status: Int32, output: String, errors: String)
            switch self {
            case .commandLine:
                result = try MirrorOperationTests.notekit(["compact", url.path])
            case .extensionSave:
                result = try MirrorOperationTests.run(MirrorConvergenceTests.device,
                                                      ["add", "--store", url.path, "--title", "from the extension",
                                                       "--compact-after-bytes", "1"])
            }
            #expect(result.status == 0, "\(result)")
        }
    }

    /// The segment files of the store at `url`, which a compaction replaces with one of a new number.
    static func segmentFiles(_ url: URL) throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path))
    }

    @Test("Issue 34, item 1: after another process compacts the store, the mirroring process still fetches every promised blob on first read",
          arguments: Compactor.allCases)
    func fetchedAfterAnotherProcessCompacts(compactor: Compactor) throws {
        let zone = try MirrorZone(.file)
        let (a, mirrorA) = try zone.device()
        var photos: [(id: UUID, bytes: Data)] = []
        for index in 0..<3 {
            let context = ModelContext(a)
            let note = NoteRecord()
            note.title = "photo \(index)"
            context.insert(note)
            let bytes = Data((0..<(5_000 + index)).map { UInt8(truncatingIfNeeded: $0 &* (index + 3)) })
            let photo = PhotoRecord(fileName: "\(index).jpg", data: bytes)
            note.photos.append(photo)
            try context.save()
            photos.append((photo.id, bytes))
        }
        try mirrorA.sync()
        let (b, mirrorB) = try zone.device()
        try mirrorB.sync()
        let store = try #require(b.store as? FileStore)
        let url = store.configuration.url
        #expect(try store.promisedBlobs().count == 3)

        let before = try Self.segmentFiles(url)
        try compactor.compact(url)
        #expect(try Self.segmentFiles(url).isDisjoint(with: before), "the other process did not compact the store")

        for (id, bytes) in photos {
            let (context, photo) = try Self.photo(b, id)
            let read = photo.data
            #expect(read == bytes ? true : false, "\(photo.fileName) read \(read.count) bytes")
            #expect(context.readFailures.isEmpty, "\(context.readFailures)")
        }
        #expect(try store.promisedBlobs().isEmpty)
    }

    @Test("Issue 34, item 1: a blob that cannot be fetched reads as the declared default with a read failure, and a later save of its object sends the reference it had, never an empty value")
    func unfetchedBlobIsNeverSentEmpty() throws {
        let zone = try MirrorZone(.file, ownServer: true)
        let (a, mirrorA) = try zone.device()
        let id = try Self.savePhoto(a)
        try mirrorA.sync()
        let (b, mirrorB) = try zone.device()
        try mirrorB.sync()
        let url = try #require((b.store as? FileStore)?.configuration.url)
        try Compactor.commandLine.compact(url)

        try zone.server.stopServer()
        let (context, photo) = try Self.photo(b, id)
        #expect(photo.data.isEmpty)
        #expect(context.readFailures.map(\.property) == ["data"], "\(context.readFailures)")
        // Another property changes and the object is saved: the record keeps naming the blob.
        photo.fileName = "renamed offline.jpg"
        try context.save()
        // Writing back what the failed read returned is refused: it would replace the bytes with nothing.
        photo.data = photo.data
        #expect(throws: SaveError.unreadValueOverwritten(model: photo.persistentModelID, property: "data")) {
            try context.save()
        }
        context.rollback()

        try zone.server.start()
        #expect(try mirrorB.sync().exportedTransactions == 1)
        let sent = try zone.query(#"SELECT "a_data" FROM notekit."e_PhotoRecord""#)
        #expect(sent == [[#"{"blob":"\#(Self.name)"}"#]] || sent == [[#"{"blob": "\#(Self.name)"}"#]], "\(sent)")
        #expect(try mirrorA.sync().importedChanges == 1)
        let (_, onA) = try Self.photo(a, id)
        let (readOnA, nameOnA) = (onA.data, onA.fileName)
        #expect(nameOnA == "renamed offline.jpg")
        #expect(readOnA == Self.bytes ? true : false, "A read \(readOnA.count) bytes")
        let (_, onB) = try Self.photo(b, id)
        let readOnB = onB.data
        #expect(readOnB == Self.bytes ? true : false, "B read \(readOnB.count) bytes")
    }
}
