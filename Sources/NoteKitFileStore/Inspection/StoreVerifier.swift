#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `notekit verify` finds: every problem of a store, each with its file, byte offset and kind.
public struct VerificationReport: Sendable, Hashable {
    /// One problem: where it is, what kind it is, and a sentence about it.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The path of the file concerned (the manifest, a segment, a blob, or an entry of `segments/` or
        /// `blobs/`).
        public var file: String
        /// The byte offset in `file` where the problem begins; 0 for a problem of the whole file.
        public var offset: Int
        /// What kind of problem it is: the key a script matches on (`notekit verify --json` prints its raw value).
        public var kind: Kind
        /// What is wrong, as a sentence for a person.
        public var message: String

        /// One line: the file, the offset, the kind and the message, as `notekit verify` prints it.
        public var description: String { "\(file) at byte \(offset): \(kind.rawValue): \(message)" }
    }

    /// The kinds of problem.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The store's directory has no `MANIFEST` (or it does not exist at all).
        case missingManifest
        /// The manifest or a segment does not begin with NoteKit's magic line: it is not a NoteKit file.
        case notAStoreFile
        /// A file is in a store format version this build does not read.
        case unsupportedFormatVersion
        /// The manifest lists a segment that does not exist.
        case missingSegment
        /// The segments do not fit together: one from another store, out of order, or with a `segment` record
        /// where it does not belong.
        case inconsistentSegments
        /// An incomplete or checksum-failing last record of the last segment (what a crash leaves; the next
        /// writable open excludes it).
        case tornTail
        /// A record, not at the torn tail, whose checksum does not match its payload.
        case checksumMismatch
        /// Bytes, not at the torn tail, that do not frame a record: a header that does not parse, a missing
        /// newline, zeros where a record belongs.
        case malformedRecord
        /// A record, not at the torn tail, whose length runs past the end of the file.
        case truncatedRecord
        /// An intact record whose payload is not what the format allows (bad JSON, an unknown kind, a value that
        /// does not fit its type).
        case undecodableRecord
        /// A transaction that does not apply to the state before it (it names an object that does not exist).
        case danglingReference
        /// A relationship whose target does not exist.
        case danglingRelationship
        /// A blob a live object names is not in `blobs/`, or is there only as a retired copy (which a writable
        /// open deletes once its grace period has passed).
        case missingBlob
        /// A blob's size differs from the size its record gives.
        case blobSizeMismatch
        /// A blob's bytes do not hash (SHA-256) to its name.
        case blobChecksumMismatch
        /// A store file exists but this process may not read it (`EACCES`, `EPERM`).
        case permissionDenied
        /// A store file could not be read for another reason than its absence or a permission (`EIO`, say).
        case unreadableFile
        /// Where a store file belongs there is a symbolic link, a FIFO, a socket, a device or a directory.
        case unexpectedFileType
        /// An entry of `segments/` or `blobs/` the format does not produce (a directory, a file of another name, a
        /// link): the store neither reads nor deletes it.
        case strayEntry
        /// A compaction's snapshot followed by fewer rows than it lists: only part of a committed state, which no
        /// open uses.
        case incompleteSnapshot
        /// The manifest's copy of the schema history (format version 2) is not the one the segments hold: short
        /// (a crash between a migration's record and its manifest) or different. A warning, not damage: the
        /// segments hold the truth and the next writable open rewrites the manifest; until then a salvage has one
        /// copy of the schemas fewer to fall back on.
        case manifestSchemasDiffer

        /// Whether the kind is a warning: nothing committed is lost or unreadable, and the next writable open
        /// repairs it.
        public var isWarning: Bool { self == .manifestSchemasDiffer || self == .damagedCheckpoint }

        /// `CHECKPOINT` is damaged, or stale: it does not describe exactly the rows, order and keys of the opening of
        /// the manifest's first segment (docs/FORMAT.md, *Version 2*). A warning, not damage: the checkpoint is
        /// derived data, an open ignores it and replays the segments, and the next writable open writes a new one.
        case damagedCheckpoint
    }

    /// Every problem found, in the order it was met; empty for a healthy store.
    public var problems: [Problem] = []
    /// Whether the store is healthy: no problem was found, except perhaps a damaged or stale checkpoint
    /// (``Kind/damagedCheckpoint``, listed in ``problems``), which is derived data no open trusts: a crash or a
    /// concurrent compaction leaves one stale for a moment, and the next writable open writes a new one.
    public var ok: Bool { problems.allSatisfy { $0.kind == .damagedCheckpoint } }
    /// The problems that are damage: all but a torn tail, which is what a save in progress in another process looks
    /// like to a reader (or one a crash cut short, which the next writable open sets aside), and the warnings
    /// (``Kind/isWarning``: a manifest's schema copy that differs, a damaged or stale checkpoint).
    public var damage: [Problem] { problems.filter { $0.kind != .tornTail && !$0.kind.isWarning } }
}

/// Reads everything of a store, writes nothing, and reports every problem instead of stopping at the first.
public enum StoreVerifier {
    /// Verifies the store at `url`: the manifest, every record of every segment (framing, checksum, decoding, and
    /// whether each transaction applies), every relationship of the final state, and every blob (presence, size and
    /// SHA-256). Works on a read-only copy, and beside processes that write and compact the store: it takes no lock,
    /// and reads again when the manifest was replaced while it read (docs/FORMAT.md, *Reading while another process
    /// writes*), so a problem is reported only when two reads in a row over an unchanged manifest found it.
    ///
    /// - Throws: ``FileStoreError/storeKeptChanging(path:attempts:seconds:)`` when other processes kept replacing
    ///   the manifest for 5 seconds: nothing was found damaged. Damage is in the report, not thrown.
    /// - Complexity: reads every byte of the store once, blobs included (twice when it finds a problem).
    public static func verify(at url: URL) throws -> VerificationReport {
        try verify(at: url, fileSystem: POSIXFileSystem())
    }

    /// ``verify(at:)`` through `fileSystem`.
    package static func verify(at url: URL, fileSystem: any StoreFileSystem) throws -> VerificationReport {
        let layout = StoreLayout(root: url.path)
        // What an open refuses for the kind of an entry is reported as such: a store verify calls healthy opens.
        let refused = layout.misplacedEntries(writing: true, fileSystem: fileSystem)
        if !refused.isEmpty {
            var report = VerificationReport()
            for case let .unexpectedFileType(path, found, expected) in refused {
                report.problems.append(.init(
                    file: path, offset: 0, kind: .unexpectedFileType,
                    message: "\(FileStoreError.unexpectedFileType(path: path, found: found, expected: expected)); "
                        + "a writable open refuses the store"))
            }
            // What reading goes through is refused by every open: nothing more can be read.
            if !layout.misplacedEntries(writing: false, fileSystem: fileSystem).isEmpty { return report }
            var rest = try verifyPinned(layout: layout, fileSystem: fileSystem)
            rest.problems.insert(contentsOf: report.problems, at: 0)
            return rest
        }
        return try verifyPinned(layout: layout, fileSystem: fileSystem)
    }

    /// Verifies the store through a pinned read (``PinnedRead``).
    private static func verifyPinned(layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> VerificationReport {
        // A torn tail alone is no damage (VerificationReport.damage) and no reason to read again; it stays in the report.
        return try PinnedRead(layout: layout, fileSystem: fileSystem).run(damage: {
            $0.damage.isEmpty ? nil : $0
        }) { pin in
            verify(pin, layout: layout, fileSystem: fileSystem)
        }
    }

    /// Verifies the store whose manifest is pinned: the manifest, each segment in turn, the manifest's copy of the
    /// schema history, the final state, the stray entries and the checkpoint.
    private static func verify(_ pin: PinnedRead.Pin, layout: StoreLayout,
                               fileSystem: any StoreFileSystem) -> VerificationReport {
        var verification = Verification(layout: layout, fileSystem: fileSystem)
        guard let manifest = verification.readManifest(pin) else { return verification.report }
        for (position, number) in manifest.segments.enumerated() {
            verification.verifySegment(number, of: manifest, isLast: position == manifest.segments.count - 1)
        }
        verification.compareSchemaCopy(of: manifest)
        verification.verifyFinalState()
        let rows = verification.objects.rows
        let referenced = verification.schemas.last.map { FileStore.referencedBlobs(rows, schema: $0) } ?? []
        strayEntries(layout, manifest: manifest, referencedBlobs: referenced, fileSystem: fileSystem) {
            verification.problem($0, $1, $2, $3)
        }
        checkpoint(layout, manifest: manifest, fileSystem: fileSystem) { verification.problem($0, $1, $2, $3) }
        return verification.report
    }

    /// One verification of a pinned store: the problems found so far, and the state its records rebuild.
    private struct Verification {
        let layout: StoreLayout
        let fileSystem: any StoreFileSystem
        let blobStore: BlobStore
        var report = VerificationReport()
        var schemas: [Schema] = []
        var objects = ReplayedRows()
        /// Where each object was last written, to place a problem of the final state.
        var lastWrite: [PersistentIdentifier: (file: String, offset: Int)] = [:]

        init(layout: StoreLayout, fileSystem: any StoreFileSystem) {
            self.layout = layout
            self.fileSystem = fileSystem
            blobStore = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
        }

        mutating func problem(_ file: String, _ offset: Int, _ kind: VerificationReport.Kind, _ message: String) {
            report.problems.append(.init(file: file, offset: offset, kind: kind, message: message))
        }

        /// The pinned manifest, or nil with the problem reported when there is none or it cannot be read.
        mutating func readManifest(_ pin: PinnedRead.Pin) -> Manifest? {
            guard fileSystem.exists(layout.manifest) else {
                problem(layout.manifest, 0, .missingManifest, "there is no manifest")
                return nil
            }
            do { return try pin.manifest } catch {
                let (kind, offset) = classify(error)
                problem(layout.manifest, offset, kind, "\(error)")
                return nil
            }
        }

        /// Reads every record of segment `number`: its framing, its decoding, and whether each applies.
        mutating func verifySegment(_ number: Int, of manifest: Manifest, isLast: Bool) {
            let path = layout.segment(number)
            var first = true
            // A compaction's snapshot and how many of the rows it lists arrived intact.
            var snapshot: (offset: Int, rows: Int, arrived: Int)?
            do {
                try SegmentScan.walk(path, number: number, fileSystem: fileSystem, blobs: blobStore) { entry in
                    defer { first = false }
                    let recordStart = entry.recordOffset
                    do {
                        let record = try entry.decode(schema: schemas.last)
                        check(record, at: recordStart, in: path, segment: number, of: manifest, first: first,
                              snapshot: &snapshot)
                    } catch {
                        let (kind, offset) = classify(error)
                        problem(path, offset == 0 ? recordStart : offset, kind, "\(error)")
                    }
                } undecodable: { offset, _, reason in
                    first = false
                    problem(path, offset, .undecodableRecord, reason)
                } damaged: { damage in
                    let kind = isLast && damage.isTorn ? .tornTail : VerificationReport.Kind(damage.kind)
                    problem(damage.file, damage.offset, kind, "\(damage.reason) (\(damage.length) bytes)")
                } reserved: { offset, length in
                    // Allowed at the end of the last segment only: the writer cuts it off before rotating.
                    if !isLast {
                        problem(path, offset, .malformedRecord,
                                "\(length) zero bytes follow the last record of a segment that is not the last")
                    }
                }
            } catch FileStoreError.inconsistentSegments {
                problem(path, 0, .missingSegment, "the manifest lists segment \(number) but it does not exist")
            } catch {
                let (kind, offset) = classify(error)
                problem(path, offset, kind, "\(error)")
            }
            if let snapshot, snapshot.arrived < snapshot.rows {
                problem(path, snapshot.offset, .incompleteSnapshot,
                        "the snapshot lists \(snapshot.rows) rows and \(snapshot.arrived) follow it intact: "
                            + "no open uses part of a snapshot")
            }
        }

        /// Applies one decoded record of segment `number` to the state, reporting what does not fit.
        private mutating func check(_ record: StoreRecord, at recordStart: Int, in path: String, segment number: Int,
                                    of manifest: Manifest, first: Bool,
                                    snapshot: inout (offset: Int, rows: Int, arrived: Int)?) {
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
                if let conflict = objects.apply(transaction, consecutive: false) {
                    problem(path, recordStart, .danglingReference, conflict.description)
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
                problem(path, recordStart, .inconsistentSegments, "the segment does not begin with a segment record")
            }
        }

        /// The manifest's copy of the schema history, against the segments' when they were read whole: a damaged
        /// segment's history is not the truth to compare with, nor is one a torn tail may have cut short (a
        /// migration's record being appended, or lost in a crash before the manifest was replaced).
        mutating func compareSchemaCopy(of manifest: Manifest) {
            guard let copies = manifest.schemas, report.problems.isEmpty else { return }
            let truth = ManifestSchema.copies(of: schemas)
            if !ManifestSchema.copies(copies, match: schemas) {
                func names(_ list: [ManifestSchema]) -> String {
                    list.isEmpty ? "none" : list.map { String($0.hash.prefix(12)) }.joined(separator: ", ")
                }
                problem(layout.manifest, 0, .manifestSchemasDiffer,
                        "the manifest's copy of the schema history (\(names(copies))) is not the segments' "
                            + "(\(names(truth))); the segments hold the truth, and the next writable open rewrites "
                            + "the manifest")
            }
        }

        /// The final state: every relationship reaches an object, every blob is whole.
        mutating func verifyFinalState() {
            guard let schema = schemas.last else { return }
            let rows = objects.rows
            let present = Set(rows.map(\.id))
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
                    verifyBlob(blob, namedBy: "\(row.id).\(attribute.name)")
                }
            }
        }

        /// Checks that `blob` is in `blobs/`, of its recorded size, with bytes that hash to its name.
        private mutating func verifyBlob(_ blob: ExternalData, namedBy owner: String) {
            let path = blobStore.path(of: blob.name)
            // At most one byte more than the record says: a longer file (a hole, say) is told without reading it.
            let bytes: [UInt8]
            do { bytes = try fileSystem.read(path, from: 0, count: blob.size + 1) } catch {
                let missing = isMissing(error)
                // A blob on the mirror's server, promised and not fetched yet, is not missing.
                if missing, (try? blobStore.isPromised(blob.name)) == true { return }
                // A blob retired while this read ran is no longer named by the state read again (the pinned read
                // retries before it reports damage); one the stable state names is damage, which a writable open
                // past the grace period makes final.
                let retired = missing && hasRetiredCopy(of: blob.name, in: blobStore, fileSystem: fileSystem)
                problem(path, 0, missing ? .missingBlob : classify(error).0,
                        "\(owner) names a blob that "
                            + (missing ? "is missing" : "cannot be read: \(error)")
                            + (retired ? " (only a retired copy is left, which a writable open or compaction "
                                + "deletes once its grace period has passed)" : ""))
                return
            }
            if bytes.count != blob.size {
                let size = (try? fileSystem.status(path)?.size) ?? bytes.count
                problem(path, 0, .blobSizeMismatch, "\(size) bytes; the record says \(blob.size)")
            } else if SHA256Digest.hexString(Data(bytes)) != blob.name {
                problem(path, 0, .blobChecksumMismatch, "its bytes do not hash to its name")
            }
        }
    }

    /// Reports each entry of `segments/` and `blobs/` that is not the store's: a name the format does not
    /// produce, or one it does on something else than a regular file (unless the store names it, when reading it
    /// already reported it). Leftovers the next writable open deletes (unlisted segments, partial or unreferenced
    /// blobs, promises of blobs no object names) are not problems, nor are retired blobs (kept for readers, then deleted; their bytes are checked
    /// only when a reader loads one).
    private static func strayEntries(_ layout: StoreLayout, manifest: Manifest, referencedBlobs: Set<String>,
                                     fileSystem: any StoreFileSystem,
                                     _ problem: (String, Int, VerificationReport.Kind, String) -> Void) {
        let listed = Set(manifest.segments)
        for (directory, isSegments) in [(layout.segments, true), (layout.blobs, false)] {
            guard fileSystem.exists(directory), let names = try? fileSystem.contentsOfDirectory(directory) else { continue }
            for name in names {
                let path = directory + "/" + name
                let named: Bool, used: Bool
                if isSegments {
                    let number = StoreLayout.segmentNumber(name)
                    named = number != nil
                    used = number.map(listed.contains) ?? false
                } else {
                    let blob = StoreLayout.blobName(name)
                    named = blob != nil || StoreLayout.partialBlobName(name) != nil || StoreLayout.retiredBlob(name) != nil
                        || StoreLayout.remoteBlobName(name) != nil
                    used = blob.map(referencedBlobs.contains) ?? false
                }
                guard let found = try? fileSystem.kind(of: path), !used,
                      !named || found != .regularFile else { continue }
                problem(path, 0, .strayEntry, named
                    ? "\(found) with the name of a store file: the store neither reads nor deletes it"
                    : "\(found) whose name the store's format does not produce: the store neither reads nor deletes it")
            }
        }
    }

    /// Checks `CHECKPOINT`, when there is one, in full: it must be byte for byte the checkpoint the opening of the
    /// manifest's first segment gives (every page, every row's place and checksum, the rows, order and keys),
    /// which is what a compaction writes. Anything else is reported as `damagedCheckpoint` at the first byte that
    /// differs; a link, FIFO or other entry that is not a regular file is refused as every store file is.
    private static func checkpoint(_ layout: StoreLayout, manifest: Manifest, fileSystem: any StoreFileSystem,
                                   _ problem: (String, Int, VerificationReport.Kind, String) -> Void) {
        let path = layout.checkpoint
        let found: [UInt8], expected: [UInt8]
        let first = manifest.segments[0]
        do {
            guard try fileSystem.status(path) != nil else { return }
        } catch {
            let (kind, offset) = classify(error)
            problem(path, offset, kind, "\(error)")
            return
        }
        do {
            expected = try Checkpoint.build(segment: layout.segment(first), number: first, store: manifest.store,
                                            fileSystem: fileSystem)
        } catch {
            problem(path, 0, .damagedCheckpoint, "stale: segment \(first), the manifest's first, has no compaction's "
                    + "opening for it to describe (\(error)); no open uses it")
            return
        }
        do {
            found = try fileSystem.read(path, from: 0, count: expected.count + 1)
        } catch {
            let (kind, offset) = classify(error)
            problem(path, offset, kind, "\(error)")
            return
        }
        guard found != expected else { return }
        let header: CheckpointHeader
        do { header = try CheckpointReader.readHeader(path, fileSystem: fileSystem) } catch let damage as CheckpointDamage {
            problem(path, damage.offset, .damagedCheckpoint, damage.reason + "; no open uses it")
            return
        } catch {
            problem(path, 0, .damagedCheckpoint, "\(error); no open uses it")
            return
        }
        if header.store != manifest.store || header.segment != first {
            problem(path, 0, .damagedCheckpoint, "stale: it describes segment \(header.segment) of store "
                    + "\(header.store), not segment \(first), the manifest's first; no open uses it")
            return
        }
        let offset = (0..<min(found.count, expected.count)).first { found[$0] != expected[$0] } ?? min(found.count, expected.count)
        let page = offset / Checkpoint.pageSize
        problem(path, offset, .damagedCheckpoint, found.count != expected.count && offset == min(found.count, expected.count)
                ? "\(found.count > expected.count ? "longer" : "shorter") than the \(expected.count) bytes segment "
                    + "\(first)'s opening gives; no open uses it"
                : "page \(page) differs from what segment \(first)'s opening gives (a row's place, a key's order or "
                    + "a checksum that is not the segment's, or a stale checkpoint of another compaction); no open uses it")
    }

    /// Whether `blobs/` holds a retired copy of blob `name` (one listing).
    private static func hasRetiredCopy(of name: String, in store: BlobStore, fileSystem: any StoreFileSystem) -> Bool {
        ((try? fileSystem.contentsOfDirectory(store.directory)) ?? []).contains { StoreLayout.retiredBlob($0)?.name == name }
    }

    /// Whether `error` says the file does not exist.
    private static func isMissing(_ error: any Error) -> Bool {
        (error as? StoreIOError)?.code == ENOENT
    }

    /// The kind and offset of an error met while reading: a permission refused or another I/O error is reported
    /// as such, never as a file that is missing.
    private static func classify(_ error: any Error) -> (VerificationReport.Kind, Int) {
        let fileStoreError = error as? FileStoreError
        if let error = error as? StoreIOError {
            return (error.code == EACCES || error.code == EPERM ? .permissionDenied : .unreadableFile, 0)
        }
        return switch fileStoreError {
        case .unexpectedFileType?: (.unexpectedFileType, 0)
        case .unsupportedFormatVersion?: (.unsupportedFormatVersion, 0)
        case .notAStoreFile?: (.notAStoreFile, 0)
        // A damaged frame's kind comes with it (``RecordDamage``), never from its message.
        case let .damagedRecord(_, offset, damage, _)?: (VerificationReport.Kind(damage), offset)
        case .undecodableRecord(_, let offset, _)?: (.undecodableRecord, offset)
        case .inconsistentSegments?: (.inconsistentSegments, 0)
        case .danglingReference(_, let offset, _, _)?: (.danglingReference, offset)
        default: (.undecodableRecord, 0)
        }
    }
}

extension VerificationReport.Kind {
    /// The kind a damaged frame is reported as, when it is not a torn tail.
    init(_ damage: RecordDamage) {
        self = switch damage {
        case .checksumMismatch: .checksumMismatch
        case .truncated: .truncatedRecord
        case .malformed: .malformedRecord
        }
    }
}

extension StoreRecord {
    var isSegmentHeader: Bool {
        if case .segment = self { return true }
        return false
    }
}
