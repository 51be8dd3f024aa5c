import Foundation
import NoteKit

// Seed 001's record models, declared here as the benchmark's own (the engine knows nothing of notes). NoteRecord
// gains `updatedAt`, which workload W1 sets on every note and edits.

final class NoteRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var id = UUID()
    @Attribute var title = ""
    @Attribute var body = ""
    @Attribute var createdAt = Date.now
    @Attribute var updatedAt = Date.now
    @Attribute var tags: [String] = []
    @Attribute var isPinned = false
    @Attribute var latitude: Double?
    @Attribute var longitude: Double?
    @Attribute var placeName: String?
    @Relationship var notebook: NotebookRecord?
    @Relationship(deleteRule: .cascade, inverse: \PhotoRecord.note) var photos: [PhotoRecord] = []
    static var indexes: [[PartialKeyPath<NoteRecord>]] { [[\.createdAt], [\.isPinned, \.createdAt]] }
    required init() {}
}

final class NotebookRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) var id = UUID()
    @Attribute var name = ""
    @Attribute var symbolName = "book.closed"
    @Relationship(deleteRule: .nullify, inverse: \NoteRecord.notebook) var notes: [NoteRecord] = []
    required init() {}
}

final class PhotoRecord: PersistentModel {
    @Attribute var id = UUID()
    @Attribute var fileName = ""
    @Attribute var addedAt = Date.now
    @Attribute(.externalStorage) var data = Data()
    @Relationship var note: NoteRecord?
    required init() {}
}

/// The mirror benchmark's keyed objects: a unique key, and links to other keyed objects (many-to-many, no inverse).
final class KeyedRecord: PersistentModel {
    @Attribute(.unique) var key = ""
    @Attribute var body = ""
    @Relationship var peers: [KeyedRecord] = []
    required init() {}
}
