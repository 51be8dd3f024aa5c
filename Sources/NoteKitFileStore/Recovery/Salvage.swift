#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// What a salvage keeps of the transactions after the first one it loses (a damaged record, or an intact one
    /// that no longer applies).
    ///
    /// sqlite3's `.recover` is the prior art for ``bestEffort``: it keeps everything it can still read and place.
    /// ``consistentPrefix`` is what a point-in-time read gives: a state the store really was in.
    public enum SalvageMode: String, Sendable, Hashable, CaseIterable {
        /// Keeps every later intact transaction whose objects survive: an update or delete of an object that
        /// exists, an insert of one that does not exist yet, with every relationship it sets pointing at an
        /// object that exists. The result may be a state the store was never in (a later edit kept, an earlier
        /// one lost), and every transaction left out is reported with the lost one it depends on. The default.
        case bestEffort
        /// Keeps every transaction before the first one lost and none after it, so the result is the state the
        /// store was in just before it; each later transaction is reported as left out. A compaction's whole
        /// snapshot later in the log is a committed state again: it, and what follows it, are kept.
        case consistentPrefix
    }

    /// What a salvage kept and what it left out.
    public struct SalvageReport: Sendable, Hashable {
        /// The mode the salvage ran in.
        public var mode: SalvageMode = .bestEffort
        /// Transactions copied into the new store.
        public var transactionsKept: Int = 0
        /// Objects in the new store.
        public var objectsKept: Int = 0
        /// The segment files whose records the new store's state comes from, in order: from the last segment whose
        /// snapshot arrived whole (a compaction's), or from the first segment when none did.
        public var segmentsUsed: [String] = []
        /// Stretches of bytes that were not intact records: file, offset, length, reason.
        public var skippedBytes: [Skipped] = []
        /// Intact records that could not be used: file, offset, reason (undecodable, or a transaction that depends
        /// on one that was lost).
        public var skippedRecords: [Skipped] = []

        /// One part of the source a salvage left out: a stretch of bytes that was not an intact record, or an intact
        /// record that could not be used.
        public struct Skipped: Sendable, Hashable, CustomStringConvertible {
            /// The segment's path.
            public var file: String
            /// The byte offset in the segment where the part begins.
            public var offset: Int
            /// The part's length in bytes.
            public var length: Int
            /// Why it was left out, as a sentence.
            public var reason: String
            /// The number of the transaction left out, when the part is an intact `tx` or `migration` record.
            public var transaction: UInt64? = nil
            /// One line naming the file, the offset, the length, the transaction when known and the reason, as
            /// `notekit salvage` prints it.
            public var description: String {
                "\(file) at byte \(offset) (\(length) bytes\(transaction.map { ", transaction \($0)" } ?? "")): \(reason)"
            }
        }

        /// Whether anything was left out.
        public var isComplete: Bool { skippedBytes.isEmpty && skippedRecords.isEmpty }
    }

    /// Copies every intact transaction of the damaged store at `source` into a new store at `destination`, and
    /// reports what it left out. `source` is only read.
    ///
    /// Every segment file in `segments/` is considered, in the order of their numbers, whether the manifest names
    /// it or not (a copy taken while a compaction wrote, or a manifest naming segments that are gone, still has
    /// the older segments beside it); one that belongs to another store is left out. Damaged stretches are skipped
    /// by finding the next intact record. A compaction's snapshot is used whole or not at all: it replaces the
    /// state rebuilt so far only when all the rows it lists arrived intact (otherwise the segment is left out and
    /// the state of the segments before it stands; when it is used, what the older segments left out is not
    /// reported, since the snapshot holds all they committed). A transaction is kept when it applies to the state rebuilt so
    /// far, as `mode` says: with ``SalvageMode/bestEffort`` every later transaction whose objects survive is kept
    /// (one that updates or deletes an object a lost transaction created, or sets a relationship to one, is left
    /// out); with ``SalvageMode/consistentPrefix`` nothing after the first transaction lost is kept. Each
    /// transaction left out is reported with its number and the lost one it depends on. A schema record that is
    /// damaged is taken from the manifest's copy of the schema history (format version 2), when that copy agrees
    /// with the segments. The new store holds the result as a snapshot, with the stored schema history;
    /// ``SalvageReport/segmentsUsed`` names the segments it comes from.
    ///
    /// ```swift
    /// let report = try FileStore.salvage(from: damaged, to: rescued, mode: .consistentPrefix)
    /// for part in report.skippedRecords { print("left out", part) }
    /// ```
    ///
    /// - Parameters:
    ///   - source: the damaged store's directory.
    ///   - destination: where to create the new store; it must not exist.
    ///   - mode: what to keep after the first transaction lost; ``SalvageMode/bestEffort`` by default.
    /// - Throws: ``FileStoreError/nothingToSalvage(path:kind:reason:)`` when no segment holds a whole state (a schema,
    ///   and every row of any snapshot used), ``FileStoreError/destinationExists(path:)`` when `destination`
    ///   exists; I/O errors.
    /// - Complexity: reads every segment once; memory is proportional to the state rebuilt.
    public static func salvage(from source: URL, to destination: URL, mode: SalvageMode = .bestEffort) throws
        -> SalvageReport {
        try salvage(from: source, to: destination, mode: mode, fileSystem: POSIXFileSystem())
    }

    /// ``salvage(from:to:mode:)`` through `fileSystem`.
    package static func salvage(from source: URL, to destination: URL, mode: SalvageMode = .bestEffort,
                                fileSystem: any StoreFileSystem) throws -> SalvageReport {
        let layout = StoreLayout(root: source.path), target = StoreLayout(root: destination.path)
        guard !fileSystem.exists(target.root) else {
            throw FileStoreError.destinationExists(path: target.root)
        }
        // Read over a pinned manifest: a compaction in another process while this reads is not damage.
        let source = try PinnedRead(layout: layout, fileSystem: fileSystem)
            .run(damage: { $0.report.isComplete ? nil : $0.report }) { pin in
                try readSource(pin, layout: layout, mode: mode, fileSystem: fileSystem)
            }
        var report = source.report
        let (schemas, schema, state, storeID, sourceBlobs) = (source.schemas, source.schema, source.state,
                                                              source.storeID, source.blobs)

        // Write the new store: the schema history, a snapshot and the rows, copying the blobs they name.
        let rows = state.rows
        let encoder = RecordEncoder()
        var records = schemas.map(encoder.schema)
        records.append(encoder.snapshot(lastTransactionNumber: state.lastTransactionNumber, rowCount: rows.count))
        for entity in schema.entities {
            let entityRows = rows.filter { $0.id.entityName == entity.name }
            var start = 0
            while start < entityRows.count {
                let end = min(entityRows.count, start + SegmentOpening.defaultRowsPerRecord)
                records.append(encoder.rows(entity: entity, entityRows[start..<end]))
                start = end
            }
        }
        let log = try SegmentLog.create(layout: target, fileSystem: fileSystem, store: storeID ?? UUID(), now: Date(),
                                        records: records, schemas: schemas)
        try log.close()
        let targetBlobs = BlobStore(directory: target.blobs, fileSystem: fileSystem)
        for blob in referencedExternalData(rows, schema: schema).values.sorted(by: { $0.name < $1.name }) {
            // Read as a fetch reads it: at most its recorded size (and one byte to tell a longer file), checked.
            do {
                if try !fileSystem.exists(sourceBlobs.path(of: blob.name)) && sourceBlobs.isPromised(blob.name) {
                    // Still on the mirror's server: the new store promises it too, and fetches it as this one would.
                    try targetBlobs.promise(name: blob.name, size: blob.size)
                } else {
                    _ = try targetBlobs.write(try sourceBlobs.reference(name: blob.name, size: blob.size).load())
                }
            } catch {
                report.skippedRecords.append(.init(file: sourceBlobs.path(of: blob.name), offset: 0, length: 0,
                                                   reason: "the blob is missing or damaged (\(error)); objects "
                                                       + "naming it keep the reference"))
            }
        }
        report.objectsKept = rows.count
        return report
    }

    /// What a salvage read of its source: the report so far, the state rebuilt, and what it was rebuilt with.
    private struct SourceRead {
        var report: SalvageReport
        var schemas: [Schema]
        var schema: Schema
        var state: SalvageState
        var storeID: UUID?
        var blobs: BlobStore
    }

    /// Reads every segment file of the store at `layout` (the manifest pinned says which store they belong to and
    /// which are missing) and rebuilds the state they hold.
    ///
    /// - Throws: ``FileStoreError/nothingToSalvage(path:kind:reason:)`` when no segment holds a whole state.
    private static func readSource(_ pin: PinnedRead.Pin, layout: StoreLayout, mode: SalvageMode,
                                   fileSystem: any StoreFileSystem) throws -> SourceRead {
        var reading = SourceReading(pin, layout: layout, mode: mode, fileSystem: fileSystem)
        for number in reading.numbers {
            reading.read(segment: number)
        }
        return try reading.finish()
    }

    /// A salvage's read of its source under way: the report so far, and the state the segments read rebuild.
    private struct SourceReading {
        /// What stands before a segment, restored when the segment turns out to hold a partial state.
        typealias Standing = (state: SalvageState, schemas: [Schema], kept: Int, used: [String])

        let layout: StoreLayout
        let fileSystem: any StoreFileSystem
        /// The segment files to read, in order: every one present, named by the manifest or not.
        let numbers: [Int]
        let blobs: BlobStore
        var report = SalvageReport()
        var storeID: UUID?
        /// The manifest's copy of the schema history (format version 2), for an opening whose schema records are
        /// damaged: used whole or not at all.
        var copy: SchemaCopy
        var schemas: [Schema] = []
        var state: SalvageState
        /// The segments left out whole because only part of their state arrived.
        var leftOutSegments = 0

        /// Lists the segment files to read. Every segment file counts, named by the manifest or not; the manifest
        /// only says which store they must belong to, and which are missing.
        init(_ pin: PinnedRead.Pin, layout: StoreLayout, mode: SalvageMode, fileSystem: any StoreFileSystem) {
            self.layout = layout
            self.fileSystem = fileSystem
            report.mode = mode
            let manifest = try? pin.manifest
            storeID = manifest?.store
            if manifest == nil {
                report.skippedRecords.append(.init(file: layout.manifest, offset: 0, length: 0,
                                                   reason: "the manifest is unreadable; every segment file was read"))
            }
            let present = (try? fileSystem.contentsOfDirectory(layout.segments))?
                .compactMap(StoreLayout.segmentNumber)
            for number in manifest?.segments ?? [] where !(present?.contains(number) ?? true) {
                report.skippedBytes.append(.init(file: layout.segment(number), offset: 0, length: 0,
                                                 reason: "the manifest lists the segment but it is missing"))
            }
            numbers = Set(present ?? manifest?.segments ?? []).sorted()
            blobs = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
            copy = SchemaCopy(manifest: manifest, layout: layout, segments: numbers, fileSystem: fileSystem)
            state = SalvageState(mode: mode)
        }

        /// Reads segment `number` and keeps its state, or leaves it out whole when only part of it arrived.
        mutating func read(segment number: Int) {
            let path = layout.segment(number)
            let before: Standing = (state, schemas, report.transactionsKept, report.segmentsUsed)
            var segment = SegmentProgress(number: number)
            var fileEnd = 0
            // Damage met in the segment's opening (before its first transaction), which may have held schemas.
            var openingDamage: [Int] = []
            var openingLooked = false
            do {
                try SegmentScan.walk(path, number: number, fileSystem: fileSystem, blobs: blobs) { entry in
                    fileEnd = entry.next
                    guard segment.leftOut == nil else { return }
                    let (offset, next) = (entry.recordOffset, entry.next)
                    // A record after an opening that lost a schema record: the opening's history is taken from the
                    // manifest's copy, when it agrees with what the opening kept (docs/FORMAT.md, *Version 2*).
                    // The opening ends at the first record that is neither a schema nor the segment's: a compaction's
                    // history or snapshot, or (a new store's segment 1) the first transaction. It is looked at once.
                    if !openingDamage.isEmpty, !openingLooked, let kind = try? entry.peek.kind,
                       kind == .snapshot || kind == .history || (schemas.isEmpty && kind != .schema && kind != .segment) {
                        openingLooked = true
                        restoreOpening(ending: offset, of: &segment, in: path, damage: openingDamage,
                                       schemasBefore: before.schemas)
                    }
                    do {
                        let record = try entry.decode(schema: schemas.last)
                        if let reason = segment.take(record, at: offset, after: state.lastTransactionNumber) {
                            segment.leftOut = (offset, reason)
                            return
                        }
                        take(record, at: offset, length: next - offset, in: path, segment: &segment)
                    } catch {
                        state.damaged(at: (path, offset))
                        report.skippedRecords.append(.init(file: path, offset: offset, length: next - offset,
                                                           reason: "\(error)"))
                    }
                } undecodable: { offset, length, reason in
                    fileEnd = offset + length
                    if segment.inOpening { openingDamage.append(offset) }
                    state.damaged(at: (path, offset))
                    report.skippedRecords.append(.init(file: path, offset: offset, length: length, reason: reason))
                } damaged: { damage in
                    let (offset, length, reason) = (damage.offset, damage.length, damage.reason)
                    fileEnd = offset + length
                    if segment.inOpening { openingDamage.append(offset) }
                    state.damaged(at: (path, offset))
                    report.skippedBytes.append(.init(file: path, offset: offset, length: length, reason: reason))
                }
            } catch FileStoreError.inconsistentSegments {
                report.skippedBytes.append(.init(file: path, offset: 0, length: 0, reason: "the segment is missing"))
                return
            } catch {
                report.skippedBytes.append(.init(file: path, offset: 0, length: 0,
                                                 reason: "not a segment of a format this build reads: \(error)"))
                return
            }
            conclude(&segment, number: number, in: path, before: before, fileEnd: fileEnd)
        }

        /// Takes the schema history of a segment's opening that lost a schema record from the manifest's copy, when
        /// it agrees with what the opening kept, and says so on the damage the opening met.
        private mutating func restoreOpening(ending offset: Int, of segment: inout SegmentProgress, in path: String,
                                             damage openingDamage: [Int], schemasBefore: [Schema]) {
            guard let history = copy.opening(ending: (segment.number, offset), keeping: segment.openingSchemasRead),
                  history.count > segment.openingSchemasRead.count else { return }
            segment.restoreOpeningSchemas(history, at: openingDamage[0])
            schemas = schemasBefore + history
            state.schemaInForce(history.last!)
            let note = "; the schema history was taken from the manifest's copy"
            for index in report.skippedBytes.indices where report.skippedBytes[index].file == path
                && openingDamage.contains(report.skippedBytes[index].offset) {
                report.skippedBytes[index].reason += note
            }
            for index in report.skippedRecords.indices where report.skippedRecords[index].file == path
                && openingDamage.contains(report.skippedRecords[index].offset) {
                report.skippedRecords[index].reason += note
            }
        }

        /// Applies one decoded record of a segment to the state, reporting what does not apply.
        private mutating func take(_ record: StoreRecord, at offset: Int, length: Int, in path: String,
                                   segment: inout SegmentProgress) {
            switch record {
            case .schema(let schema):
                schemas.append(schema)
                state.schemaInForce(schema)
            case .migration(let migration):
                if let previous = schemas.last, let reason = state.migrate(from: previous, by: migration,
                                                                          at: (path, offset)) {
                    report.skippedRecords.append(.init(file: path, offset: offset, length: length,
                                                       reason: reason, transaction: migration.number))
                } else {
                    report.transactionsKept += 1
                }
                schemas.append(migration.schema)
                state.schemaInForce(migration.schema)
            case .segment(let header):
                if storeID == nil { storeID = header.store }
                if header.store != storeID {
                    segment.leftOut = (offset, "it belongs to store \(header.store), not \(storeID!)")
                }
            default:
                if let reason = state.apply(record, at: (path, offset)) {
                    var number: UInt64?
                    if case .transaction(let transaction) = record { number = transaction.number }
                    report.skippedRecords.append(.init(file: path, offset: offset, length: length,
                                                       reason: reason, transaction: number))
                } else if case .transaction = record {
                    report.transactionsKept += 1
                }
            }
        }

        /// Uses a segment read to its end, or leaves it out and restores what stood before it.
        private mutating func conclude(_ segment: inout SegmentProgress, number: Int, in path: String,
                                       before: Standing, fileEnd: Int) {
            if segment.leftOut == nil, let partial = segment.partialSnapshot {
                segment.leftOut = partial
            }
            if let (offset, reason) = segment.leftOut {
                leftOutSegments += 1
                // Only part of this segment's state arrived: none of it is used, and what came before stands.
                (state, schemas, report.transactionsKept, report.segmentsUsed) = before
                report.skippedRecords.append(.init(file: path, offset: offset, length: max(0, fileEnd - offset),
                                                   reason: reason + "; the segment was left out"))
            } else if let snapshotSchemas = segment.snapshotSchemas {
                // A whole snapshot replaces everything before it, schema history included (the compaction wrote
                // all of it again). What the older segments left out is in it too: every record of a segment
                // numbered below it was committed before the compaction read the state (a salvage beside a
                // compaction that is still deleting them meets their records without the schema of the first).
                schemas = snapshotSchemas
                report.segmentsUsed = [path]
                let older = Set(numbers.prefix { $0 < number }.map(layout.segment))
                report.skippedRecords.removeAll { older.contains($0.file) }
                report.skippedBytes.removeAll { older.contains($0.file) }
            } else if segment.used {
                report.segmentsUsed.append(path)
            }
        }

        /// What was read, once every segment has been.
        ///
        /// - Throws: ``FileStoreError/nothingToSalvage(path:kind:reason:)`` when no segment holds a whole state.
        func finish() throws -> SourceRead {
            guard let schema = schemas.last else {
                let reasons = (report.skippedBytes + report.skippedRecords).prefix(3).map(\.description)
                throw FileStoreError.nothingToSalvage(
                    path: layout.root, kind: leftOutSegments > 0 ? .segmentsLeftOut : .noReadableSchema,
                    reason: "no segment holds a readable schema and whole state"
                        + (reasons.isEmpty ? "" : " (\(reasons.joined(separator: "; ")))"))
            }
            return SourceRead(report: report, schemas: schemas, schema: schema, state: state, storeID: storeID,
                              blobs: blobs)
        }
    }
}

/// What a salvage learns of one segment as it reads it: whether it opens with a compaction's snapshot, and
/// whether all its rows arrived.
private struct SegmentProgress {
    /// The segment's number: only segment 1, a new store's, opens with a schema and no snapshot.
    let number: Int
    /// The schemas of the segment's opening, before its snapshot, and where the opening begins.
    private var openingSchemas: [Schema] = []
    private var openingOffset: Int?
    private var openingHasHistory = false
    private var isOpening = true

    /// Whether no transaction has been read yet: what is damaged here may have been one of the opening's schemas.
    var inOpening: Bool { isOpening && snapshot == nil }
    /// The schemas of the opening read intact so far.
    var openingSchemasRead: [Schema] { openingSchemas }

    /// Takes `history` for the opening's schemas, whose records (from `offset` on) were damaged.
    mutating func restoreOpeningSchemas(_ history: [Schema], at offset: Int) {
        openingSchemas = history
        if openingOffset == nil { openingOffset = offset }
        used = true
    }
    /// The snapshot: where it is, how many rows it lists and how many arrived.
    private var snapshot: (offset: Int, rows: Int, arrived: Int)?
    /// Whether any record of the segment changed the state.
    private(set) var used = false
    /// Why the segment is left out, and where: a partial or stale snapshot, another store's segment.
    var leftOut: (offset: Int, reason: String)?

    init(number: Int) { self.number = number }

    /// Notes `record`, at `offset`, on a state at transaction `current`; returns why the segment cannot be used.
    mutating func take(_ record: StoreRecord, at offset: Int, after current: UInt64) -> String? {
        if let snapshot, snapshot.arrived < snapshot.rows {
            guard case .rows(_, let rows) = record else { return partial(snapshot) }
            guard snapshot.arrived + rows.count <= snapshot.rows else {
                return "the snapshot at byte \(snapshot.offset) lists \(snapshot.rows) rows; more follow it"
            }
            self.snapshot?.arrived += rows.count
            return nil
        }
        switch record {
        case .segment, .manifest:
            return nil
        case .history:
            if isOpening { openingHasHistory = true }
            return nil
        case .schema(let schema):
            if isOpening {
                openingSchemas.append(schema)
                if openingOffset == nil { openingOffset = offset }
            }
        case let .snapshot(last, rows):
            guard isOpening, snapshot == nil else {
                return "a snapshot at byte \(offset) after the segment's opening"
            }
            guard last >= current else {
                return "the snapshot at byte \(offset) is of transaction \(last), older than the state already "
                    + "rebuilt from the segments before (transaction \(current))"
            }
            snapshot = (offset, rows, 0)
        case .rows:
            return "rows at byte \(offset) without a snapshot before them"
        case .transaction, .migration, .trim:
            isOpening = false
        }
        used = true
        return nil
    }

    /// Why the segment's opening is not whole, when it is not: a snapshot some of whose rows are missing, or a
    /// compaction's schemas and history with no snapshot after them (a new store's segment 1 holds one schema).
    var partialSnapshot: (offset: Int, reason: String)? {
        guard let snapshot else {
            guard let openingOffset, openingHasHistory || openingSchemas.count > 1 || number != 1 else { return nil }
            return (openingOffset, "the compaction's opening at byte \(openingOffset) is not followed by its snapshot: "
                        + "part of a state is no committed state")
        }
        guard snapshot.arrived < snapshot.rows else { return nil }
        return (snapshot.offset, partial(snapshot))
    }

    /// The schemas a whole snapshot brings, when the segment has one.
    var snapshotSchemas: [Schema]? { snapshot == nil ? nil : openingSchemas }

    private func partial(_ snapshot: (offset: Int, rows: Int, arrived: Int)) -> String {
        "the snapshot at byte \(snapshot.offset) lists \(snapshot.rows) rows and only \(snapshot.arrived) arrived "
            + "intact: part of a state is no committed state"
    }
}

/// The state a salvage rebuilds: like a replay, but a transaction that does not apply is left out, not fatal, and
/// what the mode keeps after the first one lost (``FileStore/SalvageMode``). It remembers what was lost, so that a
/// transaction left out for depending on it says which.
private struct SalvageState {
    let mode: FileStore.SalvageMode
    private var objects = ReplayedRows()
    var rows: [ModelSnapshot] { objects.rows }
    var lastTransactionNumber: UInt64 { objects.lastTransactionNumber }
    /// The highest transaction number met in an intact record (kept or not), to tell which numbers were lost.
    private var lastSeen: UInt64 = 0
    /// Where the last damaged or undecodable record was, since the last intact transaction.
    private var damage: (file: String, offset: Int)?
    /// Runs of transaction numbers no intact record holds, with where the damage that lost them was.
    private var lost: [(numbers: ClosedRange<UInt64>, file: String?, offset: Int?)] = []
    /// The objects that intact transactions left out had inserted, by the transaction's number.
    private var insertedByLost: [PersistentIdentifier: UInt64] = [:]
    /// With a consistent prefix: the first loss, after which nothing is kept (until a whole snapshot).
    private var stop: String?

    init(mode: FileStore.SalvageMode) { self.mode = mode }

    /// Notes a damaged or undecodable record at `place`: it may have held a transaction.
    mutating func damaged(at place: (file: String, offset: Int)) {
        if damage == nil { damage = place }
    }

    /// Applies `record`, found at `place`, or returns why it was left out.
    mutating func apply(_ record: StoreRecord, at place: (file: String, offset: Int)) -> String? {
        switch record {
        case let .snapshot(last, _):
            // A compaction's snapshot is a committed state: what was lost before it is in it (the segment is left
            // out whole when its rows do not all arrive, and this state with it).
            objects.beginSnapshot(after: last)
            lastSeen = max(lastSeen, last)
            stop = nil
            damage = nil
            return nil
        case .rows(_, let rows):
            return objects.addSnapshotRows(rows)
        case .transaction(let transaction):
            let consecutive = mode == .consistentPrefix
            return take(transaction.number, at: place, changes: transaction.changes) {
                $0.apply(transaction, consecutive: consecutive)?.description
            }
        case .segment, .schema, .manifest, .migration, .history, .trim:
            // A salvaged store starts a new history: what a damaged log says of it is not worth the doubt.
            return nil
        }
    }

    mutating func schemaInForce(_ schema: Schema) { objects.schemaInForce(schema) }

    mutating func migrate(from previous: Schema, by migration: MigrationRecord,
                          at place: (file: String, offset: Int)) -> String? {
        let consecutive = mode == .consistentPrefix
        return take(migration.number, at: place, changes: ChangeSet(updated: migration.fills)) {
            $0.migrate(from: previous, by: migration, consecutive: consecutive)
        }
    }

    /// Applies transaction `number` (with `changes`) by `body` when the mode keeps it, and remembers what a
    /// transaction left out inserted.
    private mutating func take(_ number: UInt64, at place: (file: String, offset: Int), changes: ChangeSet,
                               _ body: (inout ReplayedRows) -> String?) -> String? {
        if number > lastSeen + 1 {
            lost.append(((lastSeen + 1)...(number - 1), damage?.file, damage?.offset))
        }
        lastSeen = max(lastSeen, number)
        damage = nil
        if let stop {
            return "transaction \(number) comes after \(stop); a consistent-prefix salvage keeps nothing after the "
                + "first transaction lost"
        }
        var reason: String?
        if mode == .bestEffort, let conflict = objects.missingTarget(in: changes, number: number) {
            reason = conflict.description
        } else {
            reason = body(&objects)
        }
        guard var reason else { return nil }
        reason += explanation(of: changes, before: number)
        for row in changes.inserted { insertedByLost[row.id] = number }
        if mode == .consistentPrefix {
            stop = lost.last.map { "the lost transaction \(Self.numbers($0.numbers))" } ?? "transaction \(number)"
        }
        return reason
    }

    /// What a transaction left out depends on that was lost: the transaction that inserted an object it names, or
    /// the transactions lost before it, which may have.
    private func explanation(of changes: ChangeSet, before number: UInt64) -> String {
        var named = changes.updated.map(\.id) + changes.deleted.map(\.id)
        for row in changes.inserted { named += row.relationships.flatMap(\.identifiers) }
        for update in changes.updated {
            for change in update.relationships {
                switch change.kind {
                case .toOne(let target?): named.append(target)
                case .toMany(let added, _): named += added
                case .toOne(nil): break
                }
            }
        }
        let inserted = Set(changes.inserted.map(\.id))
        let missing = named.filter { !objects.contains($0) && !inserted.contains($0) }
        if let id = missing.first(where: { insertedByLost[$0] != nil }), let by = insertedByLost[id] {
            return "; \(id) was inserted by the lost transaction \(by)"
        }
        if let id = missing.first, let gap = lost.last(where: { $0.numbers.upperBound < number }) {
            let place = gap.file.map { " (damaged at \($0) byte \(gap.offset ?? 0))" } ?? ""
            return "; \(id) may have been inserted by the lost transaction \(Self.numbers(gap.numbers))\(place)"
        }
        if let gap = lost.last(where: { $0.numbers.upperBound < number }) {
            return "; the lost transaction \(Self.numbers(gap.numbers)) comes before it"
        }
        return ""
    }

    private static func numbers(_ range: ClosedRange<UInt64>) -> String {
        range.count == 1 ? "\(range.lowerBound)" : "\(range.lowerBound)–\(range.upperBound)"
    }
}

/// The manifest's copy of the schema history, as a salvage uses it: for an opening whose `schema` records are
/// damaged, the schemas it held are the copy's up to the one in force where the opening ends. That one is the
/// schema the first later `migration` record migrates from (their hashes name them), or the copy's last when no
/// migration follows. The segments win: a copy that does not hold, in order, every schema the opening kept intact
/// is not used.
private struct SchemaCopy {
    private let schemas: [Schema]?
    private let layout: StoreLayout
    private let segments: [Int]
    private let fileSystem: any StoreFileSystem
    /// Every intact `migration` record of the segments: where it is and the hash it migrates from. Read once, when
    /// first needed (only a damaged opening needs it).
    private var migrations: [(segment: Int, offset: Int, from: String)]?

    init(manifest: Manifest?, layout: StoreLayout, segments: [Int], fileSystem: any StoreFileSystem) {
        let copies = manifest?.schemas ?? []
        let decoded = copies.compactMap(\.schema)
        schemas = decoded.isEmpty || decoded.count != copies.count ? nil : decoded
        self.layout = layout
        self.segments = segments
        self.fileSystem = fileSystem
    }

    /// The opening's schema history, for an opening that ends at `end` (segment, offset) and kept `kept` intact;
    /// nil when the copy cannot tell it.
    mutating func opening(ending end: (segment: Int, offset: Int), keeping kept: [Schema]) -> [Schema]? {
        guard let schemas else { return nil }
        let next = migrationRecords().first { ($0.segment, $0.offset) > end }
        guard let last = next.map({ migration in schemas.lastIndex { $0.contentHash == migration.from } })
                ?? schemas.indices.last else { return nil }
        let history = Array(schemas[...last])
        // Every schema the opening kept is in the history, in order.
        var remaining = history[...]
        for schema in kept {
            guard let found = remaining.firstIndex(where: { $0.contentHash == schema.contentHash }) else { return nil }
            remaining = remaining[(found + 1)...]
        }
        return history
    }

    private mutating func migrationRecords() -> [(segment: Int, offset: Int, from: String)] {
        if let migrations { return migrations }
        var found: [(segment: Int, offset: Int, from: String)] = []
        for number in segments {
            _ = try? SegmentScan.walk(layout.segment(number), number: number, fileSystem: fileSystem, blobs: nil) {
                entry in
                guard (try? entry.peek.kind) == .migration,
                      case .migration(let migration)? = try? entry.decode(schema: nil) else { return }
                found.append((number, entry.recordOffset, migration.fromHash))
            } undecodable: { _, _, _ in } damaged: { _ in }
        }
        migrations = found
        return found
    }
}
