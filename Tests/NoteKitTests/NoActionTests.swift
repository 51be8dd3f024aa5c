import Foundation
import NoteKitFileStore
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 13, item 4: after a `.noAction` delete, reading a relationship and a predicate on it agree (the deleted
/// object is gone from both), before and after reopening the store.
@Suite("Delete rules: .noAction reads the same through a property and a predicate")
struct NoActionTests {
    /// Two filed sheets and an unfiled one; the drawer (rule `.noAction`) deleted and saved.
    private func drawerDeleted(_ container: ModelContainer) throws -> (ModelContext, [Sheet]) {
        let context = ModelContext(container)
        let drawer = Drawer(name: "Top")
        context.insert(drawer)
        let filed = [Sheet(title: "a"), Sheet(title: "b")]
        drawer.sheets = filed
        context.insert(Sheet(title: "c"))
        try context.save()
        try context.delete(drawer)
        #expect(filed.allSatisfy { !$0.hasChanges }, "noAction does not touch the sheets")
        try context.save()
        return (context, filed)
    }

    private func check(_ container: ModelContainer, _ label: Comment) throws {
        let reader = ModelContext(container)
        let all = try reader.fetch(FetchDescriptor<Sheet>(sortBy: [SortDescriptor(\.title)]))
        let unfiled = try reader.fetch(FetchDescriptor<Sheet>(predicate: #Predicate { $0.drawer == nil },
                                                              sortBy: [SortDescriptor(\.title)]))
        let filed = try reader.fetchCount(FetchDescriptor<Sheet>(predicate: #Predicate { $0.drawer != nil }))
        withExtendedLifetime(reader) {
            #expect(all.map { $0.drawer == nil } == [true, true, true], label)
            #expect(unfiled.map(\.title) == ["a", "b", "c"], label)
            #expect(filed == 0, label)
        }
    }

    @Test(".noAction: a sheet of a deleted drawer reads nil and matches `drawer == nil`", arguments: StoreKind.allCases)
    func propertyAndPredicateAgree(kind: StoreKind) throws {
        let container = try kind.makeContainer([Drawer.self])
        let (context, filed) = try drawerDeleted(container)
        withExtendedLifetime(context) {
            #expect(filed.allSatisfy { $0.drawer == nil }, "the saving context's own objects")
        }
        try check(container, "after the save")
    }

    @Test(".noAction: property and predicate still agree after the file store reopens")
    func agreeAfterReopen() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(url, [Drawer.self])
            _ = try drawerDeleted(container)
            try StoreFiles.close(container)
        }
        let reopened = try StoreFiles.open(url, [Drawer.self])
        try check(reopened, "after reopening")
        try StoreFiles.close(reopened)
        // Compaction writes rows as the store holds them: still the same answers.
        let compacted = try StoreFiles.open(url, [Drawer.self])
        try StoreFiles.store(compacted).compact()
        try StoreFiles.close(compacted)
        try check(try StoreFiles.open(url, [Drawer.self]), "after compacting")
        #expect(try StoreVerifier.verify(at: url).ok)
    }

    @Test(".noAction on a to-many inverse: the deleted object is not counted", arguments: StoreKind.allCases)
    func toManyCount(kind: StoreKind) throws {
        let container = try kind.makeContainer([Warehouse.self])
        let context = ModelContext(container)
        let bin = Bin(code: "b1")
        let tag = Tag(name: "fragile")
        context.insert(bin)
        bin.tags = [tag]
        try context.save()
        try context.delete(bin)
        try context.save()
        #expect(tag.bins.isEmpty)
        let reader = ModelContext(container)
        let bare = try reader.fetchCount(FetchDescriptor<Tag>(predicate: #Predicate { $0.bins.count == 0 }))
        #expect(bare == 1)
        let row = try #require(container.store.rows(for: [tag.persistentModelID]).first ?? nil)
        #expect(row.relationships[0].identifiers.isEmpty, "the store no longer lists the deleted bin either")
    }
}
