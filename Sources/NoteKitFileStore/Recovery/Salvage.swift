import FoundationEssentials
import NoteKit

extension FileStore {
    /// What a salvage kept and what it left out.
    public struct SalvageReport: Sendable, Hashable {
        /// Transactions copied into the new store.
        public var transactionsKept: Int = 0
        /// Objects in the new store.
        public var objectsKept: Int = 0
        /// Stretches of bytes that were not intact records: file, offset, length, reason.
        public var skippedBytes: [Skipped] = []
        /// Intact records that could not be used: file, offset, reason (undecodable, or a transaction that depends
        /// on one that was lost).
        public var skippedRecords: [Skipped] = []

        public struct Skipped: Sendable, Hashable, CustomStringConvertible {
            public var file: String
            public var offset: Int
            public var length: Int
            public var reason: String
            public var description: String { "\(file) at byte \(offset) (\(length) bytes): \(reason)" }
        }

        /// Whether anything was left out.
        public var isComplete: Bool { skippedBytes.isEmpty && skippedRecords.isEmpty }
    }

    /// Copies every intact transaction of the damaged store at `source` into a new store at `destination`, and
    /// reports what it left out. `source` is only read.
    ///
    /// Damaged stretches are skipped by finding the next intact record. A transaction is kept when it applies to
    /// the state rebuilt so far (one that updates or deletes an object a lost transaction created is left out, and
    /// so is one whose number does not follow, which marks a gap). The new store holds the result as a snapshot,
    /// with the stored schema history.
    ///
    /// - Parameters:
    ///   - source: the damaged store's directory.
    ///   - destination: where to create the new store; it must not exist.
    ///   - fileSystem: the file operations to use.
    /// - Throws: ``FileStoreError`` when `destination` exists or `source` holds no readable schema; I/O errors.
    public static func salvage(from source: URL, to destination: URL,
                               fileSystem: any StoreFileSystem = POSIXFileSystem()) throws -> SalvageReport {
        let layout = StoreLayout(root: source.path), target = StoreLayout(root: destination.path)
        guard !fileSystem.exists(target.root) else {
            throw FileStoreError.inconsistentSegments(file: target.root, reason: "the salvage destination exists")
        }
        var report = SalvageReport()
        // The manifest says which segments count; without a readable one, every segment file does, in order.
        let numbers: [Int]
        var storeID: UUID?
        if let manifest = try? SegmentLog.readManifest(layout: layout, fileSystem: fileSystem) {
            numbers = manifest.segments
            storeID = manifest.store
        } else {
            numbers = ((try? fileSystem.contentsOfDirectory(layout.segments)) ?? []).compactMap(StoreLayout.segmentNumber)
            report.skippedRecords.append(.init(file: layout.manifest, offset: 0, length: 0,
                                               reason: "the manifest is unreadable; every segment file was read"))
        }

        let sourceBlobs = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
        var schemas: [Schema] = []
        var state = SalvageState()
        for number in numbers {
            let path = layout.segment(number)
            guard let bytes = try? fileSystem.read(path) else {
                report.skippedBytes.append(.init(file: path, offset: 0, length: 0, reason: "the segment is missing"))
                continue
            }
            bytes.withUnsafeBytes { buffer in
                guard let (version, start) = try? MagicLine.parse(buffer, expecting: .segment, file: path),
                      let decoder = RecordDecoders.decoder(for: version, blobs: sourceBlobs) else {
                    report.skippedBytes.append(.init(file: path, offset: 0, length: buffer.count,
                                                     reason: "not a segment of a format this build reads"))
                    return
                }
                RecordFrame.walk(buffer, from: start) { payload, next in
                    let offset = payload.lowerBound - RecordFrame.headerLength
                    do {
                        let record = try decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[payload]),
                                                        offset: payload.lowerBound, file: path, schema: schemas.last)
                        switch record {
                        case .schema(let schema):
                            schemas.append(schema)
                            state.schemaInForce(schema)
                        case .migration(let migration):
                            if let previous = schemas.last, let reason = state.migrate(from: previous, by: migration) {
                                report.skippedRecords.append(.init(file: path, offset: offset, length: next - offset,
                                                                   reason: reason))
                            } else {
                                report.transactionsKept += 1
                            }
                            schemas.append(migration.schema)
                            state.schemaInForce(migration.schema)
                        case .segment(let header):
                            if storeID == nil { storeID = header.store }
                        default:
                            if let reason = state.apply(record) {
                                report.skippedRecords.append(.init(file: path, offset: offset, length: next - offset,
                                                                   reason: reason))
                            } else if case .transaction = record {
                                report.transactionsKept += 1
                            }
                        }
                    } catch {
                        report.skippedRecords.append(.init(file: path, offset: offset, length: next - offset,
                                                           reason: "\(error)"))
                    }
                } damaged: { offset, length, reason, _ in
                    report.skippedBytes.append(.init(file: path, offset: offset, length: length, reason: reason))
                }
            }
        }
        guard let schema = schemas.last else {
            throw FileStoreError.undecodableRecord(file: layout.root, offset: 0, reason: "no readable schema record")
        }

        // Write the new store: the schema history, a snapshot and the rows, copying the blobs they name.
        let rows = state.rows
        let encoder = RecordEncoder()
        var records = schemas.map(encoder.schema)
        records.append(encoder.snapshot(lastTransaction: state.lastTransaction, rowCount: rows.count))
        for entity in schema.entities {
            let entityRows = rows.filter { $0.id.entityName == entity.name }
            var start = 0
            while start < entityRows.count {
                let end = min(entityRows.count, start + 4096)
                records.append(encoder.rows(entity: entity, entityRows[start..<end]))
                start = end
            }
        }
        let log = try SegmentLog.create(layout: target, fileSystem: fileSystem, store: storeID ?? UUID(), now: Date(),
                                        records: records)
        try log.close()
        let targetBlobs = BlobStore(directory: target.blobs, fileSystem: fileSystem)
        for name in referencedBlobs(rows, schema: schema) {
            if let bytes = try? fileSystem.read(sourceBlobs.path(of: name)) {
                _ = try targetBlobs.write(Data(bytes))
            } else {
                report.skippedRecords.append(.init(file: sourceBlobs.path(of: name), offset: 0, length: 0,
                                                   reason: "the blob is missing; objects naming it keep the reference"))
            }
        }
        report.objectsKept = rows.count
        return report
    }
}

/// The state a salvage rebuilds: like a replay, but a transaction that does not apply is left out, not fatal. A
/// transaction after a gap in the numbering still applies when the objects it touches exist.
private struct SalvageState {
    private var objects = ReplayedObjects()
    var rows: [ModelSnapshot] { objects.rows }
    var lastTransaction: UInt64 { objects.lastTransaction }

    /// Applies `record`, or returns why it was left out.
    mutating func apply(_ record: StoreRecord) -> String? {
        switch record {
        case let .snapshot(last, _):
            objects.beginSnapshot(after: last)
            return nil
        case .rows(_, let rows):
            return objects.addSnapshotRows(rows)
        case .transaction(let transaction):
            return objects.apply(transaction, consecutive: false)
        case .segment, .schema, .manifest, .migration, .history, .trim:
            // A salvaged store starts a new history: what a damaged log says of it is not worth the doubt.
            return nil
        }
    }

    mutating func schemaInForce(_ schema: Schema) { objects.schemaInForce(schema) }

    mutating func migrate(from previous: Schema, by migration: MigrationRecord) -> String? {
        objects.migrate(from: previous, by: migration, consecutive: false)
    }
}
