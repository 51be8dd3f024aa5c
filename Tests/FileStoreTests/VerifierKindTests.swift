import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// `notekit verify` names each damaged frame's kind from the type of damage the record reader found, never from
/// the words of its message.
@Suite("Verify: a damaged frame's kind comes from its type")
struct VerifierKindTests {
    /// A closed store of one segment with three saves.
    static func store() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: Schema(versionedSchema: PermutedV1.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        for index in 0..<3 {
            let shelf = PermutedV1.Shelf()
            shelf.name = "shelf \(index)"
            context.insert(shelf)
            try context.save()
        }
        try StoreFiles.close(container)
        return url
    }

    static func kinds(_ url: URL) throws -> [VerificationReport.Kind] {
        try StoreVerifier.verify(at: url).problems.map(\.kind)
    }

    @Test("A manifest cut inside its record is a truncatedRecord; a flipped byte in it a checksumMismatch")
    func manifest() throws {
        let cut = try Self.store()
        let manifest = cut.appendingPathComponent("MANIFEST")
        let bytes = try Data(contentsOf: manifest)
        try bytes.prefix(bytes.count - 10).write(to: manifest)
        #expect(try Self.kinds(cut) == [.truncatedRecord])

        let flipped = try Self.store()
        var changed = bytes
        changed[changed.count - 5] ^= 0x01
        try changed.write(to: flipped.appendingPathComponent("MANIFEST"))
        #expect(try Self.kinds(flipped) == [.checksumMismatch])
    }

    @Test("In a segment: a flipped byte is a checksumMismatch, a broken header malformed, a cut last record torn")
    func segment() throws {
        for (change, expected) in [("flip", VerificationReport.Kind.checksumMismatch), ("header", .malformedRecord),
                                   ("cut", .tornTail)] {
            let url = try Self.store()
            let path = url.appendingPathComponent("segments/000001.seg")
            var bytes = [UInt8](try Data(contentsOf: path))
            // The second line is the segment record; the third a schema record, with saves after it.
            let lines = bytes.indices.filter { bytes[$0] == 0x0A }
            switch change {
            case "flip": bytes[lines[2] + 30] ^= 0x01
            case "header": bytes[lines[2] + 1] = UInt8(ascii: "x")
            default: bytes.removeLast(5)
            }
            try Data(bytes).write(to: path)
            #expect(try Self.kinds(url).first == expected, "\(change)")
        }
    }
}
