import Foundation
import NoteKit

// Models of the query-form tests (issue 35): a folder tree, notes filed in it, and the notes' attachments, with an
// attribute of each kind a predicate reads through a relationship.

final class QueryFolder: PersistentModel {
    @Attribute var name = ""
    @Attribute var rank = 0
    @Relationship var parent: QueryFolder?
    @Relationship(deleteRule: .nullify, inverse: \QueryFolder.parent) var children: [QueryFolder] = []
    @Relationship(deleteRule: .nullify, inverse: \QueryNote.folder) var notes: [QueryNote] = []

    static var indexes: [[PartialKeyPath<QueryFolder>]] { [[\.name]] }

    required init() {}
    convenience init(_ name: String, rank: Int = 0, parent: QueryFolder? = nil) {
        self.init()
        self.name = name
        self.rank = rank
        self.parent = parent
    }
}

final class QueryNote: PersistentModel {
    @Attribute var title = ""
    @Attribute var body = ""
    @Attribute var rating = 0
    @Attribute var score: Double?
    @Attribute var isPinned = false
    @Attribute var createdAt = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var tags: [String] = []
    @Attribute var points: [Int] = []
    @Attribute var counts: [String: Int] = [:]
    @Relationship var folder: QueryFolder?
    @Relationship(deleteRule: .cascade, inverse: \QueryAttachment.note) var attachments: [QueryAttachment] = []

    static var indexes: [[PartialKeyPath<QueryNote>]] { [[\.isPinned, \.createdAt], [\.rating]] }

    /// Known only to the object: a predicate that reads it cannot run in the store.
    var ratingTwice: Int { rating * 2 }

    required init() {}
}

final class QueryAttachment: PersistentModel {
    @Attribute var name = ""
    @Attribute var size = 0
    @Relationship var note: QueryNote?

    static var indexes: [[PartialKeyPath<QueryAttachment>]] { [[\.size]] }

    required init() {}
    convenience init(_ name: String, size: Int) {
        self.init()
        self.name = name
        self.size = size
    }
}
