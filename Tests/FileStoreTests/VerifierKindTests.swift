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

    /// The kind of the damaged record an open of `url` is refused with, or nil when it is refused otherwise.
    static func refusal(_ url: URL) throws -> RecordDamage? {
        let error = try #require(throws: FileStoreError.self) {
            var configuration = FileStoreConfiguration(url: url)
            configuration.mode = .readOnly
            _ = try ModelContainer(for: Schema(versionedSchema: PermutedV1.self), configurations: [configuration])
        }
        guard case .damagedRecord(_, _, let kind, _) = error else { return nil }
        return kind
    }

    @Test("A manifest cut inside its record is a truncatedRecord; a flipped byte in it a checksumMismatch")
    func manifest() throws {
        let cut = try Self.store()
        let manifest = cut.appendingPathComponent("MANIFEST")
        let bytes = try Data(contentsOf: manifest)
        try bytes.prefix(bytes.count - 10).write(to: manifest)
        #expect(try Self.kinds(cut) == [.truncatedRecord])
        #expect(try Self.refusal(cut) == .truncated, "the open's error carries the verifier's kind")

        let flipped = try Self.store()
        var changed = bytes
        changed[changed.count - 5] ^= 0x01
        try changed.write(to: flipped.appendingPathComponent("MANIFEST"))
        #expect(try Self.kinds(flipped) == [.checksumMismatch])
        #expect(try Self.refusal(flipped) == .checksumMismatch)

        let longer = try Self.store()
        try (bytes + Data("x\n".utf8)).write(to: longer.appendingPathComponent("MANIFEST"))
        #expect(try Self.kinds(longer) == [.malformedRecord])
        #expect(try Self.refusal(longer) == .malformed, "bytes after the manifest's record")
    }

    /// (A segment cut short is `.truncated`: "Damage in a segment that is not the last is never taken for a torn
    /// tail", in the recovery tests.)
    @Test("An open refused for a damaged record says the kind the verifier reports: a flipped byte, a broken header")
    func openRefusalKinds() throws {
        for (change, expected) in [("flip", RecordDamage.checksumMismatch), ("header", .malformed)] {
            let url = try Self.store()
            let path = url.appendingPathComponent("segments/000001.seg")
            var bytes = [UInt8](try Data(contentsOf: path))
            let lines = bytes.indices.filter { bytes[$0] == 0x0A }
            if change == "flip" { bytes[lines[2] + 30] ^= 0x01 } else { bytes[lines[2] + 1] = UInt8(ascii: "x") }
            try Data(bytes).write(to: path)
            #expect(try Self.refusal(url) == expected, "\(change)")
        }
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
