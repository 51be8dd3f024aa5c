import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport

/// A notes container on one kind of store, with an editor on a manual clock and a temporary attachments directory.
final class NotesFixture {
    let container: ModelContainer
    let context: ModelContext
    let clock = ManualNoteClock(Date(timeIntervalSinceReferenceDate: 700_000_000))
    let attachmentsURL: URL
    let editor: NoteEditor
    let hierarchy: FolderHierarchy

    init(_ kind: StoreKind, fileSystem: any AttachmentFileSystem = LocalAttachmentFileSystem()) throws {
        container = try kind.makeContainer(NotesSchema.models)
        context = ModelContext(container)
        attachmentsURL = FileManager.default.temporaryDirectory
            .appendingPathComponent("notekit-attachments-\(UUID().uuidString)")
        editor = NoteEditor(context: context, clock: clock)
        hierarchy = FolderHierarchy(context: context)
        self.fileSystem = fileSystem
    }

    let fileSystem: any AttachmentFileSystem

    var directory: AttachmentDirectory { AttachmentDirectory(url: attachmentsURL, fileSystem: fileSystem) }
    var attachments: NoteAttachments { NoteAttachments(context: context, directory: directory, clock: clock) }

    /// Files currently in the attachments directory.
    var filesOnDisk: Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: attachmentsURL.path)) ?? [])
    }

    /// A fresh context on the same store, to see what was saved.
    func reader() -> ModelContext { ModelContext(container) }

    @discardableResult
    func folder(_ name: String, in parent: Folder? = nil) -> Folder {
        let folder = Folder(name: name)
        context.insert(folder)
        folder.parent = parent
        return folder
    }

    deinit { try? FileManager.default.removeItem(at: attachmentsURL) }
}

/// What "the note exactly as it was" means for T3: its content, timestamps and history.
struct NoteState: Equatable {
    let title: String, body: String, eventDate: Date?, createdAt: Date, updatedAt: Date, revisionIDs: [UUID]

    init(_ note: Note) {
        title = note.title
        body = note.body
        eventDate = note.eventDate
        createdAt = note.createdAt
        updatedAt = note.updatedAt
        revisionIDs = note.revisions.map(\.id).sorted { $0.uuidString < $1.uuidString }
    }
}

/// An attachment file system whose removals fail, as if the process died after the save and before the files went.
struct FailingRemovalFileSystem: AttachmentFileSystem {
    struct Interrupted: Error {}
    let base = LocalAttachmentFileSystem()
    func write(_ data: Data, to url: URL) throws { try base.write(data, to: url) }
    func read(_ url: URL) throws -> Data { try base.read(url) }
    func remove(_ url: URL) throws { throw Interrupted() }
    func fileNames(in url: URL) throws -> [String] { try base.fileNames(in: url) }
}
