import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// A store compacted into one segment, and a copy of its directory from just before the compaction: a counter
/// (a folder whose name is a number) and 300 notes, which a compaction writing 128 rows a record spreads over
/// three `rows` records, as 9,000 notes would be at the default 4,096.
private struct CompactedStore {
    static let shared = Result { try CompactedStore() }
    static let notes = 300
    static let counter = "5000"

    /// The store's files after the compaction, relative to its directory.
    let after: [String: Data]
    /// Its files before the compaction (the older segments, and the manifest naming them).
    let before: [String: Data]
    /// The compacted segment's path relative to the store, and where its last `rows` record ends.
    let compacted: String
    let rowsEnd: Int
    let olderSegments: [String]

    init() throws {
        let url = TemporaryStores.newURL("compacted")
        defer { try? FileManager.default.removeItem(at: url) }
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.maximumSegmentSize = 8 << 10
            $0.rowsPerRecord = 128
        }
        let context = ModelContext(container)
        let counter = Folder(name: "0")
        context.insert(counter)
        for index in 0..<Self.notes { context.insert(Note.titled("item \(index)")) }
        try context.save()
        for value in [1, 2, 4999, 5000] {
            counter.name = "\(value)"
            try context.save()
        }
        let store = StoreFiles.store(container)
        // Closed segments hold their records only; the active one's reserved space is not part of the state.
        try store.sync()
        before = StoreFiles.contents(of: url).filter { !$0.key.hasPrefix("LOCK") }
        olderSegments = before.keys.filter { $0.hasPrefix("segments/") }.sorted()
        try store.compact()
        try StoreFiles.close(container)
        after = StoreFiles.contents(of: url).filter { !$0.key.hasPrefix("LOCK") }
        let segments = after.keys.filter { $0.hasPrefix("segments/") }
        guard segments.count == 1, let segment = segments.first else { throw CocoaError(.fileReadCorruptFile) }
        compacted = segment
        // No save follows the compaction: its last rows record ends the segment.
        rowsEnd = after[segment]!.count
    }

    /// Writes `files` as a store directory.
    func write(_ files: [String: Data]) throws -> URL {
        let url = TemporaryStores.newURL("cut")
        for (path, bytes) in files {
            let file = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.write(to: file)
        }
        return url
    }
}

@Suite("Snapshot extent: a compaction's snapshot is used whole or not at all")
struct SnapshotExtentTests {
    /// Where the compacted segment is cut, in tenths of it: each one with `NOTEKIT_LONG_TESTS=1` (``LongTests``);
    /// bounded, five of them, still from nothing through the `rows` records (the last one holds its last tenth)
    /// to the whole segment.
    static let tenths = LongTests.isEnabled ? Array(0...10) : [0, 1, 5, 9, 10]

    /// The counter and the number of notes of a salvaged store.
    private func state(_ url: URL) throws -> (counter: [String], notes: Int) {
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        let context = ModelContext(container)
        return (try context.fetch(FetchDescriptor<Folder>()).map(\.name), try context.fetchCount(FetchDescriptor<Note>()))
    }

    @Test("A compacted segment cut at every 10% salvages into its whole state or is refused, never a made-up one")
    func cutCompactedSegment() throws {
        let store = try CompactedStore.shared.get()
        let bytes = store.after[store.compacted]!
        let noteRecords = String(decoding: bytes, as: UTF8.self).components(separatedBy: #"{"k":"rows","e":"Note""#).count - 1
        #expect(noteRecords == 3, "the notes' rows span three records: \(noteRecords)")
        for tenth in Self.tenths {
            let cut = bytes.count * tenth / 10
            var files = store.after
            files[store.compacted] = bytes.prefix(cut)
            let url = try store.write(files)
            let destination = TemporaryStores.newURL("salvaged")
            let whole = cut >= store.rowsEnd
            do {
                let report = try FileStore.salvage(from: url, to: destination)
                let salvaged = try state(destination)
                #expect(whole, "cut at \(tenth * 10)%: salvaged \(salvaged) from a partial snapshot")
                #expect(salvaged.counter == [CompactedStore.counter] && salvaged.notes == CompactedStore.notes,
                        "cut at \(tenth * 10)%: \(salvaged)")
                #expect(report.segmentsUsed == [url.appendingPathComponent(store.compacted).path])
                #expect(try StoreVerifier.verify(at: destination).ok)
            } catch let error as FileStoreError {
                #expect(!whole, "cut at \(tenth * 10)%: the whole segment was refused: \(error)")
                #expect("\(error)".contains("nothing whole"), "cut at \(tenth * 10)%: \(error)")
            }
            if !whole {
                let problems = try StoreVerifier.verify(at: url).problems
                #expect(!problems.isEmpty, "cut at \(tenth * 10)%: verify calls it healthy")
                #expect(throws: FileStoreError.self, "cut at \(tenth * 10)%: opened") {
                    _ = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
                }
            }
        }
    }

    @Test("A partial snapshot is reported by verify as such, naming the snapshot's byte and its row counts")
    func verifyNamesPartialSnapshot() throws {
        let store = try CompactedStore.shared.get()
        let bytes = store.after[store.compacted]!
        var files = store.after
        files[store.compacted] = bytes.prefix(bytes.count / 2)
        let url = try store.write(files)
        let problems = try StoreVerifier.verify(at: url).problems
        let partial = problems.filter { $0.kind == .incompleteSnapshot }
        #expect(partial.count == 1, "\(problems)")
        #expect(partial.first?.message.contains("lists \(CompactedStore.notes + 1) rows") == true, "\(problems)")
    }

    @Test("A cut compacted segment beside the older intact segments salvages from the older ones, and says so")
    func cutBesideOlderSegments() throws {
        let store = try CompactedStore.shared.get()
        let bytes = store.after[store.compacted]!
        for tenth in Self.tenths {
            let cut = bytes.count * tenth / 10
            // A copy taken while the compaction deleted the older segments, or a disk that lost the new one's tail.
            var files = store.before
            files["MANIFEST"] = store.after["MANIFEST"]
            files[store.compacted] = bytes.prefix(cut)
            let url = try store.write(files)
            let destination = TemporaryStores.newURL("salvaged")
            let report = try FileStore.salvage(from: url, to: destination)
            let salvaged = try state(destination)
            #expect(salvaged.counter == [CompactedStore.counter] && salvaged.notes == CompactedStore.notes,
                    "cut at \(tenth * 10)%: \(salvaged)")
            let used = cut >= store.rowsEnd ? [store.compacted] : store.olderSegments
            #expect(report.segmentsUsed == used.map { url.appendingPathComponent($0).path }, "cut at \(tenth * 10)%")
            #expect(try StoreVerifier.verify(at: destination).ok)
        }
    }

    @Test("A salvage while a compaction deletes the older segments is complete: a whole snapshot covers what they hold")
    func olderSegmentsBeingDeleted() throws {
        let store = try CompactedStore.shared.get()
        #expect(store.olderSegments.count >= 2, "the store has several older segments: \(store.olderSegments)")
        // The compaction has written its segment and manifest and deleted the first older segments (the one with
        // the schema among them); the later ones, records without a schema before them, are still there.
        for deleted in 1..<store.olderSegments.count {
            var files = store.after
            for segment in store.olderSegments.dropFirst(deleted) { files[segment] = store.before[segment] }
            let url = try store.write(files)
            let destination = TemporaryStores.newURL("salvaged")
            let report = try FileStore.salvage(from: url, to: destination)
            #expect(report.isComplete, "\(deleted) deleted: \(report.skippedRecords.prefix(2)) \(report.skippedBytes.prefix(2))")
            let salvaged = try state(destination)
            #expect(salvaged.counter == [CompactedStore.counter] && salvaged.notes == CompactedStore.notes,
                    "\(deleted) deleted: \(salvaged)")
            #expect(report.segmentsUsed == [url.appendingPathComponent(store.compacted).path])
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: destination)
        }
    }

    @Test("A copy whose manifest names only segments that are gone salvages from the older intact segments")
    func manifestNamesMissingSegments() throws {
        let store = try CompactedStore.shared.get()
        var files = store.before
        files["MANIFEST"] = store.after["MANIFEST"]
        let url = try store.write(files)
        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination)
        let salvaged = try state(destination)
        #expect(salvaged.counter == [CompactedStore.counter] && salvaged.notes == CompactedStore.notes, "\(salvaged)")
        #expect(report.segmentsUsed == store.olderSegments.map { url.appendingPathComponent($0).path })
        #expect(report.skippedBytes.contains { $0.file.hasSuffix(store.compacted) && $0.reason.contains("missing") })
    }
}
