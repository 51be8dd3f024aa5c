import Foundation
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// The store evaluates a compiled predicate exactly as Swift does.
///
/// Each run inserts a few hundred ``Specimen``s (half as many in a bounded run) with random values (nils, duplicates, negative numbers and
/// negative zero, infinities, strings that differ by case, accents, canonical equivalence and emoji), then
/// compares what `context.fetch` returns (on the compiled path: the test asserts it is not evaluated in memory)
/// with a reference computed on the model objects with `Predicate.evaluate` and `SortDescriptor.compare`, for
/// every predicate, sort order and fetch window below. Ties in the sort go by `persistentModelID`, ascending, or
/// descending when the last sort key is descending: the reference breaks them the same way.
///
/// The comparison runs three times on the same objects: after the first save; after a save of random edits,
/// deletes and inserts (so indexes are maintained, not just built); and with unsaved edits, deletes and inserts
/// pending (so the context's merge of pending changes is held to the same standard).
///
/// A failure names its seed. Replay it with `NOTEKIT_DIFFERENTIAL_SEED=<seed> swift test --filter Differential`.
/// `swift test` runs one seed on each store with 30 specimens, every predicate, sort and window on them;
/// `NOTEKIT_LONG_TESTS=1` (``LongTests``) two seeds with 180 (`NOTEKIT_DIFFERENTIAL_SPECIMENS=N` sets the number).
@Suite("Predicates: the store evaluates compiled predicates as Swift does")
struct PredicateDifferentialTests {
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["NOTEKIT_DIFFERENTIAL_SEED"], let seed = UInt64(text) {
            return [seed]
        }
        return LongTests.isEnabled ? [0x5EED_0001, 0xC0FF_EE42] : [0x5EED_0001]
    }()

    /// The specimens inserted first; the edits, deletes and inserts that follow are in proportion.
    static let specimens = LongTests.value("NOTEKIT_DIFFERENTIAL_SPECIMENS", bounded: 30, long: 180)

    @Test("Random objects: store results equal Predicate.evaluate + SortDescriptor.compare",
          arguments: StoreKind.allCases, seeds)
    func storeMatchesSwift(kind: StoreKind, seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let container = try kind.makeContainer([Specimen.self])
        let context = ModelContext(container)
        let sites = ["north", "south", "east", "west"].map(Site.init(code:))
        for site in sites { context.insert(site) }
        var live: [Specimen] = []
        let n = Self.specimens
        for _ in 0..<n {
            let specimen = Specimen()
            Self.randomize(specimen, sites: sites, rng: &rng)
            context.insert(specimen)
            live.append(specimen)
        }
        try context.save()
        let cases = Self.cases(sites: sites, specimens: live, rng: &rng)
        try compare(cases, in: context, live: live, phase: "saved", seed: seed, insertionOrdered: true)

        // Saved edits, deletes and inserts: the indexes must follow.
        for specimen in live.shuffled(using: &rng).prefix(n * 4 / 9) { Self.mutate(specimen, sites: sites, rng: &rng) }
        let doomed = Set(live.shuffled(using: &rng).prefix(n / 6).map(ObjectIdentifier.init))
        for specimen in live where doomed.contains(ObjectIdentifier(specimen)) { try context.delete(specimen) }
        live.removeAll { doomed.contains(ObjectIdentifier($0)) }
        for _ in 0..<n / 6 {
            let specimen = Specimen()
            Self.randomize(specimen, sites: sites, rng: &rng)
            context.insert(specimen)
            live.append(specimen)
        }
        try context.save()
        try compare(cases, in: context, live: live, phase: "after saved edits", seed: seed, insertionOrdered: true)

        // A second context sees the same answers from the store alone.
        let reader = ModelContext(container)
        for testCase in cases {
            for sort in Self.sorts {
                let descriptor = FetchDescriptor(predicate: testCase.predicate, sortBy: sort.descriptors)
                let mine = try context.fetchIdentifiers(descriptor)
                let theirs = try reader.fetch(descriptor).map(\.persistentModelID)
                #expect(mine == theirs, "seed \(seed), \(testCase.name), sort \(sort.name): a fresh context differs")
            }
        }

        // Unsaved edits, deletes and inserts: fetches merge them, and must still agree with Swift.
        for specimen in live.shuffled(using: &rng).prefix(n / 3) { Self.mutate(specimen, sites: sites, rng: &rng) }
        let pendingDeletes = Set(live.shuffled(using: &rng).prefix(n * 5 / 36).map(ObjectIdentifier.init))
        for specimen in live where pendingDeletes.contains(ObjectIdentifier(specimen)) { try context.delete(specimen) }
        live.removeAll { pendingDeletes.contains(ObjectIdentifier($0)) }
        for _ in 0..<n * 5 / 36 {
            let specimen = Specimen()
            Self.randomize(specimen, sites: sites, rng: &rng)
            context.insert(specimen)
            live.append(specimen)
        }
        #expect(context.hasChanges)
        try compare(cases, in: context, live: live, phase: "pending", seed: seed, insertionOrdered: false)

        // With includePendingChanges false the context answers from saved values: as a fresh context does.
        let saved = ModelContext(container)
        for testCase in cases {
            for sort in Self.sorts {
                var descriptor = FetchDescriptor(predicate: testCase.predicate, sortBy: sort.descriptors)
                let fromStore = try saved.fetchIdentifiers(descriptor)
                descriptor.includePendingChanges = false
                let ignoringPending = try context.fetchIdentifiers(descriptor)
                #expect(ignoringPending == fromStore,
                        "seed \(seed), \(testCase.name), sort \(sort.name): includePendingChanges false")
            }
        }
    }

    /// Compares every case, sort and window against the reference computed on `live`.
    ///
    /// - Parameter insertionOrdered: whether an unsorted fetch has a defined order (identifier order, which is
    ///   creation order here); with unsaved changes pending, unsorted results are compared as sets.
    private func compare(_ cases: [Case], in context: ModelContext, live: [Specimen], phase: String, seed: UInt64,
                         insertionOrdered: Bool) throws {
        for testCase in cases {
            let matching: [Specimen]
            do {
                matching = try live.filter { try testCase.predicate.evaluate($0) }
            } catch {
                Issue.record("seed \(seed), \(phase), \(testCase.name): Swift's evaluation threw \(error)")
                continue
            }
            for sort in Self.sorts {
                let reference = Self.ordered(matching, by: sort.descriptors).map(\.persistentModelID)
                let whole = FetchDescriptor(predicate: testCase.predicate, sortBy: sort.descriptors)
                let plan = try context.explain(whole)
                #expect(!plan.evaluatedInMemory,
                        "seed \(seed), \(phase), \(testCase.name), sort \(sort.name): evaluated in memory")
                for window in Self.windows {
                    var descriptor = whole
                    descriptor.fetchLimit = window.limit
                    descriptor.fetchOffset = window.offset
                    let label = "seed \(seed), \(phase), \(testCase.name), sort \(sort.name), \(window)"
                    let fetched = try context.fetch(descriptor).map(\.persistentModelID)
                    let expected = window.apply(reference)
                    if sort.descriptors.isEmpty && !insertionOrdered {
                        // No defined order: the window is some `expected.count` of the matches.
                        #expect(fetched.count == expected.count, "\(label): count")
                        #expect(Set(fetched).isSubset(of: Set(reference)), "\(label): members")
                        if window.limit == nil && window.offset == nil {
                            #expect(Set(fetched) == Set(reference), "\(label): members")
                        }
                    } else {
                        let same = fetched == expected
                        #expect(same, "\(label)\n\(Self.difference(fetched, expected, in: live))")
                    }
                    // fetchIdentifiers and fetchCount run the same plan: checked on two windows only, which keeps
                    // the test's run time reasonable in debug builds.
                    if window.offset == nil && window.limit == nil {
                        let identifiers = try context.fetchIdentifiers(descriptor)
                        #expect(identifiers == fetched, "\(label): fetchIdentifiers")
                    }
                    if window.offset == nil && window.limit == nil || window.offset == 3 {
                        let count = try context.fetchCount(descriptor)
                        #expect(count == expected.count, "\(label): fetchCount")
                    }
                }
            }
        }
    }

    // MARK: - Reference

    /// Swift's order: each sort descriptor in turn, then the identifier (descending when the last key is).
    static func ordered(_ items: [Specimen], by sort: [SortDescriptor<Specimen>]) -> [Specimen] {
        let descending = sort.last?.order == .reverse
        return items.sorted { a, b in
            for descriptor in sort {
                switch descriptor.compare(a, b) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return descending ? b.persistentModelID < a.persistentModelID : a.persistentModelID < b.persistentModelID
        }
    }

    /// A short account of the first place two results differ.
    static func difference(_ fetched: [PersistentIdentifier], _ expected: [PersistentIdentifier],
                           in live: [Specimen]) -> String {
        let byID = Dictionary(live.map { ($0.persistentModelID, $0) }, uniquingKeysWith: { a, _ in a })
        func show(_ id: PersistentIdentifier?) -> String {
            guard let id, let s = byID[id] else { return id.map { "\($0)" } ?? "none" }
            return "name=\(String(reflecting: s.name)) label=\(String(describing: s.label)) count=\(s.count) "
                + "amount=\(s.amount) weight=\(String(describing: s.weight)) flag=\(s.flag) "
                + "seen=\(s.seen.timeIntervalSinceReferenceDate) tags=\(s.tags) site=\(s.site?.code ?? "nil")"
        }
        let position = zip(fetched, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(fetched.count, expected.count)
        return "fetched \(fetched.count), expected \(expected.count); first difference at \(position): "
            + "fetched [\(show(position < fetched.count ? fetched[position] : nil))] "
            + "expected [\(show(position < expected.count ? expected[position] : nil))]"
    }

    // MARK: - Windows and sorts

    struct Window: CustomStringConvertible {
        let limit: Int?
        let offset: Int?
        func apply<T>(_ items: [T]) -> [T] { Array(items.dropFirst(offset ?? 0).prefix(limit ?? .max)) }
        var description: String { "limit \(limit.map(String.init) ?? "-") offset \(offset.map(String.init) ?? "-")" }
    }

    static let windows = [
        Window(limit: nil, offset: nil), Window(limit: 7, offset: nil), Window(limit: nil, offset: 5),
        Window(limit: 10, offset: 3), Window(limit: 5, offset: 10_000),
    ]

    struct Sort {
        let name: String
        let descriptors: [SortDescriptor<Specimen>]
    }

    static let sorts = [
        Sort(name: "none", descriptors: []),
        Sort(name: "count", descriptors: [SortDescriptor(\.count)]),
        Sort(name: "count desc", descriptors: [SortDescriptor(\.count, order: .reverse)]),
        Sort(name: "name, amount desc", descriptors: [SortDescriptor(\.name), SortDescriptor(\.amount, order: .reverse)]),
        Sort(name: "name desc", descriptors: [SortDescriptor(\.name, order: .reverse)]),
        Sort(name: "label (optional)", descriptors: [SortDescriptor(\.label)]),
        Sort(name: "weight desc (optional), seen", descriptors: [SortDescriptor(\.weight, order: .reverse),
                                                                 SortDescriptor(\.seen)]),
        Sort(name: "seen desc", descriptors: [SortDescriptor(\.seen, order: .reverse)]),
        Sort(name: "persistentModelID desc", descriptors: [SortDescriptor(\.persistentModelID, order: .reverse)]),
    ]

    // MARK: - Random values

    static let namePool = [
        "alpha", "Alpha", "ALPHA", "beta", "Beta", "café", "cafe\u{301}", "Crème brûlée", "creme brulee", "Straße",
        "STRASSE", "strasse", "naïve", "naive", "😀 smile", "🇫🇷 Paris", "Zürich", "zurich", "", " ", "10", "9", "-1",
        "ﬁsh", "\u{2126}", "\u{03A9}", "ä", "a\u{308}",
    ]
    /// Random names are built from these. A decomposed "e\u{301}" is left out on purpose: Swift 6.3.1 orders a
    /// string ending in it neither before nor after a longer precomposed one ("e\u{301}" vs "\u{E9}Z"), so no
    /// sort, Swift's included, has a single right answer (see IndexTests' canonical-equivalence test). Whole
    /// decomposed names in `namePool` still test canonical equivalence.
    static let pieces = ["a", "b", "B", "e", "é", "ß", "😀", " ", "1", "Z"]
    static let tagPool = ["x", "y", "Zürich", "zurich", ""]
    static let numberPool: [Double] = [-1.5, 0, -0.0, 2.25, 1e9, -1e-9, .infinity, -.infinity, 1.5]

    static func randomName(_ rng: inout SeededGenerator) -> String {
        if rng.chance(0.6) { return rng.pick(namePool) }
        return (0..<Int.random(in: 0...5, using: &rng)).map { _ in rng.pick(pieces) }.joined()
    }

    static func randomNumber(_ rng: inout SeededGenerator) -> Double {
        rng.chance(0.4) ? rng.pick(numberPool) : Double(Int.random(in: -100...100, using: &rng)) / 4
    }

    static func randomDate(_ rng: inout SeededGenerator) -> Date {
        Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<40, using: &rng)) * 3600)
    }

    static func randomize(_ specimen: Specimen, sites: [Site], rng: inout SeededGenerator) {
        specimen.name = randomName(&rng)
        specimen.label = rng.chance(0.35) ? nil : randomName(&rng)
        specimen.count = Int.random(in: -15...15, using: &rng)
        specimen.amount = randomNumber(&rng)
        specimen.weight = rng.chance(0.3) ? nil : randomNumber(&rng)
        specimen.flag = rng.chance(0.4)
        specimen.seen = randomDate(&rng)
        specimen.tags = tagPool.filter { _ in rng.chance(0.3) }
        specimen.site = rng.chance(0.25) ? nil : rng.pick(sites)
    }

    /// Changes one to three properties of `specimen`.
    static func mutate(_ specimen: Specimen, sites: [Site], rng: inout SeededGenerator) {
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            switch Int.random(in: 0..<9, using: &rng) {
            case 0: specimen.name = randomName(&rng)
            case 1: specimen.label = rng.chance(0.35) ? nil : randomName(&rng)
            case 2: specimen.count = Int.random(in: -15...15, using: &rng)
            case 3: specimen.amount = randomNumber(&rng)
            case 4: specimen.weight = rng.chance(0.3) ? nil : randomNumber(&rng)
            case 5: specimen.flag.toggle()
            case 6: specimen.seen = randomDate(&rng)
            case 7: specimen.tags = tagPool.filter { _ in rng.chance(0.3) }
            default: specimen.site = rng.chance(0.25) ? nil : rng.pick(sites)
            }
        }
    }

    // MARK: - Predicates

    struct Case {
        let name: String
        let predicate: Predicate<Specimen>
    }

    /// One predicate per compiled construct, with constants drawn from `rng` (and from the objects, so equality
    /// predicates have matches).
    static func cases(sites: [Site], specimens: [Specimen], rng: inout SeededGenerator) -> [Case] {
        let k = Int.random(in: -10...10, using: &rng)
        let k2 = k + Int.random(in: 1...15, using: &rng)
        let d = randomNumber(&rng)
        let w = Double(Int.random(in: -40...40, using: &rng)) / 4
        let name = rng.pick(specimens).name
        let name2 = randomName(&rng)
        let names = [name, name2, "Crème brûlée", "cafe\u{301}"]
        let counts = [k, k2, 0]
        let label = rng.pick(specimens.compactMap(\.label))
        let query = rng.pick(["a", "ph", "é", "e", "ss", "😀", "Paris", "1", " ", "ß", "l"])
        let prefix = rng.pick(["a", "A", "c", "ca", "caf", "café", "Stra", "😀", "", "1", "B"])
        let search = rng.pick(["creme", "STRASSE", "cafe", "E", "zurich", "NAIVE", "😀", "alp", "ß"])
        let tag = rng.pick(tagPool)
        let date1 = randomDate(&rng)
        let date2 = date1.addingTimeInterval(10 * 3600)
        let site = rng.pick(sites)
        let siteID = rng.pick(sites).persistentModelID
        let specimenID = rng.pick(specimens).persistentModelID
        return [
            Case(name: "count == \(k)", predicate: #Predicate { $0.count == k }),
            Case(name: "count != \(k)", predicate: #Predicate { $0.count != k }),
            Case(name: "count < \(k)", predicate: #Predicate { $0.count < k }),
            Case(name: "count <= \(k)", predicate: #Predicate { $0.count <= k }),
            Case(name: "count > \(k)", predicate: #Predicate { $0.count > k }),
            Case(name: "count >= \(k)", predicate: #Predicate { $0.count >= k }),
            Case(name: "\(k) <= count < \(k2)", predicate: #Predicate { $0.count >= k && $0.count < k2 }),
            Case(name: "\(k) < count (constant on the left)", predicate: #Predicate { k < $0.count }),
            Case(name: "amount > \(d)", predicate: #Predicate { $0.amount > d }),
            Case(name: "amount == 0 (-0.0 too)", predicate: #Predicate { $0.amount == 0 }),
            Case(name: "amount <= \(d) || flag", predicate: #Predicate { $0.amount <= d || $0.flag }),
            Case(name: "flag", predicate: #Predicate { $0.flag }),
            Case(name: "!flag", predicate: #Predicate { !$0.flag }),
            Case(name: "flag == false && seen > date1", predicate: #Predicate { $0.flag == false && $0.seen > date1 }),
            Case(name: "flag && date1 <= seen < date2",
                 predicate: #Predicate { $0.flag && $0.seen >= date1 && $0.seen < date2 }),
            Case(name: "seen == date1", predicate: #Predicate { $0.seen == date1 }),
            Case(name: "name == \(String(reflecting: name))", predicate: #Predicate { $0.name == name }),
            Case(name: "name != \(String(reflecting: name2))", predicate: #Predicate { $0.name != name2 }),
            Case(name: "name < \(String(reflecting: name2))", predicate: #Predicate { $0.name < name2 }),
            Case(name: "\"a\" <= name < \"n\"", predicate: #Predicate { $0.name >= "a" && $0.name < "n" }),
            Case(name: "name.contains(\(String(reflecting: query)))", predicate: #Predicate { $0.name.contains(query) }),
            Case(name: "name.starts(with: \(String(reflecting: prefix)))",
                 predicate: #Predicate { $0.name.starts(with: prefix) }),
            Case(name: "name.localizedStandardContains(\(String(reflecting: search)))",
                 predicate: #Predicate { $0.name.localizedStandardContains(search) }),
            Case(name: "\(names).contains(name)", predicate: #Predicate { names.contains($0.name) }),
            Case(name: "\(counts).contains(count)", predicate: #Predicate { counts.contains($0.count) }),
            Case(name: "tags.contains(\(String(reflecting: tag)))", predicate: #Predicate { $0.tags.contains(tag) }),
            Case(name: "label == nil", predicate: #Predicate { $0.label == nil }),
            Case(name: "label != nil", predicate: #Predicate { $0.label != nil }),
            Case(name: "label == \(String(reflecting: label))", predicate: #Predicate { $0.label == label }),
            Case(name: "(label ?? \"zz\") < \"m\"", predicate: #Predicate { ($0.label ?? "zz") < "m" }),
            Case(name: "(label ?? \"\").contains(\(String(reflecting: query)))",
                 predicate: #Predicate { ($0.label ?? "").contains(query) }),
            Case(name: "(weight ?? 0) > \(w)", predicate: #Predicate { ($0.weight ?? 0) > w }),
            Case(name: "weight != nil && weight! < \(w)", predicate: #Predicate { $0.weight != nil && $0.weight! < w }),
            Case(name: "weight == \(w)", predicate: #Predicate { $0.weight == w }),
            Case(name: "site == nil", predicate: #Predicate { $0.site == nil }),
            Case(name: "site == \(site.code)", predicate: #Predicate { $0.site == site }),
            Case(name: "site != nil && tags.contains(\(String(reflecting: tag)))",
                 predicate: #Predicate { $0.site != nil && $0.tags.contains(tag) }),
            Case(name: "site?.persistentModelID == siteID",
                 predicate: #Predicate { $0.site?.persistentModelID == siteID }),
            Case(name: "persistentModelID == specimenID", predicate: #Predicate { $0.persistentModelID == specimenID }),
            Case(name: "!(count > \(k) || name.starts(with: \(String(reflecting: prefix))))",
                 predicate: #Predicate { !($0.count > k || $0.name.starts(with: prefix)) }),
            Case(name: "count > 0 && amount < 0 || !flag", predicate: #Predicate { $0.count > 0 && $0.amount < 0 || !$0.flag }),
            Case(name: "true", predicate: #Predicate { _ in true }),
            Case(name: "false", predicate: #Predicate { _ in false }),
        ]
    }

    // MARK: - Known divergences, pinned down

    @Test("String.contains: the store agrees with Swift on an empty needle and on partial characters",
          arguments: StoreKind.allCases)
    func containsEdgeCases(kind: StoreKind) throws {
        let container = try kind.makeContainer([Specimen.self])
        let context = ModelContext(container)
        var all: [Specimen] = []
        for name in ["café", "cafe\u{301}", "🇫🇷🇩🇪", "", "plain"] {
            let specimen = Specimen()
            specimen.name = name
            context.insert(specimen)
            all.append(specimen)
        }
        try context.save()
        for query in ["é", "e", "🇩🇪"] {
            let predicate = #Predicate<Specimen> { $0.name.contains(query) }
            let swift = try all.filter { try predicate.evaluate($0) }.map(\.name)
            #expect(try context.fetch(FetchDescriptor(predicate: predicate)).map(\.name) == swift,
                    "contains(\(String(reflecting: query)))")
        }
        // Swift: every string contains the empty string, and a lone combining mark or regional indicator is not
        // a Character of "café" or "🇫🇷🇩🇪". The store's `String.contains` is Foundation's, which differs on both.
        for query in ["", "\u{301}", "\u{1F1E9}"] {
            let predicate = #Predicate<Specimen> { $0.name.contains(query) }
            let swift = try all.filter { try predicate.evaluate($0) }.map(\.name)
            let store = try context.fetch(FetchDescriptor(predicate: predicate)).map(\.name)
            #expect(store == swift, "contains(\(String(reflecting: query))): store \(store), Swift \(swift)")
        }
    }
}
