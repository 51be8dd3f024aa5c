import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Seed 003's schema change for version 2, ported to NoteKit's declarations: V1 shipped Note { title, body,
/// createdAt }; V2 renames body to content, adds isPinned and tags, and a Tag whose name is unique.
enum TutorialSchemas {
    enum SchemaV1: VersionedSchema {
        static let versionIdentifier = Schema.Version(1, 0, 0)
        static var models: [any PersistentModel.Type] { [Note.self] }

        final class Note: PersistentModel {
            @Attribute var title = ""
            @Attribute var body = ""
            @Attribute var createdAt = Date.now
            required init() {}
            convenience init(title: String, body: String, createdAt: Date) {
                self.init()
                self.title = title; self.body = body; self.createdAt = createdAt
            }
        }
    }

    enum SchemaV2: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [Note.self, Tag.self] }

        final class Note: PersistentModel {
            @Attribute var title = ""
            @Attribute(originalName: "body") var content = ""
            @Attribute var createdAt = Date.now
            @Attribute var isPinned = false
            @Relationship var tags: [Tag] = []
            required init() {}
            convenience init(title: String, content: String, createdAt: Date) {
                self.init()
                self.title = title; self.content = content; self.createdAt = createdAt
            }
        }

        final class Tag: PersistentModel {
            @Attribute(.unique) var name = ""
            required init() {}
            convenience init(name: String) {
                self.init()
                self.name = name
            }
        }
    }

    enum NotesMigrationPlan: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [SchemaV1.self, SchemaV2.self] }
        static var stages: [MigrationStage] {
            [.lightweight(fromVersion: SchemaV1.self, toVersion: SchemaV2.self)]
        }
    }
}

/// Unversioned model lists of one entity, Card: `Later` adds an optional attribute, `WithoutBack` removes one.
enum ListSchemas {
    /// What the tests write into a card store.
    protocol CardModel: AnyObject {
        var front: String { get set }
        var back: String { get set }
    }

    final class Card: PersistentModel, CardModel {
        @Attribute var front = ""
        @Attribute var back = ""
        required init() {}
    }

    enum Later {
        final class Card: PersistentModel, CardModel {
            @Attribute var front = ""
            @Attribute var back = ""
            @Attribute var hint: String?
            required init() {}
        }
    }

    enum WithoutBack {
        final class Card: PersistentModel {
            @Attribute var front = ""
            required init() {}
        }
    }

    /// Version 2 of the cards: the same entity without `back`, declared on purpose.
    enum VersionTwoWithoutBack: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [WithoutBack.Card.self] }
    }

    /// Version 2 of the cards with `hint`.
    enum VersionTwoLater: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [Later.Card.self] }
    }
}

/// ShelfV1's models at 2.0.0: a version that changes data only, through a custom stage.
enum ShelfDataOnly: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [ShelfV1.Item.self] }
}

/// ShelfV1 → ShelfDataOnly: multiplies every count by ten.
enum ShelfDataOnlyPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfDataOnly.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ShelfV1.self, toVersion: ShelfDataOnly.self) { context in
            for item in try context.fetch(FetchDescriptor<ShelfV1.Item>()) { item.count *= 10 }
        }]
    }
}

/// The SHA-256 of every file under `url`, by relative path: what "the store's bytes are unchanged" compares.
func fileHashes(_ url: URL) -> [String: String] {
    StoreFiles.contents(of: url).mapValues { SHA256Digest.hexString($0) }
}

extension StoreKind {
    /// A configuration of this kind of store in a fresh place.
    fileprivate func freshConfiguration() -> any DataStoreConfiguration {
        switch self {
        case .inMemory: ModelConfiguration(isStoredInMemoryOnly: true)
        case .file: FileStoreConfiguration(url: TemporaryStores.newURL())
        }
    }
}

@Suite("Schema versions: a plan's models take the plan's version; an older schema never migrates a store backwards")
struct PlanVersionTests {
    typealias V1 = TutorialSchemas.SchemaV1
    typealias V2 = TutorialSchemas.SchemaV2

    /// A store the V2 app created with its plan (seed 003's container), holding one note without tags.
    private func v2Store() throws -> URL {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: V2.Note.self, V2.Tag.self,
                                           migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                           configurations: FileStoreConfiguration(url: url))
        let context = ModelContext(container)
        context.insert(V2.Note(title: "Groceries", content: "milk, eggs", createdAt: Date(timeIntervalSince1970: 0)))
        try context.save()
        try StoreFiles.close(container)
        return url
    }

    @Test("A container given a plan records the version of the plan's schema its models belong to",
          arguments: StoreKind.allCases)
    func planVersionRecorded(kind: StoreKind) throws {
        let configuration = kind.freshConfiguration()
        let container = try ModelContainer(for: V2.Note.self, V2.Tag.self,
                                           migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                           configurations: configuration)
        #expect(container.schema.version == Schema.Version(2, 0, 0))
        #expect(container.store.schema.version == Schema.Version(2, 0, 0))
        if let file = configuration as? FileStoreConfiguration {
            try StoreFiles.close(container)
            #expect(try StoreInspector.schemaHistory(at: file.url).map(\.version) == [Schema.Version(2, 0, 0)])
        }
    }

    @Test("The V1 app opening a V2 store with the plan is refused as older, and the store's bytes are unchanged")
    func olderAppWithPlan() throws {
        let url = try v2Store()
        let before = fileHashes(url)
        #expect(throws: MigrationError.storeIsNewer(stored: Schema.Version(2, 0, 0), current: Schema.Version(1, 0, 0))) {
            _ = try ModelContainer(for: V1.Note.self, migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                   configurations: FileStoreConfiguration(url: url))
        }
        #expect(fileHashes(url) == before)
    }

    @Test("The V1 app opening a V2 store with Schema(versionedSchema:) is refused as older, bytes unchanged")
    func olderAppWithVersionedSchema() throws {
        let url = try v2Store()
        let before = fileHashes(url)
        #expect(throws: MigrationError.storeIsNewer(stored: Schema.Version(2, 0, 0), current: Schema.Version(1, 0, 0))) {
            _ = try ModelContainer(for: Schema(versionedSchema: V1.self),
                                   configurations: [FileStoreConfiguration(url: url)])
        }
        #expect(fileHashes(url) == before)
        // The V2 app still finds its note's content.
        let container = try ModelContainer(for: V2.Note.self, V2.Tag.self,
                                           migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                           configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(container).fetch(FetchDescriptor<V2.Note>()).map(\.content) == ["milk, eggs"])
    }

    @Test("The V1 models as a plain list opening a V2 store are refused before dropping content, bytes unchanged")
    func olderAppAsModelList() throws {
        let url = try v2Store()
        let before = fileHashes(url)
        do {
            _ = try ModelContainer(for: V1.Note.self, configurations: FileStoreConfiguration(url: url))
            Issue.record("a model list that would drop stored content must be refused")
        } catch let error as MigrationError {
            #expect("\(error)".contains("content"), "the message names what would be lost: \(error)")
            #expect("\(error)".contains("VersionedSchema"), "and says how to remove it on purpose: \(error)")
        }
        #expect(fileHashes(url) == before)
    }

    @Test("A stage between two versions with the same models runs once, and the store records the new version")
    func dataOnlyStage() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(container)
            let item = ShelfV1.Item()
            item.count = 3
            context.insert(item)
            try context.save()
            try StoreFiles.close(container)
        }
        for _ in 1...2 {
            let container = try ModelContainer(for: ShelfV1.Item.self, migrationPlan: ShelfDataOnlyPlan.self,
                                               configurations: FileStoreConfiguration(url: url))
            #expect(container.schema.version == Schema.Version(2, 0, 0))
            #expect(try ModelContext(container).fetch(FetchDescriptor<ShelfV1.Item>()).map(\.count) == [30])
            try StoreFiles.close(container)
        }
        #expect(try StoreInspector.schemaHistory(at: url).map(\.version)
                    == [Schema.Version(1, 0, 0), Schema.Version(2, 0, 0)])
        // The V1 app is now older than the store, though its models are the same.
        #expect(throws: MigrationError.storeIsNewer(stored: Schema.Version(2, 0, 0), current: Schema.Version(1, 0, 0))) {
            _ = try ModelContainer(for: Schema(versionedSchema: ShelfV1.self),
                                   configurations: [FileStoreConfiguration(url: url)])
        }
    }

    @Test("Seed 003's plan migrates a V1 store to 2.0.0, keeping every body as content")
    func planMigratesForward() throws {
        let url = TemporaryStores.newURL()
        do {
            let container = try ModelContainer(for: V1.Note.self, migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                               configurations: FileStoreConfiguration(url: url))
            #expect(container.schema.version == Schema.Version(1, 0, 0))
            let context = ModelContext(container)
            context.insert(V1.Note(title: "Groceries", body: "milk, eggs", createdAt: Date(timeIntervalSince1970: 0)))
            try context.save()
            try StoreFiles.close(container)
        }
        let container = try ModelContainer(for: V2.Note.self, V2.Tag.self,
                                           migrationPlan: TutorialSchemas.NotesMigrationPlan.self,
                                           configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(container).fetch(FetchDescriptor<V2.Note>()).map(\.content) == ["milk, eggs"])
        try StoreFiles.close(container)
        #expect(try StoreInspector.schemaHistory(at: url).map(\.version)
                    == [Schema.Version(1, 0, 0), Schema.Version(2, 0, 0)])
    }
}

@Suite("Schema versions: an unversioned model list is ordered by the store's schema history")
struct ModelListVersionTests {
    typealias Card = ListSchemas.Card

    /// A store written by `type`'s model list (or, with `version`, by a schema of that version), holding one card.
    private func cardStore<C: PersistentModel & ListSchemas.CardModel>(_ type: C.Type,
                                                                       version: Schema.Version? = nil) throws -> URL {
        let url = TemporaryStores.newURL()
        let schema = try version.map { try Schema([type], version: $0) } ?? Schema([type])
        let container = try ModelContainer(for: schema, configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        let card = C()
        card.front = "hola"
        card.back = "hello"
        context.insert(card)
        try context.save()
        try StoreFiles.close(container)
        return url
    }

    @Test("A model list with a forward lightweight change opens a store of any version and carries its version on")
    func forwardUnderModelList() throws {
        let url = try cardStore(Card.self, version: Schema.Version(2, 0, 0))
        let container = try ModelContainer(for: ListSchemas.Later.Card.self,
                                           configurations: FileStoreConfiguration(url: url))
        let cards = try ModelContext(container).fetch(FetchDescriptor<ListSchemas.Later.Card>())
        #expect(cards.map(\.back) == ["hello"] && cards.map(\.hint) == [nil])
        #expect(container.schema.version == Schema.Version(2, 0, 0), "the list carries the store's version on")
        try StoreFiles.close(container)
        let history = try StoreInspector.schemaHistory(at: url)
        #expect(history.map(\.version) == [Schema.Version(2, 0, 0), Schema.Version(2, 0, 0)])
        #expect(history.last?.contentHash == (try Schema([ListSchemas.Later.Card.self])).contentHash)
    }

    @Test("A model list with the store's latest hash opens it and writes nothing")
    func sameHashWritesNothing() throws {
        let url = try cardStore(Card.self, version: Schema.Version(3, 0, 0))
        let before = fileHashes(url)
        let container = try ModelContainer(for: Card.self, configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Card>()) == 1)
        #expect(container.schema.version == Schema.Version(3, 0, 0))
        try StoreFiles.close(container)
        #expect(fileHashes(url) == before)
    }

    @Test("A model list whose hash is an older schema of the store's history is refused as a downgrade, bytes unchanged")
    func downgradeUnderModelList() throws {
        let url = try cardStore(Card.self)
        try StoreFiles.close(try ModelContainer(for: ListSchemas.Later.Card.self,
                                                configurations: FileStoreConfiguration(url: url)))
        let before = fileHashes(url)
        do {
            _ = try ModelContainer(for: Card.self, configurations: FileStoreConfiguration(url: url))
            Issue.record("an older model list must not migrate the store backwards")
        } catch let error as MigrationError {
            guard case .schemaIsOlderThanStore = error else {
                Issue.record("expected schemaIsOlderThanStore, got \(error)")
                return
            }
            #expect("\(error)".contains("left untouched"))
        }
        #expect(fileHashes(url) == before)
    }

    @Test("A model list that would drop stored values is refused and says to declare a higher VersionedSchema")
    func destructiveUnderModelList() throws {
        let url = try cardStore(Card.self, version: Schema.Version(2, 0, 0))
        let before = fileHashes(url)
        do {
            _ = try ModelContainer(for: ListSchemas.WithoutBack.Card.self,
                                   configurations: FileStoreConfiguration(url: url))
            Issue.record("removing an attribute that holds values needs a declared version")
        } catch MigrationError.refused(let diff) {
            let refusal = try #require(diff.refusals.first)
            #expect(refusal.entity == "Card")
            #expect(refusal.change.contains("back"))
            #expect(refusal.refusal?.contains("VersionedSchema with a version higher than 2.0.0") == true)
        }
        #expect(fileHashes(url) == before)
        // Declared on purpose, with a higher version, the removal is made.
        let container = try ModelContainer(for: Schema(versionedSchema: ListSchemas.VersionTwoWithoutBack.self),
                                           configurations: [FileStoreConfiguration(url: try cardStore(Card.self))])
        #expect(try ModelContext(container).fetch(FetchDescriptor<ListSchemas.WithoutBack.Card>()).map(\.front)
                    == ["hola"])
    }

    @Test("A model list may remove an attribute that holds no value")
    func removingEmptyAttribute() throws {
        let url = try cardStore(ListSchemas.Later.Card.self)
        let container = try ModelContainer(for: Card.self, migrationPlan: nil,
                                           configurations: FileStoreConfiguration(url: url))
        #expect(try ModelContext(container).fetch(FetchDescriptor<Card>()).map(\.back) == ["hello"])
    }

    @Test("A versioned schema at the store's number is ordered by hash: an older one is refused, a new one loses nothing")
    func equalVersionOrderedByHash() throws {
        let url = try cardStore(Card.self, version: Schema.Version(2, 0, 0))
        // A model list moves the store on, at 2.0.0.
        try StoreFiles.close(try ModelContainer(for: ListSchemas.Later.Card.self,
                                                configurations: FileStoreConfiguration(url: url)))
        let before = fileHashes(url)
        let older = try Schema([Card.self], version: Schema.Version(2, 0, 0))
        let later = try Schema([ListSchemas.Later.Card.self])
        #expect(throws: MigrationError.schemaIsOlderThanStore(hash: older.contentHash, stored: Schema.Version(2, 0, 0),
                                                              storedHash: later.contentHash)) {
            _ = try ModelContainer(for: older, configurations: [FileStoreConfiguration(url: url)])
        }
        #expect(fileHashes(url) == before)

        // A new hash at the same number migrates forward, but may not drop stored values.
        let forward = try ModelContainer(for: Schema(versionedSchema: ListSchemas.VersionTwoLater.self),
                                         configurations: [FileStoreConfiguration(
                                             url: try cardStore(Card.self, version: Schema.Version(2, 0, 0)))])
        #expect(try ModelContext(forward).fetch(FetchDescriptor<ListSchemas.Later.Card>()).map(\.back) == ["hello"])
        let numbered = try cardStore(Card.self, version: Schema.Version(2, 0, 0))
        #expect(throws: MigrationError.self, "dropping `back` needs a version higher than 2.0.0") {
            _ = try ModelContainer(for: Schema(versionedSchema: ListSchemas.VersionTwoWithoutBack.self),
                                   configurations: [FileStoreConfiguration(url: numbered)])
        }
    }
}
