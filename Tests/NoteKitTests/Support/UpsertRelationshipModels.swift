import Foundation
import NoteKit

// Models for what an upsert does to relationships: a member, unique by handle, with every relationship shape.

/// A member, unique by handle: in crews (many-to-many), at a desk (one-to-one), author of memos (one-to-many,
/// deleted with the member).
final class Member: PersistentModel {
    @Attribute(.unique) var handle = ""
    @Attribute var name = ""
    @Relationship var crews: [Crew] = []
    @Relationship var desk: Desk?
    @Relationship(deleteRule: .cascade, inverse: \Memo.author) var memos: [Memo] = []
    required init() {}
    convenience init(handle: String, name: String = "") {
        self.init()
        self.handle = handle
        self.name = name
    }
}

final class Crew: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \Member.crews) var members: [Member] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Desk: PersistentModel {
    @Attribute var label = ""
    @Relationship(inverse: \Member.desk) var occupant: Member?
    required init() {}
    convenience init(label: String) {
        self.init()
        self.label = label
    }
}

final class Memo: PersistentModel {
    @Attribute var text = ""
    @Relationship var author: Member?
    required init() {}
    convenience init(text: String) {
        self.init()
        self.text = text
    }
}
