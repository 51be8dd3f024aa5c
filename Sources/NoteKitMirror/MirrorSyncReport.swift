import Foundation
import NoteKit

/// What one ``StoreMirror/sync()`` did.
public struct MirrorSyncReport: Sendable, Hashable, CustomStringConvertible {
    /// Local transactions sent to the server (the mirror's own imports and migrations are never sent).
    public var exportedTransactions = 0
    /// Whether the store's history no longer reached back to the last export (trimmed, or a server that lost the
    /// zone), so every object was sent as it is now.
    public var exportedBaseline = false
    /// Other devices' changes taken from the server.
    public var importedChanges = 0
    /// The local transactions the imports committed, each with author ``StoreMirror/author``.
    public var importTransactions: [DefaultHistoryToken] = []
    /// Server rows that could not be applied (they stay on the server, and are read again by later syncs).
    public var skippedRows: [MirrorSkippedRow] = []
    /// Objects another device deleted that a `.deny` delete rule kept here, because they still have targets here.
    public var deniedDeletions: [PersistentIdentifier] = []

    /// One line: what was sent and received.
    public var description: String {
        var text = "exported \(exportedTransactions) transaction(s)\(exportedBaseline ? " and a baseline" : ""), "
            + "imported \(importedChanges) change(s) in \(importTransactions.count) transaction(s)"
        if !skippedRows.isEmpty { text += ", skipped \(skippedRows.count) row(s)" }
        if !deniedDeletions.isEmpty { text += ", kept \(deniedDeletions.count) object(s) a deny rule protects" }
        return text
    }
}
