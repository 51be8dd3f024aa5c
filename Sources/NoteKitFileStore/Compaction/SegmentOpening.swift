#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A committed state written as the opening of a segment (docs/FORMAT.md, *Writing, rotation and compaction*): the
/// schema history, the history kept, the `snapshot` record and the rows, at most 4,096 to a `rows` record. A
/// compaction writes one as the new segment of its store, a backup as the one segment of a new store.
///
/// The rows are encoded while the segment is written (``records``), so that the encoded state, as large as the
/// segment, is never in memory at once; the places a checkpoint records are learned meanwhile from the encoder (each
/// row's span in its record) and the segment's writer (each record's offset, through ``places``).
struct SegmentOpening {
    let schemas: [Schema]
    /// The schema the rows follow (the last of `schemas`).
    let schema: Schema
    /// The rows, one list per entity of `schema`, in its entity order.
    let entityRows: [[ModelSnapshot]]
    let lastTransactionNumber: UInt64
    /// The `history` records, encoded: at most about 16,384 changes each, the first carrying the deleted ranges.
    let historyRecords: [[UInt8]]
    let places: CheckpointPlaces
    private let encoder = RecordEncoder()

    /// The rows of one `rows` record unless a configuration says otherwise (``FileStoreConfiguration/rowsPerRecord``).
    static let defaultRowsPerRecord = 4096

    /// The most rows one `rows` record holds.
    private let rowsPerRecord: Int

    init(schemas: [Schema], schema: Schema, entityRows: [[ModelSnapshot]], history: HistoryLog,
         lastTransactionNumber: UInt64, rowsPerRecord: Int = Self.defaultRowsPerRecord) {
        self.rowsPerRecord = max(1, rowsPerRecord)
        self.schemas = schemas
        self.schema = schema
        self.entityRows = entityRows
        self.lastTransactionNumber = lastTransactionNumber
        historyRecords = Self.historyRecords(history, encoder: encoder)
        places = CheckpointPlaces(entities: schema.entities)
    }

    /// Every row, in entity order.
    var rowCount: Int { entityRows.reduce(0) { $0 + $1.count } }

    /// The records of the opening, in order; the `rows` records encoded as they are read.
    var records: some Sequence<[UInt8]> {
        let encoder = encoder, places = places, schema = schema, rowsPerRecord = rowsPerRecord
        let opening = schemas.map(encoder.schema) + historyRecords
            + [encoder.snapshot(lastTransactionNumber: lastTransactionNumber, rowCount: rowCount)]
        var chunks: [(entity: Schema.Entity, rows: ArraySlice<ModelSnapshot>)] = []
        for (entity, rows) in zip(schema.entities, entityRows) {
            var start = rows.startIndex
            while start < rows.endIndex {
                let end = min(rows.endIndex, start + rowsPerRecord)
                chunks.append((entity, rows[start..<end]))
                start = end
            }
        }
        return [AnySequence(opening), AnySequence(chunks.lazy.map { chunk in
            var spans: [Range<Int>]? = []
            let record = encoder.rows(entity: chunk.entity, chunk.rows, spans: &spans)
            places.encoded(record, entity: chunk.entity.name, spans: spans ?? [])
            return record
        })].joined()
    }

    /// The blobs the rows name, by name, with the size their records give.
    var referencedExternalData: [String: ExternalData] {
        FileStore.referencedExternalData(entityRows.flatMap { $0 }, schema: schema)
    }

    /// The checkpoint of the opening once it is written as segment `segment` of store `store` (its records went
    /// through ``records`` and their offsets to ``places``).
    ///
    /// - Parameter indexEntries: the sorted entries of each entity's index, as the rows' store holds them.
    /// - Throws: ``Checkpoint/Unwritable`` when the state cannot be described, or what `indexEntries` throws.
    func checkpoint(store: UUID, segment: Int,
                    indexEntries: (_ entity: String, _ index: Int) throws -> [IndexEntry]) throws -> [UInt8] {
        let opening = try places.opening(store: store, segment: segment, schemaRecords: schemas.count,
                                         historyRecords: historyRecords.count,
                                         lastTransactionNumber: lastTransactionNumber, rowCount: rowCount)
        return try Checkpoint.encode(
            opening, schema: schema,
            entities: zip(schema.entities, entityRows).map { entity, rows in
                Checkpoint.EntityRows(entity: entity, rows: rows, places: places.places[entity.name] ?? [])
            },
            indexEntries: indexEntries, blobs: Set(referencedExternalData.keys))
    }

    /// The history as `history` records of at most about 16,384 changes each; the first carries the deleted ranges.
    private static func historyRecords(_ history: HistoryLog, encoder: RecordEncoder) -> [[UInt8]] {
        guard !history.records.isEmpty || !history.deleted.isEmpty else { return [] }
        var chunks: [[UInt8]] = []
        var start = history.records.startIndex, changes = 0
        for index in history.records.indices {
            changes += history.records[index].changeCount + 1
            if changes >= 16_384 {
                chunks.append(encoder.history(history.records[start...index], deleted: chunks.isEmpty ? history.deleted : []))
                start = index + 1
                changes = 0
            }
        }
        if start < history.records.endIndex || chunks.isEmpty {
            chunks.append(encoder.history(history.records[start...], deleted: chunks.isEmpty ? history.deleted : []))
        }
        return chunks
    }
}
