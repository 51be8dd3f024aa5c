import NoteKit
import Testing

// The README's example, compiled and run here. The test below checks that README.md shows exactly these lines.
// Like the README, the file imports NoteKit alone: NoteKit re-exports Foundation.

// README: models begin
final class Project: PersistentModel {
    @Attribute(.unique) var name = ""
    @Relationship(deleteRule: .cascade, inverse: \Todo.project) var todos: [Todo] = []
    required init() {}
}

final class Todo: PersistentModel {
    @Attribute var title = ""
    @Attribute var isDone = false
    @Relationship var project: Project?
    required init() {}
}
// README: models end

@Suite("README")
struct ReadmeExampleTests {
    @Test("The README example runs and does what it says")
    func example() throws {
        // README: usage begin
        let container = try ModelContainer(for: Project.self,
                                           configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let launch = Project(); launch.name = "Launch"
        let todo = Todo(); todo.title = "Write the README"; todo.project = launch   // launch.todos holds it now
        context.insert(launch)                                                     // inserts the todo too
        try context.save()
        let open = try context.fetch(FetchDescriptor<Todo>(predicate: #Predicate { !$0.isDone },
                                                           sortBy: [SortDescriptor(\.title)]))
        // README: usage end
        #expect(open.map(\.title) == ["Write the README"])
        #expect(launch.todos.first === todo)
        #expect(open.first?.project?.name == "Launch")
    }

    @Test("README.md shows the example exactly as this file compiles it")
    func readmeMatches() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        func section(_ name: String) -> [String] {
            let lines = source.components(separatedBy: "\n")
            guard let start = lines.firstIndex(where: { $0.hasSuffix("// README: \(name) begin") }),
                  let end = lines.firstIndex(where: { $0.hasSuffix("// README: \(name) end") }) else { return [] }
            let body = lines[(start + 1)..<end]
            let indent = body.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
            return body.map { $0.isEmpty ? $0 : String($0.dropFirst(indent)) }
        }
        let expected = (["import NoteKit", ""] + section("models") + [""] + section("usage"))
            .joined(separator: "\n")
        #expect(readme.contains("```swift\n" + expected + "\n```"), "update README.md's example from this file")
    }
}
