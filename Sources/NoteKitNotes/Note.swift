#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A note: authored text with an optional event date, filed in at most one folder, with a drawing, a history of
/// revisions and attached files.
///
/// Create and edit notes through ``NoteEditor`` and attach files through ``NoteAttachments``: they own the
/// timestamp and history rules (<doc:Rules>, T1–T7), so callers never decide when `updatedAt` moves. Refiling
/// (`note.folder = other`) is organization, not authorship, and changes neither timestamp nor history.
public final class Note: PersistentModel {
    /// A stable identifier of the note's own.
    @Attribute(.unique) public var id = UUID()
    /// The note's title; set it through ``NoteEditor/commit(_:to:)`` so that the change is dated and the version
    /// it replaces kept (T2, T4).
    @Attribute public var title = ""
    /// The note's text; set it through ``NoteEditor`` as the title.
    @Attribute public var body = ""
    /// The date of the event the note is about, if any.
    @Attribute public var eventDate: Date?
    /// When the note was created; never changes (T1).
    @Attribute public var createdAt = Date.now
    /// When the note's own content last changed (T2): text, event date, drawing or attached files.
    @Attribute public var updatedAt = Date.now

    /// The folder the note is filed in; nil for an unfiled note. Deleting the folder unfiles the note (R1).
    @Relationship public var folder: Folder?
    /// The note's drawing, deleted with the note (R2).
    @Relationship(deleteRule: .cascade, inverse: \NoteDrawing.note) public var drawing: NoteDrawing?
    /// Earlier versions of the note, deleted with it (R2). Read them in order through ``NoteEditor/history(of:)``.
    @Relationship(deleteRule: .cascade, inverse: \NoteRevision.note) public var revisions: [NoteRevision] = []
    /// Records of the files attached to the note, deleted with it (R2); the files themselves are removed by
    /// ``NoteAttachments/delete(_:in:using:)`` (R8).
    @Relationship(deleteRule: .cascade, inverse: \NoteAttachment.note) public var attachments: [NoteAttachment] = []

    /// An empty, unfiled note created now, in no context yet; required by `PersistentModel`. Create notes with
    /// ``NoteEditor/createNote(_:in:)`` instead, which dates them by the editor's clock.
    public required init() {}
}
