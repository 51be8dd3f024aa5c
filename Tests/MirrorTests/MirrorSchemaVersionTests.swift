import Foundation
import NoteKit
import NoteKitTestSupport
import Testing
@testable import NoteKitMirror

/// Version 2.0.0 of a small app's schema.
enum MemoSchemaV200: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Memo.self] }

    final class Memo: PersistentModel {
        @Attribute var title = ""
        required init() {}
    }
}

/// Version 2.1.0 adds an attribute: an additive change within the major version.
enum MemoSchemaV210: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 1, 0) }
    static var models: [any PersistentModel.Type] { [Memo.self] }

    final class Memo: PersistentModel {
        @Attribute var title = ""
        @Attribute var mood: String?
        required init() {}
    }
}

/// Version 1.0.0 of a tagging schema: tags unique by name.
enum TagSchemaV100: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Tag.self] }

    final class Tag: PersistentModel {
        @Attribute(.unique) var name = ""
        required init() {}
    }
}

/// Version 1.1.0 adds an attribute the older version does not know.
enum TagSchemaV110: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 1, 0) }
    static var models: [any PersistentModel.Type] { [Tag.self] }

    final class Tag: PersistentModel {
        @Attribute(.unique) var name = ""
        @Attribute var emoji: String?
        required init() {}
    }
}

/// Issue 18, item 5: each device's schema version is on the server; an older device of the same major version
/// keeps writing and never drops what it does not know; one of an older major version is refused before it writes.
@Suite("Devices on different schema versions", .enabled(if: TemporaryPostgres.runsServerTests,
                                                       Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorSchemaVersionTests {
    @Test("An older device edits what it knows; the fields it does not know stay on the server and reach newer devices")
    func olderDeviceKeepsUnknownFields() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: "memos")
        let newer = try ModelContainer(for: Schema(versionedSchema: MemoSchemaV210.self),
                                       configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        let older = try ModelContainer(for: Schema(versionedSchema: MemoSchemaV200.self),
                                       configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        try newer.initializeMirrorSchema(configuration)
        // The older device initializes after the newer one: accepted, and it adds nothing.
        let olderChanges = try older.initializeMirrorSchema(configuration)
        #expect(olderChanges.tablesCreated.isEmpty && olderChanges.columnsAdded.isEmpty && olderChanges.schemaRecorded)
        let newerMirror = try StoreMirror(container: newer, configuration: configuration)
        let olderMirror = try StoreMirror(container: older, configuration: configuration)

        let context = ModelContext(newer)
        let memo = MemoSchemaV210.Memo()
        memo.title = "first"
        memo.mood = "glad"
        context.insert(memo)
        try context.save()
        try newerMirror.sync()
        try olderMirror.sync()

        let olderContext = ModelContext(older)
        let olderMemo = try #require(try olderContext.fetch(FetchDescriptor<MemoSchemaV200.Memo>()).first)
        #expect(olderMemo.title == "first")
        olderMemo.title = "edited on the older device"
        try olderContext.save()
        try olderMirror.sync()
        try newerMirror.sync()

        let merged = try #require(try ModelContext(newer).fetch(FetchDescriptor<MemoSchemaV210.Memo>()).first)
        #expect(merged.title == "edited on the older device")
        #expect(merged.mood == "glad", "the older device's edit kept the field it does not know")
        // A third device, new, gets both.
        let third = try ModelContainer(for: Schema(versionedSchema: MemoSchemaV210.self),
                                       configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        try StoreMirror(container: third, configuration: configuration).sync()
        let copy = try #require(try ModelContext(third).fetch(FetchDescriptor<MemoSchemaV210.Memo>()).first)
        #expect(copy.title == "edited on the older device" && copy.mood == "glad")
        let versions = try PostgresConnection(server.connectionString).execute(
            "SELECT major || '.' || minor || '.' || patch FROM notekit.zone_schemas ORDER BY 1", purpose: "test").values
        #expect(versions == [["2.0.0"], ["2.1.0"]], "each device's schema version is recorded")
    }

    @Test("An older device that merges two objects of one unique key keeps the fields only the newer one knows")
    func olderDeviceMergeKeepsUnknownFields() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: "tags")
        let newer = try ModelContainer(for: Schema(versionedSchema: TagSchemaV110.self),
                                       configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        let older = try ModelContainer(for: Schema(versionedSchema: TagSchemaV100.self),
                                       configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        try newer.initializeMirrorSchema(configuration)
        try older.initializeMirrorSchema(configuration)
        let newerMirror = try StoreMirror(container: newer, configuration: configuration)
        let olderMirror = try StoreMirror(container: older, configuration: configuration)

        // The older device makes the tag first; the newer one makes it later, with an emoji, and sends first.
        let olderContext = ModelContext(older)
        let first = TagSchemaV100.Tag()
        first.name = "trip"
        olderContext.insert(first)
        try olderContext.save()
        Thread.sleep(forTimeInterval: 0.01)
        let newerContext = ModelContext(newer)
        let second = TagSchemaV110.Tag()
        second.name = "trip"
        second.emoji = "🏔"
        newerContext.insert(second)
        try newerContext.save()
        try newerMirror.sync()
        // The older device's push brings the collision: it merges, over columns its schema does not have.
        try olderMirror.sync()
        try newerMirror.sync()

        let tags = try ModelContext(newer).fetch(FetchDescriptor<TagSchemaV110.Tag>())
        #expect(tags.map(\.persistentModelID) == [first.persistentModelID], "the first made survives")
        #expect(tags.first?.emoji == "🏔", "the newer device's field survived a merge the older device made")
        #expect(try ModelContext(older).fetchCount(FetchDescriptor<TagSchemaV100.Tag>()) == 1)
    }
}
