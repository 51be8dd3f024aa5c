#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

// The checkpoint file (docs/FORMAT.md, *Version 2* and *The checkpoint file*): its header, its sections, and the
// one encoder of the whole file, shared by compaction and by the build from a segment.

extension StoreLayout {
    /// `CHECKPOINT`: derived data describing the opening of the manifest's first segment.
    var checkpoint: String { root + "/CHECKPOINT" }
    /// `CHECKPOINT.tmp`: a checkpoint being written, renamed over ``checkpoint`` once flushed.
    var temporaryCheckpoint: String { root + "/CHECKPOINT.tmp" }
}

/// Why a checkpoint cannot be used, or what in it is damaged: the file, the byte offset, and a sentence. Derived
/// data is never a reason to refuse an open: whoever meets one drops the checkpoint and replays the segments.
struct CheckpointDamage: Error, Equatable, CustomStringConvertible {
    /// The checkpoint, or the segment whose bytes it describes.
    let file: String
    let offset: Int
    let reason: String

    var description: String { "\(file) at byte \(offset): \(reason)" }
}

/// A record of the segment a checkpoint describes, as the checkpoint ties itself to it: the offset of its header,
/// its payload's length and its checksum (masked CRC-32C, as in the header).
struct RecordTie: Equatable, Sendable {
    var offset: Int
    var length: Int
    var checksum: UInt32

    /// The offset just past the record's newline.
    var end: Int { offset + RecordFrame.headerLength + length + 1 }

    /// The tie to the framed record `record` at `offset`, or nil when it is not a framed record.
    init?(framed record: [UInt8], at offset: Int) {
        guard let header = record.withUnsafeBytes({ RecordFrame.parseHeader($0, at: 0) }) else { return nil }
        self.init(offset: offset, length: header.length, checksum: header.checksum)
    }

    init(offset: Int, length: Int, checksum: UInt32) {
        self.offset = offset
        self.length = length
        self.checksum = checksum
    }
}

/// Where one row's bytes are in the segment: a `rowTable` entry.
struct CheckpointRow: Equatable, Sendable {
    /// The offset of the row object's `{`.
    var offset: Int
    /// Through its `}`.
    var length: Int
    /// The masked CRC-32C of the row's bytes.
    var checksum: UInt32
}

/// What the opening of a compaction's segment is made of, as a checkpoint describes it.
struct CheckpointOpening: Equatable {
    var store: UUID
    var segment: Int
    var segmentRecord: RecordTie
    /// From the first `schema` record's header to past the last one's newline.
    var schemas: Range<Int>
    /// Likewise for the `history` records; empty (at the snapshot's offset) when there are none.
    var history: Range<Int>
    var snapshotOffset: Int
    var lastTransactionNumber: UInt64
    var rowCount: Int
    /// The opening's last record: the last `rows` record, or the snapshot when there are no rows.
    var lastRecord: RecordTie
    /// Where the opening ends: the log after the checkpoint begins there.
    var end: Int { lastRecord.end }
}

/// A run of whole pages holding fixed-size entries.
struct CheckpointSection: Equatable, Sendable {
    var entries: Int
    var page: Int
    var pages: Int
}

/// The header record of a checkpoint.
struct CheckpointHeader: Equatable, Sendable {
    /// An index or unique constraint's section, with the properties it was written for.
    struct KeyedSection: Equatable, Sendable {
        var properties: [String]
        var section: CheckpointSection
    }

    struct Entity: Equatable, Sendable {
        var name: String
        var rows: Int
        var ids: CheckpointSection
        var rowTable: CheckpointSection
        var indexes: [KeyedSection]
        var uniques: [KeyedSection]
    }

    var store: UUID
    var segment: Int
    var segmentRecord: RecordTie
    var schemas: Range<Int>
    var history: Range<Int>
    var snapshotOffset: Int
    var lastTransactionNumber: UInt64
    var rowCount: Int
    var end: Int
    var lastRecord: RecordTie
    var pageSize: Int
    var entities: [Entity]
    var blobs: CheckpointSection

    /// Every section, entities' first, in the order of the file.
    var sections: [(name: String, section: CheckpointSection, entrySize: Int)] {
        var all: [(String, CheckpointSection, Int)] = []
        for entity in entities {
            all.append(("\(entity.name) ids", entity.ids, Checkpoint.idEntrySize))
            all.append(("\(entity.name) rowTable", entity.rowTable, Checkpoint.rowEntrySize))
            for (n, index) in entity.indexes.enumerated() {
                all.append(("\(entity.name) index \(n)", index.section, Checkpoint.rowNumberSize))
            }
            for (n, unique) in entity.uniques.enumerated() {
                all.append(("\(entity.name) unique constraint \(n)", unique.section, Checkpoint.rowNumberSize))
            }
        }
        all.append(("blobs", blobs, Checkpoint.blobEntrySize))
        return all
    }
}

enum Checkpoint {
    static let magic = Array("NOTEKIT/2 checkpoint\n".utf8)
    static let pageSize = 4096
    /// The bytes of entries a body page holds; its last four bytes are their checksum.
    static let pageBody = 4092
    static let idEntrySize = 20
    static let rowEntrySize = 16
    static let rowNumberSize = 4
    static let blobEntrySize = 32
    /// The longest header a reader reads.
    static let maximumHeaderLength = 16 << 20

    /// Entries of `size` bytes a page holds.
    static func perPage(_ size: Int) -> Int { pageBody / size }

    /// Pages a section of `entries` entries of `size` bytes takes.
    static func pages(_ entries: Int, size: Int) -> Int { (entries + perPage(size) - 1) / perPage(size) }

    /// The rows of one entity as a checkpoint lists them: in row-number order, with their place in the segment.
    struct EntityRows {
        var entity: Schema.Entity
        var rows: [ModelSnapshot]
        var places: [CheckpointRow]
    }

    /// Errors of the writer: the state cannot be described (more rows than a row number counts).
    struct Unwritable: Error, CustomStringConvertible {
        let description: String
    }

    /// The whole checkpoint file describing `opening`, whose rows are `entities` (every entity of `schema`, in its
    /// order); `indexEntries` gives an entity's declared index's entries in the index's order (the in-memory
    /// index's own), `blobs` the names of the blobs the rows reference.
    ///
    /// - Throws: ``Unwritable`` when an entity has more rows than a u32 row number counts.
    /// - Complexity: O(rows × log rows) for the sorted sections; one pass for the rest.
    static func encode(_ opening: CheckpointOpening, schema: Schema, entities: [EntityRows],
                       indexEntries: (_ entity: String, _ index: Int) throws -> [IndexEntry], blobs: Set<String>) throws
        -> [UInt8] {
        var bodies: [SectionBody] = []
        var described: [DescribedEntity] = []
        for item in entities {
            let entity = item.entity
            let count = item.rows.count
            guard count <= Int(UInt32.max), item.places.count == count else {
                throw Unwritable(description: "\(entity.name) has \(count) rows, more than a checkpoint numbers")
            }
            described.append((entity.name, count, entity.indexes, entity.uniqueConstraints))
            // ids: by key bytes, unsigned.
            var keyed = item.rows.indices.map { (words: IndexEntryWords.words(item.rows[$0].id.primaryKey), row: $0) }
            keyed.sort { $0.words < $1.words }
            bodies.append(idSection(keyed, rows: item.rows))
            bodies.append(rowTableSection(item.places))
            for index in entity.indexes.indices {
                bodies.append(try indexSection(try indexEntries(entity.name, index), index: index, of: entity,
                                               keyed: keyed))
            }
            for constraint in entity.uniqueConstraints {
                bodies.append(uniqueSection(constraint, of: entity, rows: item.rows))
            }
        }
        var blobSection = [UInt8]()
        for name in blobs.sorted() { appendHexBytes(name, to: &blobSection) }
        bodies.append((blobs.count, blobEntrySize, blobSection))
        return layOut(opening, described: described, bodies: bodies)
    }

    /// A section's entries, before it is laid out in pages: how many, the size of one, and their bytes.
    private typealias SectionBody = (entries: Int, size: Int, bytes: [UInt8])
    /// A row's key as two words to compare, and the row's number.
    private typealias KeyedRow = (words: (UInt64, UInt64), row: Int)
    /// What the header says of an entity besides its sections.
    private typealias DescribedEntity = (name: String, rows: Int, indexes: [[String]], uniques: [[String]])

    /// The `ids` section: each row's key and row number, ordered by key bytes (`keyed`, sorted).
    private static func idSection(_ keyed: [KeyedRow], rows: [ModelSnapshot])
        -> SectionBody {
        var ids = [UInt8]()
        ids.reserveCapacity(rows.count * idEntrySize)
        for entry in keyed {
            appendUUID(rows[entry.row].id.primaryKey, to: &ids)
            appendU32(UInt32(entry.row), to: &ids)
        }
        return (rows.count, idEntrySize, ids)
    }

    /// The row table: where each row's bytes are, in row order.
    private static func rowTableSection(_ places: [CheckpointRow]) -> SectionBody {
        var table = [UInt8]()
        table.reserveCapacity(places.count * rowEntrySize)
        for place in places {
            appendU64(UInt64(place.offset), to: &table)
            appendU32(UInt32(truncatingIfNeeded: place.length), to: &table)
            appendU32(place.checksum, to: &table)
        }
        return (places.count, rowEntrySize, table)
    }

    /// A declared index's section: the row numbers of its entries, in the index's order.
    ///
    /// - Throws: ``Unwritable`` when an entry names no row.
    private static func indexSection(_ entries: [IndexEntry], index: Int, of entity: Schema.Entity,
                                     keyed: [KeyedRow]) throws -> SectionBody {
        // An index entry's row number, by binary search over the keys sorted: cheaper than hashing them.
        func number(of id: UUID) -> Int? {
            let target = IndexEntryWords.words(id)
            var lo = 0, hi = keyed.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if keyed[mid].words < target { lo = mid + 1 } else { hi = mid }
            }
            return lo < keyed.count && keyed[lo].words == target ? keyed[lo].row : nil
        }
        var section = [UInt8]()
        section.reserveCapacity(entries.count * rowNumberSize)
        for entry in entries {
            guard let number = number(of: entry.id.primaryKey) else {
                throw Unwritable(description: "index \(index) of \(entity.name) lists \(entry.id), not a row")
            }
            appendU32(UInt32(number), to: &section)
        }
        return (entries.count, rowNumberSize, section)
    }

    /// A unique constraint's section: the row numbers of the rows with no null in the key, by key, then row.
    private static func uniqueSection(_ constraint: [String], of entity: Schema.Entity, rows: [ModelSnapshot])
        -> SectionBody {
        let slots = constraint.compactMap(entity.attributeIndex(named:))
        var holders: [(key: [StoredValue], row: Int)] = []
        for (n, row) in rows.enumerated() {
            let key = slots.map { row.attributes[$0] }
            if !key.contains(where: \.isNull) { holders.append((key, n)) }
        }
        holders.sort { a, b in
            let c = compareKeys(a.key, b.key)
            return c != 0 ? c < 0 : a.row < b.row
        }
        var section = [UInt8]()
        section.reserveCapacity(holders.count * rowNumberSize)
        for holder in holders { appendU32(UInt32(holder.row), to: &section) }
        return (holders.count, rowNumberSize, section)
    }

    /// The file: the magic line and the header, in as many pages as the header takes, then each section's pages.
    private static func layOut(_ opening: CheckpointOpening, described: [DescribedEntity], bodies: [SectionBody])
        -> [UInt8] {
        // The header names the sections' pages, which follow the header's own pages: lay them out from one
        // header page, and again from as many as the header took, until it fits.
        var headerPages = 1
        while true {
            var page = headerPages
            var sections: [CheckpointSection] = []
            for body in bodies {
                let pages = Self.pages(body.entries, size: body.size)
                sections.append(CheckpointSection(entries: body.entries, page: page, pages: pages))
                page += pages
            }
            var next = sections.makeIterator()
            let header = CheckpointHeader(
                store: opening.store, segment: opening.segment, segmentRecord: opening.segmentRecord,
                schemas: opening.schemas, history: opening.history, snapshotOffset: opening.snapshotOffset,
                lastTransactionNumber: opening.lastTransactionNumber, rowCount: opening.rowCount, end: opening.end,
                lastRecord: opening.lastRecord, pageSize: pageSize,
                entities: described.map { entity in
                    CheckpointHeader.Entity(
                        name: entity.name, rows: entity.rows, ids: next.next()!, rowTable: next.next()!,
                        indexes: entity.indexes.map { .init(properties: $0, section: next.next()!) },
                        uniques: entity.uniques.map { .init(properties: $0, section: next.next()!) })
                },
                blobs: next.next()!)
            var file = magic + encodeHeader(header)
            guard file.count <= headerPages * pageSize else {
                headerPages = (file.count + pageSize - 1) / pageSize
                continue
            }
            file.reserveCapacity(page * pageSize)
            file += [UInt8](repeating: 0, count: headerPages * pageSize - file.count)
            for body in bodies { appendPages(of: body, to: &file) }
            return file
        }
    }

    /// Appends a section's entries to `file`, as many to a page as fit, each page zero-filled and checksummed.
    private static func appendPages(of body: SectionBody, to file: inout [UInt8]) {
        let perPage = Self.perPage(body.size)
        var start = 0
        while start < body.bytes.count {
            let end = min(body.bytes.count, start + perPage * body.size)
            let pageStart = file.count
            file += body.bytes[start..<end]
            file += [UInt8](repeating: 0, count: pageBody - (end - start))
            let crc = file.withUnsafeBytes {
                CRC32C.masked(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[pageStart..<(pageStart + pageBody)])))
            }
            appendU32(crc, to: &file)
            start = end
        }
    }

    /// How two keys compare, component by component (``StoredValue/compare(_:_:)``): the order of a unique section.
    static func compareKeys(_ a: [StoredValue], _ b: [StoredValue]) -> Int {
        for i in 0..<min(a.count, b.count) {
            let c = StoredValue.compare(a[i], b[i])
            if c != 0 { return c }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    // MARK: Header

    static func encodeHeader(_ header: CheckpointHeader) -> [UInt8] {
        var writer = RecordFrame.writer(reservingCapacity: 512 + header.entities.count * 256)
        func tie(_ tie: RecordTie) {
            writer.beginObject()
            writer.key("offset"); writer.int(Int64(tie.offset))
            writer.key("length"); writer.int(Int64(tie.length))
            writer.key("checksum"); writer.string(hex(tie.checksum))
            writer.endObject()
        }
        func range(_ range: Range<Int>) {
            writer.beginObject()
            writer.key("offset"); writer.int(Int64(range.lowerBound))
            writer.key("end"); writer.int(Int64(range.upperBound))
            writer.endObject()
        }
        func pages(_ section: CheckpointSection) {
            writer.key("page"); writer.int(Int64(section.page))
            writer.key("pages"); writer.int(Int64(section.pages))
        }
        func keyed(_ sections: [CheckpointHeader.KeyedSection]) {
            writer.beginArray()
            for keyed in sections {
                writer.beginObject()
                writer.key("properties")
                writer.beginArray()
                for property in keyed.properties { writer.string(property) }
                writer.endArray()
                writer.key("entries"); writer.int(Int64(keyed.section.entries))
                pages(keyed.section)
                writer.endObject()
            }
            writer.endArray()
        }
        writer.beginObject()
        writer.key("k"); writer.string("checkpoint")
        writer.key("store"); writer.uuid(header.store)
        writer.key("segment"); writer.int(Int64(header.segment))
        writer.key("segmentRecord"); tie(header.segmentRecord)
        writer.key("schemas"); range(header.schemas)
        writer.key("history"); range(header.history)
        writer.key("snapshot")
        writer.beginObject()
        writer.key("offset"); writer.int(Int64(header.snapshotOffset))
        writer.key("lastTx"); writer.uint(header.lastTransactionNumber)
        writer.key("rows"); writer.int(Int64(header.rowCount))
        writer.endObject()
        writer.key("end"); writer.int(Int64(header.end))
        writer.key("lastRecord"); tie(header.lastRecord)
        writer.key("pageSize"); writer.int(Int64(header.pageSize))
        writer.key("entities")
        writer.beginArray()
        for entity in header.entities {
            writer.beginObject()
            writer.key("e"); writer.string(entity.name)
            writer.key("rows"); writer.int(Int64(entity.rows))
            writer.key("ids"); writer.beginObject(); pages(entity.ids); writer.endObject()
            writer.key("rowTable"); writer.beginObject(); pages(entity.rowTable); writer.endObject()
            writer.key("indexes"); keyed(entity.indexes)
            writer.key("uniques"); keyed(entity.uniques)
            writer.endObject()
        }
        writer.endArray()
        writer.key("blobs")
        writer.beginObject()
        writer.key("count"); writer.int(Int64(header.blobs.entries))
        pages(header.blobs)
        writer.endObject()
        writer.endObject()
        return RecordFrame.seal(writer)
    }

    /// Decodes a header payload, strictly: every member required, none unknown, numbers in range.
    ///
    /// - Throws: ``CheckpointDamage`` naming `file` and the offset of what is wrong.
    static func decodeHeader(_ payload: UnsafeRawBufferPointer, offset: Int, file: String) throws -> CheckpointHeader {
        var reader = JSONReader(payload, baseOffset: offset)
        let members = HeaderMembers(file: file)
        do {
            var kind: String?, store: UUID?, segment: Int?, segmentRecord: RecordTie?, schemas: Range<Int>?
            var history: Range<Int>?, snapshot: (Int, UInt64, Int)?, end: Int?, lastRecord: RecordTie?
            var pageSize: Int?, entities: [CheckpointHeader.Entity]?, blobs: CheckpointSection?
            let start = reader
            try reader.readObject { member, key in
                switch key {
                case "k": kind = try member.readString()
                case "store": store = try member.readUUID()
                case "segment": segment = try members.count(&member)
                case "segmentRecord": segmentRecord = try members.tie(&member)
                case "schemas": schemas = try members.range(&member)
                case "history": history = try members.range(&member)
                case "snapshot": snapshot = try members.snapshot(&member)
                case "end": end = try members.count(&member)
                case "lastRecord": lastRecord = try members.tie(&member)
                case "pageSize": pageSize = try members.count(&member)
                case "entities":
                    var all: [CheckpointHeader.Entity] = []
                    try member.readArray { all.append(try members.entity(&$0)) }
                    entities = all
                case "blobs": blobs = try members.section(&member, entriesKey: "count", properties: nil)
                default:
                    throw members.fail(member, "unknown key \(String(reflecting: key.string)) in a checkpoint header")
                }
            }
            try reader.finish()
            guard kind == "checkpoint" else { throw members.fail(start, "the header is not a checkpoint record") }
            guard let store, let segment, let segmentRecord, let schemas, let history, let snapshot, let end,
                  let lastRecord, let pageSize, let entities, let blobs else {
                throw members.fail(start, "the checkpoint header lacks a member")
            }
            return CheckpointHeader(store: store, segment: segment, segmentRecord: segmentRecord, schemas: schemas,
                                    history: history, snapshotOffset: snapshot.0, lastTransactionNumber: snapshot.1,
                                    rowCount: snapshot.2, end: end, lastRecord: lastRecord, pageSize: pageSize,
                                    entities: entities, blobs: blobs)
        } catch let error as JSONReadError {
            throw CheckpointDamage(file: file, offset: error.offset, reason: error.reason)
        }
    }

    /// The readers of a header's members, each strict, each failing with a ``CheckpointDamage`` in `file`.
    private struct HeaderMembers {
        let file: String

        func fail(_ at: JSONReader, _ reason: String) -> CheckpointDamage {
            CheckpointDamage(file: file, offset: at.offset, reason: reason)
        }

        func count(_ member: inout JSONReader) throws -> Int {
            let at = member
            let value = try member.readInt64()
            guard value >= 0, value <= Int64(Int32.max) * 4096 else { throw fail(at, "\(value) is out of range") }
            return Int(value)
        }

        func tie(_ member: inout JSONReader) throws -> RecordTie {
            var offset: Int?, length: Int?, checksum: UInt32?
            let at = member
            try member.readObject { value, key in
                switch key {
                case "offset": offset = try count(&value)
                case "length": length = try count(&value)
                case "checksum":
                    let text = try value.readString()
                    guard text.utf8.count == 8, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
                          let parsed = UInt32(text, radix: 16) else { throw fail(value, "a checksum is 8 lowercase hex digits") }
                    checksum = parsed
                default: throw fail(value, "unknown key \(String(reflecting: key.string))")
                }
            }
            guard let offset, let length, let checksum else { throw fail(at, "a record tie lacks a member") }
            return RecordTie(offset: offset, length: length, checksum: checksum)
        }

        func range(_ member: inout JSONReader) throws -> Range<Int> {
            var offset: Int?, end: Int?
            let at = member
            try member.readObject { value, key in
                switch key {
                case "offset": offset = try count(&value)
                case "end": end = try count(&value)
                default: throw fail(value, "unknown key \(String(reflecting: key.string))")
                }
            }
            guard let offset, let end, offset <= end else { throw fail(at, "a byte range lacks a member or is reversed") }
            return offset..<end
        }

        /// The snapshot's offset, last transaction and row count.
        func snapshot(_ member: inout JSONReader) throws -> (Int, UInt64, Int) {
            var offset: Int?, lastTx: UInt64?, rows: Int?
            let at = member
            try member.readObject { value, key in
                switch key {
                case "offset": offset = try count(&value)
                case "lastTx": lastTx = try value.readUInt64()
                case "rows": rows = try count(&value)
                default: throw fail(value, "unknown key \(String(reflecting: key.string))")
                }
            }
            guard let offset, let lastTx, let rows else { throw fail(at, "the snapshot lacks a member") }
            return (offset, lastTx, rows)
        }

        func section(_ member: inout JSONReader, entriesKey: StaticString?, properties: UnsafeMutablePointer<[String]>?) throws
            -> CheckpointSection {
            var entries: Int?, page: Int?, pages: Int?
            let at = member
            try member.readObject { value, key in
                switch key {
                case "page": page = try count(&value)
                case "pages": pages = try count(&value)
                case "properties" where properties != nil:
                    var names: [String] = []
                    try value.readArray { names.append(try $0.readString()) }
                    properties!.pointee = names
                default:
                    if let entriesKey, key == entriesKey { entries = try count(&value) } else {
                        throw fail(value, "unknown key \(String(reflecting: key.string))")
                    }
                }
            }
            guard let page, let pages, entriesKey == nil || entries != nil else {
                throw fail(at, "a section lacks a member")
            }
            return CheckpointSection(entries: entries ?? -1, page: page, pages: pages)
        }

        func keyed(_ member: inout JSONReader) throws -> [CheckpointHeader.KeyedSection] {
            var all: [CheckpointHeader.KeyedSection] = []
            try member.readArray { element in
                var names: [String] = []
                let found = try section(&element, entriesKey: "entries", properties: &names)
                all.append(.init(properties: names, section: found))
            }
            return all
        }

        /// One entity of the header's `entities`: its name, row count and sections.
        func entity(_ element: inout JSONReader) throws -> CheckpointHeader.Entity {
            var name: String?, rows: Int?, ids: CheckpointSection?, table: CheckpointSection?
            var indexes: [CheckpointHeader.KeyedSection]?, uniques: [CheckpointHeader.KeyedSection]?
            let at = element
            try element.readObject { value, key in
                switch key {
                case "e": name = try value.readString()
                case "rows": rows = try count(&value)
                case "ids": ids = try section(&value, entriesKey: nil, properties: nil)
                case "rowTable": table = try section(&value, entriesKey: nil, properties: nil)
                case "indexes": indexes = try keyed(&value)
                case "uniques": uniques = try keyed(&value)
                default: throw fail(value, "unknown key \(String(reflecting: key.string))")
                }
            }
            guard let name, let rows, var ids, var table, let indexes, let uniques else {
                throw fail(at, "an entity lacks a member")
            }
            ids.entries = rows
            table.entries = rows
            return .init(name: name, rows: rows, ids: ids, rowTable: table, indexes: indexes, uniques: uniques)
        }
    }

    // MARK: Bytes

    static func appendU32(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    static func appendU64(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    static func appendUUID(_ uuid: UUID, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: uuid.uuid) { bytes += $0 }
    }

    private static func appendHexBytes(_ name: String, to bytes: inout [UInt8]) {
        var high: UInt8?
        for char in name.utf8 {
            let digit = char <= 0x39 ? char - 0x30 : char - 0x61 + 10
            if let h = high { bytes.append(h << 4 | digit); high = nil } else { high = digit }
        }
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

/// A primary key's 16 bytes as two big-endian words: comparing them compares the bytes, unsigned.
enum IndexEntryWords {
    static func words(_ uuid: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) {
            (UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)),
             UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }
}
