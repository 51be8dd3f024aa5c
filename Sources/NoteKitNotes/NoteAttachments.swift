import Foundation
import NoteKit

/// Files attached to notes: adding, removing, opening, deleting a note with its files, and sweeping files no
/// record references.
///
/// The order of operations is the rule (R8): a file is written *before* the record that names it is saved, and a
/// record's removal is saved *before* its file is deleted. An interruption at any point can therefore only leave
/// a file that no record references (which ``sweep()`` removes), never a record that points at nothing.
///
/// Attaching or removing a file changes the note's content, so `updatedAt` moves, but it records no revision: a
/// revision holds authored text (T4). Opening an attachment changes nothing (R9).
///
/// Unlike ``NoteEditor``, these operations save the context, because their order relative to the files matters.
public struct NoteAttachments {
    /// The context the notes belong to.
    public let context: ModelContext
    /// Where the files live.
    public let directory: AttachmentDirectory
    /// Where the helper gets the time.
    public let clock: any NoteClock

    /// The attachments of the notes in `context`, their files in `directory`, dated by `clock`. It holds no state
    /// of its own: make one wherever needed.
    public init(context: ModelContext, directory: AttachmentDirectory, clock: any NoteClock = SystemNoteClock()) {
        self.context = context
        self.directory = directory
        self.clock = clock
    }

    /// What became of the files an operation meant to delete.
    public struct Cleanup: Sendable, Hashable {
        /// Files deleted.
        public var removed: [String] = []
        /// Files that could not be deleted (no record references them any more; ``sweep()`` will retry).
        public var leftBehind: [String] = []
    }

    /// Attaches `data` to `note` as a new file, then saves the record (R8). `updatedAt` moves; no revision (T4).
    ///
    /// - Parameters:
    ///   - data: the file's bytes, written to the attachments directory before the record is saved.
    ///   - originalName: the file's name as the user knew it; its extension is kept on the stored file.
    ///   - contentType: the file's media type.
    ///   - note: the note the file is attached to.
    /// - Returns: the saved attachment record.
    /// - Throws: the file system's error (nothing was recorded), or the save's error (the file is written and the
    ///   record stays pending in the context, so saving again completes the attachment).
    @discardableResult
    public func add(_ data: Data, originalName: String, contentType: String, to note: Note) throws -> NoteAttachment {
        let pathExtension = (originalName as NSString).pathExtension
        let fileName = UUID().uuidString.lowercased() + (pathExtension.isEmpty ? "" : ".\(pathExtension)")
        try directory.fileSystem.write(data, to: directory.url(of: fileName))

        let attachment = NoteAttachment()
        attachment.fileName = fileName
        attachment.originalName = originalName
        attachment.contentType = contentType
        attachment.size = Int64(data.count)
        note.attachments.append(attachment)
        note.updatedAt = clock.now()
        try context.save()
        return attachment
    }

    /// Removes one attachment: the record's removal is saved, then the file is deleted (R8). The note's
    /// `updatedAt` moves; no revision (T4).
    ///
    /// - Throws: what saving throws; then nothing was deleted and the removal stays pending in the context.
    @discardableResult
    public func remove(_ attachment: NoteAttachment) throws -> Cleanup {
        let fileName = attachment.fileName
        let note = attachment.note
        try context.delete(attachment)
        note?.updatedAt = clock.now()
        try context.save()
        return Self.deleteFiles([fileName], in: directory)
    }

    /// Deletes `note`, its drawing, its revisions, its attachment records, and then its attachment files (R2, R8).
    ///
    /// - Throws: what deleting or saving throws; then no file was deleted.
    /// - Returns: which files were deleted and which could not be.
    @discardableResult
    public static func delete(_ note: Note, in context: ModelContext, using directory: AttachmentDirectory) throws
        -> Cleanup {
        let fileNames = note.attachments.map(\.fileName)
        try context.delete(note)
        try context.save()
        return deleteFiles(fileNames, in: directory)
    }

    /// The attachment's bytes. Reading changes nothing: not the note, not the record, not the store (R9).
    ///
    /// - Throws: the file system's error when the file cannot be read.
    public func data(of attachment: NoteAttachment) throws -> Data {
        try directory.fileSystem.read(url(of: attachment))
    }

    /// Where the attachment's file is, for a viewer that opens files itself.
    public func url(of attachment: NoteAttachment) -> URL {
        directory.url(of: attachment.fileName)
    }

    /// Deletes the files in the directory that no attachment record references (what an interrupted add or
    /// delete can leave, and temporary files of interrupted writes).
    ///
    /// Run it when no add is in flight in another context: a file written by an add whose record is not saved yet
    /// is not referenced.
    ///
    /// - Returns: the names of the files deleted.
    /// - Throws: what fetching the records or listing the directory throws.
    @discardableResult
    public func sweep() throws -> [String] {
        let referenced = Set(try context.fetch(FetchDescriptor<NoteAttachment>()).map(\.fileName))
        let orphans = try directory.fileSystem.fileNames(in: directory.url).filter { !referenced.contains($0) }.sorted()
        return Self.deleteFiles(orphans, in: directory).removed
    }

    private static func deleteFiles(_ fileNames: [String], in directory: AttachmentDirectory) -> Cleanup {
        var cleanup = Cleanup()
        for fileName in fileNames {
            do {
                try directory.fileSystem.remove(directory.url(of: fileName))
                cleanup.removed.append(fileName)
            } catch {
                cleanup.leftBehind.append(fileName)
            }
        }
        return cleanup
    }
}
