import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

// Issue 17, items 1 and 3: the checkpoint file (docs/FORMAT.md, *Version 2*, *The checkpoint file*, *Using a
// checkpoint*): written at compaction, built from a segment byte for byte, read as a RowBase, verified.

/// A model with two declared indexes (one compound), a compound unique constraint beside a single one, a nullable
/// unique value, external storage and a relationship: every kind of section a checkpoint has.
final class CheckpointItem: PersistentModel {
    @Attribute(.unique) var code = ""
    @Attribute var title = ""
    @Attribute var rank = 0
    @Attribute var bucket = 0
    @Attribute var pinned = false
    @Attribute var created = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var serial: String?
    @Attribute(.externalStorage) var attachment: Data?
    @Relationship var group: CheckpointGroup?

    static var indexes: [[PartialKeyPath<CheckpointItem>]] { [[\.pinned, \.created], [\.bucket]] }
    static var uniqueConstraints: [[PartialKeyPath<CheckpointItem>]] { [[\.serial, \.rank]] }

    required init() {}
}

final class CheckpointGroup: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \CheckpointItem.group) var items: [CheckpointItem] = []

    static var indexes: [[PartialKeyPath<CheckpointGroup>]] { [[\.name]] }

    required init() {}
}

/// Reads through POSIX, counting the bytes read of each file.
final class CountingFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem = POSIXFileSystem()
    private let counts = Mutex<[String: Int]>([:])

    func bytesRead(_ path: String) -> Int { counts.withLock { $0[path] ?? 0 } }
    func reset() { counts.withLock { $0 = [:] } }
    private func count(_ path: String, _ bytes: [UInt8]) -> [UInt8] {
        counts.withLock { $0[path, default: 0] += bytes.count }
        return bytes
    }

    func read(_ path: String) throws -> [UInt8] { count(path, try base.read(path)) }
    func read(_ path: String, from offset: Int) throws -> [UInt8] { count(path, try base.read(path, from: offset)) }
    func read(_ path: String, from offset: Int, count n: Int) throws -> [UInt8] {
        count(path, try base.read(path, from: offset, count: n))
    }
}

enum CheckpointFixture {
    static let models: [any PersistentModel.Type] = [CheckpointItem.self, CheckpointGroup.self]
    static func schema() throws -> Schema { try Schema(models) }

    /// A closed store of 1,000 items (``store(count:compact:url:configure:)``), made once a process: a test that
    /// reads or damages such a store works on a copy of it (``copyOfShared()``) rather than making its own, which
    /// took a second or two of a debug build each time.
    private static let shared = Result { () throws -> URL in
        let (url, container) = try store(count: sharedCount)
        try StoreFiles.close(container)
        return url
    }

    /// The number of items of the shared store: a checkpoint of many pages, and few enough rows that the tests
    /// damaging copies of it and asking every answer stay quick in a debug build.
    static let sharedCount = 1_000

    /// A copy of the shared store of ``sharedCount`` items, the test's own.
    static func copyOfShared() throws -> URL { try StoreFiles.copy(shared.get()) }

    /// A store of `count` items in three groups, some updated, some deleted, with a few attachments; compacted
    /// when `compact`. History is kept (the opening then has `history` records too).
    static func store(count: Int, compact: Bool = true, url: URL = TemporaryStores.newURL(),
                      configure: (inout FileStoreConfiguration) -> Void = { _ in }) throws -> (URL, ModelContainer) {
        let container = try StoreFiles.open(url, models) {
            $0.automaticCompaction = nil
            configure(&$0)
        }
        let context = ModelContext(container)
        let groups = (0..<3).map { n in
            let group = CheckpointGroup()
            group.name = ["b", "a", "c"][n]
            context.insert(group)
            return group
        }
        var items: [CheckpointItem] = []
        for n in 0..<count {
            let item = CheckpointItem()
            item.code = "code-\(n)"
            item.title = "item \(n)"
            item.rank = n
            item.bucket = (n * 7919) % 97
            item.pinned = n % 5 == 0
            item.created = Date(timeIntervalSinceReferenceDate: Double((n * 104_729) % 1000))
            item.serial = n % 3 == 0 ? nil : "s\(n % 11)"
            if n % 400 == 1 { item.attachment = Data("attachment \(n % 800)".utf8) }
            item.group = groups[n % 3]
            context.insert(item)
            items.append(item)
        }
        try context.save()
        for item in items.prefix(count / 10) { item.title += " (edited)"; item.bucket += 1 }
        for item in items.suffix(count / 20) { try context.delete(item) }
        try context.save()
        if compact { try StoreFiles.store(container).compact() }
        return (url, container)
    }

    static func layout(_ url: URL) -> StoreLayout { StoreLayout(root: url.path) }

    /// The rows of `entity` in the store's memory, in insertion order: row number order.
    static func rows(_ container: ModelContainer, _ entity: String) throws -> [ModelSnapshot] {
        try StoreFiles.store(container).state.withLock { try $0.rows.rows(of: entity) }
    }

    static func manifest(_ url: URL) throws -> Manifest {
        try SegmentLog.readManifest(layout: layout(url), fileSystem: POSIXFileSystem())
    }

    static func open(_ url: URL, fileSystem: any StoreFileSystem = POSIXFileSystem())
        -> Result<CheckpointReader, CheckpointDamage> {
        let manifest: Manifest, schema: Schema
        do { (manifest, schema) = (try self.manifest(url), try self.schema()) } catch {
            return .failure(CheckpointDamage(file: url.path, offset: 0, reason: "\(error)"))
        }
        return CheckpointReader.open(layout: layout(url), fileSystem: fileSystem, store: manifest.store,
                                     segment: manifest.segments[0], schema: schema, blobs: nil)
    }

    static func strip(_ rows: [ModelSnapshot]) -> [ModelSnapshot] {
        rows.map { var row = $0; row.transactionNumber = 0; return row }
    }

    /// Everything a reader answers for `entity`, gathered: every row, each row's number by its key (and a key it
    /// does not hold), each index scanned whole both ways and between bounds, each unique key's holder.
    struct Answers: Equatable {
        var rows: [ModelSnapshot] = []
        var numbers: [Int?] = []
        var scans: [[Int]] = []
        var holders: [Int?] = []
    }

    static func answers(_ base: any RowBase, entity: Schema.Entity) throws -> Answers {
        var answers = Answers()
        answers.rows = strip(try base.rows(Array(0..<base.count)))
        answers.numbers = try answers.rows.map { try base.rowNumber(of: $0.id.primaryKey) }
        answers.numbers.append(try base.rowNumber(of: UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))))
        for index in entity.indexes.indices {
            for reverse in [false, true] {
                for bounds in boundsToTry(entity, index) {
                    var numbers: [Int] = []
                    try base.scanIndex(index, from: bounds.0, to: bounds.1, reverse: reverse) { _, number in
                        numbers.append(number)
                        return true
                    }
                    answers.scans.append(numbers)
                }
            }
        }
        for (constraint, properties) in entity.uniqueConstraints.enumerated() {
            let slots = properties.compactMap(entity.attributeIndex(named:))
            for row in answers.rows {
                answers.holders.append(try base.uniqueHolder(constraint, key: slots.map { row.attributes[$0] }))
            }
            answers.holders.append(try base.uniqueHolder(constraint, key: slots.map { _ in .string("absent") }))
        }
        return answers
    }

    static func boundsToTry(_ entity: Schema.Entity, _ index: Int) -> [(IndexBound?, IndexBound?)] {
        switch entity.indexes[index] {
        case ["pinned", "created"]:
            return [(nil, nil), (IndexBound(values: [.bool(true)], isInclusive: true), IndexBound(values: [.bool(true)], isInclusive: true)),
                    (IndexBound(values: [.bool(false), .date(Date(timeIntervalSinceReferenceDate: 500))], isInclusive: false), nil)]
        case ["bucket"]:
            return [(nil, nil), (IndexBound(values: [.int(10)], isInclusive: true), IndexBound(values: [.int(20)], isInclusive: false))]
        default:
            return [(nil, nil), (IndexBound(values: [.string("b")], isInclusive: true), nil)]
        }
    }

    /// The answers the store's own memory gives: rows by insertion order, the in-memory index's order, the
    /// in-memory unique map.
    static func expected(_ container: ModelContainer, entity: Schema.Entity) throws -> Answers {
        var answers = Answers()
        let rows = try self.rows(container, entity.name)
        let storage = RowStorage(schema: try schema())
        storage.load(rows, transactionNumber: 1)
        answers.rows = strip(rows)
        let number = Dictionary(uniqueKeysWithValues: rows.enumerated().map { ($1.id, $0) })
        answers.numbers = rows.indices.map { $0 } + [nil]
        for index in entity.indexes.indices {
            let slots = entity.indexes[index].compactMap(entity.attributeIndex(named:))
            for reverse in [false, true] {
                for bounds in boundsToTry(entity, index) {
                    var entries = try storage.indexEntries(of: entity.name, index: index).filter { entry in
                        if let lower = bounds.0 {
                            let c = IndexEntry.compare(entry.key, prefix: lower.values)
                            if lower.isInclusive ? c < 0 : c <= 0 { return false }
                        }
                        if let upper = bounds.1 {
                            let c = IndexEntry.compare(entry.key, prefix: upper.values)
                            if upper.isInclusive ? c > 0 : c >= 0 { return false }
                        }
                        return true
                    }
                    if reverse { entries.reverse() }
                    _ = slots
                    answers.scans.append(entries.map { number[$0.id]! })
                }
            }
        }
        for (constraint, properties) in entity.uniqueConstraints.enumerated() {
            let slots = properties.compactMap(entity.attributeIndex(named:))
            for row in rows {
                let key = slots.map { row.attributes[$0] }
                answers.holders.append(try storage.identifier(entity: entity.name, uniqueConstraint: constraint, key: key)
                    .flatMap { number[$0] })
            }
            answers.holders.append(nil)
        }
        return answers
    }
}

@Suite("Checkpoint writing")
struct CheckpointWritingTests {
    @Test("Compaction writes a checkpoint whose rows, ids, index scans and unique holders are the store's")
    func compactionWritesCheckpoint() throws {
        let (url, container) = try CheckpointFixture.store(count: 5_000)
        let reader = try CheckpointFixture.open(url).get()
        let schema = try CheckpointFixture.schema()
        #expect(reader.header.segment == (try CheckpointFixture.manifest(url)).segments[0])
        for entity in schema.entities {
            let base = try #require(reader.bases[entity.name])
            #expect(try base.count == CheckpointFixture.rows(container, entity.name).count)
            let answers = try CheckpointFixture.answers(base, entity: entity)
            let expected = try CheckpointFixture.expected(container, entity: entity)
            #expect(answers.rows == expected.rows)
            #expect(answers.numbers == expected.numbers)
            #expect(answers.scans == expected.scans)
            #expect(answers.holders == expected.holders)
        }
        // A row's transaction number is the snapshot's last transaction.
        let row = try #require(try reader.bases["CheckpointItem"]?.rows([0]).first)
        #expect(row.transactionNumber == StoreFiles.store(container).statistics.lastTransactionNumber)
        #expect(StoreFiles.store(container).statistics.lastCheckpointError == nil)
        #expect(reader.header.blobs.entries == 2)
    }

    /// A compacted fixture store of `count` items, closed: its location and the items' entity.
    static func closedItemStore(count: Int) throws -> (URL, Schema.Entity) {
        let (url, container) = try CheckpointFixture.store(count: count)
        try StoreFiles.close(container)
        let entity = try #require(try CheckpointFixture.schema().entity(named: "CheckpointItem"))
        return (url, entity)
    }

    @Test("Rows asked in any order, some more than once, come back in the order asked, each decoded once")
    func rowsInAnyOrder() throws {
        let (url, entity) = try Self.closedItemStore(count: 300)
        defer { try? FileManager.default.removeItem(at: url) }
        let one = try #require(try CheckpointFixture.open(url).get().bases[entity.name])
        let count = one.count
        #expect(count > 100)
        let single = try (0..<count).map { try #require(try one.rows([$0]).first) }
        // A fresh reader, so that no row is in its cache: the numbers descending, repeated, interleaved.
        let base = try #require(try CheckpointFixture.open(url).get().bases[entity.name])
        let last = count - 1
        let numbers = [last, 7, 50, 7, 0, last, last - 1, 1, 50, 42]
        let before = base.valuesDecoded
        #expect(try base.rows(numbers) == numbers.map { single[$0] })
        #expect(base.valuesDecoded - before == Set(numbers).count * entity.attributes.count)
        // Kept rows and new ones together, still in the order asked.
        let mixed = [3, last, 4, 7, 3]
        #expect(try base.rows(mixed) == mixed.map { single[$0] })
    }

    @Test("An index search asked again decodes no probe again: the keys its binary searches read are kept")
    func repeatedSearchDecodesNoProbe() throws {
        let (url, entity) = try Self.closedItemStore(count: 2_000)
        defer { try? FileManager.default.removeItem(at: url) }
        let base = try #require(try CheckpointFixture.open(url).get().bases[entity.name])
        // Rows read with the title alone (and the index's own attributes): partial rows, which are not kept, so
        // each search decodes its results again; what it must not decode again is what its binary searches probed.
        let title = try #require(entity.attributeIndex(named: "title"))
        let mask = entity.attributes.indices.map { $0 == title }
        for (index, key) in [(0, StoredValue.bool(true)), (1, .int(7))] {
            let slots = entity.indexes[index].count
            func search() throws -> [Int] {
                var found: [Int] = []
                try base.scanIndex(index, from: IndexBound(values: [key], isInclusive: true),
                                   to: IndexBound(values: [key], isInclusive: true), reverse: true,
                                   decoding: mask) { _, number, _ in
                    found.append(number)
                    return true
                }
                return found
            }
            let first = try search()
            #expect(first.count >= 10)
            let before = base.valuesDecoded
            #expect(try search() == first)
            #expect(base.valuesDecoded - before == first.count * (1 + slots),
                    "index \(index): the second search decoded its probes again")
        }
    }

    @Test("A checkpoint built from the segment is byte for byte the one compaction wrote",
          arguments: [0, 1, 5_000])
    func buildIsByteIdentical(count: Int) throws {
        let (url, container) = try CheckpointFixture.store(count: count) {
            if count == 1 { $0.historyRetention = .latest(0) }
        }
        let manifest = try CheckpointFixture.manifest(url)
        let layout = CheckpointFixture.layout(url)
        let written = try POSIXFileSystem().read(layout.checkpoint)
        let built = try Checkpoint.build(segment: layout.segment(manifest.segments[0]), number: manifest.segments[0],
                                         store: manifest.store, fileSystem: POSIXFileSystem())
        #expect(built == written)
        #expect(written.count % 4096 == 0)
        // Saves after the compaction append to the segment: the opening, and so the checkpoint, stays the same.
        let context = ModelContext(container)
        context.insert(CheckpointItem())
        try context.save()
        #expect(try Checkpoint.build(segment: layout.segment(manifest.segments[0]), number: manifest.segments[0],
                                     store: manifest.store, fileSystem: POSIXFileSystem()) == written)
    }

    @Test("A compaction whose checkpoint write fails still succeeds, leaves no CHECKPOINT.tmp, and says why",
          arguments: [FaultRules.Operation.create, .write, .fsync, .rename])
    func failedCheckpointWriteFailsNothing(operation: FaultRules.Operation) throws {
        let fileSystem = FaultyFileSystem()
        let (url, container) = try CheckpointFixture.store(count: 50, compact: false) { $0.fileSystem = fileSystem }
        let before = try CheckpointFixture.rows(container, "CheckpointItem")
        fileSystem.arm(FaultRules.Rule(operation, pathContaining: "CHECKPOINT"))
        try StoreFiles.store(container).compact()
        fileSystem.disarm()
        #expect(fileSystem.failureCount == 1)
        let layout = CheckpointFixture.layout(url)
        #expect(!FileManager.default.fileExists(atPath: layout.temporaryCheckpoint))
        let error = try #require(StoreFiles.store(container).statistics.lastCheckpointError)
        #expect("\(error)".contains("CHECKPOINT"))
        // The compaction is committed: one segment, and the state reopens whole.
        #expect(try CheckpointFixture.manifest(url).segments.count == 1)
        try StoreFiles.close(container)
        let reopened = try StoreFiles.open(url, CheckpointFixture.models)
        #expect(try CheckpointFixture.strip(CheckpointFixture.rows(reopened, "CheckpointItem")) == CheckpointFixture.strip(before))
    }
}

@Suite("Checkpoint reading")
struct CheckpointReadingTests {
    /// A compacted store of the test's own (a copy of ``CheckpointFixture``'s shared one), its checkpoint's bytes,
    /// and the answers of the intact checkpoint (the shared store's, asked once).
    private static func fixture() throws -> (URL, [UInt8], [CheckpointFixture.Answers]) {
        let url = try CheckpointFixture.copyOfShared()
        let (bytes, answers) = try intact.get()
        return (url, bytes, answers)
    }

    private static let intact = Result { () throws -> ([UInt8], [CheckpointFixture.Answers]) in
        let url = try CheckpointFixture.copyOfShared()
        defer { try? FileManager.default.removeItem(at: url) }
        let bytes = try POSIXFileSystem().read(CheckpointFixture.layout(url).checkpoint)
        let reader = try CheckpointFixture.open(url).get()
        let answers = try CheckpointFixture.schema().entities.map {
            try CheckpointFixture.answers(reader.bases[$0.name]!, entity: $0)
        }
        return (bytes, answers)
    }

    enum Outcome: Equatable {
        case refused(String)
        case damaged(String)
        case sameAnswers
    }

    /// Opens the (altered) checkpoint of the store at `url` and asks it everything: refused at open, damage
    /// thrown by a read, or the same answers as the intact one. A wrong answer fails the test here.
    private static func outcome(_ url: URL, expected: [CheckpointFixture.Answers],
                                sourceLocation: SourceLocation = #_sourceLocation) -> Outcome {
        let reader: CheckpointReader
        switch CheckpointFixture.open(url) {
        case .failure(let damage): return .refused(damage.reason)
        case .success(let opened): reader = opened
        }
        do {
            let answers = try CheckpointFixture.schema().entities.map {
                try CheckpointFixture.answers(reader.bases[$0.name]!, entity: $0)
            }
            #expect(answers == expected, "a damaged checkpoint gave a wrong answer", sourceLocation: sourceLocation)
            return .sameAnswers
        } catch let damage as CheckpointDamage {
            return .damaged(damage.reason)
        } catch {
            Issue.record("not a CheckpointDamage: \(error)", sourceLocation: sourceLocation)
            return .damaged("\(error)")
        }
    }

    private static func write(_ bytes: [UInt8], to url: URL) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: CheckpointFixture.layout(url).checkpoint))
    }

    /// `bytes` with its header replaced by `change` applied to it (re-framed; it must still fit page 0).
    private static func withHeader(_ bytes: [UInt8], _ change: (inout CheckpointHeader) -> Void) throws -> [UInt8] {
        var header = try CheckpointReader.readHeaderBytes(bytes)
        change(&header)
        let framed = Checkpoint.magic + Checkpoint.encodeHeader(header)
        precondition(framed.count <= 4096)
        return framed + [UInt8](repeating: 0, count: 4096 - framed.count) + bytes[4096...]
    }

    /// Recomputes the checksum of page `page` after an edit.
    private static func reseal(_ bytes: inout [UInt8], page: Int) {
        let start = page * 4096
        let crc = bytes.withUnsafeBytes {
            CRC32C.masked(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<(start + 4092)])))
        }
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange((start + 4092)..<(start + 4096), with: $0) }
    }

    @Test("Truncated at any of several lengths, the checkpoint is refused at open")
    func truncated() throws {
        let (url, bytes, expected) = try Self.fixture()
        for length in [0, 1, 20, 100, 4095, 4096, 4097, bytes.count / 2, bytes.count - 4096, bytes.count - 1] {
            try Self.write(Array(bytes.prefix(length)), to: url)
            guard case .refused = Self.outcome(url, expected: expected) else {
                Issue.record("a checkpoint cut to \(length) of \(bytes.count) bytes was not refused")
                continue
            }
        }
    }

    @Test("One flipped byte in the header or in any section is refused or reported as damage, never answered")
    func flippedBytes() throws {
        let (url, bytes, expected) = try Self.fixture()
        let header = try CheckpointReader.readHeaderBytes(bytes)
        // The header record's bytes, then a byte of each section's first and last page, and a page's checksum.
        var offsets = [0, 5, Checkpoint.magic.count + 3, Checkpoint.magic.count + 40, Checkpoint.magic.count + 200]
        // (The blobs section is for the open's cleanup, not for a RowBase: only verify reads it.)
        var blobOffsets: Set<Int> = []
        for (name, section, _) in header.sections where section.pages > 0 {
            let chosen = [section.page * 4096 + 7, (section.page + section.pages - 1) * 4096 + 1, section.page * 4096 + 4094]
            offsets += chosen
            if name == "blobs" { blobOffsets.formUnion(chosen) }
        }
        #expect(!blobOffsets.isEmpty)
        for offset in offsets {
            var flipped = bytes
            flipped[offset] ^= 0x20
            try Self.write(flipped, to: url)
            if !blobOffsets.contains(offset) {
                let outcome = Self.outcome(url, expected: expected)
                #expect(outcome != .sameAnswers, "a flipped byte at \(offset) went unnoticed")
            }
            let report = try StoreVerifier.verify(at: url)
            #expect(report.problems.map(\.kind) == [.damagedCheckpoint], "verify missed a flipped byte at \(offset)")
        }
    }

    @Test("A flipped byte of a row in the segment is reported as damage when the row is read")
    func flippedRowByte() throws {
        let (url, bytes, expected) = try Self.fixture()
        try Self.write(bytes, to: url)
        let reader = try CheckpointFixture.open(url).get()
        let base = try #require(reader.bases["CheckpointItem"])
        let layout = CheckpointFixture.layout(url)
        // Row 17's bytes, from its row table entry, flipped in the segment (the rows live there).
        let table = try #require(reader.header.entities.first { $0.name == "CheckpointItem" }).rowTable
        let entry = Array(bytes[(table.page * 4096 + 17 * 16)..<(table.page * 4096 + 17 * 16 + 16)])
        let offset = Int(entry.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) })
        let segment = URL(fileURLWithPath: layout.segment(reader.header.segment))
        var data = try Data(contentsOf: segment)
        data[offset + 10] ^= 0x01
        try data.write(to: segment)
        #expect(throws: CheckpointDamage.self) { _ = try base.rows([17]) }
        _ = try base.rows([16, 18])
        guard case .damaged(let reason) = Self.outcome(url, expected: expected) else {
            Issue.record("the damaged row was answered")
            return
        }
        #expect(reason.contains("checksum"))
    }

    @Test("A checkpoint of another format version is refused, naming the version")
    func wrongVersion() throws {
        let (url, bytes, expected) = try Self.fixture()
        var other = bytes
        other[8] = UInt8(ascii: "3")
        try Self.write(other, to: url)
        #expect(Self.outcome(url, expected: expected) == .refused("format version 3, this build reads version 2"))
    }

    @Test("A stale checkpoint (another compaction's segment of the same number, another store's) is refused")
    func stale() throws {
        let (url, bytes, expected) = try Self.fixture()
        // The same store copied before its compaction, and compacted again with one more row: segment 2 again.
        let (twinURL, twin) = try CheckpointFixture.store(count: CheckpointFixture.sharedCount, compact: false)
        let copy = try StoreFiles.copy(twinURL)
        try StoreFiles.store(twin).compact()
        try StoreFiles.close(twin)
        let reopened = try StoreFiles.open(copy, CheckpointFixture.models) { $0.automaticCompaction = nil }
        let context = ModelContext(reopened)
        context.insert(CheckpointItem())
        try context.save()
        try StoreFiles.store(reopened).compact()
        try StoreFiles.close(reopened)
        #expect(try CheckpointFixture.manifest(copy).segments == CheckpointFixture.manifest(twinURL).segments)
        let twinBytes = try POSIXFileSystem().read(CheckpointFixture.layout(twinURL).checkpoint)
        try Self.write(twinBytes, to: copy)
        guard case .refused(let reason) = CheckpointFixture.open(copy).map({ _ in Outcome.sameAnswers })
            .mapError({ $0 }).outcome else {
            Issue.record("another compaction's checkpoint of the same segment number was used")
            return
        }
        #expect(reason.contains("not the one the checkpoint describes"))
        // Another store's checkpoint.
        try Self.write(twinBytes, to: url)
        guard case .refused(let other) = Self.outcome(url, expected: expected) else {
            Issue.record("another store's checkpoint was used")
            return
        }
        #expect(other.contains("of store"))
        _ = bytes
    }

    @Test("Sections out of bounds, overlapping, or with counts their pages cannot hold are refused at open")
    func badSections() throws {
        let (url, bytes, expected) = try Self.fixture()
        let edits: [(String, (inout CheckpointHeader) -> Void)] = [
            ("past the end", { $0.entities[0].ids.page += 10_000 }),
            ("overlapping", { $0.entities[0].rowTable.page = $0.entities[0].ids.page }),
            ("in the header", { $0.blobs.page = 0; if $0.blobs.pages == 0 { $0.blobs.pages = 1; $0.blobs.entries = 1 } }),
            ("absurd count", { $0.entities[0].rows = 2_000_000_000; $0.entities[0].ids.entries = 2_000_000_000 }),
            ("absurd pages", { $0.entities[0].ids.pages = Int(Int32.max) }),
            ("rows disagree with the snapshot", { $0.rowCount += 1 }),
            ("another index", { $0.entities[$0.entities.count - 1].indexes[0].properties = ["title"] }),
            ("another page size", { $0.pageSize = 8192 }),
        ]
        for (name, edit) in edits {
            try Self.write(try Self.withHeader(bytes, edit), to: url)
            guard case .refused = Self.outcome(url, expected: expected) else {
                Issue.record("a header with sections \(name) was not refused")
                continue
            }
        }
        // The unchanged header, re-framed the same way, is used: the edits are what is refused.
        try Self.write(try Self.withHeader(bytes) { _ in }, to: url)
        #expect(Self.outcome(url, expected: expected) == .sameAnswers)
    }

    @Test("A row number out of range, or index entries out of order, are damage when read")
    func badEntries() throws {
        let (url, bytes, expected) = try Self.fixture()
        let header = try CheckpointReader.readHeaderBytes(bytes)
        let item = try #require(header.entities.first { $0.name == "CheckpointItem" })
        let index = item.indexes[1].section
        var outOfRange = bytes
        withUnsafeBytes(of: UInt32(0xFFFF_FFF0).littleEndian) {
            outOfRange.replaceSubrange((index.page * 4096 + 40)..<(index.page * 4096 + 44), with: $0)
        }
        Self.reseal(&outOfRange, page: index.page)
        try Self.write(outOfRange, to: url)
        guard case .damaged(let reason) = Self.outcome(url, expected: expected) else {
            Issue.record("a row number out of range was not damage")
            return
        }
        #expect(reason.contains("out of range"))

        // A row placed past the opening, four gigabytes long: damage, and nothing that size is read.
        var farRow = bytes
        let table = item.rowTable.page * 4096 + 5 * 16
        withUnsafeBytes(of: UInt32.max.littleEndian) { farRow.replaceSubrange((table + 8)..<(table + 12), with: $0) }
        Self.reseal(&farRow, page: item.rowTable.page)
        try Self.write(farRow, to: url)
        guard case .damaged(let far) = Self.outcome(url, expected: expected) else {
            Issue.record("a row placed outside the opening was not damage")
            return
        }
        #expect(far.contains("outside the snapshot's rows"))

        // Two entries of the rank index swapped: the walk meets keys out of order.
        var swapped = bytes
        let first = index.page * 4096
        let a = Array(swapped[first..<(first + 4)])
        swapped.replaceSubrange(first..<(first + 4), with: swapped[(first + 4000)..<(first + 4004)])
        swapped.replaceSubrange((first + 4000)..<(first + 4004), with: a)
        Self.reseal(&swapped, page: index.page)
        try Self.write(swapped, to: url)
        guard case .damaged(let order) = Self.outcome(url, expected: expected) else {
            Issue.record("index entries out of order were not damage")
            return
        }
        #expect(order.contains("out of order") || order.contains("outside the range"))
    }

    /// 25,000 rows in `swift test` (its id section alone is more pages than the bound), 100,000 with
    /// `NOTEKIT_LONG_TESTS=1` (``LongTests``).
    @Test("One row by id and a 20-entry index scan of a large checkpoint read a few dozen pages and those rows")
    func readsOnlyWhatIsAsked() throws {
        // A synthetic compaction segment of items, written by the record encoder, and its checkpoint.
        let count = LongTests.value("NOTEKIT_CHECKPOINT_ITEMS", bounded: 25_000, long: 100_000)
        let url = TemporaryStores.newURL()
        let layout = CheckpointFixture.layout(url)
        try FileManager.default.createDirectory(atPath: layout.segments, withIntermediateDirectories: true)
        let schema = try CheckpointFixture.schema()
        let item = try #require(schema.entity(named: "CheckpointItem"))
        let group = try #require(schema.entity(named: "CheckpointGroup"))
        let store = UUID()
        let encoder = RecordEncoder()
        let rows = (0..<count).map { n in
            ModelSnapshot(id: PersistentIdentifier(entityName: item.name, primaryKey: UUID()),
                          attributes: item.attributes.map { attribute -> StoredValue in
                              switch attribute.name {
                              case "code": .string("code-\(n)")
                              case "title": .string("item \(n)")
                              case "rank": .int(Int64(n))
                              case "bucket": .int(Int64(n % 1000))
                              case "pinned": .bool(n % 7 == 0)
                              case "created": .date(Date(timeIntervalSinceReferenceDate: Double(n)))
                              default: .null
                              }
                          },
                          relationships: [.toOne(nil)])
        }
        var segment = Array("NOTEKIT/1 segment\n".utf8)
        segment += encoder.segment(SegmentHeader(store: store, number: 2, created: Date()))
        segment += encoder.schema(schema)
        segment += encoder.snapshot(lastTransactionNumber: 1, rowCount: rows.count)
        var start = 0
        while start < rows.count {
            segment += encoder.rows(entity: item, rows[start..<min(rows.count, start + 4096)])
            start += 4096
        }
        _ = group
        try Data(segment).write(to: URL(fileURLWithPath: layout.segment(2)))
        let file = try Checkpoint.build(segment: layout.segment(2), number: 2, store: store, fileSystem: POSIXFileSystem())
        try Data(file).write(to: URL(fileURLWithPath: layout.checkpoint))

        let counting = CountingFileSystem()
        let reader = try CheckpointReader.open(layout: layout, fileSystem: counting, store: store, segment: 2,
                                               schema: schema, blobs: nil).get()
        let opened = counting.bytesRead(layout.checkpoint)
        #expect(opened <= 2 * 4096)
        #expect(counting.bytesRead(layout.segment(2)) < 200)
        counting.reset()
        let base = try #require(reader.bases[item.name])
        let wantedNumber = count * 7 / 9
        let wanted = rows[wantedNumber]
        let number = try #require(try base.rowNumber(of: wanted.id.primaryKey))
        #expect(number == wantedNumber)
        #expect(CheckpointFixture.strip(try base.rows([number])) == [wanted])
        var found: [Int] = []
        try base.scanIndex(1, from: IndexBound(values: [.int(500)], isInclusive: true), to: nil, reverse: false) { entry, n in
            #expect(entry.key == [.int(500)])
            found.append(n)
            return found.count < 20
        }
        // Equal keys are in identifier order.
        let expected = rows.enumerated().filter { $0.offset % 1000 == 500 }
            .sorted { IndexEntry.compare(IndexEntry(key: [], id: $0.element.id), IndexEntry(key: [], id: $1.element.id)) < 0 }
            .prefix(20).map(\.offset)
        #expect(found == expected)
        let pages = counting.bytesRead(layout.checkpoint) / 4096
        let rowBytes = counting.bytesRead(layout.segment(2))
        let longest = 300
        // ids: about 9 pages; the row table: up to a page per row read (rows scattered by the index's order); the
        // index: a few pages for the search and the walk.
        #expect(pages <= 64)
        // The one row, the search's ~17 probes, and the 20 rows (read in batches of 8 and 16): 42 rows at most.
        #expect(rowBytes <= 42 * longest)
        TestOutput.summary("checkpoint of \(count) rows: open \(opened) bytes; one row by id + 20-entry scan: \(pages) pages, "
                           + "\(rowBytes) bytes of rows")
    }
}

extension Result where Success == CheckpointReadingTests.Outcome, Failure == CheckpointDamage {
    var outcome: CheckpointReadingTests.Outcome {
        switch self {
        case .success(let outcome): outcome
        case .failure(let damage): .refused(damage.reason)
        }
    }
}

extension CheckpointReader {
    /// The header of checkpoint file bytes, for tests that edit it.
    static func readHeaderBytes(_ bytes: [UInt8]) throws -> CheckpointHeader {
        let url = TemporaryStores.newURL()
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let path = url.appendingPathComponent("CHECKPOINT").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try readHeader(path, fileSystem: POSIXFileSystem())
    }
}

@Suite("Checkpoint verification")
struct CheckpointVerificationTests {
    @Test("verify: an intact checkpoint is no problem; a damaged or stale one is a damagedCheckpoint warning, not damage")
    func verifyReportsDamagedCheckpoint() throws {
        let (url, container) = try CheckpointFixture.store(count: 500)
        try StoreFiles.close(container)
        #expect(try StoreVerifier.verify(at: url).problems == [])
        let path = CheckpointFixture.layout(url).checkpoint
        var bytes = try POSIXFileSystem().read(path)
        let intact = bytes
        bytes[4096 + 100] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let report = try StoreVerifier.verify(at: url)
        #expect(report.problems.map(\.kind) == [.damagedCheckpoint])
        #expect(report.problems.first?.offset == 4096 + 100)
        #expect(report.problems.first?.file == path)
        #expect(report.damage.isEmpty)

        // Stale: the store compacted again without writing it (put back the old one).
        let reopened = try StoreFiles.open(url, CheckpointFixture.models) { $0.automaticCompaction = nil }
        try StoreFiles.store(reopened).compact()
        try StoreFiles.close(reopened)
        try Data(intact).write(to: URL(fileURLWithPath: path))
        let stale = try StoreVerifier.verify(at: url)
        #expect(stale.problems.map(\.kind) == [.damagedCheckpoint])
        #expect(stale.problems.first?.message.contains("stale") == true)
    }

    @Test("verify: a CHECKPOINT that is a symbolic link or a FIFO is refused like every store file")
    func verifyRefusesLinksAndFIFOs() throws {
        let (url, container) = try CheckpointFixture.store(count: 10)
        try StoreFiles.close(container)
        let path = CheckpointFixture.layout(url).checkpoint
        let elsewhere = url.deletingLastPathComponent().appendingPathComponent(UUID().uuidString).path
        try FileManager.default.moveItem(atPath: path, toPath: elsewhere)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: elsewhere)
        #expect(try StoreVerifier.verify(at: url).problems.map(\.kind) == [.unexpectedFileType])
        try FileManager.default.removeItem(atPath: path)
        #expect(mkfifo(path, 0o644) == 0)
        #expect(try StoreVerifier.verify(at: url).problems.map(\.kind) == [.unexpectedFileType])
        // And an open's reader refuses it without blocking.
        guard case .failure = CheckpointFixture.open(url) else {
            Issue.record("a FIFO was read as a checkpoint")
            return
        }
    }
}
