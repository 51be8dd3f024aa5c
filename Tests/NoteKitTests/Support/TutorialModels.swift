import Foundation
import NoteKit
import NoteKitNotes

/// Seed 003's tutorial models as a porter writes them for NoteKit (`@Model` replaced by the wrappers), in a
/// namespace so that the entities keep the tutorial's names, `Note` and `Folder`.
enum Tutorial {
    final class Folder: PersistentModel {
        @Attribute var name = ""
        @Relationship(deleteRule: .cascade, inverse: \Note.folder) var notes: [Note] = []
        required init() {}
        convenience init(name: String) {
            self.init()
            self.name = name
        }
    }

    final class Note: PersistentModel {
        @Attribute var title = ""
        @Attribute var createdAt = Date.now
        @Attribute var isPinned: Bool = false
        @Relationship var folder: Folder?
        /// A computed property, which a predicate reads on objects only.
        var titleLength: Int { title.count }
        required init() {}
        convenience init(title: String, createdAt: Date, isPinned: Bool = false, folder: Folder? = nil) {
            self.init()
            self.title = title
            self.createdAt = createdAt
            self.isPinned = isPinned
            self.folder = folder
        }
    }

    /// The tutorial's note with the index a list sorted pinned-first, newest-first wants.
    final class IndexedNote: PersistentModel {
        @Attribute var title = ""
        @Attribute var createdAt = Date.now
        @Attribute var isPinned = false
        @Attribute var isFlagged: Bool?
        static var indexes: [[PartialKeyPath<IndexedNote>]] { [[\.isPinned, \.createdAt]] }
        required init() {}
        convenience init(title: String, createdAt: Date, isPinned: Bool = false, isFlagged: Bool? = nil) {
            self.init()
            self.title = title
            self.createdAt = createdAt
            self.isPinned = isPinned
            self.isFlagged = isFlagged
        }
    }
}


// Seed 003's models ("Filtering, sorting and relationships"), declared without the macro: a note that may belong to
// a folder, a folder whose notes cascade.

final class TutorialFolder: PersistentModel {
    static var entityName: String { "Folder" }
    @Attribute var name = ""
    @Relationship(deleteRule: .cascade, inverse: \TutorialNote.folder) var notes: [TutorialNote] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class TutorialNote: PersistentModel {
    static var entityName: String { "Note" }
    @Attribute var title = ""
    @Attribute var createdAt = Date.now
    @Attribute var isPinned = false
    @Relationship var folder: TutorialFolder?
    required init() {}
    convenience init(title: String, folder: TutorialFolder? = nil, createdAt: Date = .now) {
        self.init()
        self.title = title
        self.createdAt = createdAt
        self.folder = folder
    }
}
