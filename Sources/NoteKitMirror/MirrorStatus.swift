import Foundation
import NoteKit

/// Where a store's mirroring stands (``StoreMirror/status()``, `notekit mirror status`).
public struct MirrorStatus: Sendable, Hashable, CustomStringConvertible {
    /// The device's identity on the server.
    public var device: UUID
    /// The zone the store mirrors to.
    public var zone: String
    /// Local transactions committed and not sent yet (the mirror's own imports and migrations are never sent).
    public var pendingLocalTransactions: Int
    /// The last local transaction the server has, nil before the first export.
    public var exportedThrough: DefaultHistoryToken?
    /// The server's change sequence number this device has imported through (0 before the first import).
    public var serverCursor: Int64
    /// When the last sync ended, successfully or not; nil before the first.
    public var lastSync: Date?
    /// Why the last sync failed; nil when it succeeded.
    public var lastError: String?
    /// Whether this process runs background syncing for the store (``StoreMirror/startSyncing(every:)``).
    public var isSyncingInBackground: Bool

    init(state: MirrorState, history: HistoryLog, isSyncingInBackground: Bool) {
        device = state.device
        zone = state.zone
        pendingLocalTransactions = history.records.lazy.filter {
            $0.number > state.exportedThrough && !SyncSession.localOnlyAuthors.contains($0.author ?? "")
        }.count
        exportedThrough = state.exportedThrough == 0
            ? nil : DefaultHistoryToken(transactionNumber: state.exportedThrough)
        serverCursor = state.importedSequence
        lastSync = state.lastSyncAt
        lastError = state.lastError
        self.isSyncingInBackground = isSyncingInBackground
    }

    /// A few lines: the device, what is pending, the cursors and the last sync.
    public var description: String {
        var lines = ["device \(device) in zone \(zone)",
                     "pending local transactions: \(pendingLocalTransactions)",
                     "exported through: \(exportedThrough.map(\.description) ?? "nothing yet")",
                     "server cursor: \(serverCursor)"]
        lines.append("last sync: " + (lastSync.map { "\($0)" } ?? "never")
                     + (lastError.map { " (failed: \($0))" } ?? ""))
        if isSyncingInBackground { lines.append("syncing in the background") }
        return lines.joined(separator: "\n")
    }
}
