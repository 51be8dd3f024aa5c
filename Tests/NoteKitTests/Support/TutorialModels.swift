import Foundation
import NoteKit

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
