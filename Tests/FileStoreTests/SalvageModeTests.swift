import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Issue 17, item 4: beside the best-effort salvage, a consistent-prefix one; each reports exactly what it left out
/// (docs/FORMAT.md, *Recovery*). Salvage is the file store's alone.
@Suite("Salvage modes: best effort and consistent prefix")
struct SalvageModeTests {
    /// Seven transactions, two of them damaged (2 and 5): 1 inserts folder Work; 2 note A; 3 note B in Work; 4
    /// renames A; 5 inserts folder Home; 6 note C in Home; 7 note D, unfiled.
    static func damagedStore() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        let work = Folder(name: "Work")
        context.insert(work)
        try context.save()
        let a = Note.titled("A")
        context.insert(a)
        try context.save()
        let b = Note.titled("B")
        context.insert(b)
        b.folder = work
        try context.save()
        a.title = "A renamed"
        try context.save()
        let home = Folder(name: "Home")
        context.insert(home)
        try context.save()
        let c = Note.titled("C")
        context.insert(c)
        c.folder = home
        try context.save()
        context.insert(Note.titled("D"))
        try context.save()
        try StoreFiles.close(container)
        // Records: the segment's, the schema, then transaction k at index k + 1.
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        var bytes = try Data(contentsOf: segment)
        for transaction in [2, 5] { bytes[offsets[transaction + 1] + 40] ^= 0x04 }
        try bytes.write(to: segment)
        return url
    }

    static func offsets(_ url: URL) throws -> [Int] { try StoreFiles.recordOffsets(StoreFiles.segment(url)) }

    static func content(_ url: URL) throws -> (notes: [String], folders: [String]) {
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.mode = .readOnly }
        defer { try? StoreFiles.close(container) }
        let context = ModelContext(container)
        return (try context.fetch(FetchDescriptor<Note>()).map { "\($0.title)|\($0.folder?.name ?? "-")" }.sorted(),
                try context.fetch(FetchDescriptor<Folder>()).map(\.name).sorted())
    }

    @Test("Best effort keeps every later transaction whose objects survive and names the lost transaction behind each one it leaves out")
    func bestEffort() throws {
        let url = try Self.damagedStore()
        let offsets = try Self.offsets(url)
        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination, mode: .bestEffort)
        #expect(report.mode == .bestEffort)
        #expect(report.transactionsKept == 3, "1, 3 and 7")
        let (notes, folders) = try Self.content(destination)
        #expect(notes == ["B|Work", "D|-"])
        #expect(folders == ["Work"])
        #expect(try StoreVerifier.verify(at: destination).ok, "no relationship points at an object that is not there")
        #expect(report.skippedBytes.map(\.offset) == [offsets[3], offsets[6]])
        #expect(report.skippedRecords.map(\.offset) == [offsets[5], offsets[7]])
        #expect(report.skippedRecords.map(\.transaction) == [4, 6])
        let renames = try #require(report.skippedRecords.first)
        #expect(renames.reason.contains("updates Note/") && renames.reason.contains("lost transaction 2"),
                "\(renames.reason)")
        let files = try #require(report.skippedRecords.last)
        #expect(files.reason.contains("Folder/") && files.reason.contains("lost transaction 5"), "\(files.reason)")
        #expect(files.description.contains("transaction 6"))
    }

    final class Tag: PersistentModel {
        @Attribute var name = ""
        required init() {}
    }

    /// A one-way relationship: inserting a card writes no update of its tag, so only the card names the tag.
    final class Card: PersistentModel {
        @Attribute var front = ""
        @Relationship var tag: Tag?
        required init() {}
    }

    @Test("Best effort leaves out a transaction that would set a relationship to an object a lost transaction inserted")
    func oneWayRelationship() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, [Card.self, Tag.self])
        let context = ModelContext(container)
        for name in ["kept", "lost"] {
            let tag = Tag()
            tag.name = name
            context.insert(tag)
            try context.save()
        }
        let tags = try context.fetch(FetchDescriptor<Tag>())
        for tag in tags {
            let card = Card()
            card.front = "on \(tag.name)"
            context.insert(card)
            card.tag = tag
            try context.save()
        }
        try StoreFiles.close(container)
        let segment = StoreFiles.segment(url)
        let offsets = try StoreFiles.recordOffsets(segment)
        let text = try String(contentsOf: segment, encoding: .utf8)
        // Damage the record that inserted the tag named "lost".
        let lostAt = try #require(offsets.firstIndex { offset in
            let end = offsets.first { $0 > offset } ?? text.utf8.count
            return String(decoding: Array(text.utf8)[offset..<end], as: UTF8.self).contains(#""name":"lost""#)
        })
        var bytes = try Data(contentsOf: segment)
        bytes[offsets[lostAt] + 40] ^= 0x04
        try bytes.write(to: segment)

        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination, mode: .bestEffort)
        #expect(try StoreVerifier.verify(at: destination).ok, "no card points at a tag that is not there")
        let salvaged = try StoreFiles.open(destination, [Card.self, Tag.self]) { $0.mode = .readOnly }
        let fronts = try ModelContext(salvaged).fetch(FetchDescriptor<Card>()).map(\.front)
        try StoreFiles.close(salvaged)
        #expect(fronts == ["on kept"])
        let left = try #require(report.skippedRecords.first)
        #expect(left.reason.contains("to point at Tag/") && left.reason.contains("lost transaction 2"), "\(left.reason)")
    }

    @Test("The default is best effort, as salvage has always been")
    func defaultMode() throws {
        let url = try Self.damagedStore()
        let report = try FileStore.salvage(from: url, to: TemporaryStores.newURL("salvaged"))
        #expect(report.mode == .bestEffort && report.transactionsKept == 3)
    }

    @Test("Consistent prefix keeps every transaction before the first one lost, a state the store was in, and lists each later one it leaves out")
    func consistentPrefix() throws {
        let url = try Self.damagedStore()
        let offsets = try Self.offsets(url)
        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination, mode: .consistentPrefix)
        #expect(report.mode == .consistentPrefix)
        #expect(report.transactionsKept == 1)
        let (notes, folders) = try Self.content(destination)
        #expect(notes == [] && folders == ["Work"])
        #expect(try StoreVerifier.verify(at: destination).ok)
        #expect(report.skippedBytes.map(\.offset) == [offsets[3], offsets[6]])
        #expect(report.skippedRecords.map(\.offset) == [offsets[4], offsets[5], offsets[7], offsets[8]])
        #expect(report.skippedRecords.map(\.transaction) == [3, 4, 6, 7])
        #expect(report.skippedRecords.allSatisfy { $0.reason.contains("transaction 2") }, "\(report.skippedRecords)")
    }

    @Test("A whole snapshot after the loss is a committed state again: consistent prefix keeps it and what follows")
    func snapshotAfterLoss() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        for title in ["t1", "t2", "t3"] {
            context.insert(Note.titled(title))
            try context.save()
        }
        let old = try Data(contentsOf: StoreFiles.segment(url, 1))
        try StoreFiles.store(container).compact()
        context.insert(Note.titled("t4"))
        try context.save()
        try StoreFiles.close(container)
        // A copy taken while the compaction deleted the old segment still has it, here with t2's record damaged.
        var damaged = old
        try old.write(to: StoreFiles.segment(url, 1))
        let oldOffsets = try StoreFiles.recordOffsets(StoreFiles.segment(url, 1))
        damaged[oldOffsets[3] + 40] ^= 0x04
        try damaged.write(to: StoreFiles.segment(url, 1))

        let destination = TemporaryStores.newURL("salvaged")
        let report = try FileStore.salvage(from: url, to: destination, mode: .consistentPrefix)
        #expect(report.isComplete, "the snapshot holds all the old segment committed: \(report.skippedRecords)")
        #expect(report.objectsKept == 4)
        #expect(try Self.content(destination).notes == ["t1|-", "t2|-", "t3|-", "t4|-"])
    }

    @Test("notekit salvage --consistent-prefix and --best-effort pick the mode, and --json names it and each transaction left out")
    func commandLine() throws {
        for (flag, kept, mode) in [("--consistent-prefix", 1, "consistentPrefix"), ("--best-effort", 3, "bestEffort")] {
            let url = try Self.damagedStore()
            let destination = TemporaryStores.newURL("salvaged")
            let run = try CommandLineTests.run(CommandLineTests.executable,
                                               ["salvage", url.path, "--to", destination.path, flag, "--json"])
            #expect(run.status == 1, "\(flag): something was left out: \(run.errors)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
            #expect(json["mode"] as? String == mode)
            #expect(json["transactionsKept"] as? Int == kept)
            let records = try #require(json["skippedRecords"] as? [[String: Any]])
            #expect(records.first?["transaction"] as? Int == (kept == 1 ? 3 : 4), "\(flag)")
            let text = try CommandLineTests.run(CommandLineTests.executable,
                                                ["salvage", url.path, "--to", destination.path + "2", flag])
            #expect(text.output.contains(mode == "bestEffort" ? "best effort" : "consistent prefix"), "\(text.output)")
        }
        let both = try CommandLineTests.run(CommandLineTests.executable,
                                            ["salvage", "x", "--to", "y", "--best-effort", "--consistent-prefix"])
        #expect(both.status == 2, "the two modes exclude each other")
    }
}
