import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 17, item 4: no single damaged byte loses the schema. A salvage takes each schema from whichever copy is
/// intact, the segments' records or the manifest's copy (docs/FORMAT.md, *Version 2* and *Recovery*). Salvage
/// is the file store's alone.
@Suite("Salvage: no single damaged byte loses the schema")
struct SalvageSchemaCopyTests {
    /// A closed one-segment notes store in the demo's shape: the schema record, then transactions filing notes
    /// in folders, editing and deleting.
    static func notesStore() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        let editor = NoteEditor(context: context)
        let work = Folder(name: "Work")
        context.insert(work)
        try context.save()
        for index in 1...5 {
            let note = editor.createNote(.init(title: "n\(index)", body: "body \(index)"))
            note.folder = index.isMultiple(of: 2) ? work : nil
            try context.save()
        }
        let third = try #require(try context.fetch(FetchDescriptor<Note>()).first { $0.title == "n3" })
        third.body = "edited"
        try context.save()
        try StoreFiles.close(container)
        return url
    }

    /// Every note's title, body and folder, sorted: what a salvage must keep.
    static func content(_ url: URL) throws -> [String] {
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        defer { try? StoreFiles.close(container) }
        return try ModelContext(container).fetch(FetchDescriptor<Note>()).map {
            "\($0.title)|\($0.body)|\($0.folder?.name ?? "-")"
        }.sorted()
    }

    /// The schema record's range in segment 1 (after the segment record).
    static func schemaRecord(_ url: URL) throws -> Range<Int> {
        let offsets = try StoreFiles.recordOffsets(StoreFiles.segment(url))
        return offsets[1]..<offsets[2]
    }

    @Test("A flipped byte anywhere in a one-segment store's schema record still salvages every intact transaction",
          arguments: [0, 5, 12, 17, 18, 40, 200, 1_000, -400, -60, -3, -2])
    func flippedSchemaRecord(position: Int) throws {
        let url = try Self.notesStore()
        let expected = try Self.content(url)
        let transactions = try StoreFiles.store(try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly })
            .history().records.count
        let record = try Self.schemaRecord(url)
        let at = position >= 0 ? record.lowerBound + position : record.upperBound + position
        #expect(record.contains(at))
        var bytes = try Data(contentsOf: StoreFiles.segment(url))
        bytes[at] ^= 0x04
        try bytes.write(to: StoreFiles.segment(url))

        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination)
        #expect(report.transactionsKept == transactions, "flip at byte \(at) of the record \(record)")
        #expect(!report.isComplete, "the damaged record is reported")
        #expect(report.skippedBytes.contains { $0.offset == record.lowerBound }
                    || report.skippedRecords.contains { $0.offset == record.lowerBound })
        #expect(try Self.content(destination) == expected)
        #expect(try StoreInspector.schemaHistory(at: destination).map(\.contentHash)
                    == [try Schema(NotesSchema.models).contentHash])
        #expect(try StoreVerifier.verify(at: destination).ok)
    }

    @Test("A flipped byte in the manifest's copy changes nothing a salvage keeps; a differing copy changes nothing an open reads")
    func flippedManifestCopy() throws {
        let url = try Self.notesStore()
        let expected = try Self.content(url)
        let intact = TemporaryStores.newURL("intact")
        let intactReport = try FileStore.salvage(from: url, to: intact)
        #expect(intactReport.isComplete)

        // A flipped byte inside the copy: the manifest's checksum fails; the salvage reads every segment instead.
        let manifestURL = url.appendingPathComponent("MANIFEST")
        let original = try Data(contentsOf: manifestURL)
        let text = String(decoding: original, as: UTF8.self)
        let schemasAt = try #require(text.range(of: #""schemas":"#)).upperBound.utf16Offset(in: text)
        for offset in [schemasAt + 3, schemasAt + 100, original.count - 10] {
            var bytes = original
            bytes[offset] ^= 0x04
            try bytes.write(to: manifestURL)
            let salvaged = TemporaryStores.newURL("salvaged")
            let report = try FileStore.salvage(from: url, to: salvaged)
            #expect(report.transactionsKept == intactReport.transactionsKept)
            #expect(try Self.content(salvaged) == expected)
        }

        // A copy that is intact but differs (another schema under the right framing): the segments win.
        var manifest = try SegmentLog.decodeManifest([UInt8](original), layout: StoreLayout(root: url.path))
        manifest.schemas = [ManifestSchema(try Schema([ListSchemas.Card.self]))]
        try ManifestSchemaCopyTests.writeManifest(manifest, to: url)
        let salvaged = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: salvaged)
        #expect(report.transactionsKept == intactReport.transactionsKept)
        #expect(try Self.content(salvaged) == expected)
        #expect(try Self.content(url) == expected, "a read-only open reads the segments")
        let container = try StoreFiles.open(url, NotesSchema.models)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == expected.count)
        try StoreFiles.close(container)
    }

    @Test("A damaged schema record in a compacted segment after a migration is taken from the manifest's copy, in order")
    func compactedHistory() throws {
        let url = TemporaryStores.newURL()
        var container = try StoreFiles.open(url, [ListSchemas.Card.self])
        var context = ModelContext(container)
        for front in ["a", "b"] {
            let card = ListSchemas.Card()
            card.front = front
            context.insert(card)
            try context.save()
        }
        try StoreFiles.close(container)
        container = try StoreFiles.open(url, [ListSchemas.Later.Card.self])
        context = ModelContext(container)
        let card = ListSchemas.Later.Card()
        card.front = "c"
        card.hint = "later"
        context.insert(card)
        try context.save()
        try StoreFiles.store(container).compact()
        let after = ListSchemas.Later.Card()
        after.front = "d"
        context.insert(after)
        try context.save()
        try StoreFiles.close(container)
        let history = try StoreInspector.schemaHistory(at: url).map(\.contentHash)
        #expect(history.count == 2)

        // Segment 2 (the compaction's) opens with the segment record and the two schema records.
        let segment = StoreFiles.segment(url, 2)
        let offsets = try StoreFiles.recordOffsets(segment)
        for damaged in [1, 2] {
            var bytes = try Data(contentsOf: segment)
            let original = bytes
            bytes[offsets[damaged] + 30] ^= 0x04
            try bytes.write(to: segment)
            let destination = TemporaryStores.newURL("salvaged")
            let report = try FileStore.salvage(from: url, to: destination)
            try original.write(to: segment)
            #expect(try StoreInspector.schemaHistory(at: destination).map(\.contentHash) == history,
                    "schema record \(damaged) damaged")
            let salvaged = try StoreFiles.open(destination, [ListSchemas.Later.Card.self]) { $0.mode = .readOnly }
            let fronts = try ModelContext(salvaged).fetch(FetchDescriptor<ListSchemas.Later.Card>()).map(\.front)
            #expect(fronts.sorted() == ["a", "b", "c", "d"], "schema record \(damaged) damaged")
            try StoreFiles.close(salvaged)
            #expect(report.transactionsKept == 1, "the transaction after the compaction")
        }
    }
}
