import Foundation
import NoteKit
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 36, item 2: one applier of a change set to rows, for every store and every reader of a log. Each way a change
/// set can fail to apply (a `ChangeConflict`) is said once per client: a save throws its `SaveError`, a replay and a
/// refresh refuse the record, a verification reports it and a salvage leaves it out, each naming the record's offset
/// and the object.
///
/// What the rule newly refuses: a save used to accept a change set that inserts an object twice, deletes one twice, or
/// updates one it deletes (and the file store wrote a record every later open refused), and a replay used to accept a
/// record that deletes an object and inserts it again (which no save wrote).
@Suite("One applier: when a change set applies to a store's rows, for a save and for a log")
struct ChangeConflictTests {
    final class Box: PersistentModel {
        @Attribute(.unique) var name = ""
        @Relationship var label: Label?
        required init() {}
    }

    final class Label: PersistentModel {
        @Attribute var text = ""
        required init() {}
    }

    /// Saved boxes `a` (labelled) and `b`, and their label: the rows as the store holds them; and two identifiers the
    /// store does not have, fixed so that the same conflict built twice names the same objects.
    struct Saved {
        var container: ModelContainer
        var a: ModelSnapshot
        var b: ModelSnapshot
        var label: ModelSnapshot
        var newID: PersistentIdentifier
        var missingID: PersistentIdentifier

        init(_ kind: StoreKind) throws {
            container = try kind.makeContainer([Box.self, Label.self])
            let context = ModelContext(container)
            let a = Box(), b = Box(), label = Label()
            a.name = "a"
            b.name = "b"
            label.text = "x"
            a.label = label
            context.insert(a)
            context.insert(b)
            try context.save()
            let rows = container.store.rows(for: [a.persistentModelID, b.persistentModelID,
                                                       label.persistentModelID])
            self.a = try #require(rows[0])
            self.b = try #require(rows[1])
            self.label = try #require(rows[2])
            newID = PersistentIdentifier(entityName: self.a.id.entityName, primaryKey: UUID())
            missingID = PersistentIdentifier(entityName: self.a.id.entityName, primaryKey: UUID())
        }

        /// A new label's identifier.
        var newLabelID: PersistentIdentifier {
            PersistentIdentifier(entityName: label.id.entityName, primaryKey: newID.primaryKey)
        }

        /// Every object a conflict names, and the rows the store holds of them (of the new ones, none).
        var ids: [PersistentIdentifier] { [a.id, b.id, label.id, newID, newLabelID, missingID] }
        var rows: [ModelSnapshot?] { [a, b, label, nil, nil, nil] }

        /// A new box row named `name` (identifier ``newID``), labelled `label`.
        func newBox(_ name: String, label: PersistentIdentifier? = nil) -> ModelSnapshot {
            var row = a
            row.id = newID
            row.attributes[0] = .string(name)
            row.relationships = RelationshipValues([.toOne(label)])
            row.transactionNumber = 0
            return row
        }

        func rename(_ id: PersistentIdentifier, _ name: String) -> ModelUpdate {
            ModelUpdate(id: id, attributes: [AttributeChange(index: 0, value: .string(name))], relationships: [])
        }
    }

    /// One conflict: the change set, what a save throws, and what a log says of a transaction `number` that holds
    /// it (nil: a replay does not check it, since a save did before writing the record).
    struct Conflict: CustomStringConvertible {
        var description: String
        var changes: ChangeSet
        var saveError: SaveError
        var logReason: ((UInt64) -> String)?
        /// Whether a save accepted the change set before the rule was shared.
        var newForSave = false
        /// Whether a replay accepted the record before the rule was shared.
        var newForLog = false
        /// Whether a log's record can hold the change set for an applier to see: one cannot name an entity its schema
        /// lacks, and its decoder refuses a value of the wrong type first.
        var canBeLogged = true
    }

    static func conflicts(_ saved: Saved) -> [Conflict] {
        let (a, b) = (saved.a.id, saved.b.id)
        let c = saved.newBox("c"), missing = saved.missingID
        // A label: a box inserted twice would also take its own unique name twice.
        var label = saved.label
        label.id = saved.newLabelID
        var ghost = c
        ghost.id = PersistentIdentifier(entityName: "Ghost", primaryKey: c.id.primaryKey)
        return [
            Conflict(description: "an insert of an object that exists", changes: ChangeSet(inserted: [saved.a]),
                     saveError: .duplicateIdentifier(a),
                     logReason: { "transaction \($0) inserts \(a), which already exists" }),
            Conflict(description: "an object inserted twice", changes: ChangeSet(inserted: [label, label]),
                     saveError: .duplicateIdentifier(label.id),
                     logReason: { "transaction \($0) inserts \(label.id), which already exists" }, newForSave: true),
            Conflict(description: "an object deleted and inserted again",
                     changes: ChangeSet(inserted: [saved.a], deleted: [ModelDeletion(id: a)]),
                     saveError: .duplicateIdentifier(a),
                     logReason: { "transaction \($0) inserts \(a), which already exists" }, newForLog: true),
            Conflict(description: "an update of an object that does not exist",
                     changes: ChangeSet(updated: [saved.rename(missing, "z")]), saveError: .objectNotFound(missing),
                     logReason: { "transaction \($0) updates \(missing), which does not exist" }),
            Conflict(description: "an update of an object the change set deletes",
                     changes: ChangeSet(updated: [saved.rename(b, "z")], deleted: [ModelDeletion(id: b)]),
                     saveError: .objectNotFound(b),
                     logReason: { "transaction \($0) updates \(b), which does not exist" }, newForSave: true),
            Conflict(description: "a delete of an object that does not exist",
                     changes: ChangeSet(deleted: [ModelDeletion(id: missing)]), saveError: .objectNotFound(missing),
                     logReason: { "transaction \($0) deletes \(missing), which does not exist" }),
            Conflict(description: "an object deleted twice",
                     changes: ChangeSet(deleted: [ModelDeletion(id: b), ModelDeletion(id: b)]),
                     saveError: .objectNotFound(b),
                     logReason: { "transaction \($0) deletes \(b), which does not exist" }, newForSave: true),
            Conflict(description: "an insert of an entity the schema lacks", changes: ChangeSet(inserted: [ghost]),
                     saveError: .objectNotFound(ghost.id), logReason: nil, canBeLogged: false),
            Conflict(description: "a unique key another object holds", changes: ChangeSet(inserted: [saved.newBox("a")]),
                     saveError: .uniqueConstraintViolation(entity: a.entityName, properties: ["name"],
                                                           values: [.string("a")], existing: a),
                     logReason: nil),
            Conflict(description: "a value its attribute's type does not admit",
                     changes: ChangeSet(updated: [ModelUpdate(id: a, attributes: [AttributeChange(index: 0, value: .int(1))],
                                                              relationships: [])]),
                     saveError: .valueDoesNotMatchType(model: a, property: "name", expected: "String", found: "int 1"),
                     logReason: nil, canBeLogged: false),
        ]
    }

    /// The conflicts a log's reader checks, by their position in ``conflicts(_:)``.
    static var logged: [Int] {
        guard let saved = try? Saved(.inMemory) else { return [] }
        let all = conflicts(saved)
        return all.indices.filter { all[$0].logReason != nil }
    }

    // MARK: Saving

    /// Saves each conflict `which` selects, expecting its `SaveError`, then checks that the store holds what it held.
    private func expectEachSaveRefused(_ kind: StoreKind, _ which: (Conflict) -> Bool) throws {
        let saved = try Saved(kind)
        let store = saved.container.store
        let transactionNumber = store.transactionNumber
        for conflict in Self.conflicts(saved) where which(conflict) {
            #expect(throws: conflict.saveError, "\(conflict)") { try store.save(conflict.changes) }
        }
        #expect(store.transactionNumber == transactionNumber)
        #expect(store.rows(for: saved.ids) == saved.rows)
        guard kind == .file else { return }
        let url = StoreFiles.store(saved.container).configuration.url
        try saved.container.close()
        // The store wrote no record: it opens, with the rows it had.
        let reopened = try Self.open(url)
        #expect(reopened.store.transactionNumber == transactionNumber)
        #expect(reopened.store.rows(for: saved.ids) == saved.rows)
        try reopened.close()
    }

    @Test("A save refuses a change set that inserts an object twice, deletes one twice, or updates one it deletes, and writes nothing",
          arguments: StoreKind.allCases)
    func saveRefusesRepeatedChanges(kind: StoreKind) throws {
        try expectEachSaveRefused(kind) { $0.newForSave }
    }

    @Test("A save throws the SaveError of each conflict, and writes nothing", arguments: StoreKind.allCases)
    func saveThrows(kind: StoreKind) throws {
        try expectEachSaveRefused(kind) { _ in true }
    }

    @Test("A store keeps no target check of its own: a relationship to a missing object is the context's to refuse",
          arguments: StoreKind.allCases)
    func saveKeepsMissingTarget(kind: StoreKind) throws {
        let saved = try Saved(kind)
        let dangling = saved.newBox("d", label: PersistentIdentifier(entityName: saved.label.id.entityName,
                                                                    primaryKey: UUID()))
        _ = try saved.container.store.save(ChangeSet(inserted: [dangling]))
        #expect(saved.container.store.rows(for: [dangling.id]).first??.id == dangling.id)
        try saved.container.close()
    }

    // MARK: Reading a log

    /// Where a record was appended: its segment, the offset of its frame (what a refresh, a verification and a
    /// salvage name) and of its payload (what an open names), and its transaction number.
    struct Appended {
        var segment: String
        var offset: Int
        var payloadOffset: Int { offset + RecordFrame.headerLength }
        var number: UInt64
    }

    /// Appends `changes` to the last segment of closed store `url` as the record of transaction `number`.
    static func append(_ changes: ChangeSet, number: UInt64, to url: URL, schema: Schema) throws -> Appended {
        let layout = StoreLayout(root: url.path)
        let manifest = try SegmentLog.readManifest(layout: layout, fileSystem: POSIXFileSystem())
        let segment = layout.segment(try #require(manifest.segments.last))
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: segment)))
        bytes.removeLast(bytes.count - StoreFiles.withoutReservedSpace(bytes))
        let offset = bytes.count
        bytes += RecordEncoder().transaction(Transaction(number: number, time: Date(timeIntervalSinceReferenceDate: 1),
                                                         changes: changes), schema: schema)
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        return Appended(segment: segment, offset: offset, number: number)
    }

    /// A closed file store holding `saved`'s rows, with the changes `changes` makes of them appended as the record of
    /// transaction `number` (of the last one; the next one unless given).
    static func storeWithRecord(_ changes: (Saved) -> ChangeSet, number: ((UInt64) -> UInt64)? = nil,
                                compacted: Bool = false) throws -> (url: URL, saved: Saved, record: Appended) {
        let saved = try Saved(.file)
        let store = StoreFiles.store(saved.container)
        if compacted { _ = try store.compact() }
        let url = store.configuration.url
        let last = store.transactionNumber
        let schema = saved.container.schema
        try saved.container.close()
        let record = try append(changes(saved), number: number.map { $0(last) } ?? last + 1, to: url, schema: schema)
        if !compacted { #expect(!FileManager.default.fileExists(atPath: StoreLayout(root: url.path).checkpoint)) }
        return (url, saved, record)
    }

    /// Whether `error` is the refusal of the record at `offset` of `file` for `reason` (its kind follows the reason).
    static func refusal(_ file: String, _ offset: Int, _ reason: String) -> (any Error) -> Bool {
        { error in
            guard case let FileStoreError.danglingReference(found, at, _, said) = error else { return false }
            return found == file && at == offset && said == reason
        }
    }

    static func open(_ url: URL, readOnly: Bool = false) throws -> ModelContainer {
        try StoreFiles.open(url, [Box.self, Label.self]) {
            if readOnly {
                $0.mode = .readOnly
                $0.automaticRefreshInterval = nil
            }
        }
    }

    @Test("An open refuses a record that deletes an object and inserts it again, as a save refuses the change set")
    func replayRefusesDeleteAndInsert() throws {
        let made = try Self.storeWithRecord { ChangeSet(inserted: [$0.b], deleted: [ModelDeletion(id: $0.b.id)]) }
        let reason = "transaction \(made.record.number) inserts \(made.saved.b.id), which already exists"
        #expect(throws: FileStoreError.danglingReference(file: made.record.segment, offset: made.record.payloadOffset,
                                                         kind: .objectExists, reason: reason)) {
            try Self.open(made.url, readOnly: true)
        }
    }

    @Test("An open refuses the record of each conflict it checks, naming its segment, offset, transaction and object",
          arguments: logged)
    func replayRefuses(index: Int) throws {
        let made = try Self.storeWithRecord { Self.conflicts($0)[index].changes }
        let conflict = Self.conflicts(made.saved)[index]
        let logReason = try #require(conflict.logReason)
        #expect("\(conflict)", performing: { try Self.open(made.url, readOnly: true) },
                throws: Self.refusal(made.record.segment, made.record.payloadOffset, logReason(made.record.number)))
    }

    @Test("An open refuses a transaction whose number does not follow the last one")
    func replayRefusesOutOfSequence() throws {
        let made = try Self.storeWithRecord({ _ in ChangeSet() }, number: { $0 + 2 })
        #expect(throws: FileStoreError.danglingReference(
            file: made.record.segment, offset: made.record.payloadOffset, kind: .outOfSequence,
            reason: "transaction \(made.record.number) follows transaction \(made.record.number - 2)")) {
            try Self.open(made.url, readOnly: true)
        }
    }

    @Test("A refresh refuses a record another process appended as an open or a save would have refused it",
          arguments: [false, true])
    func refreshRefuses(compacted: Bool) throws {
        for index in Self.conflicts(try Saved(.inMemory)).indices {
            let made = try Saved(.file)
            let conflict = Self.conflicts(made)[index]
            guard conflict.canBeLogged else { continue }
            let store = StoreFiles.store(made.container)
            if compacted { _ = try store.compact() }
            let url = store.configuration.url, schema = made.container.schema, last = store.transactionNumber
            try made.container.close()
            let reader = try Self.open(url, readOnly: true)
            let record = try Self.append(conflict.changes, number: last + 1, to: url, schema: schema)
            // In an open's words; what only a save checks, in the save's.
            let reason = conflict.logReason?(record.number) ?? "transaction \(record.number): \(conflict.saveError)"
            #expect("\(conflict)", performing: { try StoreFiles.store(reader).refresh() },
                    throws: Self.refusal(record.segment, record.offset, reason))
            #expect(reader.store.rows(for: made.ids) == made.rows,
                    "\(conflict): the reader keeps the rows it had")
            try reader.close()
        }
    }

    @Test("Verify reports the record of each conflict as a dangling reference, at its offset", arguments: logged)
    func verifyReports(index: Int) throws {
        let made = try Self.storeWithRecord { Self.conflicts($0)[index].changes }
        let conflict = Self.conflicts(made.saved)[index]
        let logReason = try #require(conflict.logReason)
        let report = try StoreVerifier.verify(at: made.url)
        #expect(report.problems.map(\.kind) == [.danglingReference], "\(conflict): \(report.problems)")
        #expect(report.problems.first?.offset == made.record.offset)
        #expect(report.problems.first?.message == logReason(made.record.number), "\(conflict)")
    }

    @Test("A salvage leaves out the transaction of each conflict and says why", arguments: logged)
    func salvageLeavesOut(index: Int) throws {
        let made = try Self.storeWithRecord { Self.conflicts($0)[index].changes }
        let conflict = Self.conflicts(made.saved)[index]
        let logReason = try #require(conflict.logReason)
        for mode in [FileStore.SalvageMode.consistentPrefix, .bestEffort] {
            let report = try FileStore.salvage(from: made.url, to: TemporaryStores.newURL("salvaged"), mode: mode)
            #expect(report.transactionsKept == 1, "\(conflict), \(mode)")
            #expect(report.skippedRecords.map(\.offset) == [made.record.offset], "\(conflict), \(mode)")
            #expect(report.skippedRecords.first?.transaction == made.record.number, "\(conflict), \(mode)")
            #expect(report.skippedRecords.first?.reason == logReason(made.record.number), "\(conflict), \(mode)")
        }
    }

    @Test("A best-effort salvage also leaves out a transaction that sets a relationship to a missing object")
    func salvageLeavesOutMissingTarget() throws {
        let label = PersistentIdentifier(entityName: "Label", primaryKey: UUID())
        let made = try Self.storeWithRecord { ChangeSet(inserted: [$0.newBox("d", label: label)]) }
        let report = try FileStore.salvage(from: made.url, to: TemporaryStores.newURL("salvaged"), mode: .bestEffort)
        #expect(report.transactionsKept == 1)
        #expect(report.skippedRecords.map(\.offset) == [made.record.offset])
        #expect(report.skippedRecords.first?.reason
                    == "transaction \(made.record.number) sets \(made.saved.newID) to point at \(label), which does not exist")
    }

    @Test("An open keeps a relationship to an object that does not exist, as every store saves it")
    func replayKeepsMissingTarget() throws {
        let label = PersistentIdentifier(entityName: "Label", primaryKey: UUID())
        let made = try Self.storeWithRecord { ChangeSet(inserted: [$0.newBox("d", label: label)]) }
        let container = try Self.open(made.url)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Box>()) == 3)
        try container.close()
    }
}
