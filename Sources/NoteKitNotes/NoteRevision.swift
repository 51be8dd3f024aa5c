#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// An earlier version of a note's authored content (T4, T5).
public final class NoteRevision: PersistentModel {
    @Attribute(.unique) public var id = UUID()
    @Attribute public var title = ""
    @Attribute public var body = ""
    @Attribute public var eventDate: Date?
    /// The note's `updatedAt` while this version was current: the date shown to the reader.
    @Attribute public var updatedAt = Date.now
    /// When this version was replaced: what history is ordered by.
    @Attribute public var capturedAt = Date.now
    @Relationship public var note: Note?

    public required init() {}
}
