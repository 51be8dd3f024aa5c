import Foundation
import NoteKit

// Models of the fetch, predicate and index tests.

/// Seed 001's FieldNotes record, as NoteKit declares it: `#Index<NoteRecord>([\.createdAt], [\.isPinned, \.createdAt])`.
final class NoteRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var id = UUID()
    @Attribute var title = ""
    @Attribute var body = ""
    @Attribute var createdAt = Date.now
    @Attribute var tags: [String] = []
    @Attribute var isPinned = false
    @Attribute var latitude: Double?
    @Attribute var longitude: Double?
    @Attribute var placeName: String?
    @Relationship var notebook: NotebookRecord?

    static var indexes: [[PartialKeyPath<NoteRecord>]] { [[\.createdAt], [\.isPinned, \.createdAt]] }

    /// A computed property: known only to the object, so a predicate that reads it is evaluated on objects (the
    /// tests' way to send a fetch there).
    var tagCount: Int { tags.count }
    /// Likewise.
    var titleLength: Int { title.count }

    required init() {}
    convenience init(title: String, body: String = "", createdAt: Date = .now, tags: [String] = [],
                     isPinned: Bool = false) {
        self.init()
        self.title = title
        self.body = body
        self.createdAt = createdAt
        self.tags = tags
        self.isPinned = isPinned
    }
}

/// Seed 001's notebook record.
final class NotebookRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var id = UUID()
    @Attribute var name = ""
    @Attribute var symbolName = "book.closed"
    @Relationship(deleteRule: .nullify, inverse: \NoteRecord.notebook) var notes: [NoteRecord] = []

    required init() {}
    convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// One attribute of every kind a compiled predicate reads, for the differential test: strings (plain and
/// optional), integers, doubles (plain and optional), a Bool, a Date, an array, and a to-one relationship.
/// Indexes on a number, a string and a (Bool, Date) pair put the index paths under the same test.
final class Specimen: PersistentModel {
    @Attribute var name = ""
    @Attribute var label: String?
    @Attribute var count = 0
    @Attribute var amount: Double = 0
    @Attribute var weight: Double?
    @Attribute var flag = false
    @Attribute var seen = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var tags: [String] = []
    @Relationship var site: Site?

    static var indexes: [[PartialKeyPath<Specimen>]] { [[\.count], [\.name], [\.flag, \.seen]] }

    required init() {}
}

/// Where a ``Specimen`` was found.
final class Site: PersistentModel {
    @Attribute var code = ""
    @Relationship(deleteRule: .nullify, inverse: \Specimen.site) var specimens: [Specimen] = []

    required init() {}
    convenience init(code: String) {
        self.init()
        self.code = code
    }
}

// `#Predicate { $0.notebook == work }` type-checks only when the captured object is `Codable & Sendable`:
// Foundation's `PredicateExpressions.Value` is a `StandardPredicateExpression` only then, and `Predicate`
// accepts nothing else. Model objects are neither, so without these conformances the tests could not write
// SwiftData's relationship comparison at all (`$0.notebook?.persistentModelID == id` is what apps can write).
// NoteKit compiles the captured object to its identifier; the conformances exist only to let the predicate
// capture one. Nothing here encodes or decodes a model.
extension NotebookRecord: @unchecked Sendable, Codable {
    convenience init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                debugDescription: "model objects are not decoded"))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(persistentModelID)
    }
}

extension Site: @unchecked Sendable, Codable {
    convenience init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                debugDescription: "model objects are not decoded"))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(persistentModelID)
    }
}
