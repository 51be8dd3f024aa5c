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

extension FileStore {
    /// What ``backup(to:)`` wrote.
    public struct BackupReport: Sendable, Hashable {
        /// The new store's path.
        public var path: String
        /// The last transaction of the state copied: the store's last commit when the backup read it.
        public var lastTransactionNumber: UInt64
        /// The objects copied.
        public var objects: Int
        /// The history records copied (every transaction the store's history keeps).
        public var historyTransactions: Int
        /// The blobs copied with their bytes.
        public var blobs: Int
        /// The blobs copied as promises: their bytes are elsewhere (on a mirror's server, say) and this process had
        /// no source to fetch them from (docs/FORMAT.md, *Promised blobs*); the backup fetches them as the store
        /// would.
        public var promisedBlobs: Int
        /// The bytes of the new store's files (segment, manifest, checkpoint, blobs).
        public var bytes: Int
    }

    /// Writes a copy of the store's last commit as a new store at `destination`, checks it with ``StoreVerifier``,
    /// and only then puts it in place: SQLite's `VACUUM INTO`, GRDB's `backup(to:)`. Other processes keep saving,
    /// rotating and compacting meanwhile (the backup takes no lock of the store); an open that can fall behind
    /// (read-only, or shared per save) first reads their last commits.
    ///
    /// The copy is the state and the history of one commit: every object, the schema history, the transactions the
    /// history keeps, and every blob an object names (its bytes, read and checked as a property read would read them,
    /// from a retired copy when another process's compaction retired it meanwhile; a promised blob that this process
    /// cannot fetch is copied as its promise). It is written in one segment with its checkpoint,
    /// like a compacted store, under a temporary name beside `destination` that is renamed into place once verified:
    /// `destination` never holds part of a backup. The copy is a store of its own (a new store identifier); the
    /// store's history hold and the files its clients keep beside it (NoteKitMirror's state) are not copied.
    ///
    /// A plain copy of a live store's directory (`cp -a`) is no backup: it can take a manifest and segments of
    /// different moments, or segments without the blobs they name (docs/FORMAT.md, *Copying a store*).
    ///
    /// - Returns: what was copied.
    /// - Throws: ``FileStoreError/destinationExists(path:)`` when something is at `destination`; what reading the
    ///   store's last commits throws; ``FileStoreError/blobRemoved(name:path:)`` or
    ///   `StoredValueError.externalDataUnreadable` when a blob an object names is gone or damaged (the store is
    ///   damaged: `notekit verify` says where); ``FileStoreError/backupNotVerified(path:problems:)`` when the copy
    ///   does not verify; an I/O error. Nothing is left at `destination` when it throws.
    /// - Complexity: O(store): the state is encoded and written once, every blob read, hashed and written once, and
    ///   the copy read once more to verify it. This open's reads and saves wait while the segment is written, as
    ///   during a compaction; copying the blobs and verifying them do not hold it.
    @discardableResult
    public func backup(to destination: URL) throws -> BackupReport {
        let target = destination.standardizedFileURL.path
        guard !fileSystem.exists(target) else { throw FileStoreError.destinationExists(path: target) }
        let slash = target.lastIndex(of: "/").map { target.index(after: $0) } ?? target.startIndex
        let partial = StoreLayout(root: String(target[..<slash]) + "." + target[slash...]
                                      + ".backup-" + UUID().uuidString.prefix(8).lowercased())
        do {
            var report = try writeState(to: partial)
            let copied = try copyBlobs(report.blobs, to: partial)
            report.counts.blobs = copied.blobs
            report.counts.promisedBlobs = copied.promises
            let verification = try StoreVerifier.verify(at: URL(fileURLWithPath: partial.root), fileSystem: fileSystem)
            guard verification.problems.isEmpty else {
                throw FileStoreError.backupNotVerified(path: target, problems: verification.problems)
            }
            report.counts.bytes = try Self.bytes(of: partial, fileSystem: fileSystem)
            try fileSystem.rename(partial.root, to: target)
            try fileSystem.syncDirectory(partial.parent)
            report.counts.path = target
            return report.counts
        } catch {
            Self.removeBackup(partial, fileSystem: fileSystem)
            throw error
        }
    }

    /// The state of the last commit, written as the one segment (and checkpoint) of a new store at `layout`, under
    /// the state's lock; the blobs it names, for the caller to copy without the lock.
    private func writeState(to layout: StoreLayout) throws
        -> (counts: BackupReport, blobs: [ExternalData]) {
        try reading { state in
            if state.position != nil { _ = try refresh(&state) }
            try loadHistoryPrefix(&state)
            var entityRows: [[ModelSnapshot]] = []
            for entity in schema.entities {
                entityRows.append(try readingRows(&state) { try $0.rows(of: entity.name) })
            }
            let opening = SegmentOpening(schemas: state.schemas, schema: schema, entityRows: entityRows,
                                         history: state.rows.history,
                                         lastTransactionNumber: state.lastTransactionNumber)
            let log = try SegmentLog.create(layout: layout, fileSystem: fileSystem, store: UUID(),
                                            now: configuration.clocks.wall(), records: opening.records,
                                            schemas: state.schemas, recorded: opening.places.written)
            try log.close()
            let rows = state.rows
            let checkpoint = try opening.checkpoint(store: log.manifest.store, segment: log.activeSegment) {
                try rows.indexEntries(of: $0, index: $1)
            }
            try Checkpoint.write(checkpoint, layout: layout, fileSystem: fileSystem)
            let counts = BackupReport(path: layout.root, lastTransactionNumber: state.lastTransactionNumber,
                                      objects: opening.rowCount, historyTransactions: state.rows.history.records.count,
                                      blobs: 0, promisedBlobs: 0, bytes: 0)
            return (counts, opening.referencedExternalData.values.sorted { $0.name < $1.name })
        }
    }

    /// Copies each blob into `layout`'s `blobs/`: its bytes, read as a property read reads them, or its promise when
    /// the bytes are promised and this process cannot fetch them. The new store is not in place yet, so each
    /// file is written under its own name and flushed, and the directory flushed once at the end.
    private func copyBlobs(_ references: [ExternalData], to layout: StoreLayout) throws -> (blobs: Int, promises: Int) {
        var copied = 0, promised = 0
        let target = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
        for reference in references {
            let bytes: Data
            do {
                bytes = try reference.load()
            } catch FileStoreError.blobNotFetched {
                try target.promise(name: reference.name, size: reference.size)
                promised += 1
                continue
            }
            try fileSystem.writeFlushedFile(target.path(of: reference.name), bytes)
            copied += 1
        }
        if copied > 0 { try fileSystem.syncDirectory(layout.blobs) }
        return (copied, promised)
    }

    /// The bytes of the files of the new store at `layout`.
    private static func bytes(of layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> Int {
        var total = 0
        for path in [layout.manifest, layout.checkpoint] { total += try fileSystem.status(path)?.size ?? 0 }
        for directory in [layout.segments, layout.blobs] {
            for name in try fileSystem.contentsOfDirectory(directory) {
                total += try fileSystem.status(directory + "/" + name)?.size ?? 0
            }
        }
        return total
    }

    /// Deletes what a backup that failed wrote at `layout` (a temporary directory no one else uses).
    private static func removeBackup(_ layout: StoreLayout, fileSystem: any StoreFileSystem) {
        for directory in [layout.segments, layout.blobs] {
            for name in (try? fileSystem.contentsOfDirectory(directory)) ?? [] {
                _ = try? removeStoreFile(directory + "/" + name, fileSystem: fileSystem)
            }
        }
        for path in [layout.manifest, layout.temporaryManifest, layout.checkpoint, layout.temporaryCheckpoint] {
            _ = try? removeStoreFile(path, fileSystem: fileSystem)
        }
        // Empty now, unless the file system is not the disk's (a test's), where nothing was made on disk.
        for directory in [layout.segments, layout.blobs, layout.root] { _ = rmdir(directory) }
    }
}
