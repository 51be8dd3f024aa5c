#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// An earlier version of a note's authored content (T4, T5).
public final class NoteRevision: PersistentModel {
    /// A stable identifier of the revision's own.
    @Attribute(.unique) public var id = UUID()
    /// The note's title in this version.
    @Attribute public var title = ""
    /// The note's text in this version.
    @Attribute public var body = ""
    /// The note's event date in this version.
    @Attribute public var eventDate: Date?
    /// The note's `updatedAt` while this version was current: the date shown to the reader.
    @Attribute public var updatedAt = Date.now
    /// When this version was replaced: what history is ordered by.
    @Attribute public var capturedAt = Date.now
    /// The note this is a version of (inverse of `Note.revisions`).
    @Relationship public var note: Note?

    /// An empty revision, in no context yet; required by `PersistentModel`. ``NoteEditor`` records revisions
    /// itself (T4).
    public required init() {}
}
