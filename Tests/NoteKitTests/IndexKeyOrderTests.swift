import Foundation
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// A model whose indexes hold keys of every form an index tree keeps: a number alone or after a boolean (held in
/// the digest), two numbers, a string, a UUID (held in an array).
final class Gauge24: PersistentModel {
    @Attribute var whole = 0
    @Attribute var real: Double = 0
    @Attribute var flag = false
    @Attribute var name = ""
    @Attribute var token = UUID()

    static var indexes: [[PartialKeyPath<Gauge24>]] {
        [[\.real], [\.flag, \.real], [\.whole, \.real], [\.whole], [\.name], [\.token]]
    }

    required init() {}
}

@Suite("Indexes: keys held without an array order and answer as before")
struct IndexKeyOrderTests {
    static let reals: [Double] = [-0.0, 0.0, 0.5, -1.5, 2, 3, 1e15, -1e300, 0x1p53, 0x1p60, .infinity, -.infinity, 5]
    static let wholes: [Int] = [0, 5, -5, 2, 1 << 53, (1 << 53) + 1, 1 << 60, -(1 << 60), .max, .min, 3]

    static func descriptors(_ gauges: [Gauge24]) -> [(String, FetchDescriptor<Gauge24>)] {
        let token = gauges[7].token, name = gauges[3].name
        var list: [(String, FetchDescriptor<Gauge24>)] = []
        for order in [SortOrder.forward, .reverse] {
            list += [
                ("real", FetchDescriptor(sortBy: [SortDescriptor(\.real, order: order)])),
                ("0 <= real < 5", FetchDescriptor(predicate: #Predicate { $0.real >= 0 && $0.real < 5 },
                                                  sortBy: [SortDescriptor(\.real, order: order)])),
                ("real == 0", FetchDescriptor(predicate: #Predicate { $0.real == 0 },
                                              sortBy: [SortDescriptor(\.real, order: order)])),
                ("flag, real > 0.5", FetchDescriptor(predicate: #Predicate { $0.flag && $0.real > 0.5 },
                                                     sortBy: [SortDescriptor(\.real, order: order)])),
                ("whole, real", FetchDescriptor(sortBy: [SortDescriptor(\.whole, order: order),
                                                         SortDescriptor(\.real, order: order)])),
                ("whole == 5, real", FetchDescriptor(predicate: #Predicate { $0.whole == 5 },
                                                     sortBy: [SortDescriptor(\.real, order: order)])),
                ("whole >= 2^53", FetchDescriptor(predicate: #Predicate { $0.whole >= 9_007_199_254_740_992 },
                                                  sortBy: [SortDescriptor(\.whole, order: order)])),
                ("name", FetchDescriptor(sortBy: [SortDescriptor(\.name, order: order)])),
                ("name < n", FetchDescriptor(predicate: #Predicate { $0.name < name },
                                             sortBy: [SortDescriptor(\.name, order: order)])),
                ("token", FetchDescriptor(predicate: #Predicate { $0.token == token })),
            ]
        }
        var limited = FetchDescriptor<Gauge24>(predicate: #Predicate { $0.flag },
                                               sortBy: [SortDescriptor(\.real, order: .reverse)])
        limited.fetchLimit = 7
        list.append(("flag, real, limit 7", limited))
        return list
    }

    static func check(_ context: ModelContext, _ label: String) throws {
        let gauges = try context.fetch(FetchDescriptor<Gauge24>())
        for (name, descriptor) in descriptors(gauges) {
            #expect(try context.explain(descriptor).index != nil, "\(label): \(name) uses an index")
            let found = try context.fetch(descriptor).map(\.persistentModelID)
            #expect(found == (try IndexTests.reference(gauges, descriptor)), "\(label): \(name)")
            if descriptor.fetchLimit == nil { #expect(try context.fetchCount(descriptor) == found.count, "\(label): \(name)") }
        }
    }

    @Test("Doubles and Ints, strings and UUIDs: index scans give Swift's order, before and after changes",
          arguments: StoreKind.allCases)
    func mixedKeysOrderAsBefore(kind: StoreKind) throws {
        let url = TemporaryStores.newURL()
        defer { try? FileManager.default.removeItem(at: url) }
        let configuration: any DataStoreConfiguration = kind == .file
            ? FileStoreConfiguration(url: url) : ModelConfiguration(isStoredInMemoryOnly: true)
        let container = try ModelContainer(for: Schema([Gauge24.self]), configurations: [configuration])
        var context = ModelContext(container)
        var rng = SeededGenerator(seed: 24)
        // Enough rows for a save's batch to bulk-load the indexes (1,024), each value many times.
        for n in 0..<1500 {
            let gauge = Gauge24()
            gauge.whole = Self.wholes[n % Self.wholes.count]
            gauge.real = Self.reals[(n / 3) % Self.reals.count]
            gauge.flag = Bool.random(using: &rng)
            gauge.name = "n\(Int.random(in: 0..<40, using: &rng))"
            context.insert(gauge)
        }
        try context.save()
        try Self.check(context, "\(kind) inserted")

        // Edits one at a time go through the tree's inserts and removes.
        let all = try context.fetch(FetchDescriptor<Gauge24>())
        for gauge in all.shuffled(using: &rng).prefix(200) {
            gauge.real = Self.reals.randomElement(using: &rng)!
            gauge.whole = Self.wholes.randomElement(using: &rng)!
        }
        for gauge in all.shuffled(using: &rng).prefix(100) { try context.delete(gauge) }
        for n in 0..<50 {
            let gauge = Gauge24()
            gauge.real = Self.reals[n % Self.reals.count]
            context.insert(gauge)
        }
        try context.save()
        try Self.check(context, "\(kind) edited")

        guard kind == .file else { return }
        try StoreFiles.close(container)
        // Reopened: replayed into the trees; then compacted, the trees' order written into the checkpoint, and
        // reopened over it.
        context = ModelContext(try ModelContainer(for: Schema([Gauge24.self]), configurations: [configuration]))
        try Self.check(context, "replayed")
        try StoreFiles.store(context.container).compact()
        try StoreFiles.close(context.container)
        context = ModelContext(try ModelContainer(for: Schema([Gauge24.self]), configurations: [configuration]))
        try Self.check(context, "over the checkpoint")
        try StoreFiles.close(context.container)
    }
}
