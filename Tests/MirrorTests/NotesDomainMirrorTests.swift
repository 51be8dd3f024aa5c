import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// The flagship notes domain through the mirror: folders in a hierarchy, a note's one-to-one drawing (external
/// storage), its revisions and attachments, every entity with unique keys; cascades on import; and two machines
/// attaching a file of one name offline, which the attachment's unique `fileName` makes one attachment.
@Suite("The notes domain mirrored", .enabled(if: TemporaryPostgres.runsServerTests,
                                             Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct NotesDomainMirrorTests {
    typealias Zone = MirrorZone

    static func dump(_ container: ModelContainer) throws -> [String] {
        let context = ModelContext(container)
        var lines: [String] = []
        for folder in try context.fetch(FetchDescriptor<Folder>()) {
            lines.append("folder \(folder.name) parent \(folder.parent?.name ?? "-") notes "
                + folder.notes.map(\.title).sorted().joined(separator: ","))
        }
        for note in try context.fetch(FetchDescriptor<Note>()) {
            lines.append("note \(note.title)|\(note.body) in \(note.folder?.name ?? "-") drawing \(note.drawing?.data.count ?? -1) "
                + "revisions \(note.revisions.map(\.title).sorted()) attachments "
                + note.attachments.map(\.fileName).sorted().joined(separator: ","))
        }
        for attachment in try context.fetch(FetchDescriptor<NoteAttachment>()) {
            lines.append("attachment \(attachment.fileName) \(attachment.size) of \(attachment.note?.title ?? "-")")
        }
        lines.append("drawings \(try context.fetchCount(FetchDescriptor<NoteDrawing>())) revisions "
            + "\(try context.fetchCount(FetchDescriptor<NoteRevision>()))")
        return lines.sorted()
    }

    @Test("Folders, notes, drawings, revisions and attachments reach another store; deletions cascade there",
          arguments: StoreKind.allCases)
    func notesDomainRoundTrip(kind: StoreKind) throws {
        let zone = try Zone(kind, zone: "notes", models: NotesSchema.models)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let context = ModelContext(a)
        let work = Folder(name: "Work"), quarter = Folder(name: "Q1")
        context.insert(work)
        context.insert(quarter)
        quarter.parent = work
        let note = Note()
        note.title = "Plan"
        note.body = "ship it"
        context.insert(note)
        note.folder = quarter
        let drawing = NoteDrawing()
        drawing.data = Data((0..<4096).map { UInt8($0 % 253) })
        note.drawing = drawing
        let revision = NoteRevision()
        revision.title = "Plan v1"
        note.revisions.append(revision)
        let attachment = NoteAttachment()
        attachment.fileName = "plan.pdf"
        attachment.size = 1234
        note.attachments.append(attachment)
        try context.save()

        try mirrorA.sync()
        try mirrorB.sync()
        #expect(try Self.dump(b) == Self.dump(a))
        #expect(try Self.dump(b).contains("note Plan|ship it in Q1 drawing 4096 revisions [\"Plan v1\"] attachments plan.pdf"))
        #expect(try Self.dump(b).contains("folder Q1 parent Work notes Plan"))

        // B deletes the note: its drawing, revisions and attachments go with it on A too; the folder stays.
        let contextB = ModelContext(b)
        try contextB.delete(try #require(try contextB.fetch(FetchDescriptor<Note>()).first))
        try contextB.save()
        try mirrorB.sync()
        try mirrorA.sync()
        #expect(try Self.dump(a) == Self.dump(b))
        #expect(try Self.dump(a) == ["drawings 0 revisions 0", "folder Q1 parent Work notes ", "folder Work parent - notes "])
    }

    @Test("Two machines attaching a file of one name offline end with one attachment", arguments: StoreKind.allCases)
    func attachmentNamesCollide(kind: StoreKind) throws {
        let zone = try Zone(kind, zone: "notes", models: NotesSchema.models)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        for (container, title, size) in [(a, "from A", Int64(10)), (b, "from B", Int64(20))] {
            let context = ModelContext(container)
            let note = Note()
            note.title = title
            context.insert(note)
            let attachment = NoteAttachment()
            attachment.fileName = "scan.pdf"
            attachment.size = size
            note.attachments.append(attachment)
            try context.save()
            Thread.sleep(forTimeInterval: 0.01)
        }
        try mirrorB.sync()
        try mirrorA.sync()
        try mirrorB.sync()
        #expect(try Self.dump(a) == Self.dump(b))
        // One attachment, the first made, with the later one's values (its size and its note), as an upsert leaves it.
        #expect(try Self.dump(a).filter { $0.hasPrefix("attachment") } == ["attachment scan.pdf 20 of from B"])
        #expect(try ModelContext(a).fetchCount(FetchDescriptor<Note>()) == 2)
    }
}
