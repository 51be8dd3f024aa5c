import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore

/// `notekit demo`: the notes domain on a file store, end to end.
enum Demo {
    static func run(path: String) throws -> Int32 {
        let url = URL(fileURLWithPath: path)
        let existed = FileManager.default.fileExists(atPath: url.appendingPathComponent("MANIFEST").path)
        let container = try ModelContainer(for: Schema(versionedSchema: NotesSchema.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        let attachmentsURL = URL(fileURLWithPath: url.path + ".attachments")

        if try context.fetchCount(FetchDescriptor<Folder>()) == 0 {
            let made = try populate(context, attachments: AttachmentDirectory(url: attachmentsURL))
            print("NoteKit demo: \(existed ? "filled" : "created") \(path)")
            print("  made \(made)")
            print("  attachment files live in \(attachmentsURL.path)")
        } else {
            let transactions = (container.store as? FileStore)?.statistics.lastTransactionNumber ?? 0
            print("NoteKit demo: reopened \(path) (\(transactions) transactions); the demo data is there, nothing added")
        }
        print("")
        try printTree(context)
        print("")
        print("Look inside: swift run notekit stats \(path)  ·  verify  ·  dump  ·  schema")
        try (container.store as? FileStore)?.close()
        return 0
    }

    /// Folders nested two deep, filed and unfiled notes, a drawing, revisions and an attachment.
    private static func populate(_ context: ModelContext, attachments directory: AttachmentDirectory) throws -> String {
        let editor = NoteEditor(context: context)
        let hierarchy = FolderHierarchy(context: context)
        func folder(_ name: String, in parent: Folder? = nil) throws -> Folder {
            let folder = Folder(name: name)
            context.insert(folder)
            try hierarchy.move(folder, to: parent)
            return folder
        }
        let personal = try folder("Personal"), travel = try folder("Travel", in: personal)
        let work = try folder("Work"), projects = try folder("Projects", in: work)

        let packing = editor.createNote(.init(title: "Packing list", body: "passport"), in: travel)
        editor.commit(.init(title: "Packing list", body: "passport, charger"), to: packing)
        editor.commit(.init(title: "Packing list", body: "passport, charger, umbrella"), to: packing)
        editor.createNote(.init(title: "Kyoto itinerary", body: "Fushimi Inari → Gion, 京都",
                                eventDate: Date(timeIntervalSinceNow: 14 * 86_400)), in: travel)
        let review = editor.createNote(.init(title: "Weekly review", body: "What moved, what is stuck."), in: work)
        try editor.setDrawing(Data((0..<2048).map { UInt8($0 % 251) }), on: review)
        let launch = editor.createNote(.init(title: "NoteKit launch", body: "Ship the file store."), in: projects)
        editor.createNote(.init(title: "Groceries", body: "crème fraîche, bread"))
        editor.createNote(.init(title: "Ideas", body: "A store format people can read."))
        try context.save()
        try NoteAttachments(context: context, directory: directory)
            .add(Data("Launch checklist\n- docs\n- benchmark\n".utf8), originalName: "checklist.txt",
                 contentType: "text/plain", to: launch)
        let revisions = try context.fetchCount(FetchDescriptor<NoteRevision>())
        return "4 folders, 6 notes, 1 drawing, \(revisions) revisions (two edits of the packing list and the "
            + "text the drawing replaced), 1 attachment"
    }

    /// The folder tree with each folder's note count, then the unfiled notes.
    private static func printTree(_ context: ModelContext) throws {
        let hierarchy = FolderHierarchy(context: context)
        func count(_ folder: Folder) -> String {
            let notes = folder.notes.count
            return "\(folder.name) (\(notes) note\(notes == 1 ? "" : "s"))"
        }
        let unfiled = try context.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.folder == nil }))
        let roots = try hierarchy.roots()
        print("Library")
        func walk(_ folder: Folder, prefix: String, isLast: Bool, seen: inout Set<ObjectIdentifier>) {
            guard seen.insert(ObjectIdentifier(folder)).inserted else { return }
            print(prefix + (isLast ? "└── " : "├── ") + count(folder))
            let children = folder.children.sorted { $0.name < $1.name }
            for (index, child) in children.enumerated() {
                walk(child, prefix: prefix + (isLast ? "    " : "│   "), isLast: index == children.count - 1, seen: &seen)
            }
        }
        var seen = Set<ObjectIdentifier>()
        for root in roots { walk(root, prefix: "", isLast: false, seen: &seen) }
        print("└── Unfiled (\(unfiled) note\(unfiled == 1 ? "" : "s"))")
    }
}
