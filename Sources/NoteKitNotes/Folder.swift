#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// A folder of notes, possibly inside another folder. A folder with no parent is a root folder; the library
/// itself is the conceptual root and is not stored.
///
/// Move and delete folders through ``FolderHierarchy``: it refuses moves that would make a cycle (R5) and keeps
/// a deleted folder's children in place (R4). The store itself accepts any graph, cycles included (R6).
public final class Folder: PersistentModel {
    /// A stable identifier of the folder's own, unique among folders.
    @Attribute(.unique) public var id = UUID()
    /// The name shown for the folder; not unique (two folders may share a name, in one parent or in two).
    @Attribute public var name = ""
    /// The notes filed here. Deleting the folder keeps them, unfiled (R1).
    @Relationship(deleteRule: .nullify, inverse: \Note.folder) public var notes: [Note] = []
    /// The folder this one is inside; nil for a root folder.
    @Relationship public var parent: Folder?
    /// The folders inside this one. Deleting this folder never deletes them (R3).
    @Relationship(deleteRule: .nullify, inverse: \Folder.parent) public var children: [Folder] = []

    /// An unnamed root folder with a new ``id``, in no context yet; required by `PersistentModel`.
    public required init() {}

    /// A folder named `name`, in no context yet.
    public convenience init(name: String) {
        self.init()
        self.name = name
    }
}
