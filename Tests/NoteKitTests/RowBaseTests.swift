import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 17, items 1-2 (the NoteKit side): a ``RowStorage`` that starts from each entity's saved rows behind a
/// ``RowBase`` and lays every later change over them answers exactly as one that loaded the same rows.
///
/// A failure of the randomized test names its seed. Replay it with
/// `NOTEKIT_ROWBASE_SEED=<seed> swift test --filter "Rows over a base"`.
@Suite("Rows over a base")
struct RowBaseTests {
    // MARK: The schema

    /// Folders (unique name, indexed rank) holding notes through a `.noAction` to-many; notes with a compound
    /// index, a single index, a nullable unique code and a compound unique key, a nullify to-one and an
    /// inverse-less to-many.
    static let schema: Schema = {
        let folder = Schema.Entity(
            name: "Folder",
            attributes: [
                .init(name: "name", type: .string, defaultValue: .string("")),
                .init(name: "rank", type: .int, defaultValue: .int(0)),
            ],
            relationships: [
                .init(name: "notes", destination: "Note", isToMany: true, inverse: "folder", deleteRule: .noAction),
            ],
            uniqueConstraints: [["name"]], indexes: [["rank"]])
        let note = Schema.Entity(
            name: "Note",
            attributes: [
                .init(name: "title", type: .string, defaultValue: .string("")),
                .init(name: "pinned", type: .bool, defaultValue: .bool(false)),
                .init(name: "created", type: .int, defaultValue: .int(0)),
                .init(name: "score", type: .int, defaultValue: .int(0)),
                .init(name: "code", type: .optional(.string), defaultValue: .null),
            ],
            relationships: [
                .init(name: "folder", destination: "Folder", isToMany: false, inverse: "notes"),
                .init(name: "related", destination: "Note", isToMany: true, inverse: nil),
            ],
            uniqueConstraints: [["code"], ["title", "score"]],
            indexes: [["pinned", "created"], ["score"], ["code"]])
        // The entities are written here and valid; a mistake in them fails every test at once.
        return try! Schema(version: .init(1, 0, 0), entities: [folder, note])
    }()

    static var folderEntity: Schema.Entity { schema.entity(named: "Folder")! }
    static var noteEntity: Schema.Entity { schema.entity(named: "Note")! }

    static func id(_ entity: String, _ n: Int) -> PersistentIdentifier {
        let hex = String(format: "%012x", n)
        return PersistentIdentifier(entityName: entity,
                                    primaryKey: UUID(uuidString: "00000000-0000-8000-8000-\(hex)")!)
    }

    static func folder(_ n: Int, name: String, rank: Int, notes: [PersistentIdentifier] = []) -> ModelSnapshot {
        ModelSnapshot(id: id("Folder", n), attributes: [.string(name), .int(Int64(rank))],
                      relationships: [.toMany(notes)], transactionNumber: 1)
    }

    static func note(_ n: Int, title: String, pinned: Bool = false, created: Int = 0, score: Int = 0,
                     code: String? = nil, folder: PersistentIdentifier? = nil,
                     related: [PersistentIdentifier] = []) -> ModelSnapshot {
        ModelSnapshot(id: id("Note", n),
                      attributes: [.string(title), .bool(pinned), .int(Int64(created)), .int(Int64(score)),
                                   code.map(StoredValue.string) ?? .null],
                      relationships: [.toOne(folder), .toMany(related)], transactionNumber: 1)
    }

    /// The storage that loaded `rows`, and the one over an ``InMemoryRowBase`` of the same rows.
    static func pair(_ rows: [ModelSnapshot], failingAt: [String: Int] = [:])
        -> (loaded: RowStorage, based: RowStorage, bases: [String: InMemoryRowBase]) {
        let loaded = RowStorage(schema: schema)
        loaded.load(rows, transactionNumber: 1)
        var bases: [String: InMemoryRowBase] = [:]
        for entity in schema.entities {
            bases[entity.name] = InMemoryRowBase(entity: entity, rows: rows.filter { $0.id.entityName == entity.name },
                                                 failingAt: failingAt[entity.name])
        }
        let based = RowStorage(schema: schema, bases: bases, transactionNumber: 1)
        return (loaded, based, bases)
    }

    // MARK: Comparing

    static func noteRequests(_ rows: [ModelSnapshot], rng: inout SeededGenerator) -> [StoreFetchRequest] {
        let notes = rows.filter { $0.id.entityName == "Note" }
        let created: Int64 = notes.isEmpty ? 50 : { if case .int(let v) = rng.pick(notes).attributes[2] { v } else { 0 } }()
        let score: Int64 = notes.isEmpty ? 3 : { if case .int(let v) = rng.pick(notes).attributes[3] { v } else { 0 } }()
        let code: StoredValue = notes.isEmpty ? .string("c1") : rng.pick(notes).attributes[4]
        let excluded: Set<PersistentIdentifier> = notes.isEmpty ? [] : [rng.pick(notes).id]
        func eq(_ slot: Int, _ value: StoredValue) -> FetchFilter { .compare(.attribute(slot), .equal, .value(value)) }
        let filters: [FetchFilter?] = [
            nil,
            eq(1, .bool(true)),
            eq(1, .bool(false)),
            .and([eq(1, .bool(true)), .compare(.attribute(2), .greater, .value(.int(created)))]),
            .compare(.attribute(2), .lessOrEqual, .value(.int(created))),
            eq(3, .int(score)),
            .compare(.attribute(3), .greaterOrEqual, .value(.int(score))),
            eq(4, code),
            .compare(.attribute(0), .notEqual, .value(.string("t3"))),
            .or([eq(3, .int(score)), eq(1, .bool(true))]),
        ]
        let sorts: [[FetchSortKey]] = [
            [],
            [FetchSortKey(.attribute(2), ascending: false)],
            [FetchSortKey(.attribute(2), ascending: true)],
            [FetchSortKey(.attribute(3), ascending: true)],
            [FetchSortKey(.attribute(0), ascending: true), FetchSortKey(.attribute(3), ascending: false)],
        ]
        var requests: [StoreFetchRequest] = []
        for filter in filters {
            for sort in sorts {
                let offset = rng.chance(0.3) ? Int.random(in: 0...3, using: &rng) : 0
                let limit: Int? = rng.chance(0.5) ? Int.random(in: 1...6, using: &rng) : nil
                let type: StoreFetchRequest.ResultType = rng.pick([.rows, .identifiers, .count])
                requests.append(StoreFetchRequest(entity: "Note", filter: filter, sort: sort, offset: offset,
                                                  limit: limit, resultType: type,
                                                  excluding: rng.chance(0.2) ? excluded : []))
            }
        }
        for sort in [[], [FetchSortKey(.attribute(1), ascending: true)]] {
            requests.append(StoreFetchRequest(entity: "Folder", filter: nil, sort: sort))
            requests.append(StoreFetchRequest(entity: "Folder", filter: .compare(.attribute(1), .less, .value(.int(3))),
                                              sort: sort, limit: 2))
        }
        return requests
    }

    /// Compares every answer of the two storages; `known` are identifiers to look up (live, deleted, never saved).
    static func expectSame(_ a: RowStorage, _ b: RowStorage, known: [PersistentIdentifier],
                           rng: inout SeededGenerator, _ label: String) throws {
        for entity in schema.entities {
            #expect(a.count(of: entity.name) == b.count(of: entity.name), "count of \(entity.name), \(label)")
            #expect(try a.rows(of: entity.name) == b.rows(of: entity.name), "rows of \(entity.name), \(label)")
        }
        let all = try a.rows(of: "Folder") + a.rows(of: "Note")
        for id in known {
            #expect(try a.snapshot(for: id) == b.snapshot(for: id), "snapshot \(id), \(label)")
        }
        for entity in schema.entities {
            let slots = entity.uniqueConstraints.map { $0.map { entity.attributeIndex(named: $0)! } }
            for (constraint, slots) in slots.enumerated() {
                let rows = all.filter { $0.id.entityName == entity.name }
                var keys = (0..<min(rows.count, 16)).map { _ in slots.map { rng.pick(rows).attributes[$0] } }
                keys.append(slots.map { _ in .string("t\(Int.random(in: 0..<8, using: &rng))") })
                for key in keys {
                    #expect(try a.identifier(entity: entity.name, uniqueConstraint: constraint, key: key)
                                == b.identifier(entity: entity.name, uniqueConstraint: constraint, key: key),
                            "holder of \(key) in \(entity.name), \(label)")
                }
            }
        }
        for _ in 0..<8 {
            let target = rng.pick(known)
            if target.entityName == "Folder" {
                #expect(try a.identifiers(entity: "Note", relationship: 0, referencing: target)
                            == b.identifiers(entity: "Note", relationship: 0, referencing: target), "folder refs, \(label)")
            } else {
                #expect(try a.identifiers(entity: "Note", relationship: 1, referencing: target)
                            == b.identifiers(entity: "Note", relationship: 1, referencing: target), "related refs, \(label)")
                #expect(try a.identifiers(entity: "Folder", relationship: 0, referencing: target)
                            == b.identifiers(entity: "Folder", relationship: 0, referencing: target), "notes refs, \(label)")
            }
        }
        for request in noteRequests(all, rng: &rng) {
            let x = try a.fetch(request), y = try b.fetch(request)
            let what = "\(request.filter.map { "\($0)" } ?? "all") sort \(request.sort) offset \(request.offset) "
                + "limit \(request.limit.map(String.init) ?? "-") \(request.resultType), \(label)"
            #expect(x.rows == y.rows, "snapshots of \(what)")
            #expect(x.identifiers == y.identifiers, "identifiers of \(what)")
            #expect(x.count == y.count, "count of \(what)")
            #expect(x.plan == y.plan, "plan of \(what)")
        }
    }

    /// Validates on both; applies on both when both accept. The verdicts must agree.
    static func save(_ changes: ChangeSet, _ a: RowStorage, _ b: RowStorage, _ label: String) throws -> Bool {
        let x = Result { try a.validate(changes) }, y = Result { try b.validate(changes) }
        switch (x, y) {
        case (.success, .success):
            a.apply(changes, timestamp: Date(timeIntervalSinceReferenceDate: 0))
            b.apply(changes, timestamp: Date(timeIntervalSinceReferenceDate: 0))
            return true
        case let (.failure(e), .failure(f)):
            #expect(e as? SaveError == f as? SaveError, "verdicts, \(label)")
            #expect(e is SaveError, "a loaded storage refuses with a SaveError, \(label): \(e)")
            return false
        default:
            Issue.record("verdicts differ, \(label): loaded \(x), based \(y)")
            return false
        }
    }

    // MARK: Random change sets

    struct World {
        var rng: SeededGenerator
        var nextNumber = 1000
        var known: [PersistentIdentifier] = []

        mutating func title() -> String { "t\(Int.random(in: 0..<60, using: &rng))" }
        mutating func code() -> String? { rng.chance(0.4) ? nil : "c\(Int.random(in: 0..<300, using: &rng))" }

        mutating func initialRows(notes: Int, folders: Int) -> [ModelSnapshot] {
            var rows: [ModelSnapshot] = []
            let folderIDs = (0..<folders).map { RowBaseTests.id("Folder", $0) }
            var members: [PersistentIdentifier: [PersistentIdentifier]] = [:]
            var usedCodes = Set<String>(), usedTitleScores = Set<String>()
            var noteRows: [ModelSnapshot] = []
            for n in 0..<notes {
                var code = code()
                if let c = code, !usedCodes.insert(c).inserted { code = nil }
                var title = title(), score = Int.random(in: 0..<6, using: &rng)
                while !usedTitleScores.insert("\(title)/\(score)").inserted { title += "x"; score += 1 }
                let folder = rng.chance(0.7) ? rng.pick(folderIDs) : nil
                let related = (0..<Int.random(in: 0...2, using: &rng)).map { _ in RowBaseTests.id("Note", Int.random(in: 0..<notes, using: &rng)) }
                let row = RowBaseTests.note(n, title: title, pinned: rng.chance(0.3), created: Int.random(in: 0..<100, using: &rng),
                                            score: score, code: code, folder: folder, related: Array(Set(related)).sorted())
                if let folder { members[folder, default: []].append(row.id) }
                noteRows.append(row)
            }
            for (n, id) in folderIDs.enumerated() {
                rows.append(RowBaseTests.folder(n, name: "f\(n)", rank: Int.random(in: 0..<5, using: &rng), notes: members[id] ?? []))
            }
            rows += noteRows
            known = rows.map(\.id) + [RowBaseTests.id("Note", 999), RowBaseTests.id("Folder", 999)]
            return rows
        }

        /// A random change set over the current rows of `storage` (which the change set is validated against).
        mutating func changes(over storage: RowStorage) throws -> ChangeSet {
            let notes = try storage.rows(of: "Note"), folders = try storage.rows(of: "Folder")
            var used = Set<PersistentIdentifier>()
            var changes = ChangeSet()
            func fresh(_ entity: String) -> PersistentIdentifier {
                // Sometimes an identifier that was deleted, or one still there (a duplicate insert).
                if rng.chance(0.1), let old = known.filter({ $0.entityName == entity }).randomElement(using: &rng) { return old }
                nextNumber += 1
                let id = RowBaseTests.id(entity, nextNumber)
                known.append(id)
                return id
            }
            func folderTarget() -> PersistentIdentifier? {
                rng.chance(0.3) || folders.isEmpty ? nil : rng.pick(folders).id
            }
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                let id = fresh("Note")
                guard used.insert(id).inserted else { continue }
                changes.inserted.append(ModelSnapshot(
                    id: id, attributes: [.string(title()), .bool(rng.chance(0.4)), .int(Int64(Int.random(in: 0..<100, using: &rng))),
                                         .int(Int64(Int.random(in: 0..<6, using: &rng))), code().map(StoredValue.string) ?? .null],
                    relationships: [.toOne(folderTarget()), .toMany(notes.isEmpty ? [] : [rng.pick(notes).id])]))
            }
            if rng.chance(0.2) {
                let id = fresh("Folder")
                if used.insert(id).inserted {
                    changes.inserted.append(ModelSnapshot(id: id, attributes: [.string("f\(Int.random(in: 0..<40, using: &rng))"), .int(Int64(Int.random(in: 0..<5, using: &rng)))],
                                                          relationships: [.toMany([])]))
                }
            }
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                // Mostly live rows; sometimes a deleted or unknown one.
                let id = rng.chance(0.9) && !notes.isEmpty ? rng.pick(notes).id : rng.pick(known.filter { $0.entityName == "Note" })
                guard used.insert(id).inserted else { continue }
                var attributes: [AttributeChange] = []
                if rng.chance(0.4) { attributes.append(.init(index: 0, value: .string(title()))) }
                if rng.chance(0.4) { attributes.append(.init(index: 1, value: .bool(rng.chance(0.5)))) }
                if rng.chance(0.4) { attributes.append(.init(index: 2, value: .int(Int64(Int.random(in: 0..<100, using: &rng))))) }
                if rng.chance(0.4) { attributes.append(.init(index: 3, value: .int(Int64(Int.random(in: 0..<6, using: &rng))))) }
                if rng.chance(0.3) { attributes.append(.init(index: 4, value: code().map(StoredValue.string) ?? .null)) }
                var relationships: [RelationshipChange] = []
                if rng.chance(0.3) { relationships.append(.init(index: 0, kind: .toOne(folderTarget()))) }
                if rng.chance(0.3), !notes.isEmpty {
                    relationships.append(.init(index: 1, kind: .toMany(added: [rng.pick(notes).id], removed: rng.chance(0.5) ? [rng.pick(notes).id] : [])))
                }
                changes.updated.append(ModelUpdate(id: id, attributes: attributes, relationships: relationships))
            }
            if rng.chance(0.3), !folders.isEmpty {
                let id = rng.pick(folders).id
                if used.insert(id).inserted {
                    var attributes: [AttributeChange] = []
                    if rng.chance(0.5) { attributes.append(.init(index: 0, value: .string("f\(Int.random(in: 0..<40, using: &rng))"))) }
                    if rng.chance(0.5) { attributes.append(.init(index: 1, value: .int(Int64(Int.random(in: 0..<5, using: &rng))))) }
                    let relationships: [RelationshipChange] = notes.isEmpty ? [] : [.init(index: 0, kind: .toMany(added: [rng.pick(notes).id], removed: []))]
                    changes.updated.append(ModelUpdate(id: id, attributes: attributes, relationships: relationships))
                }
            }
            for _ in 0..<Int.random(in: 0...1, using: &rng) where !notes.isEmpty {
                let id = rng.pick(notes).id
                if used.insert(id).inserted { changes.deleted.append(ModelDeletion(id: id)) }
            }
            // A folder delete: its `.noAction` notes keep pointing at it until the delete drops those references.
            if rng.chance(0.1), !folders.isEmpty {
                let id = rng.pick(folders).id
                if used.insert(id).inserted { changes.deleted.append(ModelDeletion(id: id)) }
            }
            if rng.chance(0.03) { changes.deleted.append(ModelDeletion(id: RowBaseTests.id("Note", 999))) }
            return changes
        }
    }

    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["NOTEKIT_ROWBASE_SEED"], let seed = UInt64(text) { return [seed] }
        return [0x17B_A5E, UInt64.random(in: 0...UInt64.max)]
    }()

    /// 100 change sets a seed in `swift test`, 300 with `NOTEKIT_LONG_TESTS=1` (``LongTests``) or
    /// `NOTEKIT_ROWBASE_STEPS=N`.
    @Test("Equivalence: random change sets over a base answer as over loaded rows", arguments: seeds)
    func randomEquivalence(seed: UInt64) throws {
        print("Rows over a base: seed \(seed) (NOTEKIT_ROWBASE_SEED=\(seed) replays it)")
        let steps = LongTests.value("NOTEKIT_ROWBASE_STEPS", bounded: 40, long: 300)
        var world = World(rng: SeededGenerator(seed: seed))
        let rows = world.initialRows(notes: 80, folders: 6)
        let (loaded, based, _) = Self.pair(rows)
        var rng = SeededGenerator(seed: seed &+ 1)
        try Self.expectSame(loaded, based, known: world.known, rng: &rng, "seed \(seed), before any change")
        var accepted = 0
        for step in 0..<steps {
            let changes = try world.changes(over: loaded)
            if try Self.save(changes, loaded, based, "seed \(seed), step \(step)") { accepted += 1 }
            try Self.expectSame(loaded, based, known: world.known, rng: &rng, "seed \(seed), step \(step)")
        }
        // About a third are accepted (the others name deleted or unknown rows, on purpose); seed 5589366857225114622
        // accepts 97 of 300, so the bound only guards against a generator that stops producing valid change sets.
        #expect(accepted > steps / 6, "enough random change sets are accepted (\(accepted) of \(steps))")
        #expect(loaded.transactionNumber == based.transactionNumber)
    }

    // MARK: The rules, one by one

    static func threeNotes() -> [ModelSnapshot] {
        [note(0, title: "a", pinned: true, created: 10, score: 1, code: "x"),
         note(1, title: "b", pinned: false, created: 20, score: 2, code: "y"),
         note(2, title: "c", pinned: true, created: 30, score: 3, code: "z")]
    }

    @Test("A changed base row keeps its place; inserted rows come after the base's")
    func changedRowKeepsItsPlace() throws {
        let (loaded, based, _) = Self.pair(Self.threeNotes())
        let inserted = Self.note(3, title: "d", created: 5)
        let changes = ChangeSet(inserted: [inserted],
                                updated: [ModelUpdate(id: Self.id("Note", 0), attributes: [.init(index: 1, value: .bool(false))],
                                                      relationships: [])])
        #expect(try Self.save(changes, loaded, based, "update and insert"))
        let order = [0, 1, 2, 3].map { Self.id("Note", $0) }
        #expect(try based.rows(of: "Note").map(\.id) == order)
        #expect(try based.fetch(StoreFetchRequest(entity: "Note", resultType: .identifiers)).identifiers == order)
        // Unpinned, through the (pinned, created) index, unsorted: insertion order, not the index's.
        let unpinned = StoreFetchRequest(entity: "Note", filter: .compare(.attribute(1), .equal, .value(.bool(false))),
                                         resultType: .identifiers)
        #expect(try based.fetch(unpinned).identifiers == [0, 1, 3].map { Self.id("Note", $0) })
        #expect(try based.fetch(unpinned).plan.index == ["pinned", "created"])
        var rng = SeededGenerator(seed: 1)
        try Self.expectSame(loaded, based, known: order, rng: &rng, "after the save")
    }

    @Test("Squeezing out the holes of deleted inserted rows keeps the changed base rows found")
    func squeezeKeepsChangedBaseRows() throws {
        let (loaded, based, _) = Self.pair(Self.threeNotes())
        let touch = ChangeSet(updated: [0, 2].map {
            ModelUpdate(id: Self.id("Note", $0), attributes: [.init(index: 3, value: .int(40 + Int64($0)))],
                        relationships: [])
        })
        #expect(try Self.save(touch, loaded, based, "change base rows 0 and 2"))
        let inserted = (10..<210).map { Self.note($0, title: "n\($0)", created: $0, score: $0 % 7) }
        #expect(try Self.save(ChangeSet(inserted: inserted), loaded, based, "insert 200"))
        // 150 of the 200 inserted rows go: more than 64 holes and more than half, so the table squeezes them out.
        let gone = (10..<160).map { ModelDeletion(id: Self.id("Note", $0)) }
        #expect(try Self.save(ChangeSet(deleted: gone), loaded, based, "delete 150"))
        for n in [0, 2] {
            #expect(try based.snapshot(for: Self.id("Note", n))?.attributes[3] == .int(40 + Int64(n)), "note \(n)")
        }
        #expect(try based.snapshot(for: Self.id("Note", 1))?.attributes[3] == .int(2))
        for n in 160..<210 { #expect(try based.snapshot(for: Self.id("Note", n)) != nil, "note \(n)") }
        for n in 10..<160 { #expect(try based.snapshot(for: Self.id("Note", n)) == nil, "note \(n)") }
        let order = [0, 1, 2].map { Self.id("Note", $0) } + (160..<210).map { Self.id("Note", $0) }
        #expect(try based.fetch(StoreFetchRequest(entity: "Note", resultType: .identifiers)).identifiers == order)
        // A later change of a changed base row still finds it, and so does its deletion.
        #expect(try Self.save(ChangeSet(updated: [ModelUpdate(id: Self.id("Note", 2),
                                                                attributes: [.init(index: 3, value: .int(99))],
                                                                relationships: [])]), loaded, based, "change 2 again"))
        #expect(try Self.save(ChangeSet(deleted: [ModelDeletion(id: Self.id("Note", 0))]), loaded, based, "delete 0"))
        var rng = SeededGenerator(seed: 3)
        try Self.expectSame(loaded, based, known: order, rng: &rng, "after the squeeze")
    }

    @Test("A deleted base row is gone from index scans, unique keys and counts")
    func deletedRowIsGone() throws {
        let (loaded, based, _) = Self.pair(Self.threeNotes())
        #expect(try Self.save(ChangeSet(deleted: [ModelDeletion(id: Self.id("Note", 2))]), loaded, based, "delete"))
        let pinned = StoreFetchRequest(entity: "Note", filter: .compare(.attribute(1), .equal, .value(.bool(true))),
                                       sort: [FetchSortKey(.attribute(2), ascending: false)], limit: 5,
                                       resultType: .identifiers)
        #expect(try based.fetch(pinned).identifiers == [Self.id("Note", 0)])
        #expect(try based.fetch(pinned).plan.sortedByIndex)
        #expect(try based.identifier(entity: "Note", uniqueConstraint: 0, key: [.string("z")]) == nil)
        #expect(try based.snapshot(for: Self.id("Note", 2)) == nil)
        #expect(based.count(of: "Note") == 2)
        #expect(try based.fetch(StoreFetchRequest(entity: "Note", resultType: .count)).count == 2)
        // The freed code can be taken, and the deleted identifier inserted again.
        let again = Self.note(2, title: "c2", code: "z")
        #expect(try Self.save(ChangeSet(inserted: [again]), loaded, based, "insert again"))
        #expect(try based.identifier(entity: "Note", uniqueConstraint: 0, key: [.string("z")]) == Self.id("Note", 2))
        var rng = SeededGenerator(seed: 2)
        try Self.expectSame(loaded, based, known: (0..<3).map { Self.id("Note", $0) }, rng: &rng, "after the saves")
    }

    @Test("A unique key freed by a base row's update can be taken in the same save")
    func freedKeyTakenInTheSameSave() throws {
        let (loaded, based, _) = Self.pair(Self.threeNotes())
        // Note 0 gives "x" up; note 1 takes it, and an inserted note takes note 1's "y".
        let changes = ChangeSet(
            inserted: [Self.note(3, title: "d", code: "y")],
            updated: [ModelUpdate(id: Self.id("Note", 0), attributes: [.init(index: 4, value: .string("w"))], relationships: []),
                      ModelUpdate(id: Self.id("Note", 1), attributes: [.init(index: 4, value: .string("x"))], relationships: [])])
        #expect(try Self.save(changes, loaded, based, "swap"))
        #expect(try based.identifier(entity: "Note", uniqueConstraint: 0, key: [.string("x")]) == Self.id("Note", 1))
        #expect(try based.identifier(entity: "Note", uniqueConstraint: 0, key: [.string("y")]) == Self.id("Note", 3))
        #expect(try based.identifier(entity: "Note", uniqueConstraint: 0, key: [.string("w")]) == Self.id("Note", 0))
        // A key still held by an unchanged base row is refused, naming that row.
        let clash = ChangeSet(inserted: [Self.note(4, title: "e", code: "z")])
        #expect(throws: SaveError.uniqueConstraintViolation(entity: "Note", properties: ["code"], values: [.string("z")],
                                                            existing: Self.id("Note", 2))) {
            try based.validate(clash)
        }
    }

    /// A change set that reads base rows of both entities in validate: updates, a `.noAction` delete, unique keys.
    static func readingChanges() -> ChangeSet {
        ChangeSet(inserted: [note(7, title: "n", code: "q")],
                  updated: [ModelUpdate(id: id("Note", 1), attributes: [.init(index: 4, value: .string("x2"))],
                                        relationships: [])],
                  deleted: [ModelDeletion(id: id("Folder", 0))])
    }

    static func filedRows() -> [ModelSnapshot] {
        [folder(0, name: "inbox", rank: 1, notes: [id("Note", 0), id("Note", 2)]),
         note(0, title: "a", pinned: true, created: 10, score: 1, code: "x", folder: id("Folder", 0)),
         note(1, title: "b", created: 20, score: 2, code: "y"),
         note(2, title: "c", pinned: true, created: 30, score: 3, code: "z", folder: id("Folder", 0))]
    }

    @Test("A base read failing in validate changes nothing, and the same save then succeeds")
    func failingValidateChangesNothing() throws {
        let rows = Self.filedRows()
        for entity in ["Note", "Folder"] {
            // How many reads of this entity's base the validation makes; each of them fails in turn below.
            let probe = Self.pair(rows)
            try probe.based.validate(Self.readingChanges())
            let reads = probe.bases[entity]!.reads
            #expect(reads >= 2, "validate reads \(entity)'s base \(reads) times")
            for failing in 1...reads {
                let reference = Self.pair(rows).based
                let (_, based, _) = Self.pair(rows, failingAt: [entity: failing])
                let label = "read \(failing) of \(reads) of \(entity)'s base failed"
                #expect(performing: { try based.validate(Self.readingChanges()) }, throws: { error in
                    (error as? RowBaseFailure)?.entity == entity
                })
                var rng = SeededGenerator(seed: 3)
                try Self.expectSame(reference, based, known: rows.map(\.id), rng: &rng, label)
                // The failure was one read: validating again reads the base again and the save goes through.
                try based.validate(Self.readingChanges())
                try reference.validate(Self.readingChanges())
                based.apply(Self.readingChanges())
                reference.apply(Self.readingChanges())
                try Self.expectSame(reference, based, known: rows.map(\.id) + [Self.id("Note", 7)], rng: &rng,
                                    "\(label), then the save")
                #expect(try based.snapshot(for: Self.id("Note", 0))?.relationships[0] == .toOne(nil),
                        "the .noAction delete dropped the note's reference to the folder, \(label)")
            }
        }
    }

    @Test("A base read failing in a fetch throws it, names the entity and changes nothing", arguments: 1...4)
    func failingFetchChangesNothing(failingAt: Int) throws {
        let rows = Self.filedRows()
        let reference = Self.pair(rows).based
        let (_, based, _) = Self.pair(rows, failingAt: ["Note": failingAt])
        let requests = [
            StoreFetchRequest(entity: "Note", filter: .compare(.attribute(1), .equal, .value(.bool(true))),
                              sort: [FetchSortKey(.attribute(2), ascending: false)], limit: 1),
            StoreFetchRequest(entity: "Note"),
            StoreFetchRequest(entity: "Note", filter: .compare(.attribute(3), .greater, .value(.int(1)))),
            StoreFetchRequest(entity: "Note", sort: [FetchSortKey(.attribute(0), ascending: false)]),
        ]
        var failures = 0
        for request in requests {
            do { _ = try based.fetch(request) } catch let failure as RowBaseFailure {
                failures += 1
                #expect(failure.entity == "Note")
            }
        }
        #expect(failures == 1, "exactly the fetch that made read \(failingAt) failed")
        var rng = SeededGenerator(seed: 4)
        try Self.expectSame(reference, based, known: rows.map(\.id), rng: &rng, "after a failed fetch")
    }

    @Test("A full scan reads the base in batches; a top-N index scan reads only the rows it returns")
    func readsAreBatched() throws {
        var rows: [ModelSnapshot] = []
        for n in 0..<1000 {
            rows.append(Self.note(n, title: "t\(n)", pinned: n % 10 == 0, created: n, score: n % 7, code: "c\(n)"))
        }
        let (_, based, bases) = Self.pair(rows)
        let base = bases["Note"]!
        let all = try based.fetch(StoreFetchRequest(entity: "Note", filter: .compare(.attribute(3), .equal, .value(.int(3))) ))
        #expect(all.rows.count == rows.count { $0.attributes[3] == .int(3) })
        #expect(base.rowCalls > 0 && base.rowCalls <= 1000 / 256 + 1 + 4,
                "\(base.rowCalls) calls of rows(_:) for 1,000 rows through the score index")
        base.resetCounts()
        _ = try based.rows(of: "Note")
        #expect(base.rowCalls <= 1000 / 256 + 1, "\(base.rowCalls) calls of rows(_:) for a full scan of 1,000 rows")
        base.resetCounts()
        let top = try based.fetch(StoreFetchRequest(
            entity: "Note", filter: .compare(.attribute(1), .equal, .value(.bool(true))),
            sort: [FetchSortKey(.attribute(2), ascending: false)], limit: 20))
        #expect(top.rows.map(\.id) == (0..<20).map { Self.id("Note", 990 - 10 * $0) })
        #expect(base.rowsRead == 20, "the top 20 read \(base.rowsRead) rows")
        #expect(base.rowCalls == 1)
        // A scan that may stop early, through a filter that rejects almost every row, still reads in batches
        // that grow (from what it needs) to the full batch size.
        base.resetCounts()
        let last = try based.fetch(StoreFetchRequest(
            entity: "Note", filter: .compare(.attribute(0), .equal, .value(.string("t999"))), limit: 1))
        #expect(last.rows.map(\.id) == [Self.id("Note", 999)])
        #expect(base.rowCalls <= 10, "\(base.rowCalls) calls of rows(_:) to scan 1,000 rows for a first match")
    }
}
