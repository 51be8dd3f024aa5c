import Foundation
import NoteKit

// Seed 003's question: a folder whose notes relationship has the default delete rule.
final class PlainFolder: PersistentModel {
    @Attribute var name = ""
    @Relationship(inverse: \PlainNote.folder) var notes: [PlainNote] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class PlainNote: PersistentModel {
    @Attribute var title = ""
    @Relationship var folder: PlainFolder?
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}

/// A self-referential tree whose children cascade: a cycle of cascades must terminate.
final class TreeNode: PersistentModel {
    @Attribute var label = ""
    @Relationship var parent: TreeNode?
    @Relationship(deleteRule: .cascade, inverse: \TreeNode.parent) var children: [TreeNode] = []
    required init() {}
    convenience init(_ label: String) {
        self.init()
        self.label = label
    }
}

/// Three levels of cascade: Warehouse → Aisle → Bin, with a deny and a noAction on the side.
final class Warehouse: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .cascade, inverse: \Aisle.warehouse) var aisles: [Aisle] = []
    @Relationship(deleteRule: .deny, inverse: \Lease.warehouse) var leases: [Lease] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Aisle: PersistentModel {
    @Attribute var number = 0
    @Relationship var warehouse: Warehouse?
    @Relationship(deleteRule: .cascade, inverse: \Bin.aisle) var bins: [Bin] = []
    required init() {}
    convenience init(number: Int) {
        self.init()
        self.number = number
    }
}

final class Bin: PersistentModel {
    @Attribute var code = ""
    @Relationship var aisle: Aisle?
    @Relationship(deleteRule: .noAction, inverse: \Tag.bins) var tags: [Tag] = []
    required init() {}
    convenience init(code: String) {
        self.init()
        self.code = code
    }
}

final class Tag: PersistentModel {
    @Attribute var name = ""
    @Relationship var bins: [Bin] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Lease: PersistentModel {
    @Attribute var tenant = ""
    @Relationship var warehouse: Warehouse?
    required init() {}
    convenience init(tenant: String) {
        self.init()
        self.tenant = tenant
    }
}

/// One-to-one: a passport belongs to one person.
final class Person: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .cascade, inverse: \Passport.holder) var passport: Passport?
    @Relationship(minimumModelCount: 0, maximumModelCount: 2) var pets: [Pet] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Passport: PersistentModel {
    @Attribute var number = ""
    @Relationship var holder: Person?
    required init() {}
    convenience init(number: String) {
        self.init()
        self.number = number
    }
}

final class Pet: PersistentModel {
    @Attribute var name = ""
    @Relationship(minimumModelCount: 1) var owners: [Person] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// Seed 003's delete-rule table: a folder whose notes rule is `.noAction` leaves its notes pointing at it.
final class Drawer: PersistentModel {
    @Attribute var name = ""
    @Relationship(deleteRule: .noAction, inverse: \Sheet.drawer) var sheets: [Sheet] = []
    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

final class Sheet: PersistentModel {
    @Attribute var title = ""
    @Relationship var drawer: Drawer?
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}
