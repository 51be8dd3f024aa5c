import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing

/// Every read path pins what it reads (docs/FORMAT.md, *Reading while another process writes*): a manifest
/// replaced and a segment removed between the reader's manifest read and its segment read is another process's
/// compaction, not damage; a store that stays damaged while nothing changes it is still reported as damaged.
@Suite("Readers: a consistent snapshot, never false damage")
struct ReaderSnapshotTests {
    static let entries = 40

    /// What a read path found wrong, when it reports instead of throwing (verify, salvage) or reads the wrong state.
    struct ReadFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// The read paths of the store: what `notekit` and an app's read-only open run.
    enum ReadPath: String, CaseIterable, CustomStringConvertible, Sendable {
        case readOnlyOpen, refresh, verify, stats, dump, schema, history, migrationSession, openForWriting, salvage

        var description: String { rawValue }

        /// Sets up what the read needs first (for `refresh`, a reader opened before the last saves, through
        /// `fileSystem`) and returns the read, which throws when it meets damage or reads the wrong state.
        func prepare(_ url: URL, fileSystem: any StoreFileSystem) throws -> () throws -> Void {
            let expected = ReaderSnapshotTests.entries
            func expectRows(_ count: Int?) throws {
                guard count == expected else { throw ReadFailure(description: "read \(count ?? -1) rows, not \(expected)") }
            }
            switch self {
            case .readOnlyOpen:
                return {
                    let configuration = FileStoreConfiguration(url: url, mode: .readOnly, fileSystem: fileSystem)
                    let container = try ModelContainer(for: Schema(CompactionRace.models), configurations: [configuration])
                    try expectRows(try ModelContext(container).fetchCount(FetchDescriptor<RaceEntry>()))
                }
            case .refresh:
                let reader = try StoreInspector.openReadOnly(at: url, fileSystem: fileSystem)
                let before = reader.statistics.lastTransactionNumber
                try ReaderSnapshotTests.save(url, times: 3)
                return {
                    let picked = try reader.refresh()
                    guard picked.map(\.number) == [before + 1, before + 2, before + 3] else {
                        throw ReadFailure(description: "picked up \(picked.map(\.number)) after \(before)")
                    }
                    try expectRows(reader.statistics.rowsPerEntity["RaceEntry"])
                }
            case .verify:
                return {
                    let report = try StoreVerifier.verify(at: url, fileSystem: fileSystem)
                    guard report.ok else { throw ReadFailure(description: "\(report.problems)") }
                }
            case .stats:
                return { try expectRows(try StoreInspector.statistics(at: url, fileSystem: fileSystem).entities["RaceEntry"]) }
            case .dump:
                return {
                    var lines = 0
                    try StoreInspector.dump(try StoreInspector.openReadOnly(at: url, fileSystem: fileSystem)) { _ in lines += 1 }
                    try expectRows(lines)
                }
            case .schema:
                return {
                    let schemas = try StoreInspector.schemaHistory(at: url, fileSystem: fileSystem)
                    guard schemas.count == 1 else { throw ReadFailure(description: "\(schemas.count) schemas") }
                }
            case .history:
                return {
                    let history = try StoreInspector.openReadOnly(at: url, fileSystem: fileSystem).history()
                    guard !history.records.isEmpty else { throw ReadFailure(description: "no history") }
                }
            case .migrationSession:
                return {
                    let configuration = FileStoreConfiguration(url: url, mode: .readOnly, fileSystem: fileSystem)
                    let session = try FileStoreMigrationSession(configuration: configuration)
                    defer { session.end() }
                    guard session.storedSchemaHistory.count == 1 else {
                        throw ReadFailure(description: "\(session.storedSchemaHistory.count) schemas")
                    }
                }
            case .openForWriting:
                return {
                    let store = try StoreInspector.openForWriting(at: url, fileSystem: fileSystem)
                    defer { try? store.close() }
                    try expectRows(store.statistics.rowsPerEntity["RaceEntry"])
                }
            case .salvage:
                return {
                    let report = try FileStore.salvage(from: url, to: TemporaryStores.newURL("salvaged"),
                                                       fileSystem: fileSystem)
                    guard report.isComplete else { throw ReadFailure(description: "\(report)") }
                    try expectRows(report.objectsKept)
                }
            }
        }
    }

    /// A store of ``entries`` rows over several segments (the saves after its creation rotate).
    static func makeStore() throws -> URL {
        let url = TemporaryStores.newURL("pinned")
        try CompactionRace.create(at: url, entries: entries)
        try save(url, times: 3)
        return url
    }

    /// `times` saves of a few rows each, by an open for writing that is closed again.
    static func save(_ url: URL, times: Int) throws {
        let container = try ModelContainer(for: Schema(CompactionRace.models),
                                           configurations: [CompactionRace.configuration(url)])
        let context = ModelContext(container)
        let entries = try context.fetch(FetchDescriptor<RaceEntry>(sortBy: [SortDescriptor(\.number)]))
        for save in 0..<times {
            for entry in entries.prefix(8) {
                entry.revision += 1
                entry.body = String(repeating: "saved \(save) ", count: 200)
            }
            try context.save()
        }
        try StoreFiles.close(container)
    }

    /// What another process's `notekit compact` does: open for writing, compact, close.
    static func compactElsewhere(_ url: URL) throws {
        let store = try StoreInspector.openForWriting(at: url)
        try store.compact()
        try store.close()
    }

    static func segmentFiles(_ url: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("segments").path).sorted()
    }

    @Test("A compaction between the manifest read and the segment reads is not damage", arguments: ReadPath.allCases)
    func compactionBetweenManifestAndSegments(_ path: ReadPath) throws {
        let url = try Self.makeStore()
        let racing = InterleavingFileSystem()
        let read = try path.prepare(url, fileSystem: racing)
        let before = try Self.segmentFiles(url)
        #expect(before.count > 1, "the store has several segments")
        // Just before the reader's first segment read, after its manifest read: the manifest is replaced and every
        // segment it listed is removed.
        racing.interleave(beforeReadsOf: url.path + "/segments/") { try Self.compactElsewhere(url) }
        try read()
        #expect(racing.interleavings == 1)
        #expect(Set(try Self.segmentFiles(url)).isDisjoint(with: before), "the segments the reader first saw are gone")
    }

    @Test("A rotation between the manifest read and the segment reads keeps what was read: no second attempt")
    func rotationIsNoReasonToReadAgain() throws {
        let url = try Self.makeStore()
        let calls = FaultyFileSystem()
        let racing = InterleavingFileSystem(base: calls)
        // Another process saves past the segment size: a new manifest lists one more segment, none fewer.
        racing.interleave(beforeReadsOf: url.path + "/segments/") { try Self.save(url, times: 1) }
        let before = try Self.segmentFiles(url)
        let report = try StoreVerifier.verify(at: url, fileSystem: racing)
        #expect(report.ok, "\(report.problems)")
        #expect(try Self.segmentFiles(url).count == before.count + 1, "the save rotated")
        let manifestReads = calls.calls.filter { $0.operation == .read && $0.path.hasSuffix("/MANIFEST") }.count
        #expect(manifestReads == 2, "one look before the read and one after: \(manifestReads) reads of the manifest")
    }

    @Test("A store that stays damaged while nothing changes it is still reported as damaged",
          arguments: ReadPath.allCases)
    func stableDamageIsReported(_ path: ReadPath) throws {
        let url = try Self.makeStore()
        let read = try path.prepare(url, fileSystem: POSIXFileSystem())
        // The last segment the manifest lists is gone, and nothing replaces the manifest.
        let last = try #require(try Self.segmentFiles(url).last)
        try FileManager.default.removeItem(at: url.appendingPathComponent("segments/" + last))
        let error = try #require(throws: (any Error).self) { try read() }
        if case .storeKeptChanging? = error as? FileStoreError {
            Issue.record("a stable store was taken for one that keeps changing: \(error)")
        }
        #expect("\(error)".contains(last), "the damage names the missing segment: \(error)")
    }

    @Test("A reader that meets another compaction at every attempt gives up with storeKeptChanging, not damage")
    func keepsChanging() throws {
        let url = try Self.makeStore()
        let racing = InterleavingFileSystem()
        racing.interleave(beforeReadsOf: url.path + "/segments/", times: nil) { try Self.compactElsewhere(url) }
        var configuration = FileStoreConfiguration(url: url, mode: .readOnly, fileSystem: racing)
        configuration.readRetryTimeout = 0.2
        let started = ContinuousClock.now
        let error = try #require(throws: FileStoreError.self) {
            _ = try ModelContainer(for: Schema(CompactionRace.models), configurations: [configuration])
        }
        guard case let .storeKeptChanging(path, attempts, _) = error else {
            Issue.record("expected storeKeptChanging, got \(error)")
            return
        }
        #expect(path == url.path)
        #expect(attempts >= 2 && racing.interleavings >= attempts, "each attempt met a compaction")
        #expect(ContinuousClock.now - started < .seconds(5), "bounded by the configured 0.2 seconds (and one attempt)")
        #expect("\(error)".contains("readRetryTimeout"), "the message says what to change: \(error)")
    }

    @Test("A damaged read that the next attempt does not repeat, over an unchanged manifest, is not reported")
    func damageMustRepeat() throws {
        let url = try Self.makeStore()
        let last = url.appendingPathComponent("segments/" + (try #require(try Self.segmentFiles(url).last)))
        let aside = url.appendingPathComponent("aside")
        // The reader's first read of the last segment finds it gone (moved away, as a backup tool might); it is
        // back at the reader's next read of any file. The manifest never changes.
        let moved = Mutex(0)
        let racing = InterleavingFileSystem()
        racing.interleave(beforeReadsOf: url.path, times: nil) { path in
            try moved.withLock { moved in
                if moved == 0, path == last.path {
                    try FileManager.default.moveItem(at: last, to: aside)
                    moved = 1
                } else if moved == 1 {
                    try FileManager.default.moveItem(at: aside, to: last)
                    moved = 2
                }
            }
        }
        let configuration = FileStoreConfiguration(url: url, mode: .readOnly, fileSystem: racing)
        let store = try FileStore(configuration: configuration, schema: Schema(CompactionRace.models))
        #expect(moved.withLock { $0 } == 2, "the segment was missing once")
        #expect(store.statistics.rowsPerEntity["RaceEntry"] == Self.entries)
    }

    @Test("A reader takes no lock, and reads while a writer holds the store open")
    func readersTakeNoLock() throws {
        let url = try Self.makeStore()
        let writer = try ModelContainer(for: Schema(CompactionRace.models),
                                        configurations: [CompactionRace.configuration(url)])
        defer { try? StoreFiles.close(writer) }
        let faulty = FaultyFileSystem()
        for path in ReadPath.allCases where path != .openForWriting && path != .refresh {
            try path.prepare(url, fileSystem: faulty)()
        }
        #expect(!faulty.calls.contains { $0.operation == .lock && $0.path.hasPrefix(url.path + "/") },
                "no read path took the store's lock")
    }
}
