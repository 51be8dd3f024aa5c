#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStore {
    /// The history records of a compaction's opening that an open through a checkpoint has not read yet: history is
    /// read when first asked for (``history()``, deleting history, compacting, a retention that drops the oldest),
    /// not by the open, which must not read more than the checkpoint's header and the log after it.
    struct HistoryPrefix {
        /// The segment holding them, and its format version.
        var segment: Int
        var version: Int
        /// The byte range of its `history` records.
        var range: Range<Int>
        /// The number of the last transaction the opening's state includes (the snapshot's).
        var lastTransaction: UInt64
    }

    /// Reads the history a checkpointed open left unread and puts it before the history of the transactions applied
    /// since; what those deleted (`trim` records after the checkpoint list every deletion so far) is deleted from it.
    ///
    /// - Throws: what reading and decoding the segment's `history` records throws; the history is then unchanged,
    ///   and the next call tries again.
    /// - Complexity: O(the history records' bytes), once per open.
    func loadHistoryPrefix(_ state: inout State) throws {
        guard let prefix = state.historyPrefix else { return }
        let path = layout.segment(prefix.segment)
        let bounded = BoundedFileSystem(base: fileSystem, path: path, limit: prefix.range.upperBound)
        var older = HistoryLog()
        if !prefix.range.isEmpty {
            let scan = try SegmentScan.read(path, number: prefix.segment, fileSystem: bounded,
                                            from: (prefix.range.lowerBound, prefix.version))
            try scan.forEachRecord(blobs: nil) { entry in
                guard case let .history(records, deleted) = try entry.decode(schema: state.schemas.last) else {
                    throw FileStoreError.undecodableRecord(file: path, offset: entry.recordOffset,
                                                           reason: "the checkpoint's history range holds a record "
                                                               + "that is not a history record")
                }
                if let last = older.records.last, let first = records.first, first.number <= last.number {
                    throw FileStoreError.undecodableRecord(
                        file: path, offset: entry.recordOffset,
                        reason: "history transaction \(first.number) follows \(last.number)")
                }
                for record in records { older.append(record) }
                older.delete(deleted)
            }
            if let bad = scan.undecodable {
                throw FileStoreError.undecodableRecord(file: path, offset: bad.offset, reason: bad.reason)
            }
            if let tail = scan.tail {
                throw FileStoreError.damagedRecord(file: path, offset: tail.offset, reason: tail.reason)
            }
            guard scan.end == prefix.range.upperBound else {
                throw FileStoreError.damagedRecord(file: path, offset: scan.end,
                                                   reason: "the history records end at byte \(scan.end), not at "
                                                       + "\(prefix.range.upperBound) as the checkpoint says")
            }
        }
        let newer = state.rows.history
        for record in newer.records { older.append(record) }
        older.delete(newer.deleted)
        if case .latest(let count) = configuration.historyRetention { older.keepLatest(count, slack: 0) }
        state.rows.history = older
        state.historyPrefix = nil
    }
}

/// A file system that shows one file cut at `limit` bytes: a scan over it stops where the caller's range ends,
/// whatever follows in the file.
struct BoundedFileSystem: StoreFileSystem {
    let base: any StoreFileSystem
    let path: String
    let limit: Int

    func read(_ path: String) throws -> [UInt8] { try read(path, from: 0, count: .max) }
    func read(_ path: String, from offset: Int) throws -> [UInt8] { try read(path, from: offset, count: .max) }
    func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        guard path == self.path else { return try base.read(path, from: offset, count: count) }
        guard offset < limit else { return [] }
        return try base.read(path, from: offset, count: min(count, limit - offset))
    }
    func status(_ path: String) throws -> StoreFileStatus? {
        guard var status = try base.status(path) else { return nil }
        if path == self.path { status.size = min(status.size, limit) }
        return status
    }
    func create(_ path: String) throws -> any StoreFile { try base.create(path) }
    func openForAppending(_ path: String) throws -> any StoreFile { try base.openForAppending(path) }
    func rename(_ source: String, to destination: String) throws { try base.rename(source, to: destination) }
    func remove(_ path: String) throws { try base.remove(path) }
    func syncDirectory(_ path: String) throws { try base.syncDirectory(path) }
    func makeDirectory(_ path: String) throws { try base.makeDirectory(path) }
    func contentsOfDirectory(_ path: String) throws -> [String] { try base.contentsOfDirectory(path) }
    func exists(_ path: String) -> Bool { base.exists(path) }
    func truncate(_ path: String, to length: Int) throws { try base.truncate(path, to: length) }
    func tryLock(_ path: String) throws -> (any StoreLockHandle)? { try base.tryLock(path) }
    func kind(of path: String) throws -> StoreFileKind? { try base.kind(of: path) }
}
