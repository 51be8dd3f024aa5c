#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The editing rules of notes (T1–T7), in one place: creating a note, committing a draft of its text, setting its
/// drawing, restoring an earlier version, and reading its history.
///
/// - Only a change of the note's own content moves `updatedAt`: title, body, event date, drawing (and, through
///   ``NoteAttachments``, the set of attached files). Organization (refiling, moving or renaming folders) never does.
/// - Each content change other than attachments first records a ``NoteRevision`` of the version it replaces.
/// - Time comes from the editor's ``NoteClock``.
///
/// Changes are made in the context; save it when you are done.
public struct NoteEditor {
    /// The context the notes belong to.
    public let context: ModelContext
    /// Where the editor gets the time.
    public let clock: any NoteClock

    /// An editor of the notes in `context`, dated by `clock` (the system's by default; a ``ManualNoteClock`` in
    /// tests). It holds no state of its own: make one wherever needed.
    public init(context: ModelContext, clock: any NoteClock = SystemNoteClock()) {
        self.context = context
        self.clock = clock
    }

    /// The authored content of a note: what a revision keeps and what an edit changes.
    public struct Draft: Sendable, Hashable {
        /// The note's title.
        public var title: String
        /// The note's text.
        public var body: String
        /// The date of the event the note is about, if any.
        public var eventDate: Date?

        /// A draft with the given content; empty by default.
        public init(title: String = "", body: String = "", eventDate: Date? = nil) {
            self.title = title
            self.body = body
            self.eventDate = eventDate
        }

        /// The note's current content.
        public init(of note: Note) {
            self.init(title: note.title, body: note.body, eventDate: note.eventDate)
        }
    }

    /// Creates a note with `draft`'s content, created and updated now (T1), filed in `folder`.
    @discardableResult
    public func createNote(_ draft: Draft = Draft(), in folder: Folder? = nil) -> Note {
        let note = Note()
        let now = clock.now()
        note.title = draft.title
        note.body = draft.body
        note.eventDate = draft.eventDate
        note.createdAt = now
        note.updatedAt = now
        context.insert(note)
        note.folder = folder
        return note
    }

    /// Replaces the note's content with `draft`'s. When nothing differs, nothing happens (T2); otherwise the version
    /// being replaced is recorded as a revision (T4) and `updatedAt` moves to now.
    ///
    /// - Returns: whether the note changed.
    @discardableResult
    public func commit(_ draft: Draft, to note: Note) -> Bool {
        guard Draft(of: note) != draft else { return false }
        let now = clock.now()
        recordRevision(of: note, replacedAt: now)
        note.title = draft.title
        note.body = draft.body
        note.eventDate = draft.eventDate
        note.updatedAt = now
        return true
    }

    /// Sets the note's drawing to `data`, or removes it when `data` is nil. A content change (T2, T4) unless the
    /// drawing is already exactly that.
    ///
    /// - Parameters:
    ///   - data: the drawing's bytes (kept in external storage, R10), or nil to remove the drawing.
    ///   - note: the note to change.
    /// - Returns: whether the note changed.
    /// - Throws: what `ModelContext.delete(_:)` throws when a drawing is removed.
    @discardableResult
    public func setDrawing(_ data: Data?, on note: Note) throws -> Bool {
        let current = note.drawing
        switch (current, data) {
        case (nil, nil):
            return false
        case let (drawing?, data?) where drawing.data == data:
            return false
        default:
            break
        }
        let now = clock.now()
        recordRevision(of: note, replacedAt: now)
        if let data {
            if let current {
                current.data = data
            } else {
                let drawing = NoteDrawing()
                drawing.data = data
                note.drawing = drawing
            }
        } else if let current {
            try context.delete(current)
        }
        note.updatedAt = now
        return true
    }

    /// Restores an earlier version of the note. Restoring is an edit (T6): the current version is recorded as a
    /// revision and `updatedAt` moves to the time of the restore. Restoring a version identical to the current one
    /// changes nothing.
    ///
    /// - Returns: whether the note changed.
    /// - Precondition: `revision` is one of `note`'s revisions.
    @discardableResult
    public func restore(_ revision: NoteRevision, on note: Note) -> Bool {
        precondition(revision.note === note, "\(revision) is not a revision of \(note)")
        return commit(Draft(title: revision.title, body: revision.body, eventDate: revision.eventDate), to: note)
    }

    /// The note's earlier versions, most recently replaced first (T5). Versions replaced at the same moment are
    /// ordered by the time they were current, then by identifier, never by the order of the relationship.
    public func history(of note: Note) -> [NoteRevision] {
        note.revisions.sorted { a, b in
            if a.capturedAt != b.capturedAt { return a.capturedAt > b.capturedAt }
            if a.updatedAt != b.updatedAt { return a.updatedAt > b.updatedAt }
            return a.id.uuidString < b.id.uuidString
        }
    }

    /// Records the note's current content as a revision replaced at `moment`.
    private func recordRevision(of note: Note, replacedAt moment: Date) {
        let revision = NoteRevision()
        revision.title = note.title
        revision.body = note.body
        revision.eventDate = note.eventDate
        revision.updatedAt = note.updatedAt
        revision.capturedAt = moment
        note.revisions.append(revision)
    }
}
