import Foundation
import NoteKit
import NoteKitNotes

// The notes schema as it was before each change, frozen (DOMAIN.md M1). These declarations write Fixtures/v1–v4 and
// must never change: editing one would make its fixture prove nothing. Each is today's declaration minus what the
// next version added, property for property, default for default (v4 is today's, until the next change).

/// Version 1: notes, folders and drawings. No revisions, no nesting, no attachments.
public enum PreRevisionSchema: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    public static var models: [any PersistentModel.Type] { [Note.self, Folder.self, NoteDrawing.self] }

    public final class Note: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var createdAt = Date.now
        @Attribute public var updatedAt = Date.now
        @Relationship public var folder: Folder?
        @Relationship(deleteRule: .cascade, inverse: \NoteDrawing.note) public var drawing: NoteDrawing?
        public required init() {}
    }

    public final class Folder: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var name = ""
        @Relationship(deleteRule: .nullify, inverse: \Note.folder) public var notes: [Note] = []
        public required init() {}
    }

    public final class NoteDrawing: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute(.externalStorage) public var data = Data()
        @Relationship public var note: Note?
        public required init() {}
    }
}

/// Version 2: adds revisions. Folders are not nested yet.
public enum PreNestedFolderSchema: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    public static var models: [any PersistentModel.Type] { [Note.self, Folder.self, NoteDrawing.self, NoteRevision.self] }

    public final class Note: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var createdAt = Date.now
        @Attribute public var updatedAt = Date.now
        @Relationship public var folder: Folder?
        @Relationship(deleteRule: .cascade, inverse: \NoteDrawing.note) public var drawing: NoteDrawing?
        @Relationship(deleteRule: .cascade, inverse: \NoteRevision.note) public var revisions: [NoteRevision] = []
        public required init() {}
    }

    public final class Folder: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var name = ""
        @Relationship(deleteRule: .nullify, inverse: \Note.folder) public var notes: [Note] = []
        public required init() {}
    }

    public final class NoteDrawing: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute(.externalStorage) public var data = Data()
        @Relationship public var note: Note?
        public required init() {}
    }

    public final class NoteRevision: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var updatedAt = Date.now
        @Attribute public var capturedAt = Date.now
        @Relationship public var note: Note?
        public required init() {}
    }
}

/// Version 3: adds nested folders (Folder.parent and Folder.children). No attachments yet.
public enum PreAttachmentSchema: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(3, 0, 0) }
    public static var models: [any PersistentModel.Type] { [Note.self, Folder.self, NoteDrawing.self, NoteRevision.self] }

    public final class Note: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var createdAt = Date.now
        @Attribute public var updatedAt = Date.now
        @Relationship public var folder: Folder?
        @Relationship(deleteRule: .cascade, inverse: \NoteDrawing.note) public var drawing: NoteDrawing?
        @Relationship(deleteRule: .cascade, inverse: \NoteRevision.note) public var revisions: [NoteRevision] = []
        public required init() {}
    }

    public final class Folder: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var name = ""
        @Relationship(deleteRule: .nullify, inverse: \Note.folder) public var notes: [Note] = []
        @Relationship public var parent: Folder?
        @Relationship(deleteRule: .nullify, inverse: \Folder.parent) public var children: [Folder] = []
        public required init() {}
    }

    public final class NoteDrawing: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute(.externalStorage) public var data = Data()
        @Relationship public var note: Note?
        public required init() {}
    }

    public final class NoteRevision: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var updatedAt = Date.now
        @Attribute public var capturedAt = Date.now
        @Relationship public var note: Note?
        public required init() {}
    }
}

/// Version 4: adds attachments (NoteAttachment). Frozen when Fixtures/v4 was written, in store format version 2.
public enum AttachmentSchema: VersionedSchema {
    public static var versionIdentifier: Schema.Version { Schema.Version(4, 0, 0) }
    public static var models: [any PersistentModel.Type] {
        [Note.self, Folder.self, NoteDrawing.self, NoteRevision.self, NoteAttachment.self]
    }

    public final class Note: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var createdAt = Date.now
        @Attribute public var updatedAt = Date.now
        @Relationship public var folder: Folder?
        @Relationship(deleteRule: .cascade, inverse: \NoteDrawing.note) public var drawing: NoteDrawing?
        @Relationship(deleteRule: .cascade, inverse: \NoteRevision.note) public var revisions: [NoteRevision] = []
        @Relationship(deleteRule: .cascade, inverse: \NoteAttachment.note) public var attachments: [NoteAttachment] = []
        public required init() {}
    }

    public final class Folder: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var name = ""
        @Relationship(deleteRule: .nullify, inverse: \Note.folder) public var notes: [Note] = []
        @Relationship public var parent: Folder?
        @Relationship(deleteRule: .nullify, inverse: \Folder.parent) public var children: [Folder] = []
        public required init() {}
    }

    public final class NoteDrawing: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute(.externalStorage) public var data = Data()
        @Relationship public var note: Note?
        public required init() {}
    }

    public final class NoteRevision: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute public var title = ""
        @Attribute public var body = ""
        @Attribute public var eventDate: Date?
        @Attribute public var updatedAt = Date.now
        @Attribute public var capturedAt = Date.now
        @Relationship public var note: Note?
        public required init() {}
    }

    public final class NoteAttachment: PersistentModel {
        @Attribute(.unique) public var id = UUID()
        @Attribute(.unique) public var fileName = ""
        @Attribute public var originalName = ""
        @Attribute public var contentType = ""
        @Attribute public var size: Int64 = 0
        @Relationship public var note: Note?
        public required init() {}
    }
}
