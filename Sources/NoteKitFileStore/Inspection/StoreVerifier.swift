import FoundationEssentials
import NoteKit

/// What `notekit verify` finds: every problem of a store, each with its file, byte offset and kind.
public struct VerificationReport: Sendable, Hashable {
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        public var file: String
        public var offset: Int
        public var kind: Kind
        public var message: String

        public var description: String { "\(file) at byte \(offset): \(kind.rawValue): \(message)" }
    }

    /// The kinds of problem.
    public enum Kind: String, Sendable, Hashable, Codable {
        case missingManifest, notAStoreFile, unsupportedFormatVersion, missingSegment, inconsistentSegments
        /// An incomplete or checksum-failing last record of the last segment (what a crash leaves; the next
        /// writable open excludes it).
        case tornTail
        case checksumMismatch, malformedRecord, truncatedRecord, undecodableRecord
        /// A transaction that does not apply to the state before it (it names an object that does not exist).
        case danglingReference
        /// A relationship whose target does not exist.
        case danglingRelationship
        case missingBlob, blobSizeMismatch, blobChecksumMismatch
        /// A compaction's snapshot followed by fewer rows than it lists: only part of a committed state, which no
        /// open uses.
        case incompleteSnapshot
    }

    public var problems: [Problem] = []
    /// Whether the store is healthy.
    public var ok: Bool { problems.isEmpty }
}

/// Reads everything of a store, writes nothing, and reports every problem instead of stopping at the first.
public enum StoreVerifier {
    /// Verifies the store at `url`: the manifest, every record of every segment (framing, checksum, decoding, and
    /// whether each transaction applies), every relationship of the final state, and every blob (presence, size and
    /// SHA-256). Works on a read-only copy.
    ///
    /// - Complexity: reads every byte of the store once, blobs included.
    public static func verify(at url: URL, fileSystem: any StoreFileSystem = POSIXFileSystem()) -> VerificationReport {
        let layout = StoreLayout(root: url.path)
        var report = VerificationReport()
        func problem(_ file: String, _ offset: Int, _ kind: VerificationReport.Kind, _ message: String) {
            report.problems.append(.init(file: file, offset: offset, kind: kind, message: message))
        }
        guard fileSystem.exists(layout.manifest) else {
            problem(layout.manifest, 0, .missingManifest, "there is no manifest")
            return report
        }
        let manifest: Manifest
        do { manifest = try SegmentLog.readManifest(layout: layout, fileSystem: fileSystem) } catch {
            let (kind, offset) = classify(error)
            problem(layout.manifest, offset, kind, "\(error)")
            return report
        }

        var schemas: [Schema] = []
        var objects = ReplayedObjects()
        var lastWrite: [PersistentIdentifier: (file: String, offset: Int)] = [:]
        let blobStore = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
        for (position, number) in manifest.segments.enumerated() {
            let path = layout.segment(number)
            guard let bytes = try? fileSystem.read(path) else {
                problem(path, 0, .missingSegment, "the manifest lists segment \(number) but it cannot be read")
                continue
            }
            let isLast = position == manifest.segments.count - 1
            bytes.withUnsafeBytes { buffer in
                let version: Int, start: Int
                do { (version, start) = try MagicLine.parse(buffer, expecting: .segment, file: path) } catch {
                    let (kind, offset) = classify(error)
                    problem(path, offset, kind, "\(error)")
                    return
                }
                guard let decoder = RecordDecoders.decoder(for: version, blobs: blobStore) else { return }
                var first = true
                // A compaction's snapshot and how many of the rows it lists arrived intact.
                var snapshot: (offset: Int, rows: Int, arrived: Int)?
                defer {
                    if let snapshot, snapshot.arrived < snapshot.rows {
                        problem(path, snapshot.offset, .incompleteSnapshot,
                                "the snapshot lists \(snapshot.rows) rows and \(snapshot.arrived) follow it intact: "
                                    + "no open uses part of a snapshot")
                    }
                }
                RecordFrame.walk(buffer, from: start) { range, _ in
                    defer { first = false }
                    let recordStart = range.lowerBound - RecordFrame.headerLength
                    do {
                        let record = try decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[range]),
                                                        offset: range.lowerBound, file: path, schema: schemas.last)
                        switch record {
                        case .segment(let header):
                            if !first { problem(path, recordStart, .inconsistentSegments, "a segment record in the middle") }
                            if header.store != manifest.store || header.number != number {
                                problem(path, recordStart, .inconsistentSegments,
                                        "it says it is segment \(header.number) of store \(header.store)")
                            }
                        case .schema(let schema):
                            schemas.append(schema)
                            objects.schemaInForce(schema)
                        case .migration(let migration):
                            if let previous = schemas.last, let reason = objects.migrate(from: previous, by: migration) {
                                problem(path, recordStart, .danglingReference, reason)
                            }
                            schemas.append(migration.schema)
                            objects.schemaInForce(migration.schema)
                        case .snapshot(let last, let rows):
                            objects.beginSnapshot(after: last)
                            snapshot = (recordStart, rows, 0)
                        case .rows(_, let rows):
                            snapshot?.arrived += rows.count
                            if let reason = objects.addSnapshotRows(rows) {
                                problem(path, recordStart, .undecodableRecord, reason)
                            }
                            for row in rows { lastWrite[row.id] = (path, recordStart) }
                        case .transaction(let transaction):
                            if let reason = objects.apply(transaction, consecutive: false) {
                                problem(path, recordStart, .danglingReference, reason)
                            }
                            for row in transaction.changes.inserted { lastWrite[row.id] = (path, recordStart) }
                            for update in transaction.changes.updated { lastWrite[update.id] = (path, recordStart) }
                        case .history, .trim:
                            // Decoding checked their shape; history refers to no live object.
                            break
                        case .manifest:
                            problem(path, recordStart, .undecodableRecord, "a manifest record in a segment")
                        }
                        if first && !record.isSegmentHeader {
                            problem(path, recordStart, .inconsistentSegments,
                                    "the segment does not begin with a segment record")
                        }
                    } catch {
                        let (kind, offset) = classify(error)
                        problem(path, offset == 0 ? recordStart : offset, kind, "\(error)")
                    }
                } damaged: { offset, length, reason, resumes in
                    let torn = isLast && !resumes
                    let kind: VerificationReport.Kind = torn ? .tornTail
                        : reason == "checksum mismatch" ? .checksumMismatch
                        : reason.contains("past the end") || reason.contains("fewer than") ? .truncatedRecord : .malformedRecord
                    problem(path, offset, kind, "\(reason) (\(length) bytes)")
                } reserved: { offset, length in
                    // Allowed at the end of the last segment only: the writer cuts it off before rotating.
                    if !isLast {
                        problem(path, offset, .malformedRecord,
                                "\(length) zero bytes follow the last record of a segment that is not the last")
                    }
                }
            }
        }

        // The final state: every relationship reaches an object, every blob is whole.
        let rows = objects.rows
        let present = Set(rows.map(\.id))
        if let schema = schemas.last {
            for row in rows {
                guard let entity = schema.entity(named: row.id.entityName) else { continue }
                let place = lastWrite[row.id] ?? (layout.root, 0)
                for (slot, relationship) in entity.relationships.enumerated() {
                    for target in row.relationships[slot].identifiers where !present.contains(target) {
                        problem(place.file, place.offset, .danglingRelationship,
                                "\(row.id).\(relationship.name) points at \(target), which does not exist")
                    }
                }
                for (slot, attribute) in entity.attributes.enumerated() where attribute.has(.externalStorage) {
                    guard case .external(let blob) = row.attributes[slot] else { continue }
                    let path = blobStore.path(of: blob.name)
                    guard let bytes = try? fileSystem.read(path) else {
                        problem(path, 0, .missingBlob, "\(row.id).\(attribute.name) names a blob that is missing")
                        continue
                    }
                    if bytes.count != blob.size {
                        problem(path, 0, .blobSizeMismatch, "\(bytes.count) bytes; the record says \(blob.size)")
                    } else if SHA256Digest.hexString(Data(bytes)) != blob.name {
                        problem(path, 0, .blobChecksumMismatch, "its bytes do not hash to its name")
                    }
                }
            }
        }
        return report
    }

    /// The kind and offset of an error met while reading.
    private static func classify(_ error: any Error) -> (VerificationReport.Kind, Int) {
        switch error as? FileStoreError {
        case .unsupportedFormatVersion?: (.unsupportedFormatVersion, 0)
        case .notAStoreFile?: (.notAStoreFile, 0)
        case .damagedRecord(_, let offset, let reason)?: (reason == "checksum mismatch" ? .checksumMismatch : .malformedRecord, offset)
        case .undecodableRecord(_, let offset, _)?: (.undecodableRecord, offset)
        case .inconsistentSegments?: (.inconsistentSegments, 0)
        case .danglingReference(_, let offset, _)?: (.danglingReference, offset)
        default: (.undecodableRecord, 0)
        }
    }
}

extension RecordFrame {
    /// Visits the intact records of `buffer` from `start`, and the damaged stretches between them: for each, its
    /// offset, its length (to the next intact record, or the end), the reason, and whether an intact record follows.
    /// Zeros from the end of a record to the end of the buffer are reserved space, not damage: `reserved` gets
    /// their offset and length.
    static func walk(_ buffer: UnsafeRawBufferPointer, from start: Int,
                     record: (_ payload: Range<Int>, _ next: Int) -> Void,
                     damaged: (_ offset: Int, _ length: Int, _ reason: String, _ resumes: Bool) -> Void,
                     reserved: (_ offset: Int, _ length: Int) -> Void = { _, _ in }) {
        var offset = start
        while offset < buffer.count {
            switch scan(buffer, at: offset) {
            case let .record(payload, next):
                record(payload, next)
                offset = next
            case .truncated where isReservedSpace(buffer, from: offset),
                 .invalid where isReservedSpace(buffer, from: offset):
                reserved(offset, buffer.count - offset)
                return
            case .truncated(let reason), .invalid(let reason):
                let resume = nextIntactRecord(in: buffer, after: offset)
                damaged(offset, (resume ?? buffer.count) - offset, reason, resume != nil)
                offset = resume ?? buffer.count
            }
        }
    }
}

extension StoreRecord {
    var isSegmentHeader: Bool {
        if case .segment = self { return true }
        return false
    }
}
