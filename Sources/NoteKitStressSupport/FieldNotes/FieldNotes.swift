import Foundation
import NoteKit
import Observation

// Seed 001's FieldNotes persistence layer, ported to NoteKit: the app's value types, the records that store them,
// the model actor that reads and writes them away from the main actor, and the main-actor store a UI would observe.
// Differences from SwiftData are NoteKit's own: indexes are a static key-path list instead of `#Index`, models
// spell out `@Attribute` and `required init()`, `ModelContext.delete` throws, and `@ModelActor` is the
// `ModelActor` protocol adopted by hand. The value types are renamed (`FieldNote` for the seed's `Note`) so they do
// not clash with NoteKit's own `Note`.

// MARK: Values

/// Where a note was written.
public struct NoteLocation: Hashable, Sendable, Codable {
    public var latitude: Double
    public var longitude: Double
    public var placeName: String?

    public init(latitude: Double, longitude: Double, placeName: String? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.placeName = placeName
    }
}

/// A photo's metadata; the image bytes live in external storage (`PhotoRecord.data`).
public struct PhotoAttachment: Identifiable, Hashable, Sendable {
    public var id: UUID
    public var fileName: String

    public init(id: UUID = UUID(), fileName: String) {
        self.id = id
        self.fileName = fileName
    }
}

/// A notebook, as the app shows it.
public struct Notebook: Identifiable, Hashable, Sendable {
    public var id: UUID
    public var name: String
    public var symbolName: String

    public init(id: UUID = UUID(), name: String, symbolName: String = "book.closed") {
        self.id = id
        self.name = name
        self.symbolName = symbolName
    }
}

/// A note, as the app shows it (the seed's `Note`).
public struct FieldNote: Identifiable, Hashable, Sendable {
    public var id: UUID
    public var title: String
    public var body: String
    public var createdAt: Date
    public var notebookID: Notebook.ID?
    public var tags: [String]
    public var isPinned: Bool
    public var location: NoteLocation?
    public var attachments: [PhotoAttachment]

    public init(id: UUID = UUID(), title: String, body: String = "", createdAt: Date = .now,
                notebookID: Notebook.ID? = nil, tags: [String] = [], isPinned: Bool = false,
                location: NoteLocation? = nil, attachments: [PhotoAttachment] = []) {
        self.id = id
        self.title = title
        self.body = body
        self.createdAt = createdAt
        self.notebookID = notebookID
        self.tags = tags
        self.isPinned = isPinned
        self.location = location
        self.attachments = attachments
    }
}

// MARK: Records

/// A stored note: `#Index<NoteRecord>([\.createdAt], [\.isPinned, \.createdAt])`, photos deleted with it.
public final class NoteRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) public var id = UUID()
    @Attribute public var title = ""
    @Attribute public var body = ""
    @Attribute public var createdAt = Date.now
    @Attribute public var tags: [String] = []
    @Attribute public var isPinned = false
    @Attribute public var latitude: Double?
    @Attribute public var longitude: Double?
    @Attribute public var placeName: String?
    @Relationship public var notebook: NotebookRecord?
    @Relationship(deleteRule: .cascade, inverse: \PhotoRecord.note) public var photos: [PhotoRecord] = []

    public static var indexes: [[PartialKeyPath<NoteRecord>]] { [[\.createdAt], [\.isPinned, \.createdAt]] }

    public required init() {}

    /// A record holding `note`'s values; its notebook is linked by the caller, which can look it up.
    public convenience init(_ note: FieldNote) {
        self.init()
        id = note.id
        update(from: note)
    }

    /// Copies `note`'s values, except its notebook and attachments, which are relationships.
    public func update(from note: FieldNote) {
        title = note.title
        body = note.body
        createdAt = note.createdAt
        tags = note.tags
        isPinned = note.isPinned
        latitude = note.location?.latitude
        longitude = note.location?.longitude
        placeName = note.location?.placeName
    }

    /// The note this record stores.
    public var note: FieldNote {
        var location: NoteLocation?
        if let latitude, let longitude {
            location = NoteLocation(latitude: latitude, longitude: longitude, placeName: placeName)
        }
        return FieldNote(id: id, title: title, body: body, createdAt: createdAt, notebookID: notebook?.id,
                         tags: tags, isPinned: isPinned, location: location,
                         attachments: photos.map { PhotoAttachment(id: $0.id, fileName: $0.fileName) })
    }
}

/// A stored notebook; deleting it unfiles its notes.
public final class NotebookRecord: PersistentModel {
    @Attribute(.preserveValueOnDeletion) public var id = UUID()
    @Attribute public var name = ""
    @Attribute public var symbolName = "book.closed"
    @Relationship(deleteRule: .nullify, inverse: \NoteRecord.notebook) public var notes: [NoteRecord] = []

    public required init() {}

    public convenience init(_ notebook: Notebook) {
        self.init()
        id = notebook.id
        update(from: notebook)
    }

    public func update(from notebook: Notebook) {
        name = notebook.name
        symbolName = notebook.symbolName
    }

    /// The notebook this record stores.
    public var notebook: Notebook {
        Notebook(id: id, name: name, symbolName: symbolName)
    }
}

/// A stored photo: the bytes in external storage, read only when `data` is.
public final class PhotoRecord: PersistentModel {
    @Attribute public var id = UUID()
    @Attribute public var fileName = ""
    @Attribute public var addedAt = Date.now
    @Attribute(.externalStorage) public var data = Data()
    @Relationship public var note: NoteRecord?

    public required init() {}

    public convenience init(id: UUID = UUID(), fileName: String, data: Data) {
        self.init()
        self.id = id
        self.fileName = fileName
        self.data = data
    }
}

extension ModelContainer {
    /// The FieldNotes record types.
    public static let fieldNotesModels: [any PersistentModel.Type] = [NoteRecord.self, NotebookRecord.self,
                                                                      PhotoRecord.self]
}

// MARK: Persistence

/// What the app's store needs from persistence; a test can wrap it to watch or delay calls.
public protocol NotePersisting: Sendable {
    func fetchNotes() async throws -> [FieldNote]
    func save(_ note: FieldNote) async throws
    func deleteNote(id: FieldNote.ID) async throws
    func fetchNotebooks() async throws -> [Notebook]
    func save(_ notebook: Notebook) async throws
}

/// A FieldNotes operation that names something the store does not have.
public enum FieldNotesError: Error, Sendable, Hashable, CustomStringConvertible {
    case noteNotFound(FieldNote.ID)

    public var description: String {
        switch self {
        case .noteNotFound(let id): "no note with id \(id) is stored; save the note before attaching photos to it"
        }
    }
}

/// The seed's `SwiftDataNotePersistence`: FieldNotes records read and written on a model actor.
public actor FieldNotePersistence: NotePersisting, ModelActor {
    public nonisolated let modelContainer: ModelContainer
    public nonisolated let modelExecutor: any ModelExecutor

    public init(modelContainer: ModelContainer) {
        self.modelContainer = modelContainer
        modelExecutor = DefaultSerialModelExecutor(modelContext: ModelContext(modelContainer))
    }

    /// Every note, newest first.
    public func fetchNotes() async throws -> [FieldNote] {
        let descriptor = FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        return try modelContext.fetch(descriptor).map(\.note)
    }

    /// Inserts `note`, or updates the stored note with its id, and links it to its notebook.
    public func save(_ note: FieldNote) async throws {
        let record: NoteRecord
        if let existing = try noteRecord(id: note.id) {
            record = existing
            record.update(from: note)
        } else {
            record = NoteRecord(note)
            modelContext.insert(record)
        }
        record.notebook = try notebookRecord(id: note.notebookID)
        try modelContext.save()
    }

    /// Deletes the note with `id` and, by the cascade rule, its photos; does nothing when there is none.
    public func deleteNote(id: FieldNote.ID) async throws {
        guard let record = try noteRecord(id: id) else { return }
        try modelContext.delete(record)
        try modelContext.save()
    }

    /// Every notebook, by name.
    public func fetchNotebooks() async throws -> [Notebook] {
        try modelContext.fetch(FetchDescriptor<NotebookRecord>(sortBy: [SortDescriptor(\.name)])).map(\.notebook)
    }

    /// Notebooks are saved before the notes that reference them, so `save(_ note:)` can link the relationship.
    public func save(_ notebook: Notebook) async throws {
        if let existing = try notebookRecord(id: notebook.id) {
            existing.update(from: notebook)
        } else {
            modelContext.insert(NotebookRecord(notebook))
        }
        try modelContext.save()
    }

    /// Pinned notes, newest first, read through the (isPinned, createdAt) index rather than every note.
    public func pinnedNotes(limit: Int? = nil) throws -> [FieldNote] {
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.isPinned },
                                                     sortBy: [SortDescriptor(\.createdAt, order: .reverse)])
        descriptor.fetchLimit = limit
        return try modelContext.fetch(descriptor).map(\.note)
    }

    /// One note by identifier.
    public func note(id: FieldNote.ID) throws -> FieldNote? {
        try noteRecord(id: id)?.note
    }

    /// Stores `data` as a photo of the note with `noteID`.
    ///
    /// - Throws: ``FieldNotesError/noteNotFound(_:)`` when no such note is stored, or what saving throws.
    @discardableResult
    public func attachPhoto(named fileName: String, data: Data, toNote noteID: FieldNote.ID) throws
        -> PhotoAttachment {
        guard let record = try noteRecord(id: noteID) else { throw FieldNotesError.noteNotFound(noteID) }
        let photo = PhotoRecord(fileName: fileName, data: data)
        modelContext.insert(photo)
        photo.note = record
        try modelContext.save()
        return PhotoAttachment(id: photo.id, fileName: photo.fileName)
    }

    func noteRecord(id: FieldNote.ID) throws -> NoteRecord? {
        var descriptor = FetchDescriptor<NoteRecord>(predicate: #Predicate { $0.id == id })
        descriptor.fetchLimit = 1
        return try modelContext.fetch(descriptor).first
    }

    func notebookRecord(id: Notebook.ID?) throws -> NotebookRecord? {
        guard let id else { return nil }
        var descriptor = FetchDescriptor<NotebookRecord>(predicate: #Predicate { $0.id == id })
        descriptor.fetchLimit = 1
        return try modelContext.fetch(descriptor).first
    }
}

// MARK: Store

/// A persistence call of ``NoteStore`` that failed (the seed logged these).
public struct NoteStoreError: Error, CustomStringConvertible {
    public enum Operation: Sendable, Hashable {
        case load
        case write
    }

    public let operation: Operation
    public let underlying: any Error

    public var description: String {
        switch operation {
        case .load: "Loading notes failed: \(underlying)"
        case .write: "Saving a note failed: \(underlying)"
        }
    }
}

/// The seed's main-actor store: changes show at once in `notes`, and reach persistence in the background, one
/// after another in the order they were made.
@Observable
@MainActor
public final class NoteStore {
    public var notes: [FieldNote]
    public var notebooks: [Notebook]
    /// The persistence calls that failed, oldest first (the seed logged them).
    public private(set) var errors: [NoteStoreError] = []

    @ObservationIgnored private let persistence: (any NotePersisting)?
    @ObservationIgnored private var lastWrite: Task<Void, Never>?
    /// How many writes have been queued; `load()` compares it before and after fetching.
    @ObservationIgnored public private(set) var writeCount = 0

    public init(notes: [FieldNote] = [], notebooks: [Notebook] = [], persistence: (any NotePersisting)? = nil) {
        self.notes = notes
        self.notebooks = notebooks
        self.persistence = persistence
    }

    /// Replaces `notes` and `notebooks` with what the store holds; call at launch and after remote changes.
    public func load() async {
        guard let persistence else { return }
        while true {
            let writesBefore = writeCount
            await lastWrite?.value
            do {
                let loadedNotebooks = try await persistence.fetchNotebooks()
                let loadedNotes = try await persistence.fetchNotes()
                // A change made while the fetch ran is newer than this snapshot: read again once it has landed.
                guard writeCount == writesBefore else { continue }
                notebooks = loadedNotebooks
                notes = loadedNotes
            } catch {
                errors.append(NoteStoreError(operation: .load, underlying: error))
            }
            return
        }
    }

    public func add(_ notebook: Notebook) {
        notebooks.append(notebook)
        write { try await $0.save(notebook) }
    }

    public func add(_ note: FieldNote) {
        notes.append(note)
        write { try await $0.save(note) }
    }

    public func delete(_ note: FieldNote) {
        notes.removeAll { $0.id == note.id }
        write { try await $0.deleteNote(id: note.id) }
    }

    public func togglePin(_ note: FieldNote) {
        guard let index = notes.firstIndex(where: { $0.id == note.id }) else { return }
        notes[index].isPinned.toggle()
        let updated = notes[index]
        write { try await $0.save(updated) }
    }

    /// Returns once every queued write has reached the store, e.g. before telling a widget to reload.
    public func waitForPendingWrites() async {
        await lastWrite?.value
    }

    /// Runs writes one after another, in the order the user made them.
    private func write(_ operation: @escaping @Sendable (any NotePersisting) async throws -> Void) {
        guard let persistence else { return }
        writeCount += 1
        let previous = lastWrite
        lastWrite = Task {
            await previous?.value
            do {
                try await operation(persistence)
            } catch {
                errors.append(NoteStoreError(operation: .write, underlying: error))
            }
        }
    }
}

// Seed 001's SwiftDataNotePersistence+History.swift, ported: what a sync or a widget asks of history.
extension FieldNotePersistence {
    /// The ids of notes deleted since `token`, plus the token to pass next time.
    public func deletedNoteIDs(after token: DefaultHistoryToken?)
        throws -> (ids: [FieldNote.ID], nextToken: DefaultHistoryToken?) {
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        if let token {
            descriptor.predicate = #Predicate { $0.token > token }
        }
        let transactions = try modelContext.fetchHistory(descriptor)
        var ids: [FieldNote.ID] = []
        for transaction in transactions {
            for change in transaction.changes {
                if case .delete(let deletion as DefaultHistoryDelete<NoteRecord>) = change,
                   let id = deletion.tombstone[\.id] as? UUID {
                    ids.append(id)
                }
            }
        }
        return (ids, transactions.last?.token ?? token)
    }

    /// Drops transactions that every consumer has already processed.
    public func trimHistory(before token: DefaultHistoryToken) throws {
        try modelContext.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token < token }))
    }
}
