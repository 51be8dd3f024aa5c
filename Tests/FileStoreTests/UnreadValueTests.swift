import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

/// Issue 34, item 1: a value the store cannot hand over (a damaged or missing blob, one not fetched from a mirror's
/// server) reads as the attribute's declared default with a ``ReadFailure``, and no save turns that stand-in into
/// the stored value: a save of the object's other changes keeps the stored reference, and writing the default back
/// over it is refused.
@Suite("Unread values: a read that fails is never saved back as the value")
struct UnreadValueTests {
    final class Sketch: PersistentModel {
        @Attribute var title = ""
        @Attribute(.externalStorage) var drawing: Data?

        required init() {}
    }

    static let bytes = Data((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })

    /// A store holding one sketch with a drawing, whose blob file is then moved aside: the path it was at.
    static func storeWithMissingBlob() throws -> (url: URL, blob: URL) {
        let url = TemporaryStores.newURL("unread")
        let container = try ModelContainer(for: Sketch.self, configurations: FileStoreConfiguration(url: url))
        let context = ModelContext(container)
        let sketch = Sketch()
        sketch.title = "ridge"
        sketch.drawing = bytes
        context.insert(sketch)
        try context.save()
        try container.close()
        let blob = url.appendingPathComponent("blobs/\(SHA256Digest.hexString(bytes)).blob")
        try FileManager.default.moveItem(at: blob, to: url.appendingPathComponent("aside"))
        return (url, blob)
    }

    static func open(_ url: URL) throws -> (ModelContainer, ModelContext, Sketch) {
        let container = try ModelContainer(for: Sketch.self, configurations: FileStoreConfiguration(url: url))
        let context = ModelContext(container)
        let sketch = try #require(try context.fetch(FetchDescriptor<Sketch>()).first)
        return (container, context, sketch)
    }

    @Test("A failed read gives the declared default and a read failure; saving other changes keeps the stored reference")
    func otherChangesKeepTheReference() throws {
        let (url, blob) = try Self.storeWithMissingBlob()
        do {
            let (container, context, sketch) = try Self.open(url)
            defer { try? container.close() }
            #expect(sketch.drawing == nil)
            #expect(context.readFailures.map(\.property) == ["drawing"], "\(context.readFailures)")
            sketch.title = "ridge, renamed"
            try context.save()
        }
        try FileManager.default.moveItem(at: url.appendingPathComponent("aside"), to: blob)
        let (container, context, sketch) = try Self.open(url)
        defer { try? container.close() }
        let drawing = sketch.drawing
        #expect(sketch.title == "ridge, renamed")
        #expect(drawing == Self.bytes ? true : false, "read \(drawing?.count ?? -1) bytes")
        #expect(context.readFailures.isEmpty)
    }

    @Test("Writing the default a failed read returned back over the stored value is refused, and nothing is written")
    func writingTheStandInBackIsRefused() throws {
        let (url, blob) = try Self.storeWithMissingBlob()
        let (container, context, sketch) = try Self.open(url)
        defer { try? container.close() }
        let transactionNumber = container.store.transactionNumber
        sketch.drawing = sketch.drawing
        #expect(throws: SaveError.unreadValueOverwritten(model: sketch.persistentModelID, property: "drawing")) {
            try context.save()
        }
        #expect(container.store.transactionNumber == transactionNumber)
        context.rollback()

        // Another value is the user's to write; so is the default once a read of the stored value succeeded.
        sketch.drawing = Data([1, 2, 3])
        try context.save()
        context.insert(Sketch())
        try context.save()
        try FileManager.default.moveItem(at: url.appendingPathComponent("aside"), to: blob)
        let (otherContainer, other, again) = try Self.open(url)
        defer { try? otherContainer.close() }
        _ = other
        #expect(again.drawing == Data([1, 2, 3]))
    }

    @Test("A read that succeeds after a failed one lets the default be saved on purpose")
    func aLaterReadClearsTheFailure() throws {
        let (url, blob) = try Self.storeWithMissingBlob()
        let (container, context, sketch) = try Self.open(url)
        defer { try? container.close() }
        #expect(sketch.drawing == nil)
        try FileManager.default.moveItem(at: url.appendingPathComponent("aside"), to: blob)
        let drawing = sketch.drawing
        #expect(drawing == Self.bytes ? true : false)
        sketch.drawing = nil
        try context.save()
        let (_, _, reopened) = try Self.open(url)
        #expect(reopened.drawing == nil)
    }
}
