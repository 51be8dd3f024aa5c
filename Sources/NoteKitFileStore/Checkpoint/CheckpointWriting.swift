#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// What a compaction learns of its segment as it writes it, for the checkpoint: each record's offset and frame
/// (from the segment's writer), and each row's span in its `rows` record (from the encoder), joined into places in
/// the file. Nothing is read back and nothing is encoded twice; each row's checksum is computed over the bytes
/// just encoded.
final class CheckpointPlaces {
    /// Each record's tie, in the order written: the `segment` record first.
    private(set) var ties: [RecordTie] = []
    /// Each entity's rows' places, in row-number order.
    private(set) var places: [String: [CheckpointRow]] = [:]
    /// The spans (in the record) and checksums of the `rows` record last encoded, until its offset is known.
    private var pending: (entity: String, rows: [(span: Range<Int>, checksum: UInt32)])?
    private var malformed = false

    init(entities: [Schema.Entity]) {
        for entity in entities { places[entity.name] = [] }
    }

    /// The encoder made `record`, a `rows` record of `entity` whose row objects are at `spans` in it.
    func encoded(_ record: [UInt8], entity: String, spans: [Range<Int>]) {
        let rows = record.withUnsafeBytes { buffer in
            spans.map { span in (span, CRC32C.masked(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[span])))) }
        }
        pending = (entity, rows)
    }

    /// The segment's writer put `record` at `offset`.
    func written(_ offset: Int, _ record: [UInt8]) {
        guard let tie = RecordTie(framed: record, at: offset) else {
            malformed = true
            return
        }
        ties.append(tie)
        if let pending {
            places[pending.entity, default: []] += pending.rows.map {
                CheckpointRow(offset: offset + $0.span.lowerBound, length: $0.span.count, checksum: $0.checksum)
            }
            self.pending = nil
        }
    }

    /// The opening written: the `segment` record, `schemaRecords` schema records, `historyRecords` history
    /// records, the snapshot, then the rows.
    ///
    /// - Throws: ``Checkpoint/Unwritable`` when the records written are not such an opening.
    func opening(store: UUID, segment: Int, schemaRecords: Int, historyRecords: Int, lastTransactionNumber: UInt64,
                 rowCount: Int) throws -> CheckpointOpening {
        let snapshot = 1 + schemaRecords + historyRecords
        guard !malformed, schemaRecords > 0, ties.count > snapshot else {
            throw Checkpoint.Unwritable(description: "the segment written is not a compaction's opening")
        }
        let history = historyRecords == 0 ? ties[snapshot].offset..<ties[snapshot].offset
            : ties[1 + schemaRecords].offset..<ties[snapshot - 1].end
        return CheckpointOpening(store: store, segment: segment, segmentRecord: ties[0],
                                 schemas: ties[1].offset..<ties[schemaRecords].end, history: history,
                                 snapshotOffset: ties[snapshot].offset, lastTransactionNumber: lastTransactionNumber,
                                 rowCount: rowCount, lastRecord: ties[ties.count - 1])
    }
}

extension Checkpoint {
    /// Writes `bytes` as the store's checkpoint: `CHECKPOINT.tmp` written and flushed, renamed over `CHECKPOINT`,
    /// the directory flushed. A failure leaves no `CHECKPOINT.tmp` behind (when the file system lets it be removed).
    ///
    /// - Throws: the I/O error.
    static func write(_ bytes: [UInt8], layout: StoreLayout, fileSystem: any StoreFileSystem) throws {
        let temporary = layout.temporaryCheckpoint
        do {
            try fileSystem.writeFlushedFile(temporary, bytes)
            try fileSystem.rename(temporary, to: layout.checkpoint)
            try fileSystem.syncDirectory(layout.root)
        } catch {
            if (try? fileSystem.kind(of: temporary)) == .regularFile { try? fileSystem.remove(temporary) }
            throw error
        }
    }

    /// The checkpoint a compaction writing segment `number` at `path` would have written, built from the segment's
    /// opening (read with the one record reader, ``SegmentScan``): for a writable open that finds the checkpoint
    /// missing or stale, and for `notekit verify`, which compares it with the file.
    ///
    /// - Parameter store: the manifest's store, which the segment record must name.
    /// - Throws: ``CheckpointDamage`` when the segment's opening is not a compaction's whole opening (no snapshot,
    ///   fewer rows than it counts, a record that does not decode); the I/O error of reading it.
    /// - Complexity: reads and decodes the opening once; O(rows × log rows) for the sorted sections.
    static func build(segment path: String, number: Int, store: UUID, fileSystem: any StoreFileSystem) throws
        -> [UInt8] {
        let scan = try SegmentScan.read(path, number: number, fileSystem: fileSystem)
        var read = OpeningRead(path: path, number: number, store: store)
        do {
            try scan.forEachRecord(blobs: nil) { try read.take($0) }
        } catch is OpeningRead.Done {
        } catch let error as FileStoreError {
            throw read.damage(0, "the segment's opening does not decode: \(error)")
        }
        guard let segmentRecord = read.segmentRecord, let schemas = read.schemas, let schema = read.schema,
              let snapshot = read.snapshot, let lastRecord = read.lastRecord else {
            throw read.damage(scan.end, "the segment's opening is not whole: it ends before the snapshot's rows")
        }
        let perEntity = read.perEntity
        let opening = CheckpointOpening(
            store: store, segment: number, segmentRecord: segmentRecord, schemas: schemas,
            history: read.history ?? snapshot.offset..<snapshot.offset, snapshotOffset: snapshot.offset,
            lastTransactionNumber: snapshot.lastTx, rowCount: snapshot.rows, lastRecord: lastRecord)
        let storage = RowStorage(schema: schema)
        var allRows: [ModelSnapshot] = []
        allRows.reserveCapacity(snapshot.rows)
        for entity in schema.entities { allRows += perEntity[entity.name]?.rows ?? [] }
        storage.load(allRows, transactionNumber: snapshot.lastTx)
        do {
            return try encode(opening, schema: schema,
                              entities: schema.entities.map { entity in
                                  EntityRows(entity: entity, rows: perEntity[entity.name]?.rows ?? [],
                                             places: perEntity[entity.name]?.places ?? [])
                              },
                              indexEntries: { try storage.indexEntries(of: $0, index: $1) },
                              blobs: FileStore.referencedBlobs(allRows, schema: schema))
        } catch let error as Unwritable {
            throw read.damage(snapshot.offset, error.description)
        }
    }

    /// A compaction's opening of a segment as ``build(segment:number:store:fileSystem:)`` reads it, record by
    /// record: where each part is, and the snapshot's rows by entity with the places of their bytes.
    private struct OpeningRead {
        /// Thrown once the snapshot's last row has arrived: the opening is read whole.
        struct Done: Error {}

        let path: String
        let number: Int
        let store: UUID
        let decoder = RecordDecoderV1(blobs: nil)
        var segmentRecord: RecordTie?, schemas: Range<Int>?, history: Range<Int>?
        var snapshot: (offset: Int, lastTx: UInt64, rows: Int)?
        var lastRecord: RecordTie?
        var schema: Schema?
        var perEntity: [String: (rows: [ModelSnapshot], places: [CheckpointRow])] = [:]
        var arrived = 0

        init(path: String, number: Int, store: UUID) {
            self.path = path
            self.number = number
            self.store = store
        }

        func damage(_ offset: Int, _ reason: String) -> CheckpointDamage {
            CheckpointDamage(file: path, offset: offset, reason: reason)
        }

        func tie(_ record: SegmentRecord) -> RecordTie {
            RecordTie(offset: record.recordOffset, length: record.payload.count,
                      checksum: CRC32C.masked(CRC32C.checksum(record.payload)))
        }

        /// Takes the opening's next record, or throws ``Done`` after its last.
        ///
        /// - Throws: ``CheckpointDamage`` when the record does not belong where it stands.
        mutating func take(_ record: SegmentRecord) throws {
            let at = record.recordOffset
            let kind = try record.peek.kind
            guard segmentRecord != nil || kind == .segment else {
                throw damage(at, "the segment does not begin with a segment record")
            }
            switch kind {
            case .segment:
                guard segmentRecord == nil, case .segment(let header) = try record.decode(schema: nil) else {
                    throw damage(at, "a segment record in the middle")
                }
                guard header.store == store, header.number == number else {
                    throw damage(at, "it says it is segment \(header.number) of store \(header.store)")
                }
                segmentRecord = tie(record)
            case .schema where history == nil && snapshot == nil:
                guard case .schema(let decoded) = try record.decode(schema: nil) else { break }
                schema = decoded
                schemas = (schemas?.lowerBound ?? at)..<record.next
            case .history where schemas != nil && snapshot == nil:
                _ = try record.decode(schema: schema)
                history = (history?.lowerBound ?? at)..<record.next
            case .snapshot where schemas != nil && snapshot == nil:
                guard case .snapshot(let lastTx, let rows) = try record.decode(schema: schema) else { break }
                snapshot = (at, lastTx, rows)
                if rows == 0 {
                    lastRecord = tie(record)
                    throw Done()
                }
            case .rows where snapshot != nil:
                try takeRows(record)
            default:
                throw damage(at, snapshot == nil ? "the segment's opening is not a compaction's (no snapshot)"
                             : "a \(kind.rawValue) record inside the snapshot's rows")
            }
        }

        /// Takes a `rows` record of the snapshot: its rows, and where each row's bytes are.
        private mutating func takeRows(_ record: SegmentRecord) throws {
            let decoded = try decoder.decodeRows(record.payload, offset: record.offset, file: path,
                                                 schema: schema!)
            arrived += decoded.rows.count
            guard arrived <= snapshot!.rows else {
                throw damage(record.recordOffset, "more rows follow the snapshot than the \(snapshot!.rows) it lists")
            }
            let places = decoded.spans.map { span in
                let bytes = UnsafeRawBufferPointer(
                    rebasing: record.payload[(span.lowerBound - record.offset)..<(span.upperBound - record.offset)])
                return CheckpointRow(offset: span.lowerBound, length: span.count,
                                     checksum: CRC32C.masked(CRC32C.checksum(bytes)))
            }
            perEntity[decoded.entity, default: ([], [])].rows += decoded.rows
            perEntity[decoded.entity, default: ([], [])].places += places
            if arrived == snapshot!.rows {
                lastRecord = tie(record)
                throw Done()
            }
        }
    }
}
