// A file that imports NoteKit, NoteKitFileStore and the dependent's own models, `Note` and `Folder`: `import NoteKit`
// must bring no type of these names (the notes domain is the separate NoteKitNotes product), or every use below is
// "ambiguous".
import NoteKit
import NoteKitFileStore
import TodoModels

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-tool-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let url = directory.appendingPathComponent("Todo.notekit")

do {
    let container = try ModelContainer(for: Note.self, Folder.self, configurations: FileStoreConfiguration(url: url))
    let context = ModelContext(container)
    let inbox = Folder(name: "Inbox")
    let note = Note(title: "Buy milk")
    note.folder = inbox
    context.insert(inbox)
    try context.save()
    try container.close()

    let reopened = try ModelContainer(for: Note.self, Folder.self, configurations: FileStoreConfiguration(url: url))
    let notes = try ModelContext(reopened).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
    guard notes.map(\.title) == ["Buy milk"], notes.first?.folder?.name == "Inbox" else {
        print("TodoTool: unexpected contents \(notes.map(\.title))")
        exit(1)
    }
    print("TodoTool: ok, \(notes.count) note in \(notes.first?.folder?.name ?? "?")")
} catch {
    print("TodoTool: \(error)")
    exit(1)
}
