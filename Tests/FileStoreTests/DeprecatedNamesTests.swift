import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitNotes
import NoteKitTestSupport
import Testing

/// The file store's names for the last transaction number before issue 36 (item 5) still answer, as deprecated
/// forwarders, so that code written against them builds until they are removed.
@Suite("Deprecated names: the file store's last transaction number")
struct FileStoreDeprecatedNamesTests {
    @Test("The statistics, backup report and inspector forward lastTransaction, firstTransaction, objectsPerEntity")
    @available(*, deprecated)
    func lastTransactionForwarders() throws {
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models)
        let context = ModelContext(container)
        context.insert(Folder(name: "Inbox"))
        try context.save()
        let store = StoreFiles.store(container)
        #expect(store.statistics.lastTransaction == store.statistics.lastTransactionNumber)
        #expect(store.statistics.objectsPerEntity == store.statistics.rowsPerEntity)
        #expect(store.generation == 1)
        let report = try store.backup(to: TemporaryStores.newURL())
        #expect(report.lastTransaction == report.lastTransactionNumber)
        try StoreFiles.close(container)
        let inspected = try StoreInspector.statistics(at: url)
        #expect(inspected.lastTransaction == 1 && inspected.firstTransaction == inspected.firstTransactionNumber)
    }
}
