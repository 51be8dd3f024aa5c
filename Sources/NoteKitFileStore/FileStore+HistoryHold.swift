#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// `HISTORY-HOLD` (docs/FORMAT.md): the last transaction that history trimming may delete, so that a client reading
/// the history as its queue never loses what it has not consumed. Every process's trimming reads it: retention
/// (``FileStoreConfiguration/HistoryRetention/latest(_:)``) at saves, opens and compactions, and
/// `ModelContext.deleteHistory(_:)`.
extension FileStore: HistoryHolding {
    /// Holds history after transaction `number` (nil: releases the hold): trimming deletes nothing later until the
    /// hold moves on. The file is replaced atomically and flushed.
    ///
    /// - Throws: the file system's error; the hold is then as it was.
    package func holdHistory(after number: UInt64?) throws {
        guard let number else {
            if fileSystem.exists(layout.historyHold) { try fileSystem.remove(layout.historyHold) }
            try fileSystem.syncDirectory(layout.root)
            return
        }
        try fileSystem.writeFlushedFile(layout.temporaryHistoryHold, Array("\(number)\n".utf8))
        try fileSystem.rename(layout.temporaryHistoryHold, to: layout.historyHold)
        try fileSystem.syncDirectory(layout.root)
    }

    /// The hold in force: nil when there is none. A hold that cannot be read (damaged, not a regular file) holds
    /// everything (0): trimming less is never a loss.
    ///
    /// - Complexity: a `stat` while the file is unchanged; a read when it changed.
    func historyHold() -> UInt64? {
        Self.readHistoryHold(layout: layout, fileSystem: fileSystem, cache: holdCache)
    }

    /// The hold of the store at `layout`, through `cache` when given (an open's, keyed by the file's status).
    static func readHistoryHold(layout: StoreLayout, fileSystem: any StoreFileSystem,
                                cache: Locked<(status: StoreFileStatus, hold: UInt64)?>?) -> UInt64? {
        guard let status = try? fileSystem.status(layout.historyHold) else {
            return fileSystem.exists(layout.historyHold) ? 0 : nil
        }
        if let cached = cache?.withLock({ $0 }), cached.status == status { return cached.hold }
        var hold: UInt64 = 0
        if (try? fileSystem.kind(of: layout.historyHold)) == .regularFile,
           let bytes = try? fileSystem.read(layout.historyHold),
           let text = String(validating: bytes, as: UTF8.self),
           let number = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            hold = number
        }
        cache?.withLock { $0 = (status, hold) }
        return hold
    }
}
