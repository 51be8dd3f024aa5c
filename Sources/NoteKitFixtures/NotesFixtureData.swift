import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore

/// What Fixtures/v1–v4 hold, described once: the generator writes it through the frozen declarations, and the
/// replay tests check that today's models read exactly this back.
public enum NotesFixtureData {
    public struct Folder: Sendable, Equatable {
        public let id: UUID
        public let name: String
        /// The parent folder's name (version 3 and later).
        public let parent: String?
    }

    public struct Revision: Sendable, Equatable {
        public let id: UUID
        public let title: String
        public let body: String
        public let eventDate: Date?
        public let updatedAt: Date
        public let capturedAt: Date
    }

    /// A note's attached file, as the store records it (version 4 and later). The file's bytes live in the
    /// application's attachment directory, not in the store: the fixture holds the records only.
    public struct Attachment: Sendable, Equatable {
        public let id: UUID
        public let note: UUID
        public let fileName: String
        public let originalName: String
        public let contentType: String
        public let size: Int64
    }

    public struct Note: Sendable, Equatable {
        public let id: UUID
        public let title: String
        public let body: String
        public let eventDate: Date?
        public let createdAt: Date
        public let updatedAt: Date
        public let folder: String?
        public let drawing: Data?
        /// Version 2 and later.
        public let revisions: [Revision]
    }

    private static func uuid(_ n: UInt8) -> UUID {
        UUID(uuid: (0xF1, 0x7E, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, n))
    }

    private static func day(_ offset: Double) -> Date { Date(timeIntervalSinceReferenceDate: 780_000_000 + offset * 86_400) }

    /// Non-trivial drawing bytes: every byte value, in a pattern that differs per seed.
    private static func drawing(_ seed: UInt8, count: Int) -> Data {
        let seed = Int(seed)
        return Data((0..<count).map { (index: Int) -> UInt8 in UInt8(((index &* 31) &+ seed &* 7) % 256) })
    }

    /// The folders of the fixture of `version` (1 to 4).
    public static func folders(version: Int) -> [Folder] {
        var folders = [
            Folder(id: uuid(1), name: "Inbox", parent: nil),
            Folder(id: uuid(2), name: "Work", parent: nil),
            Folder(id: uuid(3), name: "Recettes d'été", parent: nil),
            Folder(id: uuid(4), name: "Empty", parent: nil),
        ]
        if version >= 3 {
            folders += [
                Folder(id: uuid(5), name: "Projects", parent: "Work"),
                Folder(id: uuid(6), name: "NoteKit", parent: "Projects"),
            ]
        }
        return folders
    }

    /// The notes of the fixture of `version` (1 to 4).
    public static func notes(version: Int) -> [Note] {
        let revisions = version >= 2
        var notes = [
            Note(id: uuid(21), title: "Welcome", body: "The first note.", eventDate: nil, createdAt: day(0),
                 updatedAt: day(0), folder: "Inbox", drawing: drawing(1, count: 1024), revisions: []),
            Note(id: uuid(22), title: "Crème brûlée", body: "Sucre, œufs, crème : 180 °C — 🍮",
                 eventDate: day(30), createdAt: day(1), updatedAt: day(5), folder: "Recettes d'été", drawing: nil,
                 revisions: revisions ? [
                    Revision(id: uuid(41), title: "Creme brulee", body: "sugar", eventDate: nil, updatedAt: day(1),
                             capturedAt: day(2)),
                    Revision(id: uuid(42), title: "Crème brûlée", body: "Sucre, œufs", eventDate: day(30),
                             updatedAt: day(2), capturedAt: day(5)),
                 ] : []),
            Note(id: uuid(23), title: "日本語のメモ", body: "東京へ行く。\nZürich → Kraków", eventDate: day(-10),
                 createdAt: day(2), updatedAt: day(2), folder: nil, drawing: nil, revisions: []),
            Note(id: uuid(24), title: "Meeting \"Q3\"", body: "Agenda:\n1.\tFormat\n2.\tBack\\slash",
                 eventDate: nil, createdAt: day(3), updatedAt: day(4), folder: "Work",
                 drawing: drawing(2, count: 4096),
                 revisions: revisions ? [
                    Revision(id: uuid(43), title: "Meeting", body: "", eventDate: day(3), updatedAt: day(3),
                             capturedAt: day(4)),
                 ] : []),
            Note(id: uuid(25), title: "Unfiled and plain", body: "", eventDate: nil, createdAt: day(4),
                 updatedAt: day(4), folder: nil, drawing: nil, revisions: []),
        ]
        if version >= 3 {
            notes.append(Note(id: uuid(26), title: "Deep", body: "three folders down", eventDate: nil,
                              createdAt: day(6), updatedAt: day(6), folder: "NoteKit",
                              drawing: drawing(3, count: 300), revisions: []))
        }
        return notes
    }

    /// The attachments of the fixture of `version`: none before version 4.
    public static func attachments(version: Int) -> [Attachment] {
        guard version >= 4 else { return [] }
        return [
            Attachment(id: uuid(61), note: uuid(24), fileName: "F17E0000-0000-4000-8000-00000000003D.pdf",
                       originalName: "Q3 agenda.pdf", contentType: "application/pdf", size: 48_213),
            Attachment(id: uuid(62), note: uuid(24), fileName: "F17E0000-0000-4000-8000-00000000003E.png",
                       originalName: "whiteboard.png", contentType: "image/png", size: 1_204_551),
            Attachment(id: uuid(63), note: uuid(22), fileName: "F17E0000-0000-4000-8000-00000000003F.jpg",
                       originalName: "crème brûlée.jpg", contentType: "image/jpeg", size: 0),
        ]
    }

    /// The frozen schema of `version`.
    public static func versionedSchema(_ version: Int) -> any VersionedSchema.Type {
        switch version {
        case 1: PreRevisionSchema.self
        case 2: PreNestedFolderSchema.self
        case 3: PreAttachmentSchema.self
        default: AttachmentSchema.self
        }
    }

    /// Writes the fixture of `version` at `url` through its frozen declarations (and its checksum list).
    ///
    /// - Throws: ``FixtureError/exists(_:)`` when `url` exists.
    public static func write(version: Int, to url: URL) throws {
        try StoreFixture.write(to: url, versionedSchema: versionedSchema(version)) { context in
            switch version {
            case 1: populateV1(context)
            case 2: populateV2(context)
            case 3: populateV3(context)
            default: populateV4(context)
            }
        }
    }

    private static func populateV1(_ context: ModelContext) {
        typealias V = PreRevisionSchema
        var folders: [String: V.Folder] = [:]
        for spec in self.folders(version: 1) {
            let folder = V.Folder()
            folder.id = spec.id
            folder.name = spec.name
            context.insert(folder)
            folders[spec.name] = folder
        }
        for spec in notes(version: 1) {
            let note = V.Note()
            note.id = spec.id; note.title = spec.title; note.body = spec.body; note.eventDate = spec.eventDate
            note.createdAt = spec.createdAt; note.updatedAt = spec.updatedAt
            context.insert(note)
            note.folder = spec.folder.flatMap { folders[$0] }
            if let bytes = spec.drawing {
                let drawing = V.NoteDrawing()
                drawing.id = UUID(uuid: (0xD0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, spec.id.uuid.15))
                drawing.data = bytes
                note.drawing = drawing
            }
        }
    }

    private static func populateV2(_ context: ModelContext) {
        typealias V = PreNestedFolderSchema
        var folders: [String: V.Folder] = [:]
        for spec in self.folders(version: 2) {
            let folder = V.Folder()
            folder.id = spec.id
            folder.name = spec.name
            context.insert(folder)
            folders[spec.name] = folder
        }
        for spec in notes(version: 2) {
            let note = V.Note()
            note.id = spec.id; note.title = spec.title; note.body = spec.body; note.eventDate = spec.eventDate
            note.createdAt = spec.createdAt; note.updatedAt = spec.updatedAt
            context.insert(note)
            note.folder = spec.folder.flatMap { folders[$0] }
            if let bytes = spec.drawing {
                let drawing = V.NoteDrawing()
                drawing.id = UUID(uuid: (0xD0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, spec.id.uuid.15))
                drawing.data = bytes
                note.drawing = drawing
            }
            for revisionSpec in spec.revisions {
                let revision = V.NoteRevision()
                revision.id = revisionSpec.id; revision.title = revisionSpec.title; revision.body = revisionSpec.body
                revision.eventDate = revisionSpec.eventDate; revision.updatedAt = revisionSpec.updatedAt
                revision.capturedAt = revisionSpec.capturedAt
                note.revisions.append(revision)
            }
        }
    }

    private static func populateV3(_ context: ModelContext) {
        typealias V = PreAttachmentSchema
        var folders: [String: V.Folder] = [:]
        for spec in self.folders(version: 3) {
            let folder = V.Folder()
            folder.id = spec.id
            folder.name = spec.name
            context.insert(folder)
            folders[spec.name] = folder
        }
        for spec in self.folders(version: 3) {
            folders[spec.name]?.parent = spec.parent.flatMap { folders[$0] }
        }
        for spec in notes(version: 3) {
            let note = V.Note()
            note.id = spec.id; note.title = spec.title; note.body = spec.body; note.eventDate = spec.eventDate
            note.createdAt = spec.createdAt; note.updatedAt = spec.updatedAt
            context.insert(note)
            note.folder = spec.folder.flatMap { folders[$0] }
            if let bytes = spec.drawing {
                let drawing = V.NoteDrawing()
                drawing.id = UUID(uuid: (0xD0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, spec.id.uuid.15))
                drawing.data = bytes
                note.drawing = drawing
            }
            for revisionSpec in spec.revisions {
                let revision = V.NoteRevision()
                revision.id = revisionSpec.id; revision.title = revisionSpec.title; revision.body = revisionSpec.body
                revision.eventDate = revisionSpec.eventDate; revision.updatedAt = revisionSpec.updatedAt
                revision.capturedAt = revisionSpec.capturedAt
                note.revisions.append(revision)
            }
        }
    }

    private static func populateV4(_ context: ModelContext) {
        typealias V = AttachmentSchema
        var folders: [String: V.Folder] = [:]
        for spec in self.folders(version: 4) {
            let folder = V.Folder()
            folder.id = spec.id
            folder.name = spec.name
            context.insert(folder)
            folders[spec.name] = folder
        }
        for spec in self.folders(version: 4) {
            folders[spec.name]?.parent = spec.parent.flatMap { folders[$0] }
        }
        var notes: [UUID: V.Note] = [:]
        for spec in self.notes(version: 4) {
            let note = V.Note()
            note.id = spec.id; note.title = spec.title; note.body = spec.body; note.eventDate = spec.eventDate
            note.createdAt = spec.createdAt; note.updatedAt = spec.updatedAt
            context.insert(note)
            notes[spec.id] = note
            note.folder = spec.folder.flatMap { folders[$0] }
            if let bytes = spec.drawing {
                let drawing = V.NoteDrawing()
                drawing.id = UUID(uuid: (0xD0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, spec.id.uuid.15))
                drawing.data = bytes
                note.drawing = drawing
            }
            for revisionSpec in spec.revisions {
                let revision = V.NoteRevision()
                revision.id = revisionSpec.id; revision.title = revisionSpec.title; revision.body = revisionSpec.body
                revision.eventDate = revisionSpec.eventDate; revision.updatedAt = revisionSpec.updatedAt
                revision.capturedAt = revisionSpec.capturedAt
                note.revisions.append(revision)
            }
        }
        for spec in attachments(version: 4) {
            let attachment = V.NoteAttachment()
            attachment.id = spec.id; attachment.fileName = spec.fileName; attachment.originalName = spec.originalName
            attachment.contentType = spec.contentType; attachment.size = spec.size
            notes[spec.note]?.attachments.append(attachment)
        }
    }
}
