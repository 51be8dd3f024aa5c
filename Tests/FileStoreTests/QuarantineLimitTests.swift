import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

/// Issue 34, item 5: a writable open that sets a torn tail aside copies at most a segment's worth of it into
/// `quarantine/`, and its report says how much was left out: a hostile tail (one byte after a hole of any size)
/// cannot make an open fill the disk.
@Suite("Quarantine copies a bounded tail")
struct QuarantineLimitTests {
    @Test("Item 5: a record header, a 256 MiB hole and a byte is quarantined as at most the segment size bound, the rest is reported as left out, and the segment is cut back")
    func holeIsNotCopiedWhole() throws {
        let url = TemporaryStores.newURL("quarantine-limit")
        var configuration = FileStoreConfiguration(url: url)
        configuration.maximumSegmentSize = 1 << 20
        do {
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
            let context = ModelContext(container)
            let note = NoteRecord()
            note.title = "kept"
            context.insert(note)
            try context.save()
            try container.close()
        }
        let segments = url.appendingPathComponent("segments")
        let last = try #require(try FileManager.default.contentsOfDirectory(atPath: segments.path).sorted().last)
        let segment = segments.appendingPathComponent(last)
        let end = try #require(try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int)
        // A record header that claims a 1 GiB payload, a hole, and one byte: a torn tail as long as the file says.
        let header = Data("3fffffff 00000000 ".utf8)
        let hole = 256 << 20
        let handle = try FileHandle(forWritingTo: segment)
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: header)
        try handle.seek(toOffset: UInt64(end + header.count + hole))
        try handle.write(contentsOf: Data([0x7B]))
        try handle.close()
        let length = header.count + hole + 1

        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
        defer { try? container.close() }
        let store = try #require(container.store as? FileStore)
        let torn = try #require(store.recovery.tornTail)
        let kept = try #require(torn.quarantinedAt)
        let keptSize = try #require(try FileManager.default.attributesOfItem(atPath: kept)[.size] as? Int)
        #expect(torn.offset == end && torn.length == length, "\(torn)")
        #expect(keptSize <= configuration.maximumSegmentSize, "kept \(keptSize) bytes")
        #expect(torn.omittedLength == length - configuration.maximumSegmentSize, "\(torn)")
        #expect(try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int == end)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteRecord>()) == 1)
    }

    @Test("A torn tail within the bound is kept whole, with nothing reported as left out")
    func ordinaryTailIsKeptWhole() throws {
        let url = TemporaryStores.newURL("quarantine-limit")
        let configuration = FileStoreConfiguration(url: url)
        do {
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
            let context = ModelContext(container)
            context.insert(NoteRecord())
            try context.save()
            try container.close()
        }
        let segments = url.appendingPathComponent("segments")
        let last = try #require(try FileManager.default.contentsOfDirectory(atPath: segments.path).sorted().last)
        let handle = try FileHandle(forWritingTo: segments.appendingPathComponent(last))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("#42 {\"k\":\"tx\"".utf8))
        try handle.close()
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels), configurations: [configuration])
        defer { try? container.close() }
        let torn = try #require((container.store as? FileStore)?.recovery.tornTail)
        let kept = try #require(torn.quarantinedAt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == Data("#42 {\"k\":\"tx\"".utf8))
        #expect(torn.omittedLength == 0)
    }
}
