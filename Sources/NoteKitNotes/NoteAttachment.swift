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
    @Attribute(.unique) public var id = UUID()
    /// The file's name inside the attachments directory.
    @Attribute(.unique) public var fileName = ""
    /// The name the file had when it was attached.
    @Attribute public var originalName = ""
    /// The file's media type, such as `image/png`.
    @Attribute public var contentType = ""
    /// The file's length in bytes.
    @Attribute public var size: Int64 = 0
    @Relationship public var note: Note?

    public required init() {}
}
