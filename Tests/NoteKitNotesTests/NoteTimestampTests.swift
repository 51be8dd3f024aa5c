import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

@Suite("Notes: timestamps and history (T1–T7)")
struct NoteTimestampTests {
    @Test("T1: createdAt records creation and never changes", arguments: StoreKind.allCases)
    func t1(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let created = f.clock.now()
        let note = f.editor.createNote(.init(title: "first"))
        #expect(note.createdAt == created && note.updatedAt == created)
        f.clock.advance(by: 60)
        f.editor.commit(.init(title: "second"), to: note)
        f.clock.advance(by: 60)
        try f.editor.setDrawing(Data([9]), on: note)
        try f.context.save()
        f.clock.advance(by: 60)
        try f.attachments.add(Data("a".utf8), originalName: "a.txt", contentType: "text/plain", to: note)
        let reader = f.reader()
        #expect(try reader.fetch(FetchDescriptor<Note>()).first?.createdAt == created)
    }

    @Test("T2: updatedAt moves for title, body, event date, drawing and attached files, and only for them",
          arguments: StoreKind.allCases)
    func t2(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "t", body: "b"))
        try f.context.save()
        var draft = NoteEditor.Draft(of: note)
        var expected = note.updatedAt

        func step(_ change: () throws -> Void) rethrows {
            f.clock.advance(by: 10)
            try change()
            expected = f.clock.now()
            #expect(note.updatedAt == expected)
        }
        step { draft.title = "t2"; f.editor.commit(draft, to: note) }
        step { draft.body = "b2"; f.editor.commit(draft, to: note) }
        step { draft.eventDate = Date(timeIntervalSinceReferenceDate: 1); f.editor.commit(draft, to: note) }
        try step { try f.editor.setDrawing(Data([1]), on: note) }
        try step { try f.editor.setDrawing(Data([2]), on: note) }
        try step { try f.editor.setDrawing(nil, on: note) }
        try f.context.save()
        let attachment = try f.attachments.add(Data("x".utf8), originalName: "x", contentType: "text/plain", to: note)
        expected = note.updatedAt
        #expect(expected == f.clock.now())
        try step { try f.attachments.remove(attachment) }

        // No change of content, no move.
        f.clock.advance(by: 10)
        #expect(!f.editor.commit(draft, to: note))
        #expect(try !f.editor.setDrawing(nil, on: note))
        #expect(note.updatedAt == expected)
        try f.context.save()
        #expect(try f.reader().fetch(FetchDescriptor<Note>()).first?.updatedAt == expected)
    }

    @Test("T3: refiling a note, moving a folder, renaming an ancestor and deleting a folder leave the note as it was",
          arguments: StoreKind.allCases)
    func t3(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let top = f.folder("Top"), inbox = f.folder("Inbox", in: top), archive = f.folder("Archive")
        let note = f.editor.createNote(.init(title: "Keep me", body: "as I am"), in: inbox)
        f.clock.advance(by: 5)
        f.editor.commit(.init(title: "Keep me", body: "as I was"), to: note)
        try f.context.save()
        let before = NoteState(note)

        f.clock.advance(by: 100)
        try f.hierarchy.move(inbox, to: archive)        // moving the note's folder
        try f.hierarchy.move(inbox, to: top)
        top.name = "Renamed top"                        // renaming an ancestor
        note.folder = archive                           // refiling
        note.folder = inbox
        try f.hierarchy.delete(inbox)                   // a folder deleted out from under the note
        try f.context.save()

        #expect(NoteState(note) == before)
        #expect(note.folder == nil)
        let reader = f.reader()
        let stored = try #require(try reader.fetch(FetchDescriptor<Note>()).first)
        #expect(NoteState(stored) == before)
        #expect(try reader.fetchCount(FetchDescriptor<NoteRevision>()) == 1)
    }

    @Test("T4: a content change records a revision of the version it replaces; attaching a file records none",
          arguments: StoreKind.allCases)
    func t4(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let event = Date(timeIntervalSinceReferenceDate: 5_000)
        let note = f.editor.createNote(.init(title: "Draft", body: "one", eventDate: event))
        let firstVersionTime = note.updatedAt
        f.clock.advance(by: 30)
        f.editor.commit(.init(title: "Final", body: "two"), to: note)
        let revision = try #require(note.revisions.first)
        #expect(note.revisions.count == 1)
        #expect(revision.title == "Draft" && revision.body == "one" && revision.eventDate == event)
        #expect(revision.updatedAt == firstVersionTime && revision.capturedAt == f.clock.now())

        f.clock.advance(by: 30)
        try f.editor.setDrawing(Data([7, 7]), on: note)
        #expect(note.revisions.count == 2, "a drawing change records the text it replaces")
        try f.context.save()

        f.clock.advance(by: 30)
        let attachment = try f.attachments.add(Data("pdf".utf8), originalName: "a.pdf",
                                               contentType: "application/pdf", to: note)
        try f.attachments.remove(attachment)
        #expect(note.revisions.count == 2, "files are not authored text")
        #expect(try f.reader().fetchCount(FetchDescriptor<NoteRevision>()) == 2)
    }

    @Test("T5: history is ordered by capturedAt, ties broken deterministically, each with its own updatedAt",
          arguments: StoreKind.allCases)
    func t5(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "v1"))
        let times = [10.0, 20.0, 20.0, 20.0, 30.0]
        for (index, offset) in times.enumerated() {
            f.clock.set(Date(timeIntervalSinceReferenceDate: 700_000_000 + offset))
            f.editor.commit(.init(title: "v\(index + 2)"), to: note)
        }
        let history = f.editor.history(of: note)
        // v3 and v4 were current at the same instant and replaced at the same instant: the identifier decides.
        let tied = [history[1], history[2]].map(\.title)
        let byID = note.revisions.filter { ["v3", "v4"].contains($0.title) }
            .sorted { $0.id.uuidString < $1.id.uuidString }.map(\.title)
        #expect(history.map(\.title) == ["v5"] + byID + ["v2", "v1"])
        #expect(tied == byID)
        #expect(history.map(\.capturedAt.timeIntervalSinceReferenceDate) == [700_000_030, 700_000_020, 700_000_020,
                                                                            700_000_020, 700_000_010])
        // updatedAt is when each version became current: the capture time of the version before it.
        #expect(history.last?.updatedAt == note.createdAt)

        // Equal capture and edit times fall back to the identifier, whatever order the relationship has.
        let twins = (0..<2).map { _ in NoteRevision() }
        for twin in twins {
            twin.capturedAt = Date(timeIntervalSinceReferenceDate: 1)
            twin.updatedAt = Date(timeIntervalSinceReferenceDate: 1)
            note.revisions.insert(twin, at: 0)
        }
        let expected = twins.map(\.id).sorted { $0.uuidString < $1.uuidString }
        #expect(f.editor.history(of: note).suffix(2).map(\.id) == expected)
        note.revisions.reverse()
        #expect(f.editor.history(of: note).suffix(2).map(\.id) == expected)
        try f.context.save()
        let reader = f.reader()
        let stored = try #require(try reader.fetch(FetchDescriptor<Note>()).first)
        #expect(NoteEditor(context: reader).history(of: stored).map(\.id) == f.editor.history(of: note).map(\.id))
    }

    @Test("T6: restoring a previous version is an edit that moves updatedAt to the time of the restore",
          arguments: StoreKind.allCases)
    func t6(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let note = f.editor.createNote(.init(title: "Original", body: "text"))
        f.clock.advance(by: 10)
        f.editor.commit(.init(title: "Changed", body: "other"), to: note)
        let original = try #require(f.editor.history(of: note).first)
        f.clock.advance(by: 10)
        #expect(f.editor.restore(original, on: note))
        #expect(note.title == "Original" && note.body == "text")
        #expect(note.updatedAt == f.clock.now())
        #expect(f.editor.history(of: note).first?.title == "Changed", "the replaced version is kept")
        #expect(note.revisions.count == 2)
    }

    @Test("T7: timestamps come from the injected clock, never the system's", arguments: StoreKind.allCases)
    func t7(kind: StoreKind) throws {
        let f = try NotesFixture(kind)
        let past = Date(timeIntervalSinceReferenceDate: 12_345)
        f.clock.set(past)
        let note = f.editor.createNote(.init(title: "old"))
        f.editor.commit(.init(title: "older"), to: note)
        try f.editor.setDrawing(Data([1]), on: note)
        try f.context.save()
        try f.attachments.add(Data([0]), originalName: "z", contentType: "application/octet-stream", to: note)
        let stamps = [note.createdAt, note.updatedAt] + note.revisions.flatMap { [$0.updatedAt, $0.capturedAt] }
        #expect(stamps.allSatisfy { $0 == past })
    }
}
