import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Testing

// Issue 17, item 2 (W1's peak memory): an open that replays the log decodes each record as the scan finds it and
// lets the bytes behind it go, so it holds about one piece (`SegmentScan.piece`) or one record of segment text at a
// time, never a whole segment, with the same records applied and the same damage found as a whole-file scan.

final class StreamedNote: PersistentModel {
    @Attribute var number = 0
    @Attribute var body = ""

    required init() {}
}

enum StreamedStore {
    /// Notes of about 100 KB each, saved `perSave` at a time (a record of ~`perSave` × 100 KB each save).
    static let noteLength = 100_000

    /// A store of `saves` × `perSave` notes, never compacted: the log is all transactions.
    static func make(saves: Int, perSave: Int = 8, maximumSegmentSize: Int? = nil,
                     url: URL = TemporaryStores.newURL()) throws -> URL {
        let container = try StoreFiles.open(url, [StreamedNote.self]) {
            $0.automaticCompaction = nil
            if let maximumSegmentSize { $0.maximumSegmentSize = maximumSegmentSize }
        }
        let context = ModelContext(container)
        for save in 0..<saves {
            for n in 0..<perSave {
                let note = StreamedNote()
                note.number = save * perSave + n
                note.body = body(of: note.number)
                context.insert(note)
            }
            try context.save()
        }
        try StoreFiles.close(container)
        return url
    }

    /// The body of note `number`: `noteLength` times one letter, `a` to `z` by number.
    static func body(of number: Int) -> String {
        String(repeating: String(UnicodeScalar(UInt8(97 + number % 26))), count: noteLength)
    }

    static func layout(_ url: URL) -> StoreLayout { StoreLayout(root: url.path) }

    /// The manifest's first segment: its number and path.
    static func firstSegment(_ url: URL) throws -> (number: Int, path: String) {
        let number = try manifest(url).segments[0]
        return (number, layout(url).segment(number))
    }

    static func manifest(_ url: URL) throws -> Manifest {
        try SegmentLog.readManifest(layout: layout(url), fileSystem: POSIXFileSystem())
    }

    /// The longest record frame (header, payload, newline) of the manifest's segments, read whole.
    static func largestRecord(_ url: URL) throws -> Int {
        try manifest(url).segments.map { number in
            try SegmentScan.read(layout(url).segment(number), number: number, fileSystem: POSIXFileSystem())
                .records.map { RecordFrame.headerLength + $0.count + 1 }.max() ?? 0
        }.max() ?? 0
    }

    /// The replay an open does.
    static func replay(_ url: URL, policy: LogReplay.Policy = .strict) throws -> LogReplay {
        try LogReplay.replay(manifest(url), layout: layout(url), fileSystem: POSIXFileSystem(), blobs: nil,
                             policy: policy)
    }

    static func segmentSize(_ url: URL, _ number: Int) throws -> Int {
        try POSIXFileSystem().status(layout(url).segment(number))?.size ?? 0
    }
}

@Suite("Replay streams the log")
struct StreamingReplayTests {
    @Test("Replay: a segment of more than three pieces is held a piece and a record at a time, not whole")
    func oneLargeSegment() throws {
        let url = try StreamedStore.make(saves: 36)
        defer { try? FileManager.default.removeItem(at: url) }
        let manifest = try StreamedStore.manifest(url)
        #expect(manifest.segments.count == 1)
        let size = try StreamedStore.segmentSize(url, manifest.segments[0])
        #expect(size > 3 * SegmentScan.piece)
        let bound = SegmentScan.piece + (try StreamedStore.largestRecord(url))
        let replay = try StreamedStore.replay(url)
        #expect(replay.heldSegmentBytes <= bound, "held \(replay.heldSegmentBytes) of a \(size)-byte segment")
        #expect(replay.heldSegmentBytes > 0)
        #expect(replay.rowCount == 36 * 8)
        #expect(replay.lastTransactionNumber == 36)
        #expect(replay.tornTail == nil)
        // The open itself sees every note, bodies whole.
        let container = try StoreFiles.open(url, [StreamedNote.self])
        let notes = try ModelContext(container).fetch(FetchDescriptor<StreamedNote>(sortBy: [SortDescriptor(\.number)]))
        #expect(notes.count == 36 * 8)
        #expect(notes.allSatisfy { $0.body.utf8.count == StreamedStore.noteLength })
        // Typed step by step: as one expression of literals, this line took the type checker two seconds.
        let lastNote: Int = 36 * 8 - 1
        let lastLetter = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(lastNote % 26)))
        #expect(notes.last?.body.first == lastLetter)
    }

    @Test("Replay: a save larger than a piece gives its decoded text back while its rows are read, not after")
    func oneLargeRecord() throws {
        // One save of 200 notes of 100 KB: a single 20 MB transaction record, which a replay must hold to decode.
        let url = try StreamedStore.make(saves: 1, perSave: 200)
        defer { try? FileManager.default.removeItem(at: url) }
        let record = try StreamedStore.largestRecord(url)
        #expect(record > 4 * SegmentScan.releaseStep)
        let replay = try StreamedStore.replay(url)
        #expect(replay.rowCount == 200)
        #if os(Linux)
        // All of it but the last stretch (at most a release step and a page each side) goes back while decoding.
        #expect(replay.givenBackRecordBytes >= record - 2 * SegmentScan.releaseStep,
                "gave back \(replay.givenBackRecordBytes) bytes of a \(record)-byte record")
        #endif
        // The rows decoded from the pages given back are whole.
        let container = try StoreFiles.open(url, [StreamedNote.self])
        defer { try? StoreFiles.close(container) }
        let notes = try ModelContext(container).fetch(FetchDescriptor<StreamedNote>(sortBy: [SortDescriptor(\.number)]))
        #expect(notes.map(\.number) == Array(0..<200))
        // Compared as strings (one memory comparison each), not byte by byte: 20 MB took seconds of a debug build.
        #expect(notes.allSatisfy { $0.body == StreamedStore.body(of: $0.number) })
    }

    @Test("Replay: across several segments, each of more than a piece, no segment is held whole")
    func severalSegments() throws {
        let url = try StreamedStore.make(saves: 45, maximumSegmentSize: 3 * SegmentScan.piece / 2)
        defer { try? FileManager.default.removeItem(at: url) }
        let manifest = try StreamedStore.manifest(url)
        #expect(manifest.segments.count >= 3)
        let sizes = try manifest.segments.map { try StreamedStore.segmentSize(url, $0) }
        let bound = SegmentScan.piece + (try StreamedStore.largestRecord(url))
        let replay = try StreamedStore.replay(url)
        #expect(replay.heldSegmentBytes <= bound, "held \(replay.heldSegmentBytes) of segments of \(sizes) bytes")
        #expect(replay.rowCount == 45 * 8)
        #expect(replay.lastTransactionNumber == 45)
        // The sizes the writable open appends after are where each segment's last record ends.
        for number in manifest.segments {
            let whole = try SegmentScan.read(StreamedStore.layout(url).segment(number), number: number,
                                             fileSystem: POSIXFileSystem())
            #expect(replay.segmentSizes[number] == whole.end)
        }
    }

    @Test("Replay: a torn tail after more than three pieces is found where the whole-file scan finds it, and cut there")
    func tornTailAfterPieces() throws {
        let url = try StreamedStore.make(saves: 36)
        defer { try? FileManager.default.removeItem(at: url) }
        let (number, path) = try StreamedStore.firstSegment(url)
        let intact = try SegmentScan.read(path, number: number, fileSystem: POSIXFileSystem()).end
        // A save cut short: the start of a record frame, then nothing. Reserved space is cut off first.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(intact))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("00012345 1234abcd {\"kind\":\"transaction\"".utf8))
        try handle.close()
        let replay = try StreamedStore.replay(url)
        let whole = try SegmentScan.read(path, number: number, fileSystem: POSIXFileSystem())
        #expect(replay.heldSegmentBytes <= SegmentScan.piece + (try StreamedStore.largestRecord(url)))
        #expect(replay.tornTail?.offset == intact)
        #expect(replay.tornTail?.offset == whole.tail?.offset)
        #expect(replay.tornTail?.length == whole.fileSize - intact)
        #expect(replay.rowCount == 36 * 8)
        let container = try StoreFiles.open(url, [StreamedNote.self])
        #expect(StoreFiles.store(container).recovery.tornTail?.offset == intact)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<StreamedNote>()) == 36 * 8)
        try StoreFiles.close(container)
        #expect(try StreamedStore.segmentSize(url, number) >= intact)
    }

    @Test("Replay: damage past the third piece refuses a strict open at its offset and ends a point-in-time replay there")
    func damageAfterPieces() throws {
        let url = try StreamedStore.make(saves: 36)
        defer { try? FileManager.default.removeItem(at: url) }
        let (number, path) = try StreamedStore.firstSegment(url)
        let before = try SegmentScan.read(path, number: number, fileSystem: POSIXFileSystem())
        // A flipped byte in the payload of the first record that starts past three pieces.
        let index = try #require(before.records.firstIndex { $0.lowerBound > 3 * SegmentScan.piece })
        let damaged = before.records[index]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[damaged.lowerBound + 100] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
        let whole = try SegmentScan.read(path, number: number, fileSystem: POSIXFileSystem())
        let tail = try #require(whole.tail)
        #expect(tail.offset == damaged.lowerBound - RecordFrame.headerLength)
        #expect(throws: FileStoreError.damagedRecord(
            file: path, offset: tail.offset, kind: tail.damage,
            reason: tail.reason + " (intact records follow, so this is not a torn tail)")) {
            try StreamedStore.replay(url)
        }
        let pointInTime = try StreamedStore.replay(url, policy: .pointInTime)
        #expect(pointInTime.damage != nil)
        // Every record before the damage was applied: the segment record, the schema and `index - 2` saves.
        #expect(pointInTime.lastTransactionNumber == UInt64(index - 2))
        #expect(pointInTime.rowCount == (index - 2) * 8)
        #expect(pointInTime.heldSegmentBytes <= SegmentScan.piece + (try StreamedStore.largestRecord(url)))
    }
}

/// Reserved space is found by the first byte that is not zero after the last record (docs/FORMAT.md, *Reserved
/// space*): the search must name that byte exactly, whatever the buffer's length and alignment.
@Suite("Record framing: the first byte that is not zero")
struct FirstNonZeroTests {
    @Test("The first non-zero byte is found at every position around page boundaries, from any alignment; all zeros is none")
    func firstNonZeroAtEveryPosition() {
        let lengths = [0, 1, 7, 8, 4095, 4096, 4097, 8191, 8192, 12_289]
        var problems: [String] = []
        for shift in 0..<3 {
            for length in lengths {
                var bytes = [UInt8](repeating: 0, count: length + shift)
                let zeros = bytes.withUnsafeBytes { RecordFrame.firstNonZero(UnsafeRawBufferPointer(rebasing: $0[shift...])) }
                if zeros != nil { problems.append("\(length) zeros at shift \(shift): \(zeros!)") }
                let positions = Set([0, 1, length / 2, length - 1] + [4095, 4096, 4097, 8191, 8192, 8193].filter { $0 < length })
                for position in positions where position >= 0 && position < length {
                    bytes[shift + position] = 0x2A
                    if position + 1 < length { bytes[shift + length - 1] = 0x01 } // a later non-zero byte must not win
                    let found = bytes.withUnsafeBytes {
                        RecordFrame.firstNonZero(UnsafeRawBufferPointer(rebasing: $0[shift...]))
                    }
                    if found != position { problems.append("length \(length), shift \(shift): \(position) found as \(String(describing: found))") }
                    bytes = [UInt8](repeating: 0, count: length + shift)
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }
}
