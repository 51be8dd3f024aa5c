#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// The record of a file attached to a note. The bytes live in the attachments directory the application owns, not
/// in the store (R9): the record holds only the stored file's name, the original name, the content type and the
/// size.
public final class NoteAttachment: PersistentModel {
    /// A stable identifier of the record's own.
    @Attribute(.unique) public var id = UUID()
    /// The file's name inside the attachments directory.
    @Attribute(.unique) public var fileName = ""
    /// The name the file had when it was attached.
    @Attribute public var originalName = ""
    /// The file's media type, such as `image/png`.
    @Attribute public var contentType = ""
    /// The file's length in bytes.
    @Attribute public var size: Int64 = 0
    /// The note the file is attached to (inverse of `Note.attachments`).
    @Relationship public var note: Note?

    /// An empty record, in no context yet; required by `PersistentModel`. Attach files with
    /// ``NoteAttachments/add(_:originalName:contentType:to:)``, which writes the file before the record (R8).
    public required init() {}
}
