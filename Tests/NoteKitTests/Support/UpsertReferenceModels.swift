import Foundation
import NoteKit

// Seed 003's version 2: `Note.tags: [Tag]` with no inverse, and a tag whose name is unique.

/// Seed 003's `SchemaV2.Note` (renamed: NoteKit's notes module has a `Note`).
final class TaggedNote: PersistentModel {
    @Attribute var title = ""
    @Attribute var content = ""
    @Attribute var isPinned = false
    @Relationship var tags: [UniqueTag] = []
    /// A to-one reference without an inverse, to the same kind of unique model.
    @Relationship var primaryTag: UniqueTag?
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}

/// Seed 003's `SchemaV2.Tag`.
final class UniqueTag: PersistentModel {
    @Attribute(.unique) var name = ""
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// A unique model on the to-one side of a relationship with an inverse.
final class Byline: PersistentModel {
    @Attribute(.unique) var handle = ""
    @Attribute var displayName = ""
    @Relationship(inverse: \Story.author) var articles: [Story] = []
    required init() {}
    convenience init(handle: String, displayName: String = "") {
        self.init()
        self.handle = handle
        self.displayName = displayName
    }
}

final class Story: PersistentModel {
    @Attribute var headline = ""
    @Relationship var author: Byline?
    required init() {}
    convenience init(headline: String) {
        self.init()
        self.headline = headline
    }
}
