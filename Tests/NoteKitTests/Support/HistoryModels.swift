import Foundation
import NoteKit

// Models for the history tests: a diary whose pages go with it, each leaving its code or number behind.

final class Diary: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var code = ""
    @Attribute var title = ""
    @Attribute var mood: String?
    @Relationship(deleteRule: .cascade, inverse: \Page.diary) var pages: [Page] = []
    required init() {}
    convenience init(code: String, title: String = "") {
        self.init()
        self.code = code
        self.title = title
    }
}

final class Page: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var number = 0
    @Attribute var text = ""
    @Relationship var diary: Diary?
    required init() {}
    convenience init(number: Int, text: String = "") {
        self.init()
        self.number = number
        self.text = text
    }
}
