// The dependent's models, in a module of their own, with seed 003's names.
import NoteKit

public final class Folder: PersistentModel {
    @Attribute(.unique) public var name = ""
    @Relationship(deleteRule: .cascade, inverse: \Note.folder) public var notes: [Note] = []
    public required init() {}
    public convenience init(name: String) {
        self.init()
        self.name = name
    }
}

public final class Note: PersistentModel {
    @Attribute public var title = ""
    @Attribute public var createdAt = Date.now
    @Relationship public var folder: Folder?
    public required init() {}
    public convenience init(title: String) {
        self.init()
        self.title = title
    }
}
