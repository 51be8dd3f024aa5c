import Foundation
import NoteKit

// Models for StoredPropertyTests and DeclarationSchemaErrorTests: the kinds of stored property a model class can
// have, and what the schema makes of each. Reflection sees stored properties only (never computed ones).

/// Seed 001's QuickNote: UI state declared `@Transient`, next to persisted attributes.
final class ExpandableNote: PersistentModel {
    @Attribute var title = ""
    @Attribute var createdAt = Date(timeIntervalSinceReferenceDate: 0)
    @Transient var isExpanded = false
    @Transient var draft: String?
    var summary: String { isExpanded ? title : String(title.prefix(3)) }
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}

/// A model ported from SwiftData by deleting `@Model`: `isExpanded` has no wrapper.
final class PortedNote: PersistentModel {
    @Attribute var title = ""
    var isExpanded = false
    required init() {}
}

/// A constant without a wrapper: reflection shows it like a variable.
final class ConstantHolder: PersistentModel {
    @Attribute var name = ""
    let kind = "memo"
    required init() {}
}

/// Only reachable through a relationship, and declares a stored property without a wrapper.
final class UnwrappedDestination: PersistentModel {
    @Attribute var label = ""
    var pending = 0
    required init() {}
}

final class UnwrappedDestinationOwner: PersistentModel {
    @Attribute var name = ""
    @Relationship var destination: UnwrappedDestination?
    required init() {}
}

/// A lazy property: computed from persisted attributes on first use, so it is derived state, never persisted.
final class LazySummary: PersistentModel {
    @Attribute var title = ""
    lazy var shouted = title.uppercased()
    required init() {}
    convenience init(title: String) {
        self.init()
        self.title = title
    }
}

/// An attribute whose type is a model, declared in generic code, where the compiler cannot see that the type is a
/// model (and so cannot warn): building the schema must refuse it.
final class GenericAttributeHolder<Target>: PersistentModel {
    static var entityName: String { "GenericAttributeHolder" }
    @Attribute var target: Target?
    required init() {}
}

/// A model that is also `Codable`, so that an attribute of its type would have an encoding to store.
final class CodableTarget: PersistentModel, Codable {
    @Attribute var name = ""
    required init() {}
    init(from decoder: any Decoder) throws { super.init() }
    func encode(to encoder: any Encoder) throws {}
}
