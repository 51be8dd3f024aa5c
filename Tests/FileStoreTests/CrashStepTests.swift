import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 9, item 4: a crash at every step of compaction and of a migration (and of the other operations that
/// change a store's files) leaves the old or the new state, whole, and the next writable open cleans up.
///
/// Each case runs its operation once on a ``SimulatedDisk``, which journals every change to the files. Then, for
/// every step k of the journal and every ``SimulatedDisk/CrashKind`` (everything written survives; a write torn in
/// half; only what was flushed survives; directory entries survive but unflushed data does not), the directory as a
/// crash at k would leave it is checked:
///
/// 1. `StoreVerifier` finds nothing but, at most, a torn tail;
/// 2. read-only, the store is in its old state or its new one (by content, and for compaction by the segments the
///    manifest lists), never in between, and never old again once new;
/// 3. a writable open recovers: the content is the old or the new one (a migration completes), no temporary
///    manifest, unlisted segment or unreferenced blob is left, and the store verifies;
/// 4. a save after that survives a power loss (what recovery built on was durable).
@Suite("Crash at every step: compaction and migrations leave the old or the new state whole")
struct CrashStepTests {
    /// An operation crashed at every step.
    struct CrashCase {
        var name: String
        /// Builds the store the operation starts from, on the disk; the store is closed at the end.
        var prepare: (SimulatedDisk, URL) throws -> Void
        /// Opens what the operation needs, before the journal is marked (nil for an operation that is an open).
        var setUp: (SimulatedDisk, URL) throws -> ModelContainer? = { _, _ in nil }
        /// The operation.
        var operation: (SimulatedDisk, URL, ModelContainer?) throws -> Void
        /// How to read the old state, and the new one, read-only.
        var readOld: StoreScenario.Open
        var readNew: StoreScenario.Open
        /// How the application reopens the store (writable; a migration runs again).
        var reopen: StoreScenario.Open
        /// Compaction changes files, not content: tell old from new by the segments the manifest lists.
        var distinguishByManifest = false
        /// A migration plan's `willMigrate` saves before the schema changes, by design: that state is neither old
        /// nor new, and the next open runs the stage again.
        var allowsIntermediate = false
    }

    @Test("A crash at any step of an explicit compaction leaves the old or the new segments, whole, and leftovers are removed")
    func explicitCompaction() throws {
        try check(CrashCase(name: "explicit compaction", prepare: prepareNotes, setUp: { disk, url in
            // A drawing deleted while the store is open: compaction, not the next open, deletes its blob.
            let container = try openNotes(disk, url)
            let context = ModelContext(container)
            try context.delete(try StoreScenario.note("n2", in: context))
            try context.save()
            return container
        },
                            operation: { _, _, container in try StoreFiles.store(try #require(container)).compact() },
                            readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes,
                            distinguishByManifest: true))
    }

    @Test("A crash at any step of a save that compacts automatically leaves the state before or after the save")
    func automaticCompaction() throws {
        try check(CrashCase(name: "automatic compaction", prepare: prepareNotes, setUp: { disk, url in
            try StoreFiles.open(url, NotesSchema.models) {
                $0.fileSystem = disk
                $0.automaticCompaction = .init(minimumLogSize: 1, garbageRatio: 0)
            }
        }, operation: { _, _, container in
            let context = ModelContext(try #require(container))
            let note = try StoreScenario.note("n0", in: context)
            note.body = "compacted after this save"
            try context.save()
            #expect(StoreFiles.store(try #require(container)).statistics.segments.count == 1, "the save compacted")
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of a save that starts a new segment leaves the state before or after the save")
    func rotation() throws {
        try check(CrashCase(name: "rotation", prepare: prepareNotes, setUp: { disk, url in
            let container = try openNotes(disk, url)
            // Fill the active segment past its size bound: the next save starts a new one.
            let context = ModelContext(container)
            NoteEditor(context: context).createNote(.init(title: "long", body: String(repeating: "z", count: 3_000)))
            try context.save()
            return container
        }, operation: { _, _, container in
            let store = StoreFiles.store(try #require(container))
            let before = store.statistics.segments
            let context = ModelContext(try #require(container))
            context.insert(Note.titled("in the new segment"))
            try context.save()
            #expect(store.statistics.segments.count == before.count + 1, "the save rotated")
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of a save with a new blob leaves the state before or after the save, and no stray blob")
    func blobSave() throws {
        try check(CrashCase(name: "blob save", prepare: prepareNotes, setUp: { try openNotes($0, $1) },
                            operation: { _, _, container in
            let context = ModelContext(try #require(container))
            let note = try StoreScenario.note("n3", in: context)
            try NoteEditor(context: context).setDrawing(Data(repeating: 42, count: 500), on: note)
            try context.save()
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of deleting history leaves the history before or after")
    func historyDeletion() throws {
        try check(CrashCase(name: "history deletion", prepare: prepareNotes, setUp: { try openNotes($0, $1) },
                            operation: { _, _, container in
            let sixth = DefaultHistoryToken(transactionNumber: 6)
            try ModelContext(try #require(container)).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token < sixth }))
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of a shared writer's save that catches up (another's appends, a torn tail it cuts off) leaves the state before or after the save")
    func sharedCatchUp() throws {
        try check(CrashCase(name: "shared catch-up", prepare: prepareNotes, setUp: { disk, url in
            let other = try StoreScenario.openSharedNotes.make(url, disk)
            let writer = try StoreScenario.openSharedNotes.make(url, disk)
            // The other writer saves, then a third dies in the middle of an append: the writer's log is stale,
            // and a torn tail follows what it must catch up with.
            let context = ModelContext(other)
            try StoreScenario.note("n1", in: context).body = "by the other writer"
            try context.save()
            try StoreFiles.close(other)
            let active = try #require(manifestSegments(disk.contents(url.path + "/MANIFEST") ?? []).last)
            try disk.appendDurably(StoreFiles.segment(url, active).path, Array("0000004a 1234abcd {\"k\":\"tx\"".utf8))
            return writer
        }, operation: { _, _, container in
            let context = ModelContext(try #require(container))
            try StoreScenario.note("n0", in: context).body = "after catching up"
            try context.save()
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of creating a store leaves no store or an empty one, and the next open creates it")
    func creation() throws {
        try check(CrashCase(name: "creation", prepare: { _, _ in }, operation: { disk, url, _ in
            try StoreFiles.close(try StoreScenario.openNotes.make(url, disk))
        }, readOld: readNotes, readNew: readNotes, reopen: StoreScenario.openNotes))
    }

    @Test("A crash at any step of a lightweight migration at open (after recovering a torn tail) leaves the old or the migrated store")
    func lightweightMigration() throws {
        try check(CrashCase(name: "lightweight migration", prepare: { disk, url in
            try prepareShelf(disk, url, names: ["bolt", "nut", "washer"])
            try disk.appendDurably(StoreFiles.segment(url, 1).path, Array("00000010 00000000 {\"k\"".utf8))
            try disk.appendDurably(StoreFiles.segment(url, 5).path, Array("NOTEKIT/1 segment\n".utf8))
        }, operation: { disk, url, _ in
            try StoreFiles.close(try StoreScenario.openShelfV2.make(url, disk))
        }, readOld: readOnly(StoreScenario.openShelfV1, schema: ShelfV1.self),
           readNew: readOnly(StoreScenario.openShelfV2, schema: ShelfV2.self), reopen: StoreScenario.openShelfV2))
    }

    @Test("A crash between a migration's record and its manifest (format version 2's new step) loses nothing: the next writable open completes the manifest's copy of the schema history")
    func migrationManifestStep() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        try prepareShelf(disk, url, names: ["bolt", "nut", "washer"])
        let mark = disk.mark()
        try StoreFiles.close(try StoreScenario.openShelfV2.make(url, disk))
        let migrated = try StoreScenario.openShelfV2.fingerprint(ModelContext(try readOnly(StoreScenario.openShelfV2,
                                                                                           schema: ShelfV2.self)
            .make(url, SimulatedDisk(image: disk.crashImage(.processCrash)))))
        let layout = StoreLayout(root: url.path)
        var short = 0
        var problems: [String] = []
        for crash in disk.images(since: mark) {
            let crashed = SimulatedDisk(image: crash.image)
            guard let bytes = crashed.contents(layout.manifest),
                  let copy = try? SegmentLog.decodeManifest(bytes, layout: layout).schemas,
                  let history = try? StoreInspector.schemaHistory(at: url, fileSystem: crashed),
                  copy.count < history.count else { continue }
            // The migration's record is in the segment, its manifest not yet replaced.
            short += 1
            let at = "\(crash.kind) at step \(crash.step) (before \(crash.interrupted))"
            let reader = try readOnly(StoreScenario.openShelfV2, schema: ShelfV2.self).make(url, crashed)
            if try StoreScenario.openShelfV2.fingerprint(ModelContext(reader)) != migrated {
                problems.append("\(at): a read-only open does not read the migrated store")
            }
            let container = try StoreScenario.openShelfV2.make(url, crashed)
            if try StoreScenario.openShelfV2.fingerprint(ModelContext(container)) != migrated {
                problems.append("\(at): the reopened store is not the migrated one")
            }
            try StoreFiles.close(container)
            let repaired = try SegmentLog.decodeManifest(crashed.contents(layout.manifest) ?? [], layout: layout)
            if !ManifestSchema.copies(repaired.schemas, match: history) {
                problems.append("\(at): the manifest's copy was not completed")
            }
            if !(try StoreVerifier.verify(at: url, fileSystem: crashed).ok) {
                problems.append("\(at): the repaired store does not verify")
            }
        }
        TestOutput.summary("crash steps: migration manifest: \(short) crash images with the manifest one schema short")
        #expect(short > 0, "some crash falls between the migration's record and its manifest")
        #expect(problems.isEmpty, Comment(rawValue: problems.prefix(10).joined(separator: "\n")))
    }

    @Test("A crash at any step of a migration plan with a custom stage: the next open completes it, didMigrate included")
    func migrationPlan() throws {
        try check(CrashCase(name: "migration plan", prepare: { disk, url in
            try prepareShelf(disk, url, names: ["bolt", "nut", "bolt"])
        }, operation: { disk, url, _ in
            try StoreFiles.close(try StoreScenario.openDedupePlan.make(url, disk))
        }, readOld: readOnly(StoreScenario.openShelfV1, schema: ShelfV1.self),
           readNew: readOnly(StoreScenario.openDedupePlan, schema: ShelfUniqueName.self),
           reopen: StoreScenario.openDedupePlan, allowsIntermediate: true))
    }

    @Test("With deferred durability, a segment is flushed before a new one starts: a power loss loses no earlier save")
    func deferredRotation() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.maximumSegmentSize = 2_048
            $0.durability = .deferred(interval: 3_600)
            $0.fileSystem = disk
        }
        let context = ModelContext(container)
        NoteEditor(context: context).createNote(.init(title: "fills the segment", body: String(repeating: "f", count: 3_000)))
        try context.save()
        context.insert(Note.titled("in the next segment"))
        try context.save()
        #expect(StoreFiles.store(container).statistics.segments.count >= 2, "the saves rotated")
        try StoreFiles.store(container).sync()

        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
                == ["fills the segment", "in the next segment"])
    }

    @Test("A new store's directory is flushed in the directory holding it: a save right after creating it survives a power loss")
    func creationIsDurable() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        context.insert(Note.titled("first"))
        try context.save()

        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        let reopened = try StoreFiles.open(url, NotesSchema.models) {
            $0.mode = .readWrite(createIfMissing: false)
            $0.fileSystem = crashed
        }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>()).map(\.title) == ["first"])
    }

    @Test("A store whose creation stopped before its manifest was in place is created by the next open, not refused")
    func interruptedCreation() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let mark = disk.mark()
        try StoreFiles.close(try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk })
        var interrupted = 0
        for crash in disk.images(since: mark, kinds: [.processCrash, .powerLoss]) {
            let crashed = SimulatedDisk(image: crash.image)
            guard !crashed.exists(url.path + "/MANIFEST") else { continue }
            let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
            let context = ModelContext(container)
            context.insert(Note.titled("saved"))
            try context.save()
            try StoreFiles.close(container)
            let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
            #expect(try ModelContext(reopened).fetchCount(FetchDescriptor<Note>()) == 1, "\(crash.kind) at \(crash.step)")
            interrupted += 1
        }
        #expect(interrupted > 5)
    }

    @Test("A writable open flushes what an earlier process left unflushed: saves after a crash between a rename and its directory flush survive a power loss")
    func openFlushesWhatItBuildsOn() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) {
            $0.automaticCompaction = nil
            $0.fileSystem = disk
        }
        let context = ModelContext(container)
        for index in 0..<3 {
            context.insert(Note.titled("n\(index)"))
            try context.save()
        }
        let mark = disk.mark()
        try StoreFiles.store(container).compact()
        // The process dies right after the new manifest is renamed into place, before the directory is flushed.
        let renamed = try #require(disk.journal(since: mark).firstIndex(of: "rename MANIFEST.tmp to MANIFEST"))
        let crash = try #require(disk.images(since: mark, kinds: [.processCrash]).first { $0.step == renamed + 1 })
        let crashed = SimulatedDisk(image: crash.image)
        let next = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        let later = ModelContext(next)
        later.insert(Note.titled("after the crash"))
        try later.save()
        try StoreFiles.close(next)

        let powerLoss = SimulatedDisk(image: crashed.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: powerLoss).isEmpty)
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = powerLoss }
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
                == ["after the crash", "n0", "n1", "n2"])
    }

    @Test("The simulation agrees with the real file system: every power-loss image of a compaction, written to disk, reopens whole")
    func compactionOnRealDisk() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        try prepareNotes(disk, url)
        let container = try openNotes(disk, url)
        let context = ModelContext(container)
        try context.delete(try StoreScenario.note("n2", in: context))
        try context.save()
        let expected = try readNotes.fingerprint(ModelContext(container))
        let mark = disk.mark()
        try StoreFiles.store(container).compact()
        var opened = 0
        for crash in disk.images(since: mark, kinds: [.powerLoss, .tornWrite]) {
            let copy = TemporaryStores.newURL("crash")
            defer { try? FileManager.default.removeItem(at: copy) }
            try SimulatedDisk.materialize(crash.image, under: url.path, to: copy)
            #expect(StoreFiles.unrecoverableProblems(at: copy, fileSystem: POSIXFileSystem()).isEmpty, "\(crash.kind) at \(crash.step)")
            let reopened = try StoreFiles.open(copy, NotesSchema.models) { StoreScenario.notesConfiguration(&$0) }
            let context = ModelContext(reopened)
            #expect(try readNotes.fingerprint(context) == expected, "\(crash.kind) at \(crash.step)")
            let files = StoreFiles.contents(of: copy).mapValues { [UInt8]($0) }
            #expect(leftovers(in: files, referencedBlobs: referencedBlobs(context)).isEmpty, "\(crash.kind) at \(crash.step)")
            try StoreFiles.close(reopened)
            opened += 1
        }
        #expect(opened > 10)
    }

    // MARK: The stores

    /// A notes store with several segments, drawings (one blob shared by two), revisions and deleted history: the
    /// notes scenario up to its last edit round.
    private func prepareNotes(_ disk: SimulatedDisk, _ url: URL) throws {
        var container: ModelContainer?
        for step in StoreScenario.notes.steps.prefix(12) {
            switch step {
            case .open(let open): container = try open.make(url, disk)
            case .save(_, let change):
                let context = ModelContext(try #require(container))
                try change(context)
                try context.save()
            case .store(_, let call):
                let container = try #require(container)
                try call(StoreFiles.store(container), ModelContext(container))
            case .close, .offline, .by: break
            }
        }
        try StoreFiles.close(try #require(container))
    }

    /// The notes store, without automatic compaction: each case does only its own operation.
    private func openNotes(_ disk: SimulatedDisk, _ url: URL) throws -> ModelContainer {
        try StoreFiles.open(url, NotesSchema.models) {
            StoreScenario.notesConfiguration(&$0)
            $0.automaticCompaction = nil
            $0.fileSystem = disk
        }
    }

    private func prepareShelf(_ disk: SimulatedDisk, _ url: URL, names: [String]) throws {
        let container = try StoreScenario.openShelfV1.make(url, disk)
        let context = ModelContext(container)
        for (index, name) in names.enumerated() {
            let item = ShelfV1.Item()
            item.name = name
            item.count = index * 2 + 3
            context.insert(item)
        }
        try context.save()
        try StoreFiles.close(container)
    }

    private var readNotes: StoreScenario.Open {
        StoreScenario.Open(name: "notes, read-only", make: { url, fileSystem in
            try StoreFiles.open(url, NotesSchema.models) {
                $0.mode = .readOnly
                $0.fileSystem = fileSystem
            }
        }, fingerprint: StoreScenario.notesFingerprint)
    }

    private func readOnly(_ open: StoreScenario.Open, schema: any VersionedSchema.Type) -> StoreScenario.Open {
        StoreScenario.Open(name: open.name + ", read-only", make: { url, fileSystem in
            try ModelContainer(for: Schema(versionedSchema: schema),
                               configurations: [FileStoreConfiguration(url: url, mode: .readOnly, fileSystem: fileSystem)])
        }, fingerprint: open.fingerprint)
    }

    // MARK: The check

    /// What a crash image holds, read-only: its content and history (and, for compaction, its segments).
    private func state(_ crashCase: CrashCase, _ read: StoreScenario.Open, on disk: SimulatedDisk, _ url: URL) -> String? {
        guard disk.exists(url.path + "/MANIFEST") else { return "no store" }
        guard let container = try? read.make(url, disk) else { return nil }
        let context = ModelContext(container)
        guard let content = try? read.fingerprint(context), let history = try? container.store.history() else { return nil }
        var key = content + "\nhistory " + history.records.map { String($0.number) }.joined(separator: " ")
        if crashCase.distinguishByManifest {
            key += "\nsegments \(manifestSegments(disk.contents(url.path + "/MANIFEST") ?? []))"
        }
        return key
    }

    private func check(_ crashCase: CrashCase) throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        try crashCase.prepare(disk, url)
        let container = try crashCase.setUp(disk, url)
        let before = SimulatedDisk(image: disk.crashImage(.processCrash))
        let mark = disk.mark()
        try crashCase.operation(disk, url, container)
        if let container { try StoreFiles.close(container) }
        let after = SimulatedDisk(image: disk.crashImage(.processCrash))

        let old = state(crashCase, crashCase.readOld, on: before, url)
        let new = state(crashCase, crashCase.readNew, on: after, url)
        #expect(old != nil && new != nil && old != new, "\(crashCase.name): the operation changes the state")
        let recoveredOld = try recover(crashCase, before, url).content
        let recoveredNew = try recover(crashCase, after, url).content

        var counts: [String: Int] = [:]
        var lastSeen: [SimulatedDisk.CrashKind: String] = [:]
        var problems: [String] = []
        let images = disk.images(since: mark)
        for crash in images {
            let at = "\(crashCase.name), \(crash.kind) at step \(crash.step) of \(images.last?.step ?? 0) "
                + "(before \(crash.interrupted))"
            let crashed = SimulatedDisk(image: crash.image)
            if crashed.exists(url.path + "/MANIFEST") {
                problems += StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).map { "\(at): verify: \($0)" }
            }
            // Old or new, read-only, never old again once new.
            let found = state(crashCase, crashCase.readOld, on: crashed, url) == old ? "old"
                : state(crashCase, crashCase.readNew, on: crashed, url) == new ? "new" : "intermediate"
            counts[found, default: 0] += 1
            if found == "intermediate" && !crashCase.allowsIntermediate {
                problems.append("\(at): neither the old nor the new state: "
                                + (state(crashCase, crashCase.readNew, on: crashed, url) ?? "unreadable"))
            }
            if found == "old" && lastSeen[crash.kind] == "new" { problems.append("\(at): old again after new") }
            lastSeen[crash.kind] = found
            // A writable open recovers it whole, and cleans up.
            do {
                let recovered = try recover(crashCase, crashed, url)
                let expected = found == "old" ? recoveredOld : recoveredNew
                if recovered.content != expected {
                    problems.append("\(at): recovered to\n\(recovered.content)\nexpected\n\(expected)")
                }
                if !recovered.leftovers.isEmpty { problems.append("\(at): leftovers after recovery: \(recovered.leftovers)") }
                if !recovered.verified { problems.append("\(at): the recovered store does not verify") }
                if !recovered.survivesPowerLoss { problems.append("\(at): a save after recovery is lost in a power loss") }
            } catch {
                problems.append("\(at): recovery failed: \(error)")
            }
        }
        TestOutput.summary("crash steps: \(crashCase.name): \(images.last?.step ?? 0) steps, "
                           + "\(images.count) crash images, "
                           + counts.sorted(by: { $0.key < $1.key }).map { "\($0.value) \($0.key)" }
                               .joined(separator: ", ")
                           + ", \(problems.count) problems")
        #expect(counts["old", default: 0] > 0 && counts["new", default: 0] > 0, "\(crashCase.name): crashes fall on both sides")
        let count = problems.count
        #expect(count == 0, Comment(rawValue: problems.prefix(10).joined(separator: "\n")))
    }

    /// Opens the crashed store as the application would, then checks what the open left and that a save after it
    /// survives a power loss.
    private func recover(_ crashCase: CrashCase, _ crashed: SimulatedDisk, _ url: URL) throws
        -> (content: String, leftovers: [String], verified: Bool, survivesPowerLoss: Bool) {
        let container = try crashCase.reopen.make(url, crashed)
        let context = ModelContext(container)
        let content = try crashCase.reopen.fingerprint(context)
        let extra = leftovers(in: crashed.files(under: url.path), referencedBlobs: referencedBlobs(context))
        let verified = try StoreVerifier.verify(at: url, fileSystem: crashed).ok
        // One more save, then a power loss: it must be there, on top of everything recovery kept.
        let marker = "saved after recovery"
        if crashCase.reopen.name.hasPrefix("notes") {
            context.insert(Note.titled(marker))
        } else {
            context.insert(ModelContext.shelfItem(in: container, named: marker))
        }
        try context.save()
        let expected = try crashCase.reopen.fingerprint(ModelContext(container))
        try StoreFiles.close(container)
        let powerLoss = SimulatedDisk(image: crashed.crashImage(.powerLoss))
        let afterPowerLoss = try? crashCase.reopen.make(url, powerLoss)
        let survives = try afterPowerLoss.map { try crashCase.reopen.fingerprint(ModelContext($0)) } == expected
        if let afterPowerLoss { try? StoreFiles.close(afterPowerLoss) }
        return (content, extra, verified, survives)
    }
}

extension ModelContext {
    /// An item of whichever shelf schema the container has, for a save after recovery.
    static func shelfItem(in container: ModelContainer, named name: String) -> any PersistentModel {
        if container.schema.version == Schema.Version(1, 0, 0) {
            let item = ShelfV1.Item()
            item.name = name
            return item
        }
        if container.schema.entities.contains(where: { $0.name == "Bin" }) {
            let item = ShelfV2.Item()
            item.title = name
            item.count = 99
            return item
        }
        let item = ShelfUniqueName.Item()
        item.name = name
        item.count = 99
        return item
    }
}
