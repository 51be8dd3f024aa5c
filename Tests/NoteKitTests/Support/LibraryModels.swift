import Foundation
import NoteKit

// Models shared by the engine's tests: a small library domain that exercises every relationship shape.

final class Author: PersistentModel {
    @Attribute(.unique) var name = ""
    @Attribute var born: Date?
    @Relationship(deleteRule: .cascade, inverse: \Book.author) var books: [Book] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Book: PersistentModel {
    @Attribute var title = ""
    @Attribute var pages = 0
    @Attribute var rating: Double = 0
    @Relationship var author: Author?
    @Relationship(inverse: \Shelf.books) var shelves: [Shelf] = []
    static var indexes: [[PartialKeyPath<Book>]] { [[\.pages], [\.title, \.pages]] }
    required init() {}
    convenience init(title: String, pages: Int = 100) {
        self.init()
        self.title = title
        self.pages = pages
    }
}

/// Many-to-many with Book.
final class Shelf: PersistentModel {
    @Attribute var label = ""
    @Relationship var books: [Book] = []
    required init() {}
    convenience init(label: String) {
        self.init()
        self.label = label
    }
}
