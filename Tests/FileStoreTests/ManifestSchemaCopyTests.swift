import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFixtures
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 17, item 7 (and 4): format version 2's manifest carries a second copy of the schema history
/// (docs/FORMAT.md, *Version 2*, item 1). The segments stay the source of truth. The manifest is a file-store
/// concept: these tests have no in-memory counterpart.
@Suite("Format version 2: the manifest carries the schema history")
struct ManifestSchemaCopyTests {
    static func manifest(_ url: URL) throws -> Manifest {
        try SegmentLog.readManifest(layout: StoreLayout(root: url.path), fileSystem: POSIXFileSystem())
    }

    /// The content hashes of the manifest's copy, nil for a manifest without one (version 1).
    static func copyHashes(_ url: URL) throws -> [String]? { try manifest(url).schemas?.map(\.hash) }

    /// The content hashes of the schema history the segments hold.
    static func segmentHashes(_ url: URL) throws -> [String] {
        try StoreInspector.schemaHistory(at: url).map(\.contentHash)
    }

    /// The manifest's bytes with its record replaced by `manifest` (framed and checksummed as the writer does).
    static func writeManifest(_ manifest: Manifest, to url: URL, version: Int = MagicLine.currentVersion) throws {
        let bytes = MagicLine.bytes(.manifest, version: version) + RecordEncoder().manifest(manifest)
        try Data(bytes).write(to: url.appendingPathComponent("MANIFEST"))
    }

    private func cards(_ url: URL, _ fronts: [String]) throws {
        let container = try StoreFiles.open(url, [ListSchemas.Card.self])
        let context = ModelContext(container)
        for front in fronts {
            let card = ListSchemas.Card()
            card.front = front
            context.insert(card)
            try context.save()
        }
        try StoreFiles.close(container)
    }

    @Test("V2: a new store is written in format version 2, and its manifest holds the schema it was created with")
    func newStore() throws {
        let url = TemporaryStores.newURL()
        try cards(url, ["a"])
        let manifestText = try String(contentsOf: url.appendingPathComponent("MANIFEST"), encoding: .utf8)
        let segmentText = try String(contentsOf: StoreFiles.segment(url), encoding: .utf8)
        #expect(manifestText.hasPrefix("NOTEKIT/2 manifest\n"))
        #expect(segmentText.hasPrefix("NOTEKIT/2 segment\n"))
        let schema = try Schema([ListSchemas.Card.self])
        #expect(try Self.copyHashes(url) == [schema.contentHash])
        #expect(manifestText.contains(#""schemas":[{"hash":"\#(schema.contentHash)","schema":{"#))
    }

    @Test("V2: rotation, compaction, a migration and a salvage all write the manifest with the whole history")
    func everyWriter() throws {
        let url = TemporaryStores.newURL()
        try cards(url, ["a", "b"])
        let first = try Schema([ListSchemas.Card.self]).contentHash
        // A migration: the manifest is replaced after the record is flushed, with the new schema added.
        var container = try StoreFiles.open(url, [ListSchemas.Later.Card.self]) { $0.maximumSegmentSize = 1 }
        let second = try Schema([ListSchemas.Later.Card.self]).contentHash
        #expect(try Self.copyHashes(url) == [first, second])
        // Rotation: the save starts a new segment (the segment is past its bound).
        let context = ModelContext(container)
        let card = ListSchemas.Later.Card()
        card.front = "c"
        context.insert(card)
        try context.save()
        #expect(try Self.manifest(url).segments.count == 2, "the save rotated")
        #expect(try Self.copyHashes(url) == [first, second])
        // Compaction.
        try StoreFiles.store(container).compact()
        #expect(try Self.manifest(url).segments.count == 1)
        #expect(try Self.copyHashes(url) == [first, second])
        try StoreFiles.close(container)
        // Salvage's new store.
        let salvaged = TemporaryStores.newURL("salvaged")
        _ = try FileStore.salvage(from: url, to: salvaged)
        #expect(try Self.copyHashes(salvaged) == [first, second])
        container = try StoreFiles.open(salvaged, [ListSchemas.Later.Card.self])
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<ListSchemas.Later.Card>()) == 3)
        try StoreFiles.close(container)
    }

    @Test("V2: a version 1 store (Fixtures/v3) gets the segments' history in its manifest from a writable open, never from a read-only one")
    func versionOneManifest() throws {
        let frozen = try Schema(versionedSchema: PreAttachmentSchema.self)
        let (readOnly, copy) = try StoreFixture.openCopy(of: FixtureReplayTests.fixture(3), schema: frozen) {
            $0.mode = .readOnly
        }
        defer { try? FileManager.default.removeItem(at: copy) }
        let before = StoreFiles.contents(of: copy)
        try StoreFiles.close(readOnly)
        #expect(StoreFiles.contents(of: copy) == before, "a read-only open writes nothing")
        #expect(try Self.copyHashes(copy) == nil, "a version 1 manifest has no copy")

        let writable = try ModelContainer(for: frozen, configurations: [FileStoreConfiguration(url: copy)])
        let manifestText = try String(contentsOf: copy.appendingPathComponent("MANIFEST"), encoding: .utf8)
        #expect(manifestText.hasPrefix("NOTEKIT/2 manifest\n"))
        #expect(try Self.copyHashes(copy) == [try Self.segmentHashes(copy)].flatMap { $0 })
        #expect(try Self.copyHashes(copy) == [frozen.contentHash])
        // The segment stays as it was written: version 1, appended to as it is.
        let segmentText = try String(contentsOf: StoreFiles.segment(copy), encoding: .utf8)
        #expect(segmentText.hasPrefix("NOTEKIT/1 segment\n"))
        try StoreFiles.close(writable)
        #expect(StoreFiles.unrecoverableProblems(at: copy) == [])
    }

    @Test("V2: a manifest one schema short (a crash between a migration's record and its manifest) is completed by the next writable open")
    func shortCopy() throws {
        let url = TemporaryStores.newURL()
        try cards(url, ["a"])
        let beforeMigration = try Data(contentsOf: url.appendingPathComponent("MANIFEST"))
        try StoreFiles.close(try StoreFiles.open(url, [ListSchemas.Later.Card.self]))
        let history = try Self.segmentHashes(url)
        #expect(history.count == 2)
        // What a crash after the migration's record and before its manifest leaves.
        try beforeMigration.write(to: url.appendingPathComponent("MANIFEST"))
        #expect(try Self.copyHashes(url) == Array(history.prefix(1)))
        let report = try StoreVerifier.verify(at: url)
        #expect(report.problems.map(\.kind) == [.manifestSchemasDiffer])
        #expect(report.damage.isEmpty, "a copy that disagrees is a warning: the segments hold the truth")

        // A read-only open reads it and writes nothing.
        let unchanged = StoreFiles.contents(of: url)
        let reader = try StoreFiles.open(url, [ListSchemas.Later.Card.self]) { $0.mode = .readOnly }
        #expect(try ModelContext(reader).fetchCount(FetchDescriptor<ListSchemas.Later.Card>()) == 1)
        try StoreFiles.close(reader)
        #expect(StoreFiles.contents(of: url) == unchanged)

        try StoreFiles.close(try StoreFiles.open(url, [ListSchemas.Later.Card.self]))
        #expect(try Self.copyHashes(url) == history)
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("V2: a manifest copy that differs from the segments is replaced by theirs at a writable open: the segments win")
    func differentCopy() throws {
        let url = TemporaryStores.newURL()
        try cards(url, ["a", "b"])
        var manifest = try Self.manifest(url)
        let other = try Schema([ListSchemas.WithoutBack.Card.self])
        manifest.schemas = [ManifestSchema(other)]
        try Self.writeManifest(manifest, to: url)
        let report = try StoreVerifier.verify(at: url)
        #expect(report.problems.map(\.kind) == [.manifestSchemasDiffer])
        #expect(report.problems.first?.message.contains(other.contentHash.prefix(12)) == true,
                "the message names the schema that differs")

        let container = try StoreFiles.open(url, [ListSchemas.Card.self])
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<ListSchemas.Card>()) == 2)
        try StoreFiles.close(container)
        #expect(try Self.copyHashes(url) == [try Schema([ListSchemas.Card.self]).contentHash])
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test("V2: a version 1 manifest with schemas, or a version 2 manifest without them, is refused naming the manifest")
    func schemasBelongToVersionTwo() throws {
        let url = TemporaryStores.newURL()
        try cards(url, ["a"])
        var manifest = try Self.manifest(url)
        try Self.writeManifest(manifest, to: url, version: 1)
        #expect {
            _ = try Self.manifest(url)
        } throws: { error in
            guard case let FileStoreError.undecodableRecord(file, _, reason) = error else { return false }
            return file.hasSuffix("MANIFEST") && reason.contains("schemas")
        }
        // The writer always writes the member: a manifest without it is written by hand.
        manifest.schemas = []
        let payload = String(decoding: RecordEncoder().manifest(manifest).dropFirst(18).dropLast(), as: UTF8.self)
        let withoutSchemas = CraftedRecord.frame(Array(payload.replacingOccurrences(of: #","schemas":[]"#, with: "").utf8))
        #expect(withoutSchemas.count < RecordEncoder().manifest(manifest).count)
        for version in [1, 2] {
            try Data(MagicLine.bytes(.manifest, version: version) + withoutSchemas)
                .write(to: url.appendingPathComponent("MANIFEST"))
            if version == 1 {
                // Version 1 without them reads, as every version 1 manifest does.
                #expect(try Self.manifest(url).schemas == nil)
                continue
            }
            #expect {
                _ = try Self.manifest(url)
            } throws: { error in
                guard case let FileStoreError.undecodableRecord(file, _, reason) = error else { return false }
                return file.hasSuffix("MANIFEST") && reason.contains("schemas")
            }
        }
    }

    @Test("V2: notekit version names format 2 and reads 1 and 2")
    func formatVersion() {
        #expect(MagicLine.currentVersion == 2)
        #expect(MagicLine.supportedVersions == [1, 2])
    }
}
