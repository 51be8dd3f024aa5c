import Foundation
import NoteKit

/// Seed 002: an email is unique; inserting the same email twice updates the first.
final class Contact: PersistentModel {
    @Attribute(.unique) var email = ""
    @Attribute var name = ""
    @Attribute var phone: String?
    @Relationship(inverse: \ContactGroup.members) var groups: [ContactGroup] = []
    required init() {}
    convenience init(email: String, name: String) {
        self.init()
        self.email = email
        self.name = name
    }
}

final class ContactGroup: PersistentModel {
    @Attribute var title = ""
    @Relationship var members: [Contact] = []
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}

/// Seed 001's QuickNote: a compound unique constraint on (title, createdAt), a unique slug, a transient flag.
final class QuickNote: PersistentModel {
    @Attribute(.unique) var slug = ""
    @Attribute var title = ""
    @Attribute var createdAt = Date.now
    @Transient var isExpanded = false
    static var uniqueConstraints: [[PartialKeyPath<QuickNote>]] { [[\.title, \.createdAt]] }
    static var indexes: [[PartialKeyPath<QuickNote>]] { [[\.createdAt]] }
    required init() {}
    convenience init(title: String, createdAt: Date = .now) {
        self.init()
        self.title = title
        self.createdAt = createdAt
        self.slug = "\(title.lowercased())-\(createdAt.timeIntervalSince1970)"
    }
}
