import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit
import NoteKitNotes

/// 1,000 saved NoteRecords with distinct creation times (one minute apart, inserted in shuffled order), of which
/// between 20 and 50 are pinned, chosen by a seeded generator.
struct NoteCorpus {
    static let seed: UInt64 = 0x1DE7_0001
    static let base = Date(timeIntervalSinceReferenceDate: 750_000_000)
    static func minute(_ n: Int) -> Date { base.addingTimeInterval(Double(n) * 60) }

    let container: ModelContainer
    let context: ModelContext
    let notes: [NoteRecord]
    var pinnedCount: Int { notes.filter(\.isPinned).count }

    init(_ kind: StoreKind, count: Int = 1000, rng: inout SeededGenerator) throws {
        container = try kind.makeContainer([NoteRecord.self])
        context = ModelContext(container)
        let pinned = Set((0..<count).shuffled(using: &rng).prefix(Int.random(in: 20...50, using: &rng)))
        var notes: [NoteRecord] = []
        for minute in (0..<count).shuffled(using: &rng) {
            let note = NoteRecord(title: "Note \(minute)", createdAt: Self.minute(minute), tags: ["t\(minute % 7)"],
                                  isPinned: pinned.contains(minute))
            context.insert(note)
            notes.append(note)
        }
        try context.save()
        self.notes = notes
    }
}

@Suite("Indexes: explain shows the index used and the records examined")
struct IndexTests {
    /// Swift's answer: filter, sort by the descriptors, ties by identifier (descending after a descending last
    /// key), then the window.
    static func reference<Model: PersistentModel>(_ models: [Model], _ descriptor: FetchDescriptor<Model>) throws
        -> [PersistentIdentifier] {
        let matching = try models.filter { try descriptor.predicate?.evaluate($0) ?? true }
        let descending = descriptor.sortBy.last?.order == .reverse
        let sorted = matching.sorted { a, b in
            for sort in descriptor.sortBy {
                switch sort.compare(a, b) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return descending ? b.persistentModelID < a.persistentModelID : a.persistentModelID < b.persistentModelID
        }
        return Array(sorted.dropFirst(descriptor.fetchOffset ?? 0).prefix(descriptor.fetchLimit ?? .max))
            .map(\.persistentModelID)
    }

    static func pinnedNewestFirst(limit: Int? = nil) -> FetchDescriptor<NoteRecord> {
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                     sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        descriptor.fetchLimit = limit
        return descriptor
    }

    @Test("Seed 001: pinned notes newest first, limit 20, read 20 entries of the (isPinned, createdAt) index",
          arguments: StoreKind.allCases)
    func pinnedWithLimit(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        #expect((20...50).contains(corpus.pinnedCount), "seed \(NoteCorpus.seed)")

        let descriptor = Self.pinnedNewestFirst(limit: 20)
        let plan = try context.explain(descriptor)
        #expect(plan.index == ["isPinned", "createdAt"])
        #expect(plan.indexEqualityPrefix == 1)
        #expect(plan.sortedByIndex)
        #expect(!plan.evaluatedInMemory)
        #expect(plan.rowsExamined == 20, "not \(corpus.notes.count): \(plan)")
        #expect(plan.rowsReturned == 20)
        #expect(try context.fetch(descriptor).map(\.persistentModelID) == Self.reference(corpus.notes, descriptor))

        // The seed's summary: the count reads the pinned range, the page reads 20.
        let summary = try FetchTests.pinnedNoteSummary(ModelContext(corpus.container), limit: 20)
        #expect(summary.total == corpus.pinnedCount)
        #expect(try summary.newest.map(\.persistentModelID) == Self.reference(corpus.notes, descriptor))
    }

    @Test("Without a limit the pinned query examines exactly the pinned notes", arguments: StoreKind.allCases)
    func pinnedWithoutLimit(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        let descriptor = Self.pinnedNewestFirst()
        let plan = try context.explain(descriptor)
        #expect(plan.index == ["isPinned", "createdAt"] && plan.sortedByIndex)
        #expect(plan.rowsExamined == corpus.pinnedCount)
        #expect(plan.rowsReturned == corpus.pinnedCount)
        #expect(try context.fetch(descriptor).map(\.persistentModelID) == Self.reference(corpus.notes, descriptor))
        #expect(try context.fetchCount(descriptor) == corpus.pinnedCount)

        // A window stops the ordered scan at offset + limit.
        var window = descriptor
        window.fetchOffset = 5
        window.fetchLimit = 10
        #expect(try context.explain(window).rowsExamined == 15)
        #expect(try context.fetch(window).map(\.persistentModelID) == Self.reference(corpus.notes, window))

        // The unpinned notes are the other range of the same index.
        let unpinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned == false })
        let unpinnedPlan = try context.explain(unpinned)
        #expect(unpinnedPlan.index == ["isPinned", "createdAt"])
        #expect(unpinnedPlan.rowsExamined == corpus.notes.count - corpus.pinnedCount)
    }

    @Test("A range on createdAt reads only the matches from the createdAt index", arguments: StoreKind.allCases)
    func createdAtRange(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        let d = NoteCorpus.minute(900), lower = NoteCorpus.minute(250), upper = NoteCorpus.minute(300)
        let cases: [(String, Predicate<NoteRecord>, Int)] = [
            ("createdAt > d", #Predicate { $0.createdAt > d }, 99),
            ("createdAt >= d", #Predicate { $0.createdAt >= d }, 100),
            ("createdAt < lower", #Predicate { $0.createdAt < lower }, 250),
            ("createdAt <= lower", #Predicate { $0.createdAt <= lower }, 251),
            ("lower <= createdAt < upper", #Predicate { $0.createdAt >= lower && $0.createdAt < upper }, 50),
            ("constant on the left", #Predicate { d < $0.createdAt }, 99),
            ("the tighter of two lower bounds", #Predicate { $0.createdAt > lower && $0.createdAt > d }, 99),
            ("an empty range", #Predicate { $0.createdAt > d && $0.createdAt < lower }, 0),
        ]
        for (name, predicate, matches) in cases {
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.createdAt)])
            let plan = try context.explain(descriptor)
            #expect(plan.index == ["createdAt"], "\(name): \(plan)")
            #expect(plan.indexRange, "\(name)")
            #expect(plan.sortedByIndex, "\(name)")
            #expect(plan.rowsExamined == matches, "\(name): \(plan)")
            #expect(plan.rowsReturned == matches, "\(name)")
            #expect(try context.fetch(descriptor).map(\.persistentModelID) == Self.reference(corpus.notes, descriptor),
                    "\(name)")
        }

        // Newest first with a limit: a reversed range scan that stops after five.
        var newest = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.createdAt < upper },
                                                 sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        newest.fetchLimit = 5
        let plan = try context.explain(newest)
        #expect(plan.index == ["createdAt"] && plan.indexRange && plan.sortedByIndex)
        #expect(plan.rowsExamined == 5)
        #expect(try context.fetch(newest).map(\.title) == ["Note 299", "Note 298", "Note 297", "Note 296", "Note 295"])

        // No predicate, sorted by createdAt: the index gives the order, and a limit stops the scan.
        var oldest = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt)])
        oldest.fetchLimit = 3
        let oldestPlan = try context.explain(oldest)
        #expect(oldestPlan.index == ["createdAt"] && oldestPlan.sortedByIndex && !oldestPlan.indexRange)
        #expect(oldestPlan.rowsExamined == 3)
        #expect(try context.fetch(oldest).map(\.title) == ["Note 0", "Note 1", "Note 2"])
    }

    @Test("Equality on isPinned and a range on createdAt use both index attributes", arguments: StoreKind.allCases)
    func equalityAndRange(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        let d = NoteCorpus.minute(500)
        let cases: [(String, Predicate<NoteRecord>)] = [
            ("isPinned && createdAt > d", #Predicate { $0.isPinned && $0.createdAt > d }),
            ("isPinned == false && createdAt < d", #Predicate { $0.isPinned == false && $0.createdAt < d }),
            ("createdAt >= d && isPinned == true (order of terms)", #Predicate { $0.createdAt >= d && $0.isPinned == true }),
        ]
        for (name, predicate) in cases {
            let descriptor = FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
            let expected = try Self.reference(corpus.notes, descriptor)
            #expect(!expected.isEmpty, "\(name): the seed gives matches")
            let plan = try context.explain(descriptor)
            #expect(plan.index == ["isPinned", "createdAt"], "\(name): \(plan)")
            #expect(plan.indexEqualityPrefix == 1, "\(name)")
            #expect(plan.indexRange, "\(name)")
            #expect(plan.sortedByIndex, "\(name)")
            #expect(plan.rowsExamined == expected.count, "\(name): \(plan)")
            #expect(try context.fetch(descriptor).map(\.persistentModelID) == expected, "\(name)")
        }
    }

    @Test("A predicate on an unindexed attribute is a full scan", arguments: StoreKind.allCases)
    func unindexedFullScan(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        let cases: [(String, Predicate<NoteRecord>)] = [
            ("title ==", #Predicate { $0.title == "Note 17" }),
            ("tags.contains", #Predicate { $0.tags.contains("t3") }),
            ("latitude == nil", #Predicate { $0.latitude == nil }),
            ("isPinned || title == … (a disjunction)", #Predicate { $0.isPinned || $0.title == "Note 3" }),
        ]
        for (name, predicate) in cases {
            let descriptor = FetchDescriptor(predicate: predicate)
            let plan = try context.explain(descriptor)
            #expect(plan.index == nil, "\(name): \(plan)")
            #expect(!plan.evaluatedInMemory, "\(name)")
            #expect(plan.rowsExamined == corpus.notes.count, "\(name)")
            #expect(Set(try context.fetch(descriptor).map(\.persistentModelID))
                    == Set(try Self.reference(corpus.notes, descriptor)), "\(name)")
        }
        // A negated Boolean attribute is an equality on the other value, which the index answers.
        let unpinned = FetchDescriptor<NoteRecord>(predicate: #Predicate { !$0.isPinned })
        let unpinnedPlan = try context.explain(unpinned)
        #expect(unpinnedPlan.index == ["isPinned", "createdAt"] && unpinnedPlan.indexEqualityPrefix == 1)
        #expect(unpinnedPlan.rowsExamined == corpus.notes.filter { !$0.isPinned }.count)
        #expect(Set(try context.fetch(unpinned).map(\.persistentModelID)) == Set(try Self.reference(corpus.notes, unpinned)))

        // A sort no index delivers scans everything too, even with a limit.
        var byTitle = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title)])
        byTitle.fetchLimit = 3
        let plan = try context.explain(byTitle)
        #expect(plan.index == nil && plan.rowsExamined == corpus.notes.count)
        #expect(try context.fetch(byTitle).map(\.title) == ["Note 0", "Note 1", "Note 10"])
    }

    @Test("Indexes follow saved edits, deletes and inserts", arguments: StoreKind.allCases)
    func indexesFollowChanges(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed ^ 0xC4A6)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let writer = corpus.context
        var live = corpus.notes
        let d = NoteCorpus.minute(400)
        let descriptors = [
            Self.pinnedNewestFirst(limit: 20),
            Self.pinnedNewestFirst(),
            FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.createdAt > d }, sortBy: [SortDescriptor(\.createdAt)]),
            FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned == false && $0.createdAt <= d },
                                        sortBy: [SortDescriptor(\.createdAt, order: .reverse)]),
        ]
        for round in 0..<4 {
            // Pin and unpin, move in time (duplicates of createdAt included), delete, insert.
            for note in live.shuffled(using: &rng).prefix(60) { note.isPinned.toggle() }
            for note in live.shuffled(using: &rng).prefix(80) {
                note.createdAt = NoteCorpus.minute(Int.random(in: -50...1100, using: &rng))
            }
            for note in live.shuffled(using: &rng).prefix(30) {
                note.isPinned = true
                note.createdAt = NoteCorpus.minute(Int.random(in: 0...1000, using: &rng))
            }
            // Round 2 deletes most notes, so the store compacts the holes they leave.
            let doomed = Set(live.shuffled(using: &rng).prefix(round == 2 ? 600 : 50).map(ObjectIdentifier.init))
            for note in live where doomed.contains(ObjectIdentifier(note)) { try writer.delete(note) }
            live.removeAll { doomed.contains(ObjectIdentifier($0)) }
            for n in 0..<40 {
                let note = NoteRecord(title: "New \(round).\(n)", createdAt: NoteCorpus.minute(Int.random(in: 0...1000, using: &rng)),
                                      isPinned: rng.chance(0.3))
                writer.insert(note)
                live.append(note)
            }
            try writer.save()

            let reader = ModelContext(corpus.container)
            let everything = try reader.fetch(FetchDescriptor<NoteRecord>())
            #expect(everything.count == live.count, "round \(round)")
            for (number, descriptor) in descriptors.enumerated() {
                let label = "seed \(NoteCorpus.seed ^ 0xC4A6), round \(round), descriptor \(number)"
                let expected = try Self.reference(everything, descriptor)
                #expect(try reader.fetch(descriptor).map(\.persistentModelID) == expected, "\(label): fresh context")
                #expect(try writer.fetch(descriptor).map(\.persistentModelID) == expected, "\(label): writer")
                #expect(try Self.reference(live, descriptor) == expected, "\(label): the writer's objects agree")
                let plan = try reader.explain(descriptor)
                #expect(plan.index != nil, "\(label): \(plan)")
                #expect(plan.rowsExamined == expected.count, "\(label): reads only what it returns: \(plan)")
            }
            let pinnedPlan = try reader.explain(Self.pinnedNewestFirst(limit: 20))
            #expect(pinnedPlan.index == ["isPinned", "createdAt"] && pinnedPlan.sortedByIndex, "round \(round)")
            #expect(pinnedPlan.rowsExamined == min(20, live.filter(\.isPinned).count), "round \(round)")
        }
    }

    @Test("Index results equal the results of evaluating the same descriptor on the objects",
          arguments: StoreKind.allCases)
    func indexEqualsFullScan(kind: StoreKind) throws {
        var rng = SeededGenerator(seed: NoteCorpus.seed)
        let corpus = try NoteCorpus(kind, rng: &rng)
        let context = corpus.context
        let d = NoteCorpus.minute(333), e = NoteCorpus.minute(777)
        // Each predicate twice: as written (compiled, indexed), and with `tagCount >= 0`, which is always true
        // but reads a computed property, so it cannot be compiled, so the whole fetch runs on the objects.
        let pairs: [(String, Predicate<NoteRecord>, Predicate<NoteRecord>)] = [
            ("isPinned", #Predicate { $0.isPinned }, #Predicate { $0.isPinned && $0.tagCount >= 0 }),
            ("createdAt > d", #Predicate { $0.createdAt > d }, #Predicate { $0.createdAt > d && $0.tagCount >= 0 }),
            ("d <= createdAt <= e", #Predicate { $0.createdAt >= d && $0.createdAt <= e },
             #Predicate { $0.createdAt >= d && $0.createdAt <= e && $0.tagCount >= 0 }),
            ("!isPinned && createdAt < e", #Predicate { $0.isPinned == false && $0.createdAt < e },
             #Predicate { $0.isPinned == false && $0.createdAt < e && $0.tagCount >= 0 }),
            ("isPinned && createdAt > d && tag", #Predicate { $0.isPinned && $0.createdAt > d && $0.tags.contains("t1") },
             #Predicate { $0.isPinned && $0.createdAt > d && $0.tags.contains("t1") && $0.tagCount >= 0 }),
        ]
        let sorts: [[SortDescriptor<NoteRecord>]] = [
            [SortDescriptor(\.createdAt)], [SortDescriptor(\.createdAt, order: .reverse)],
            [SortDescriptor(\.title)],
        ]
        let windows: [(Int?, Int?)] = [(nil, nil), (20, nil), (7, 3), (nil, 12)]
        // Bounded, each predicate and sort pair gets two of the windows, turning, so that every window still meets
        // every predicate and every sort; NOTEKIT_LONG_TESTS=1 tries every combination.
        func windowsFor(_ pair: Int, _ sort: Int) -> [(Int?, Int?)] {
            LongTests.isEnabled ? windows : [windows[(pair + sort) % 4], windows[(pair + sort + 2) % 4]]
        }
        for (pairNumber, (name, indexed, inMemory)) in pairs.enumerated() {
            for (sortNumber, sort) in sorts.enumerated() {
                for (limit, offset) in windowsFor(pairNumber, sortNumber) {
                    var fast = FetchDescriptor(predicate: indexed, sortBy: sort)
                    var slow = FetchDescriptor(predicate: inMemory, sortBy: sort)
                    (fast.fetchLimit, fast.fetchOffset, slow.fetchLimit, slow.fetchOffset) = (limit, offset, limit, offset)
                    let label = "\(name), sort \(sort.map { "\($0.order)" }), limit \(String(describing: limit)), "
                        + "offset \(String(describing: offset))"
                    #expect(try !context.explain(fast).evaluatedInMemory, "\(label)")
                    #expect(try context.explain(slow).evaluatedInMemory, "\(label)")
                    let fastIDs = try context.fetch(fast).map(\.persistentModelID)
                    #expect(fastIDs == (try context.fetch(slow).map(\.persistentModelID)), "\(label)")
                    #expect(try context.fetchCount(fast) == context.fetchCount(slow), "\(label)")
                }
            }
            let plan = try context.explain(FetchDescriptor(predicate: indexed))
            #expect(plan.index != nil, "\(name) uses an index: \(plan)")
        }
    }

    @Test("Canonically equivalent strings: an index lookup finds every match", arguments: StoreKind.allCases)
    func canonicalEquivalenceInIndex(kind: StoreKind) throws {
        let container = try kind.makeContainer([Specimen.self])
        let context = ModelContext(container)
        // "éZ", "éé", "e\u{301}" (decomposed é), "Zé": Swift's String `<` orders neither "e\u{301}" before "éZ"
        // nor after it, yet they are not equal, so an index ordered by it cannot be searched reliably.
        for name in ["\u{E9}Z", "\u{E9}\u{E9}", "e\u{301}", "Z\u{E9}"] {
            let specimen = Specimen()
            specimen.name = name
            context.insert(specimen)
        }
        try context.save()
        let query = "\u{E9}Z"
        let descriptor = FetchDescriptor<Specimen>(predicate: #Predicate { $0.name == query })
        #expect(try context.explain(descriptor).index == ["name"])
        let found = try context.fetchCount(descriptor)
        #expect(found == 1, "the name index misses \"éZ\"")
        withKnownIssue("TOOLCHAIN: Swift 6.3.1's String comparison is inconsistent for a decomposed prefix") {
            let a = "e\u{301}", b = "\u{E9}Z"
            #expect(a < b || b < a || a == b)
        }
    }
}
