import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// Issue 13, item 15: SwiftData spellings that change how results are loaded, not what they are, give the same
/// results as SwiftData's (whose unlisted properties and unprefetched relationships are faulted in when read).
@Suite("Fetching: propertiesToFetch and prefetching change no result")
struct FetchOptionsTests {
    @Test("propertiesToFetch: a property not listed still reads its stored value", arguments: StoreKind.allCases)
    func unlistedPropertiesRead(kind: StoreKind) throws {
        let container = try kind.makeContainer([NoteRecord.self])
        let writer = ModelContext(container)
        let notebook = NotebookRecord(name: "Field")
        writer.insert(notebook)
        let note = NoteRecord(title: "Heron", body: "grey, patient", tags: ["bird"], isPinned: true)
        note.notebook = notebook
        writer.insert(note)
        try writer.save()

        let reader = ModelContext(container)
        var descriptor = FetchDescriptor<NoteRecord>()
        descriptor.propertiesToFetch = [\.title]
        descriptor.relationshipKeyPathsForPrefetching = [\.notebook]
        let fetched = try #require(try reader.fetch(descriptor).first)
        withExtendedLifetime(reader) {
            #expect(fetched.title == "Heron")
            #expect(fetched.body == "grey, patient" && fetched.tags == ["bird"] && fetched.isPinned)
            #expect(fetched.notebook?.name == "Field")
        }
        #expect(try reader.fetch(descriptor).map(\.persistentModelID)
            == reader.fetch(FetchDescriptor<NoteRecord>()).map(\.persistentModelID))
    }
}
