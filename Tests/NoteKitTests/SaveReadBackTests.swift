import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Synchronization
import Testing

final class ReadBackItem: PersistentModel {
    @Attribute var title = ""
    @Attribute var count = 0
    required init() {}
}

/// A store that forwards to another and records what a context asks of it: the results of its saves, and how
/// often rows are read by identifier. `reportsRows: false` strips the rows a save reports, as a store that does not
/// report them would return.
final class ReadBackRecordingStore: DataStore {
    let base: any DataStore
    let reportsRows: Bool
    let saves = Mutex<[SaveResult]>([])
    let rowReads = Mutex(0)

    init(base: any DataStore, reportsRows: Bool) {
        self.base = base
        self.reportsRows = reportsRows
    }

    var schema: Schema { base.schema }
    var transactionNumber: UInt64 { base.transactionNumber }
    func rows(for ids: [PersistentIdentifier]) -> [ModelSnapshot?] {
        rowReads.withLock { $0 += 1 }
        return base.rows(for: ids)
    }
    func fetch(_ request: StoreFetchRequest) throws -> StoreFetchResult { try base.fetch(request) }
    func containedIdentifiers(_ ids: [PersistentIdentifier]) -> [Bool] { base.containedIdentifiers(ids) }
    func aggregate(_ request: StoreAggregateRequest) throws -> StoreAggregateResult { try base.aggregate(request) }
    func identifier(entity: String, uniqueConstraint constraint: Int, key: [StoredValue]) -> PersistentIdentifier? {
        base.identifier(entity: entity, uniqueConstraint: constraint, key: key)
    }
    func identifiers(entity: String, relationship: Int, referencing target: PersistentIdentifier) -> [PersistentIdentifier] {
        base.identifiers(entity: entity, relationship: relationship, referencing: target)
    }
    func save(_ changes: ChangeSet) throws -> SaveResult {
        var result = try base.save(changes)
        saves.withLock { $0.append(result) }
        if !reportsRows { result.updatedRows = nil }
        return result
    }
    func history() throws -> HistoryLog { try base.history() }
    func deleteHistory(_ ranges: [ClosedRange<UInt64>]) throws { try base.deleteHistory(ranges) }
    func transactions() -> AsyncStream<HistoryRecord> { base.transactions() }
    func close() throws { try base.close() }
}

struct ReadBackRecordingConfiguration: DataStoreConfiguration {
    let kind: StoreKind
    let reportsRows: Bool
    final class Made: Sendable { let store = Mutex<ReadBackRecordingStore?>(nil) }
    let made = Made()
    var name: String { "recording \(kind)" }

    func makeStore(schema: Schema) throws -> any DataStore {
        let base: any DataStore = switch kind {
        case .inMemory: try ModelConfiguration(isStoredInMemoryOnly: true).makeStore(schema: schema)
        case .file: try FileStoreConfiguration(url: TemporaryStores.newURL()).makeStore(schema: schema)
        }
        let store = ReadBackRecordingStore(base: base, reportsRows: reportsRows)
        made.store.withLock { $0 = store }
        return store
    }
}

@Suite("A save reports the rows it left for the objects it updated")
struct SaveReadBackTests {
    /// Context A saves a title; context B saved a count of the same object in between. Returns A's object after
    /// its save, the recording store, and the rows reads A's save made.
    static func mergedSave(_ kind: StoreKind, reportsRows: Bool) throws
        -> (item: ReadBackItem, store: ReadBackRecordingStore, rowReads: Int, container: ModelContainer) {
        let configuration = ReadBackRecordingConfiguration(kind: kind, reportsRows: reportsRows)
        let container = try ModelContainer(for: Schema([ReadBackItem.self]), configurations: [configuration])
        let store = try #require(configuration.made.store.withLock { $0 })
        let a = ModelContext(container)
        let item = ReadBackItem()
        item.title = "old"
        a.insert(item)
        try a.save()
        let b = ModelContext(container)
        let other = try #require(try b.fetch(FetchDescriptor<ReadBackItem>()).first)
        other.count = 5
        try b.save()
        item.title = "new"
        let before = store.rowReads.withLock { $0 }
        try a.save()
        return (item, store, store.rowReads.withLock { $0 } - before, container)
    }

    @Test("A save returns, for each object it updated, the row the store holds right after it, another context's change merged in",
          arguments: StoreKind.allCases)
    func saveReportsMergedRows(kind: StoreKind) throws {
        let (item, store, _, container) = try Self.mergedSave(kind, reportsRows: true)
        defer { try? container.close() }
        let last = try #require(store.saves.withLock { $0.last })
        let rows = try #require(last.updatedRows)
        #expect(rows == store.base.rows(for: [item.persistentModelID]))
        let row = try #require(rows.first ?? nil)
        #expect(row.transactionNumber == last.transactionNumber)
        #expect(item.title == "new" && item.count == 5)
    }

    @Test("A context takes the saved rows from the save, reading none back; from a store that reports none, it reads them",
          arguments: StoreKind.allCases)
    func contextUsesReportedRows(kind: StoreKind) throws {
        let reported = try Self.mergedSave(kind, reportsRows: true)
        defer { try? reported.container.close() }
        #expect(reported.rowReads == 0)
        #expect(reported.item.title == "new" && reported.item.count == 5)
        let unreported = try Self.mergedSave(kind, reportsRows: false)
        defer { try? unreported.container.close() }
        #expect(unreported.rowReads == 1)
        #expect(unreported.item.title == "new" && unreported.item.count == 5)
    }
}
