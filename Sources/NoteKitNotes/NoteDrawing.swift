#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A note's drawing. Its bytes use external storage: listing and fetching notes never reads them (R10).
public final class NoteDrawing: PersistentModel {
    @Attribute(.unique) public var id = UUID()
    /// The drawing's bytes, read from the store only when this property is read.
    @Attribute(.externalStorage) public var data = Data()
    @Relationship public var note: Note?

    public required init() {}
}
