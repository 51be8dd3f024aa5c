#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A note's drawing. Its bytes use external storage: listing and fetching notes never reads them (R10).
public final class NoteDrawing: PersistentModel {
    /// A stable identifier of the drawing's own.
    @Attribute(.unique) public var id = UUID()
    /// The drawing's bytes, read from the store only when this property is read.
    @Attribute(.externalStorage) public var data = Data()
    /// The note the drawing belongs to (inverse of `Note.drawing`).
    @Relationship public var note: Note?

    /// An empty drawing, in no context yet; required by `PersistentModel`. Set a note's drawing with
    /// ``NoteEditor/setDrawing(_:on:)``, which dates the change (T2).
    public required init() {}
}
