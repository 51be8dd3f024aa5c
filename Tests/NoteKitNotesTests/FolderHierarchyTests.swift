import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

@Suite("Notes: delete rules and the folder hierarchy (R1–R7)")
struct FolderHierarchyTests {
    @Test("R1: deleting a folder keeps its notes, which become unfiled", arguments: StoreKind.allCases)
    func r1(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let trip = f.folder("Trip")
        let notes = (1...3).map { f.editor.createNote(.init(title: "n\($0)"), in: trip) }
        try f.context.save()
        try f.context.delete(trip)
        try f.context.save()
        let reader = f.reader()
        let stored = try reader.fetch(FetchDescriptor<Note>())
        #expect(Set(stored.map(\.id)) == Set(notes.map(\.id)))
        #expect(stored.allSatisfy { $0.folder == nil })
    }

    @Test("R2: deleting a note deletes its drawing, its revisions and its attachment records",
          arguments: StoreKind.allCases)
    func r2(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "v1"))
        f.editor.commit(.init(title: "v2"), to: note)
        try f.editor.setDrawing(Data([1, 2, 3]), on: note)
        try f.context.save()
        try f.attachments.add(Data("x".utf8), originalName: "x.txt", contentType: "text/plain", to: note)
        #expect(note.revisions.count == 2)

        try f.context.delete(note)
        try f.context.save()
        let reader = f.reader()
        for count in [try reader.fetchCount(FetchDescriptor<NoteDrawing>()),
                      try reader.fetchCount(FetchDescriptor<NoteRevision>()),
                      try reader.fetchCount(FetchDescriptor<NoteAttachment>())] {
            #expect(count == 0)
        }
    }

    @Test("R3: deleting a folder through its plain delete rule never deletes other folders",
          arguments: StoreKind.allCases)
    func r3(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let top = f.folder("Top")
        let middle = f.folder("Middle", in: top)
        let child = f.folder("Child", in: middle)
        f.folder("Grandchild", in: child)
        try f.context.save()
        try f.context.delete(middle)
        try f.context.save()
        let names = try f.reader().fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)])).map(\.name)
        #expect(names == ["Child", "Grandchild", "Top"])
        #expect(child.parent == nil, "the plain rule makes the child a root folder")
        #expect(top.children.isEmpty)
    }

    @Test("R4: FolderHierarchy.delete moves direct children into the parent, unfiles direct notes, leaves the rest",
          arguments: StoreKind.allCases)
    func r4(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let top = f.folder("Top")
        let doomed = f.folder("Doomed", in: top)
        let a = f.folder("A", in: doomed), b = f.folder("B", in: doomed)
        let deep = f.folder("Deep", in: a)
        let direct = f.editor.createNote(.init(title: "direct"), in: doomed)
        let nested = f.editor.createNote(.init(title: "nested"), in: a)
        let deeper = f.editor.createNote(.init(title: "deeper"), in: deep)
        try f.context.save()

        try f.hierarchy.delete(doomed)
        try f.context.save()
        #expect(a.parent === top && b.parent === top, "the children keep their place in the tree")
        #expect(top.children.map(\.name).sorted() == ["A", "B"])
        #expect(direct.folder == nil, "direct notes are unfiled")
        #expect(nested.folder === a && deeper.folder === deep && deep.parent === a, "deeper content is untouched")
        let reader = f.reader()
        #expect(try reader.fetchCount(FetchDescriptor<Folder>()) == 4)
        #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 3)

        // A root folder's children become roots.
        try f.hierarchy.delete(top)
        #expect(a.parent == nil && b.parent == nil)
    }

    @Test("R5: moving a folder into itself or into its own subtree is refused and changes nothing",
          arguments: StoreKind.allCases)
    func r5(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let top = f.folder("Top")
        let child = f.folder("Child", in: top)
        let grandchild = f.folder("Grandchild", in: child)
        try f.context.save()

        #expect(throws: FolderHierarchyError.moveIntoItself(folder: "Top")) { try f.hierarchy.move(top, to: top) }
        #expect(throws: FolderHierarchyError.moveIntoDescendant(folder: "Top", destination: "Grandchild")) {
            try f.hierarchy.move(top, to: grandchild)
        }
        #expect(!f.context.hasChanges, "a refused move changes nothing")
        #expect(top.parent == nil && grandchild.parent === child)

        try f.hierarchy.move(grandchild, to: nil)
        try f.hierarchy.move(top, to: grandchild)
        #expect(f.hierarchy.path(of: child).map(\.name) == ["Grandchild", "Top", "Child"])
        #expect(try f.hierarchy.isForest())
    }

    @Test("R6: the store accepts, saves and reopens a cyclic folder graph built through the model API",
          arguments: StoreKind.allCases)
    func r6(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let a = f.folder("A"), b = f.folder("B", in: a), c = f.folder("C", in: b)
        a.parent = c   // a → b → c → a, straight through the model
        let note = f.editor.createNote(.init(title: "inside"), in: b)
        try f.context.save()

        let reader = f.reader()
        let folders = try reader.fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)]))
        #expect(folders.map { $0.parent?.name } == ["C", "A", "B"])
        #expect(folders.map { $0.children.map(\.name) } == [["B"], ["C"], ["A"]])
        #expect(try reader.fetch(FetchDescriptor<Note>()).first?.folder?.name == "B")
        #expect(note.folder === b)
        #expect(try FolderHierarchy(context: reader).roots().isEmpty)
    }

    @Test("R7: every traversal terminates on cyclic data", arguments: StoreKind.allCases)
    func r7(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let a = f.folder("A"), b = f.folder("B", in: a), c = f.folder("C", in: b)
        let below = f.folder("Below", in: c)
        a.parent = c
        let loop = f.folder("Loop")
        loop.parent = loop   // a folder that is its own parent
        let fine = f.folder("Fine")
        try f.context.save()

        let reader = f.reader()
        let hierarchy = FolderHierarchy(context: reader)
        let stored = Dictionary(uniqueKeysWithValues: try reader.fetch(FetchDescriptor<Folder>()).map { ($0.name, $0) })
        let sa = try #require(stored["A"]), sloop = try #require(stored["Loop"])
        #expect(hierarchy.ancestors(of: sa).map(\.name) == ["C", "B"])
        #expect(hierarchy.descendants(of: sa).map(\.name) == ["B", "C", "Below"])
        #expect(hierarchy.path(of: sa).map(\.name) == ["B", "C", "A"])
        #expect(hierarchy.depth(of: sa) == 2)
        #expect(hierarchy.ancestors(of: sloop).isEmpty && hierarchy.descendants(of: sloop).isEmpty)
        #expect(hierarchy.depth(of: sloop) == 0)
        #expect(try hierarchy.roots().map(\.name) == ["Fine"])
        #expect(try !hierarchy.isForest())
        #expect(try hierarchy.foldersOffTheTree().map(\.name) == ["A", "B", "Below", "C", "Loop"])
        _ = (below, fine)

        // Deleting a folder on a cycle still ends, and its children become roots rather than loop onto themselves.
        let sb = try #require(stored["B"])
        try hierarchy.delete(sb)
        #expect(stored["C"]?.parent == nil)
    }
}
