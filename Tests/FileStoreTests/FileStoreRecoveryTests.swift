import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

@Suite("File store: recovery from torn tails and damage")
struct FileStoreRecoveryTests {
    /// A closed store with one note per transaction: titles "t1", "t2", "t3".
    private func threeTransactions() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        for title in ["t1", "t2", "t3"] {
            context.insert(Note.titled(title))
            try context.save()
        }
        try StoreFiles.close(container)
        return url
    }

    private func titles(_ url: URL, _ configure: (inout FileStoreConfiguration) -> Void = { _ in }) throws -> [String] {
        let container = try StoreFiles.open(url, NotesSchema.models, configure: configure)
        defer { try? StoreFiles.close(container) }
        let context = ModelContext(container)
        return try context.fetch(FetchDescriptor<Note>()).map(\.title)
    }

    /// Every offset with `NOTEKIT_LONG_TESTS=1`; bounded, the first and last digits of the record's length and
    /// checksum and the spaces after them, its middle, its end and every 61st offset
    /// (``LongTests/offsets(_:records:variable:stride:)``).
    @Test("Truncating the last record at every byte offset reopens with exactly the earlier transactions")
    func truncationAtEveryOffset() throws {
        let original = try threeTransactions()
        let segment = StoreFiles.segment(original)
        let offsets = try StoreFiles.recordOffsets(segment)
        let bytes = try Data(contentsOf: segment)
        let lastStart = offsets.last!
        #expect(offsets.count == 5, "segment, schema and three transactions")
        for cut in LongTests.offsets(lastStart...bytes.count, records: [lastStart..<bytes.count]).dropLast() {
            let copy = try StoreFiles.copy(original)
            try bytes.prefix(cut).write(to: StoreFiles.segment(copy))
            #expect(try titles(copy) == ["t1", "t2"], "cut at \(cut)")
            let kept = try Data(contentsOf: StoreFiles.segment(copy))
            #expect(kept == bytes.prefix(lastStart), "the segment is cut back to the last intact record")
            if cut > lastStart {
                let quarantine = copy.appendingPathComponent("quarantine/000001.seg.at-\(lastStart).torn")
                #expect(try Data(contentsOf: quarantine) == bytes[lastStart..<cut], "the torn bytes are kept aside")
            }
            // The store accepts new writes after recovering.
            let container = try StoreFiles.open(copy, NotesSchema.models)
            let context = ModelContext(container)
            context.insert(Note.titled("t4"))
            try context.save()
            try StoreFiles.close(container)
            #expect(try titles(copy) == ["t1", "t2", "t4"])
            try FileManager.default.removeItem(at: copy)
        }
        #expect(try titles(original) == ["t1", "t2", "t3"])
    }

    @Test("A checksum failure in the last record, with nothing after it, is a torn tail too")
    func corruptLastRecord() throws {
        let url = try threeTransactions()
        let segment = StoreFiles.segment(url)
        var bytes = try Data(contentsOf: segment)
        let last = try StoreFiles.recordOffsets(segment).last!
        bytes[last + 30] ^= 0x01
        try bytes.write(to: segment)
        let container = try StoreFiles.open(url, NotesSchema.models)
        let store = StoreFiles.store(container)
        #expect(store.recovery.tornTail?.offset == last)
        #expect(store.recovery.tornTail?.reason == "checksum mismatch")
        #expect(try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.title) == ["t1", "t2"])
    }

    @Test("A flipped byte in an earlier record refuses the open, names the offset, and writes nothing")
    func flippedByte() throws {
        let url = try threeTransactions()
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        var bytes = try Data(contentsOf: segment)
        bytes[offsets[3] + 25] ^= 0x20
        try bytes.write(to: segment)
        let before = StoreFiles.contents(of: url)
        do {
            _ = try StoreFiles.open(url, NotesSchema.models)
            Issue.record("a damaged record in the middle must refuse the open")
        } catch let FileStoreError.damagedRecord(file, offset, kind, reason) {
            #expect(file.hasSuffix("segments/000001.seg") && offset == offsets[3])
            #expect(kind == .checksumMismatch)
            #expect(reason.contains("checksum mismatch") && reason.contains("intact records follow"))
        }
        #expect(StoreFiles.contents(of: url) == before, "a refused open writes nothing")

        // A read-only open in point-in-time mode loads what precedes the damage, and reports it.
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.mode = .readOnly
            $0.recovery = .pointInTime
        }
        #expect(try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.title) == ["t1"])
        guard case .damagedRecord(_, let offset, .checksumMismatch, _)? = StoreFiles.store(container).recovery.damage
        else {
            Issue.record("the damage is reported")
            return
        }
        #expect(offset == offsets[3])
        #expect(StoreFiles.contents(of: url) == before)
    }

    @Test("Damage in a segment that is not the last is never taken for a torn tail")
    func damageInEarlierSegment() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.maximumSegmentSize = 200 }
            let context = ModelContext(container)
            for title in ["a", "b", "c", "d"] {
                context.insert(Note.titled(title))
                try context.save()
            }
            try StoreFiles.close(container)
        }
        let first = StoreFiles.segment(url, 1)
        var bytes = try Data(contentsOf: first)
        bytes.removeLast(5)
        try bytes.write(to: first)
        #expect {
            _ = try StoreFiles.open(url, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.damagedRecord(file, _, kind, reason) = error else { return false }
            return file.hasSuffix("000001.seg") && kind == .truncated && reason.contains("not the last")
        }
    }

    @Test("An unknown format version is refused, naming the versions this build reads")
    func unknownVersion() throws {
        let url = try threeTransactions()
        let segment = StoreFiles.segment(url)
        var text = try Data(contentsOf: segment)
        text.replaceSubrange(0..<9, with: Data("NOTEKIT/9".utf8))
        try text.write(to: segment)
        let before = StoreFiles.contents(of: url)
        #expect(throws: FileStoreError.unsupportedFormatVersion(file: segment.path, found: 9, supported: [1, 2])) {
            _ = try StoreFiles.open(url, NotesSchema.models)
        }
        #expect(StoreFiles.contents(of: url) == before)
        #expect(FileStoreError.unsupportedFormatVersion(file: "x", found: 9, supported: [1]).description
                == "x is in store format version 9; this build reads version 1")

        let manifest = url.appendingPathComponent("MANIFEST")
        var manifestBytes = try Data(contentsOf: manifest)
        manifestBytes.replaceSubrange(0..<9, with: Data("NOTEKIT/3".utf8))
        try manifestBytes.write(to: manifest)
        #expect(throws: FileStoreError.unsupportedFormatVersion(file: manifest.path, found: 3, supported: [1, 2])) {
            _ = try StoreFiles.open(url, NotesSchema.models)
        }
    }

    @Test("Leftovers of interrupted operations are removed at a writable open, and only then")
    func leftovers() throws {
        let url = try threeTransactions()
        let orphanSegment = StoreFiles.segment(url, 7)
        try Data("NOTEKIT/1 segment\n".utf8).write(to: orphanSegment)
        let temporaryManifest = url.appendingPathComponent("MANIFEST.tmp")
        try Data("half a manifest".utf8).write(to: temporaryManifest)
        let partialBlob = url.appendingPathComponent("blobs/." + String(repeating: "b", count: 64) + ".partial")
        try Data([1, 2]).write(to: partialBlob)
        let orphanBlob = url.appendingPathComponent("blobs/" + String(repeating: "a", count: 64) + ".blob")
        try Data([3]).write(to: orphanBlob)

        let before = StoreFiles.contents(of: url)
        let reader = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        #expect(StoreFiles.contents(of: url) == before, "a read-only open removes nothing")
        _ = reader

        let container = try StoreFiles.open(url, NotesSchema.models)
        let removed = Set(StoreFiles.store(container).recovery.removedLeftovers.map { URL(fileURLWithPath: $0).lastPathComponent })
        #expect(removed == ["MANIFEST.tmp", "000007.seg", partialBlob.lastPathComponent])
        for file in [orphanSegment, temporaryManifest, partialBlob, orphanBlob] {
            #expect(!FileManager.default.fileExists(atPath: file.path))
        }
        // A blob no object references is retired, for readers that might hold an object naming it.
        let retired = try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("blobs").path)
            .filter { $0.hasPrefix("retired-") && $0.hasSuffix("-" + String(repeating: "a", count: 64)) }
        #expect(retired.count == 1)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == 3)
    }

    @Test("A creation killed before its first manifest, at any byte of segment 1, leaves a store that opens empty")
    func interruptedCreation() throws {
        // What creating a store writes before its manifest: segment 1 with its segment and schema records.
        let created = TemporaryStores.newURL()
        try StoreFiles.close(StoreFiles.open(created, NotesSchema.models))
        let segment = try Data(contentsOf: StoreFiles.segment(created))
        let manifest = try Data(contentsOf: created.appendingPathComponent("MANIFEST"))
        let offsets = try StoreFiles.recordOffsets(StoreFiles.segment(created))
        let cuts = Set(Array(stride(from: 0, to: segment.count, by: 97)) + offsets + offsets.map { $0 + 20 }
                       + [1, 17, 18, segment.count - 1, segment.count])
        for cut in cuts.sorted() {
            // As the kill test left it: LOCK, an empty blobs/, part of segment 1, perhaps a whole MANIFEST.tmp.
            let url = TemporaryStores.newURL("interrupted")
            try FileManager.default.createDirectory(at: url.appendingPathComponent("segments"),
                                                    withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: url.appendingPathComponent("blobs"), withIntermediateDirectories: true)
            try Data().write(to: url.appendingPathComponent("LOCK"))
            try segment.prefix(cut).write(to: StoreFiles.segment(url))
            if cut == segment.count { try manifest.write(to: url.appendingPathComponent("MANIFEST.tmp")) }

            let container = try StoreFiles.open(url, NotesSchema.models)
            let removed = StoreFiles.store(container).recovery.removedLeftovers.map { URL(fileURLWithPath: $0).lastPathComponent }
            #expect(removed == ["000001.seg"] + (cut == segment.count ? ["MANIFEST.tmp"] : []), "cut at \(cut)")
            let context = ModelContext(container)
            #expect(try context.fetchCount(FetchDescriptor<Note>()) == 0)
            context.insert(Note.titled("first"))
            try context.save()
            try StoreFiles.close(container)
            #expect(try titles(url) == ["first"], "cut at \(cut)")
            #expect(try StoreVerifier.verify(at: url).ok)
            try FileManager.default.removeItem(at: url)
        }
    }

    @Test("Segments without a manifest that hold more than a creation writes are refused, and nothing is written")
    func segmentsWithoutManifest() throws {
        // A committed transaction: a store that lost its manifest is damage, not an interrupted creation.
        let withTransaction = try threeTransactions()
        try FileManager.default.removeItem(at: withTransaction.appendingPathComponent("MANIFEST"))
        // A blob: only a save writes one, after the manifest exists.
        let withBlob = TemporaryStores.newURL()
        try StoreFiles.close(StoreFiles.open(withBlob, NotesSchema.models))
        try FileManager.default.removeItem(at: withBlob.appendingPathComponent("MANIFEST"))
        try Data([1]).write(to: withBlob.appendingPathComponent("blobs/" + String(repeating: "b", count: 64) + ".blob"))
        // A second segment: only rotation or compaction writes one.
        let withTwoSegments = TemporaryStores.newURL()
        try StoreFiles.close(StoreFiles.open(withTwoSegments, NotesSchema.models))
        try FileManager.default.removeItem(at: withTwoSegments.appendingPathComponent("MANIFEST"))
        try FileManager.default.copyItem(at: StoreFiles.segment(withTwoSegments), to: StoreFiles.segment(withTwoSegments, 2))

        for url in [withTransaction, withBlob, withTwoSegments] {
            let before = StoreFiles.contents(of: url)
            #expect(throws: FileStoreError.inconsistentSegments(
                file: url.appendingPathComponent("MANIFEST").path, kind: .manifestMissing,
                reason: "the manifest is missing but segments exist")) {
                _ = try StoreFiles.open(url, NotesSchema.models)
            }
            #expect(StoreFiles.contents(of: url) == before, "a refused open writes nothing")
        }
    }

    @Test("A missing, duplicated or foreign segment is refused")
    func inconsistentSegments() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.maximumSegmentSize = 200 }
            let context = ModelContext(container)
            for title in ["a", "b", "c"] {
                context.insert(Note.titled(title))
                try context.save()
            }
            try StoreFiles.close(container)
        }
        let missing = try StoreFiles.copy(url)
        try FileManager.default.removeItem(at: StoreFiles.segment(missing, 2))
        #expect {
            _ = try StoreFiles.open(missing, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.inconsistentSegments(file, kind, _) = error else { return false }
            return kind == .segmentMissing && file.hasSuffix("000002.seg")
        }

        let swapped = try StoreFiles.copy(url)
        let two = try Data(contentsOf: StoreFiles.segment(swapped, 2))
        try Data(contentsOf: StoreFiles.segment(swapped, 3)).write(to: StoreFiles.segment(swapped, 2))
        try two.write(to: StoreFiles.segment(swapped, 3))
        #expect {
            _ = try StoreFiles.open(swapped, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.inconsistentSegments(file, kind, reason) = error else { return false }
            return file.hasSuffix("000002.seg") && kind == .segmentNumberMismatch
                && reason.contains("says it is segment 3")
        }

        let foreign = try threeTransactions()
        let mixed = try StoreFiles.copy(url)
        try Data(contentsOf: StoreFiles.segment(foreign, 1)).write(to: StoreFiles.segment(mixed, 1))
        #expect {
            _ = try StoreFiles.open(mixed, NotesSchema.models)
        } throws: { error in
            guard case let FileStoreError.inconsistentSegments(_, kind, reason) = error else { return false }
            return kind == .segmentOfAnotherStore && reason.contains("belongs to store")
        }
    }

    @Test("Salvage copies every intact transaction into a new store and reports what it left out")
    func salvage() throws {
        let url = try threeTransactions()
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        var bytes = try Data(contentsOf: segment)
        bytes[offsets[3] + 25] ^= 0x20   // t2's record
        try bytes.write(to: segment)
        let before = StoreFiles.contents(of: url)

        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination)
        #expect(StoreFiles.contents(of: url) == before, "salvage never touches the source")
        #expect(report.transactionsKept == 2 && report.objectsKept == 2)
        #expect(report.skippedBytes.count == 1 && report.skippedBytes[0].offset == offsets[3])
        #expect(!report.isComplete)
        #expect(try titles(destination) == ["t1", "t3"])
    }

    @Test("A read-only open works on a copy the process may not write, and refuses saves")
    func readOnlyCopy() throws {
        let url = try threeTransactions()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        let context = ModelContext(container)
        #expect(try context.fetchCount(FetchDescriptor<Note>()) == 3)
        context.insert(Note())
        #expect(throws: SaveError.readOnly(reason: "\(url.path) was opened read-only")) { try context.save() }
        #expect(context.hasChanges)
    }
}
