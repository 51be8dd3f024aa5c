#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// One open's reading of a store's `CHECKPOINT` (docs/FORMAT.md, *Using a checkpoint*): its header, checked
/// against the manifest, the segment and the schema, and each entity's rows as a ``RowBase`` that reads pages and
/// rows on demand through the ``StoreFileSystem`` seam, checks each against its checksum, and caches it.
///
/// ``open(layout:fileSystem:store:segment:schema:blobs:)`` checks every condition that does not need the open's
/// replay: the header, the tie to the segment, the sections' bounds, the declarations. What remains for the open
/// is to compare the opening's schema history (``header``'s `schemas` range of the segment) with the replay's,
/// and to see that the log after ``CheckpointHeader/end`` holds no migration.
final class CheckpointReader: Sendable {
    let header: CheckpointHeader
    /// Each entity's rows, by name.
    let bases: [String: CheckpointRowBase]

    private let file: CheckpointFile

    private init(header: CheckpointHeader, bases: [String: CheckpointRowBase], file: CheckpointFile) {
        self.header = header
        self.bases = bases
        self.file = file
    }

    /// The names of the blobs the checkpoint's rows reference (its `blobs` section), for a writable open's cleanup,
    /// which must not retire a blob a row it has not read names.
    ///
    /// - Throws: ``CheckpointDamage`` when a page fails its checksum, or an entry is not in increasing order.
    func blobNames() throws -> Set<String> {
        let section = header.blobs
        var names = Set<String>()
        var previous: [UInt8]?
        for index in 0..<section.entries {
            let (page, at) = try file.entry(index, of: section, size: Checkpoint.blobEntrySize)
            let bytes = Array(page[at..<(at + Checkpoint.blobEntrySize)])
            if let previous, !previous.lexicographicallyPrecedes(bytes) {
                throw CheckpointDamage(file: file.path, offset: (section.page + index / Checkpoint.perPage(
                    Checkpoint.blobEntrySize)) * Checkpoint.pageSize, reason: "blob names out of order")
            }
            previous = bytes
            let digits = Array("0123456789abcdef".utf8)
            names.insert(String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self))
        }
        return names
    }

    /// The reader of the checkpoint at `layout`, or why it cannot be used.
    ///
    /// - Parameters:
    ///   - store, segment: the manifest's store and first segment.
    ///   - schema: the schema in force, whose entities, indexes and unique constraints the checkpoint must declare.
    ///   - blobs: where rows read their external data.
    /// - Returns: `.failure` with the file, offset and reason when the checkpoint is missing, unreadable, of
    ///   another version, damaged, stale, or written for other declarations. Never throws.
    /// - Complexity: reads the header's pages and two records' frames of the segment; nothing else.
    static func open(layout: StoreLayout, fileSystem: any StoreFileSystem, store: UUID, segment: Int,
                     schema: Schema, blobs: BlobStore?) -> Result<CheckpointReader, CheckpointDamage> {
        do {
            let checkpoint = try fileSystem.openForReading(layout.checkpoint)
            return open(checkpoint, header: try readHeader(checkpoint), segment: segment,
                        file: try fileSystem.openForReading(layout.segment(segment)), store: store, schema: schema,
                        blobs: blobs)
        } catch let damage as CheckpointDamage {
            return .failure(damage)
        } catch {
            return .failure(CheckpointDamage(file: layout.checkpoint, offset: 0, reason: "\(error)"))
        }
    }

    /// The reader of the checkpoint open as `checkpoint`, whose header `readHeader(_:)` read as `header` (an open
    /// reads the header first, for the segment's schema range, and goes on through the same handle: the header
    /// is read once), over the manifest's first segment, number `segment`, open as `segmentFile`, or why it cannot
    /// be used, as ``open(layout:fileSystem:store:segment:schema:blobs:)`` says.
    static func open(_ checkpoint: any StoreReadableFile, header: CheckpointHeader, segment: Int,
                     file segmentFile: any StoreReadableFile, store: UUID, schema: Schema,
                     blobs: BlobStore?) -> Result<CheckpointReader, CheckpointDamage> {
        let path = checkpoint.path
        do {
            // Both files are read through handles opened once: another process's compaction may replace the
            // checkpoint and delete the segment meanwhile, and this open goes on reading the pair it checked.
            try check(header, path: path, store: store, segment: segment, schema: schema)
            try checkTies(header, segment: segmentFile)
            let file = CheckpointFile(checkpoint: checkpoint, segment: segmentFile,
                                      lastTransactionNumber: header.lastTransactionNumber,
                                      rowBytes: header.snapshotOffset..<header.end, blobs: blobs)
            var bases: [String: CheckpointRowBase] = [:]
            for (entity, described) in zip(schema.entities, header.entities) {
                bases[entity.name] = CheckpointRowBase(file: file, entity: entity, described: described)
            }
            return .success(CheckpointReader(header: header, bases: bases, file: file))
        } catch let damage as CheckpointDamage {
            return .failure(damage)
        } catch {
            return .failure(CheckpointDamage(file: path, offset: 0, reason: "\(error)"))
        }
    }

    /// Reads and decodes the magic line and header record, and checks the file's size against the pages.
    static func readHeader(_ path: String, fileSystem: any StoreFileSystem) throws -> CheckpointHeader {
        try readHeader(openFile(path, fileSystem: fileSystem))
    }

    /// The checkpoint at `path`, open for reading.
    ///
    /// - Throws: ``CheckpointDamage`` when there is none, or what opening it throws.
    static func openFile(_ path: String, fileSystem: any StoreFileSystem) throws -> any StoreReadableFile {
        guard try fileSystem.kind(of: path) != nil else {
            throw CheckpointDamage(file: path, offset: 0, reason: "there is no checkpoint")
        }
        return try fileSystem.openForReading(path)
    }

    /// Reads and decodes the magic line and header record of the checkpoint open as `file`, and checks the file's
    /// size against the pages.
    static func readHeader(_ file: any StoreReadableFile) throws -> CheckpointHeader {
        let path = file.path
        let size = try file.size()
        let pageSize = Checkpoint.pageSize
        guard size >= pageSize, size % pageSize == 0 else {
            throw CheckpointDamage(file: path, offset: size - size % pageSize,
                                   reason: "\(size) bytes: not a whole number of \(pageSize)-byte pages")
        }
        var bytes = try file.read(from: 0, count: pageSize)
        let magic = Checkpoint.magic
        guard bytes.count == pageSize else {
            throw CheckpointDamage(file: path, offset: bytes.count, reason: "the file is shorter than its first page")
        }
        guard bytes.starts(with: magic) else {
            let line = bytes.prefix(64).split(separator: 0x0A, maxSplits: 1).first.map { String(decoding: $0, as: UTF8.self) }
            let reason = line.flatMap { line -> String? in
                guard line.hasSuffix(" checkpoint"), line.hasPrefix("NOTEKIT/") else { return nil }
                return "format version \(line.dropFirst(8).dropLast(11)), this build reads version 2"
            } ?? "it does not begin with a NOTEKIT/2 checkpoint line"
            throw CheckpointDamage(file: path, offset: 0, reason: reason)
        }
        let claimed = bytes.withUnsafeBytes { RecordFrame.parseHeader($0, at: magic.count) }
        guard let claimed else {
            throw CheckpointDamage(file: path, offset: magic.count, reason: "malformed header record")
        }
        let needed = magic.count + RecordFrame.headerLength + claimed.length + 1
        guard claimed.length <= Checkpoint.maximumHeaderLength, needed <= size else {
            throw CheckpointDamage(file: path, offset: magic.count,
                                   reason: "a header of \(claimed.length) bytes does not fit the file")
        }
        if needed > bytes.count {
            bytes += try file.read(from: bytes.count, count: needed - bytes.count)
        }
        return try bytes.withUnsafeBytes { buffer in
            switch RecordFrame.scan(UnsafeRawBufferPointer(rebasing: buffer[..<needed]), at: magic.count) {
            case let .record(payload, _):
                let header = try Checkpoint.decodeHeader(UnsafeRawBufferPointer(rebasing: buffer[payload]),
                                                         offset: payload.lowerBound, file: path)
                try checkSections(header, path: path, headerEnd: needed, fileSize: size)
                return header
            case .truncated(let reason), .invalid(_, let reason):
                throw CheckpointDamage(file: path, offset: magic.count, reason: "the header record: \(reason)")
            }
        }
    }

    /// The sections lie in the file, after the header, without overlapping, each exactly as long as its count.
    private static func checkSections(_ header: CheckpointHeader, path: String, headerEnd: Int, fileSize: Int) throws {
        guard header.pageSize == Checkpoint.pageSize else {
            throw CheckpointDamage(file: path, offset: 0, reason: "page size \(header.pageSize); this build reads 4096")
        }
        let firstBodyPage = (headerEnd + Checkpoint.pageSize - 1) / Checkpoint.pageSize
        let filePages = fileSize / Checkpoint.pageSize
        var taken: [(range: Range<Int>, name: String)] = []
        for (name, section, size) in header.sections {
            guard section.entries >= 0, section.entries <= Int(UInt32.max),
                  section.pages == Checkpoint.pages(section.entries, size: size) else {
                throw CheckpointDamage(file: path, offset: 0,
                                       reason: "\(name): \(section.entries) entries do not take \(section.pages) pages")
            }
            guard section.pages == 0 || (section.page >= firstBodyPage && section.page + section.pages <= filePages)
            else {
                throw CheckpointDamage(file: path, offset: 0,
                                       reason: "\(name): pages \(section.page)..<\(section.page + section.pages) lie "
                                           + "outside the body, pages \(firstBodyPage)..<\(filePages)")
            }
            if section.pages > 0 { taken.append((section.page..<(section.page + section.pages), name)) }
        }
        taken.sort { $0.range.lowerBound < $1.range.lowerBound }
        for (a, b) in zip(taken, taken.dropFirst()) where a.range.overlaps(b.range) {
            throw CheckpointDamage(file: path, offset: b.range.lowerBound * Checkpoint.pageSize,
                                   reason: "\(b.name) overlaps \(a.name)")
        }
    }

    /// The header describes `segment` of `store`, and declares `schema`'s entities, indexes and unique constraints.
    private static func check(_ header: CheckpointHeader, path: String, store: UUID, segment: Int, schema: Schema) throws {
        guard header.store == store, header.segment == segment else {
            throw CheckpointDamage(file: path, offset: 0, reason: "it describes segment \(header.segment) of store "
                                   + "\(header.store), not the first segment \(segment) of store \(store)")
        }
        guard header.entities.map(\.name) == schema.entities.map(\.name) else {
            throw CheckpointDamage(file: path, offset: 0, reason: "it lists entities "
                                   + "\(header.entities.map(\.name)), the schema \(schema.entities.map(\.name))")
        }
        var total = 0
        for (entity, described) in zip(schema.entities, header.entities) {
            guard described.indexes.map(\.properties) == entity.indexes,
                  described.uniques.map(\.properties) == entity.uniqueConstraints else {
                throw CheckpointDamage(file: path, offset: 0,
                                       reason: "it was written for other indexes or unique constraints of \(entity.name)")
            }
            guard described.rows <= Int(UInt32.max), described.indexes.allSatisfy({ $0.section.entries == described.rows }),
                  described.uniques.allSatisfy({ $0.section.entries <= described.rows }) else {
                throw CheckpointDamage(file: path, offset: 0, reason: "the counts of \(entity.name)'s sections disagree")
            }
            total += described.rows
        }
        guard total == header.rowCount else {
            throw CheckpointDamage(file: path, offset: 0,
                                   reason: "its entities hold \(total) rows, the snapshot \(header.rowCount)")
        }
        let r = header
        guard r.segmentRecord.end == r.schemas.lowerBound, r.schemas.lowerBound < r.schemas.upperBound,
              r.schemas.upperBound <= r.history.lowerBound, r.history.upperBound <= r.snapshotOffset,
              r.snapshotOffset <= r.lastRecord.offset, r.lastRecord.end == r.end else {
            throw CheckpointDamage(file: path, offset: 0, reason: "the opening's parts are not in order")
        }
    }

    /// The segment's bytes at `segmentRecord` and `lastRecord` are records of exactly those lengths and checksums.
    /// The segment record is read whole and checked; the last record's header and final newline (its payload is
    /// rows, each checked against the row table when read).
    private static func checkTies(_ header: CheckpointHeader, segment: any StoreReadableFile) throws {
        let segmentPath = segment.path
        let tie = header.segmentRecord
        guard tie.length <= 4096 else {
            throw CheckpointDamage(file: segmentPath, offset: tie.offset, reason: "a segment record is not that long")
        }
        let record = try segment.read(from: tie.offset, count: tie.end - tie.offset)
        let intact = record.withUnsafeBytes { buffer -> Bool in
            guard case .record(let payload, let next) = RecordFrame.scan(buffer, at: 0), next == buffer.count,
                  payload.count == tie.length else { return false }
            return RecordFrame.parseHeader(buffer, at: 0)?.checksum == tie.checksum
        }
        guard intact else {
            throw CheckpointDamage(file: segmentPath, offset: tie.offset,
                                   reason: "the segment record is not the one the checkpoint describes")
        }
        let last = header.lastRecord
        let frame = try segment.read(from: last.offset, count: RecordFrame.headerLength)
        let newline = try segment.read(from: last.end - 1, count: 1)
        let claimed = frame.withUnsafeBytes { RecordFrame.parseHeader($0, at: 0) }
        guard let claimed, claimed.length == last.length, claimed.checksum == last.checksum, newline == [0x0A] else {
            throw CheckpointDamage(file: segmentPath, offset: last.offset,
                                   reason: "the opening's last record is not the one the checkpoint describes")
        }
    }
}

/// The pages and rows one checkpoint reads, shared by its entities' bases: each page checked against its checksum
/// when read, and kept while it is among those read lately (``pageCacheLimit``).
final class CheckpointFile: Sendable {
    /// The number of pages kept at most: 2 MiB, SQLite's default page cache (a read of every row of a million
    /// reads 4,000 pages of row table).
    static let pageCacheLimit = 512

    /// The checkpoint and the segment it describes, each open once.
    let checkpoint: any StoreReadableFile
    let segment: any StoreReadableFile
    var path: String { checkpoint.path }
    var segmentPath: String { segment.path }
    let lastTransactionNumber: UInt64
    /// Where rows may be in the segment: after the snapshot record, before the opening's end. A row table entry
    /// pointing elsewhere is damage, so no read is larger than the opening.
    let rowBytes: Range<Int>
    let blobs: BlobStore?
    private let pages = Locked(RecentlyRead<[UInt8]>(limit: CheckpointFile.pageCacheLimit))
    /// The pages checked against their checksums already (a page read again after it left ``pages`` is not).
    private let checkedPages = Locked(CheckedOnce())

    init(checkpoint: any StoreReadableFile, segment: any StoreReadableFile, lastTransactionNumber: UInt64,
         rowBytes: Range<Int>, blobs: BlobStore?) {
        self.checkpoint = checkpoint
        self.segment = segment
        self.lastTransactionNumber = lastTransactionNumber
        self.rowBytes = rowBytes
        self.blobs = blobs
    }

    /// Page `number`, checked.
    ///
    /// - Throws: ``CheckpointDamage`` when it is short or fails its checksum; the I/O error.
    func page(_ number: Int) throws -> [UInt8] {
        if let page = pages.withLock({ $0.value(for: number) }) { return page }
        let offset = number * Checkpoint.pageSize
        let bytes = try checkpoint.read(from: offset, count: Checkpoint.pageSize)
        guard bytes.count == Checkpoint.pageSize else {
            throw CheckpointDamage(file: path, offset: offset + bytes.count, reason: "page \(number) is cut short")
        }
        if !checkedPages.withLock({ $0.contains(number) }) {
            let intact = bytes.withUnsafeBytes { buffer in
                CRC32C.masked(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<Checkpoint.pageBody])))
                    == UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: Checkpoint.pageBody, as: UInt32.self))
            }
            guard intact else {
                throw CheckpointDamage(file: path, offset: offset, reason: "page \(number) fails its checksum")
            }
            checkedPages.withLock { $0.insert(number) }
        }
        pages.withLock { $0.insert(bytes, for: number) }
        return bytes
    }

    /// Entry `index` of `section` (entries of `size` bytes): its page, and its offset in the page.
    func entry(_ index: Int, of section: CheckpointSection, size: Int) throws -> (page: [UInt8], at: Int) {
        let perPage = Checkpoint.perPage(size)
        return (try page(section.page + index / perPage), (index % perPage) * size)
    }

    /// The number of pages kept, for tests.
    var pagesKept: Int { pages.withLock { $0.count } }

    private let decodedValues = Locked(0)

    /// The number of attribute values decoded from rows so far, for tests: what a partial read saves.
    var valuesDecoded: Int { decodedValues.withLock { $0 } }

    func countDecoded(_ count: Int) { decodedValues.withLock { $0 += count } }
}

/// One entity's rows in a checkpoint, as a ``RowBase``.
final class CheckpointRowBase: RowBase {
    let entityName: String
    let count: Int
    private let file: CheckpointFile
    private let entity: Schema.Entity
    private let described: CheckpointHeader.Entity
    private let indexSlots: [[Int]]
    private let uniqueSlots: [[Int]]
    private let cache = Locked(RecentlyRead<ModelSnapshot>(limit: CheckpointRowBase.rowCacheLimit))
    /// The rows checked against their checksums already.
    private let checkedRows = Locked(CheckedOnce())
    /// By index, the keys of the entries its binary searches probed, by position: every search of an index probes
    /// the same middle entries first, and a hot query probes the same ones every time, so that a search asked
    /// again reads no row. The checkpoint never changes under this base; each index keeps ``probeCacheLimit``.
    private let probedKeys: [Locked<RecentlyRead<[StoredValue]>>]

    /// The number of probed keys kept per index: the top twelve levels of its binary searches.
    static let probeCacheLimit = 4096

    /// The number of whole rows kept at most, to answer the next reads of them without decoding: about 2 MB of
    /// notes. Objects fetched hold their rows themselves; what is kept here serves the next fetch.
    static let rowCacheLimit = 4096

    /// The number of rows kept, for tests.
    var rowsKept: Int { cache.withLock { $0.count } }

    var keptRows: Int { Self.rowCacheLimit }

    /// The attribute values decoded from this checkpoint's rows so far (all its entities'), for tests.
    var valuesDecoded: Int { file.valuesDecoded }

    init(file: CheckpointFile, entity: Schema.Entity, described: CheckpointHeader.Entity) {
        self.file = file
        self.entity = entity
        self.described = described
        entityName = entity.name
        count = described.rows
        indexSlots = entity.indexes.map { $0.compactMap(entity.attributeIndex(named:)) }
        probedKeys = entity.indexes.map { _ in Locked(RecentlyRead(limit: CheckpointRowBase.probeCacheLimit)) }
        uniqueSlots = entity.uniqueConstraints.map { $0.compactMap(entity.attributeIndex(named:)) }
    }

    private func damage(_ reason: String, page: Int? = nil) -> CheckpointDamage {
        CheckpointDamage(file: file.path, offset: (page ?? 0) * Checkpoint.pageSize, reason: reason)
    }

    /// The row number stored as entry `index` of an index or unique section, checked to be a row.
    private func rowNumber(at index: Int, of section: CheckpointSection) throws -> Int {
        let (page, at) = try file.entry(index, of: section, size: Checkpoint.rowNumberSize)
        let number = Int(page.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) })
        guard number < count else {
            throw damage("row number \(number) of \(entityName) is out of range (\(count) rows)",
                         page: section.page + index / Checkpoint.perPage(Checkpoint.rowNumberSize))
        }
        return number
    }

    /// The positions `lo..<hi` of the entries of index `index` between `lower` and `upper`, found by binary searches
    /// that decode each probed row's index attributes alone, or whole rows (which stay kept) unless `keyOnly`.
    private func positions(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, keyOnly: Bool = true) throws
        -> (Int, Int) {
        guard index >= 0, index < described.indexes.count else { throw damage("\(entityName) has no index \(index)") }
        let section = described.indexes[index].section
        guard lower != nil || upper != nil else { return (0, section.entries) }
        let slots = indexSlots[index]
        var only: [Bool]?
        if keyOnly {
            var marks = [Bool](repeating: false, count: entity.attributes.count)
            for slot in slots { marks[slot] = true }
            only = marks
        }
        let probed = probedKeys[index]
        /// The key of the entry at `position`: kept from an earlier probe, or read from its row.
        func key(at position: Int) throws -> [StoredValue] {
            if let known = probed.withLock({ $0.value(for: position) }) { return known }
            let row = try rows([try rowNumber(at: position, of: section)], only: only)[0]
            let key = slots.map { row.attributes[$0] }
            probed.withLock { $0.insert(key, for: position) }
            return key
        }
        /// The first position whose entry's key prefix is past the bound (`after`) or at or after it.
        func position(of bound: IndexBound, after: Bool) throws -> Int {
            var lo = 0, hi = section.entries
            while lo < hi {
                let mid = (lo + hi) / 2
                let c = IndexEntry.compare(try key(at: mid), prefix: bound.values)
                if after ? c > 0 : c >= 0 { hi = mid } else { lo = mid + 1 }
            }
            return lo
        }
        return (try lower.map { try position(of: $0, after: !$0.isInclusive) } ?? 0,
                try upper.map { try position(of: $0, after: $0.isInclusive) } ?? section.entries)
    }

    func indexRowNumbers(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                         _ body: (Int) throws -> Bool) throws {
        let (lo, hi) = try positions(index, from: lower, to: upper)
        let section = described.indexes[index].section
        let perPage = Checkpoint.perPage(Checkpoint.rowNumberSize)
        guard lo < hi else { return }
        // A page at a time: its row numbers are read from one copy of it, without a look-up per entry.
        var position = reverse ? hi - 1 : lo
        while reverse ? position >= lo : position < hi {
            let pageIndex = position / perPage
            let page = try file.page(section.page + pageIndex)
            let first = max(lo, pageIndex * perPage), last = min(hi, pageIndex * perPage + perPage) - 1
            let stop = try page.withUnsafeBytes { buffer -> Bool in
                for entry in reverse ? Array(stride(from: position, through: first, by: -1))
                    : Array(position...last) {
                    let at = (entry - pageIndex * perPage) * Checkpoint.rowNumberSize
                    let number = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
                    guard number < count else {
                        throw damage("row number \(number) of \(entityName) is out of range (\(count) rows)",
                                     page: section.page + pageIndex)
                    }
                    if try !body(number) { return true }
                }
                return false
            }
            if stop { return }
            position = reverse ? first - 1 : last + 1
        }
    }

    func rowNumbers(of primaryKeys: [UUID]) throws -> [Int?] {
        // In key order, each search starts where the one before ended and gallops forward: keys close together
        // (a folder's notes among a million) cost a few probes each, most on a page just read.
        let targets = primaryKeys.map(IndexEntryWords.words)
        let order = targets.indices.sorted { targets[$0] < targets[$1] }
        var found = [Int?](repeating: nil, count: primaryKeys.count)
        var cached: (number: Int, bytes: [UInt8])?
        func entry(_ position: Int) throws -> (words: (UInt64, UInt64), number: Int) {
            let perPage = Checkpoint.perPage(Checkpoint.idEntrySize)
            let pageNumber = described.ids.page + position / perPage
            if cached?.number != pageNumber { cached = (pageNumber, try file.page(pageNumber)) }
            let at = (position % perPage) * Checkpoint.idEntrySize
            return cached!.bytes.withUnsafeBytes { buffer in
                ((UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                  UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))),
                 Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: at + 16, as: UInt32.self))))
            }
        }
        var start = 0
        for slot in order {
            let target = targets[slot]
            // Gallop: the first position at or past the target lies in start..<hi.
            var step = 1, hi = start
            while hi < count, try entry(hi).words < target {
                start = hi + 1
                hi += step
                step *= 2
            }
            var lo = start
            hi = min(hi + 1, count)
            while lo < hi {
                let mid = (lo + hi) / 2
                if try entry(mid).words < target { lo = mid + 1 } else { hi = mid }
            }
            start = lo
            guard lo < count else { continue }
            let (words, number) = try entry(lo)
            guard words == target else { continue }
            guard number < count else {
                throw damage("row number \(number) of \(entityName) is out of range (\(count) rows)")
            }
            found[slot] = number
        }
        return found
    }

    func rowNumber(of primaryKey: UUID) throws -> Int? {
        let target = IndexEntryWords.words(primaryKey)
        var lo = 0, hi = count
        while lo < hi {
            let mid = (lo + hi) / 2
            let (page, at) = try file.entry(mid, of: described.ids, size: Checkpoint.idEntrySize)
            let (words, number) = page.withUnsafeBytes { buffer in
                ((UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                  UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))),
                 Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: at + 16, as: UInt32.self))))
            }
            if words == target {
                guard number < count else {
                    throw damage("row number \(number) of \(entityName) is out of range (\(count) rows)")
                }
                return number
            }
            if words < target { lo = mid + 1 } else { hi = mid }
        }
        return nil
    }

    func rows(_ numbers: [Int]) throws -> [ModelSnapshot] { try rows(numbers, only: nil) }

    func rows(_ numbers: [Int], decoding attributes: [Bool]) throws -> [ModelSnapshot] {
        try rows(numbers, only: attributes.allSatisfy { $0 } ? nil : attributes)
    }

    /// The rows numbered `numbers`, decoding the attributes `only` selects (nil: every one). Whole rows are kept
    /// (the ones read lately: ``rowCacheLimit``) and answer later reads, partial ones are not kept; a row kept
    /// whole answers a partial read as it is.
    private func rows(_ numbers: [Int], only: [Bool]?) throws -> [ModelSnapshot] {
        var found = [ModelSnapshot?](repeating: nil, count: numbers.count)
        cache.withLock { cache in
            for (i, number) in numbers.enumerated() { found[i] = cache.value(for: number) }
        }
        // The rows not read yet, by where they are asked and where they lie.
        var wanted: [(position: Int, number: Int, place: CheckpointRow)] = []
        for (i, number) in numbers.enumerated() where found[i] == nil {
            guard number >= 0, number < count else { throw damage("row number \(number) of \(entityName) is out of range") }
            wanted.append((i, number, try place(of: number)))
        }
        guard !wanted.isEmpty else { return found.map { $0! } }
        // In the segment's order, so that rows are read in runs of neighbouring bytes and a row asked twice is
        // decoded once: its repeats come next to it. (A scan asks in that order already; the sort, which finds
        // ascending runs, then only checks it.)
        wanted.sort { ($0.place.offset, $0.position) < ($1.place.offset, $1.position) }
        let decoder = RecordDecoderV1(blobs: file.blobs)
        let checked = checkedRows.withLock { $0 }
        var newlyChecked: [Int] = []
        defer { if !newlyChecked.isEmpty { checkedRows.withLock { for number in newlyChecked { $0.insert(number) } } } }
        var valuesDecoded = 0
        defer { file.countDecoded(valuesDecoded) }
        var start = 0
        while start < wanted.count {
            // A run: rows whose gaps are small (a comma, or a record boundary), up to about 1 MiB.
            var end = start + 1
            let runStart = wanted[start].place.offset
            var runEnd = runStart + wanted[start].place.length
            while end < wanted.count, wanted[end].place.offset >= runEnd || wanted[end].number == wanted[end - 1].number,
                  wanted[end].place.offset - runEnd <= 256,
                  wanted[end].place.offset + wanted[end].place.length - runStart <= 1 << 20 {
                runEnd = max(runEnd, wanted[end].place.offset + wanted[end].place.length)
                end += 1
            }
            let bytes = try file.segment.read(from: runStart, count: runEnd - runStart)
            guard bytes.count == runEnd - runStart else {
                throw CheckpointDamage(file: file.segmentPath, offset: runStart + bytes.count,
                                       reason: "the segment ends before the rows the checkpoint lists")
            }
            try bytes.withUnsafeBytes { buffer in
                for k in start..<end {
                    let (position, number, place) = wanted[k]
                    if k > start, wanted[k - 1].number == number {
                        found[position] = found[wanted[k - 1].position]
                        continue
                    }
                    let row = UnsafeRawBufferPointer(rebasing: buffer[(place.offset - runStart)..<(place.offset - runStart + place.length)])
                    if !checked.contains(number) {
                        guard CRC32C.masked(CRC32C.checksum(row)) == place.checksum else {
                            throw CheckpointDamage(file: file.segmentPath, offset: place.offset,
                                                   reason: "row \(number) of \(entityName) fails its checksum")
                        }
                        newlyChecked.append(number)
                    }
                    do {
                        // Every row of the call is of this base's entity: its decoding plan is checked once.
                        var snapshot = try decoder.decodeRow(row, offset: place.offset, file: file.segmentPath,
                                                             entity: entity, only: only, decoded: &valuesDecoded,
                                                             beginsRecord: k == 0)
                        snapshot.transactionNumber = file.lastTransactionNumber
                        found[position] = snapshot
                    } catch {
                        throw CheckpointDamage(file: file.segmentPath, offset: place.offset,
                                               reason: "row \(number) of \(entityName) does not decode: \(error)")
                    }
                }
            }
            start = end
        }
        if only == nil {
            cache.withLock { cache in
                for (k, (position, number, _)) in wanted.enumerated() where k == 0 || wanted[k - 1].number != number {
                    cache.insert(found[position]!, for: number)
                }
            }
        }
        return found.map { $0! }
    }

    /// Where row `number` (in range) lies in the segment, as the row table says; damage when outside the rows.
    private func place(of number: Int) throws -> CheckpointRow {
        let (page, at) = try file.entry(number, of: described.rowTable, size: Checkpoint.rowEntrySize)
        let place = page.withUnsafeBytes { buffer in
            CheckpointRow(offset: Int(truncatingIfNeeded: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: at, as: UInt64.self))),
                          length: Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: at + 8, as: UInt32.self))),
                          checksum: UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: at + 12, as: UInt32.self)))
        }
        guard place.offset > file.rowBytes.lowerBound, place.length > 1,
              place.length <= file.rowBytes.upperBound - place.offset else {
            throw damage("row \(number) of \(entityName) is placed at bytes \(place.offset)..+\(place.length), outside "
                         + "the snapshot's rows", page: described.rowTable.page + number / Checkpoint.perPage(Checkpoint.rowEntrySize))
        }
        return place
    }

    private func row(_ number: Int) throws -> ModelSnapshot { try rows([number])[0] }

    func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                   _ body: (IndexEntry, Int) throws -> Bool) throws {
        try scanIndex(index, from: lower, to: upper, reverse: reverse, only: nil) { entry, number, _ in
            try body(entry, number)
        }
    }

    func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                   decoding attributes: [Bool], _ body: (IndexEntry, Int, ModelSnapshot) throws -> Bool) throws {
        try scanIndex(index, from: lower, to: upper, reverse: reverse,
                      only: attributes.allSatisfy { $0 } ? nil : attributes, body)
    }

    /// The index scan, with each entry's row: whole rows when `only` is nil, else rows decoding `only` and the
    /// index's own attributes (the bounds' binary search decodes the index's attributes alone).
    private func scanIndex(_ index: Int, from lower: IndexBound?, to upper: IndexBound?, reverse: Bool,
                           only: [Bool]?, _ body: (IndexEntry, Int, ModelSnapshot) throws -> Bool) throws {
        guard index >= 0, index < described.indexes.count else { throw damage("\(entityName) has no index \(index)") }
        let section = described.indexes[index].section
        let slots = indexSlots[index]
        // A constant, so that the functions below capture it by value.
        let wanted = only.map { only -> [Bool] in
            var wanted = only
            for slot in slots { wanted[slot] = true }
            return wanted
        }
        func entry(_ row: ModelSnapshot) -> IndexEntry { IndexEntry(key: slots.map { row.attributes[$0] }, id: row.id) }
        func within(_ key: [StoredValue]) -> Bool {
            if let lower {
                let c = IndexEntry.compare(key, prefix: lower.values)
                if lower.isInclusive ? c < 0 : c <= 0 { return false }
            }
            if let upper {
                let c = IndexEntry.compare(key, prefix: upper.values)
                if upper.isInclusive ? c > 0 : c >= 0 { return false }
            }
            return true
        }
        let (lo, hi) = try positions(index, from: lower, to: upper, keyOnly: only != nil)
        guard lo < hi else { return }
        var previous: IndexEntry?
        var next = reverse ? hi - 1 : lo
        var batch = 8
        while reverse ? next >= lo : next < hi {
            let positions = reverse ? Array(stride(from: next, to: max(lo, next - batch + 1) - 1, by: -1))
                : Array(next..<min(hi, next + batch))
            let numbers = try positions.map { try rowNumber(at: $0, of: section) }
            for (position, (number, row)) in zip(positions, zip(numbers, try rows(numbers, only: wanted))) {
                let current = entry(row)
                if let previous {
                    let c = IndexEntry.compare(previous, current)
                    guard reverse ? c > 0 : c < 0 else {
                        throw damage("index \(index) of \(entityName) is out of order at entry \(position)",
                                     page: section.page + position / Checkpoint.perPage(Checkpoint.rowNumberSize))
                    }
                }
                guard within(current.key) else {
                    throw damage("index \(index) of \(entityName) holds entry \(position) outside the range its order gives it",
                                 page: section.page + position / Checkpoint.perPage(Checkpoint.rowNumberSize))
                }
                previous = current
                guard try body(current, number, row) else { return }
            }
            next = reverse ? next - positions.count : next + positions.count
            batch = min(batch * 2, 512)
        }
    }

    func uniqueHolder(_ constraint: Int, key: [StoredValue]) throws -> Int? {
        guard constraint >= 0, constraint < described.uniques.count else {
            throw damage("\(entityName) has no unique constraint \(constraint)")
        }
        guard !key.contains(where: \.isNull) else { return nil }
        let section = described.uniques[constraint].section
        let slots = uniqueSlots[constraint]
        var lo = 0, hi = section.entries
        while lo < hi {
            let mid = (lo + hi) / 2
            let number = try rowNumber(at: mid, of: section)
            let row = try row(number)
            let c = Checkpoint.compareKeys(slots.map { row.attributes[$0] }, key)
            if c == 0 { return number }
            if c < 0 { lo = mid + 1 } else { hi = mid }
        }
        return nil
    }
}
