import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing

/// The history every store keeps: one transaction per save, what it changed, and deleting what was processed.
@Suite("History")
struct HistoryTests {
    private func container(_ kind: StoreKind) throws -> ModelContainer {
        try kind.makeContainer([Diary.self, Page.self])
    }

    private func all(_ context: ModelContext) throws -> [DefaultHistoryTransaction] {
        try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
    }

    private func after(_ token: DefaultHistoryToken, limit: Int? = nil,
                       in context: ModelContext) throws -> [DefaultHistoryTransaction] {
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token })
        descriptor.fetchLimit = limit
        return try context.fetchHistory(descriptor)
    }

    /// Saves `count` diaries, one per save; returns the tokens.
    @discardableResult
    private func saveDiaries(_ count: Int, in context: ModelContext, from start: Int = 0) throws -> [DefaultHistoryToken] {
        try (start..<start + count).map { index in
            context.insert(Diary(code: "D\(index)"))
            try context.save()
            return try #require(context.currentHistoryToken())
        }
    }

    @Test("Each save is one transaction with an increasing token, its author and its time", arguments: StoreKind.allCases)
    func transactionPerSave(kind: StoreKind) throws {
        let container = try container(kind)
        let context = ModelContext(container)
        #expect(context.currentHistoryToken() == nil)
        #expect(try all(context).isEmpty)
        let start = Date()
        context.author = "app"
        let diary = Diary(code: "D1")
        context.insert(diary)
        try context.save()
        diary.title = "Travels"
        try context.save()
        try context.save()   // nothing to save: no transaction
        let other = ModelContext(container)
        other.insert(Diary(code: "D2"))
        try other.save()
        let end = Date()

        let transactions = try all(context)
        #expect(transactions.count == 3)
        #expect(transactions.map(\.author) == ["app", "app", nil])
        #expect(zip(transactions, transactions.dropFirst()).allSatisfy { $0.token < $1.token })
        #expect(transactions.allSatisfy { $0.timestamp >= start.addingTimeInterval(-1) && $0.timestamp <= end.addingTimeInterval(1) })
        #expect(zip(transactions, transactions.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
        #expect(context.currentHistoryToken() == transactions.last?.token)
        #expect(Set(transactions.map(\.id)).count == 3)
    }

    @Test("Changes name the inserted objects, the properties updated, and the deleted with their tombstones",
          arguments: StoreKind.allCases)
    func changes(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        let diary = Diary(code: "D1", title: "Travels")
        let pages = [Page(number: 1, text: "Lisbon"), Page(number: 2, text: "Porto")]
        diary.pages = pages
        context.insert(diary)
        try context.save()
        diary.title = "Travels, 2026"
        diary.mood = "glad"
        try context.save()
        try context.delete(diary)   // cascades to both pages
        try context.save()

        let transactions = try all(context)
        try #require(transactions.count == 3)
        let inserts = transactions[0].changes.compactMap { change -> PersistentIdentifier? in
            guard case .insert(let insert) = change else { return nil }
            return insert.changedPersistentIdentifier
        }
        #expect(Set(inserts) == Set([diary.persistentModelID] + pages.map(\.persistentModelID)))
        #expect(transactions[0].changes.contains { if case .insert(let insert as DefaultHistoryInsert<Diary>) = $0 {
            insert.changedPersistentIdentifier == diary.persistentModelID } else { false } })

        try #require(transactions[1].changes.count == 1)
        guard case .update(let update as DefaultHistoryUpdate<Diary>) = transactions[1].changes[0] else {
            Issue.record("expected an update of the diary, got \(transactions[1].changes)")
            return
        }
        #expect(update.changedPersistentIdentifier == diary.persistentModelID)
        #expect(update.updatedPropertyNames == ["title", "mood"])
        #expect(update.updated(\.title) && update.updated(\.mood) && !update.updated(\.code))

        var diaryCodes: [String] = [], pageNumbers: [Int] = []
        for change in transactions[2].changes {
            switch change {
            case .delete(let deletion as DefaultHistoryDelete<Diary>):
                if let code = deletion.tombstone[\.code] as? String { diaryCodes.append(code) }
                #expect(deletion.tombstone[\.title] == nil, "only attributes marked preserveValueOnDeletion are kept")
            case .delete(let deletion as DefaultHistoryDelete<Page>):
                if let number = deletion.tombstone.value(of: \.number) { pageNumbers.append(number) }
            default:
                Issue.record("the delete transaction holds \(change)")
            }
        }
        #expect(diaryCodes == ["D1"])
        #expect(pageNumbers.sorted() == [1, 2], "objects deleted by cascade are in the transaction too")
    }

    @Test("fetchHistory returns the transactions after a token, oldest first, up to the limit",
          arguments: StoreKind.allCases)
    func fetchAfterToken(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        let tokens = try saveDiaries(5, in: context)
        #expect(try after(tokens[1], in: context).map(\.token) == Array(tokens[2...]))
        #expect(try after(tokens[1], limit: 2, in: context).map(\.token) == Array(tokens[2...3]))
        #expect(try after(tokens[4], in: context).isEmpty)

        // A consumer reading two at a time sees every transaction exactly once.
        var seen: [DefaultHistoryToken] = []
        var position = tokens[0]
        while true {
            let page = try after(position, limit: 2, in: context)
            guard let last = page.last else { break }
            seen += page.map(\.token)
            position = last.token
        }
        #expect(seen == Array(tokens[1...]))
    }

    @Test("deleteHistory deletes what a predicate selects; asking for deleted history is an error",
          arguments: StoreKind.allCases)
    func deleteBeforeToken(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        let tokens = try saveDiaries(5, in: context)
        let keepFrom = tokens[2]
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token < keepFrom }))
        #expect(try all(context).map(\.token) == Array(tokens[2...]))

        // A consumer that processed through the second transaction misses nothing.
        #expect(try after(tokens[1], in: context).map(\.token) == Array(tokens[2...]))
        // One that processed only the first would miss the second: it is told so.
        #expect(throws: HistoryError.historyTokenExpired(oldestRetained: tokens[2])) {
            try after(tokens[0], in: context)
        }

        // Deleting everything keeps numbering going.
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(try all(context).isEmpty)
        #expect(context.currentHistoryToken() == tokens[4])
        let next = try saveDiaries(1, in: context, from: 5)
        #expect(next[0] > tokens[4])
        #expect(try after(tokens[4], in: context).map(\.token) == next)
        #expect(throws: HistoryError.self) { try after(tokens[3], in: context) }
    }

    @Test("Deleting a transaction in the middle reports only consumers that would miss it", arguments: StoreKind.allCases)
    func deleteInTheMiddle(kind: StoreKind) throws {
        let context = ModelContext(try container(kind))
        let tokens = try saveDiaries(4, in: context)
        let middle = tokens[1]
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token == middle }))
        #expect(try all(context).map(\.token) == [tokens[0], tokens[2], tokens[3]])
        #expect(try after(tokens[1], in: context).map(\.token) == [tokens[2], tokens[3]])
        #expect(throws: HistoryError.self) { try after(tokens[0], in: context) }
        let author = "nobody"
        #expect(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.author == author })).isEmpty, "a predicate on other fields is not expired")
    }

    @Test("Predicates on tokens select exactly what evaluating them on every transaction selects")
    func tokenPredicatesMatchBruteForce() throws {
        let context = ModelContext(try container(.inMemory))
        context.author = "a"
        try saveDiaries(12, in: context)
        let gap = DefaultHistoryToken(transactionNumber: 6)
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token == gap }))
        let kept = try all(context)
        let tokens = (0...14).map { DefaultHistoryToken(transactionNumber: UInt64($0)) }
            + [DefaultHistoryToken(transactionNumber: .max)]
        for low in tokens {
            for high in tokens {
                let author = "a"
                let predicates: [Predicate<DefaultHistoryTransaction>] = [
                    #Predicate { $0.token > low }, #Predicate { $0.token >= low }, #Predicate { $0.token < low },
                    #Predicate { $0.token <= low }, #Predicate { $0.token == low }, #Predicate { low < $0.token },
                    #Predicate { low >= $0.token }, #Predicate { $0.token > low && $0.token <= high },
                    #Predicate { $0.token >= low && high > $0.token && $0.author == author },
                    #Predicate { $0.token < low || $0.token > high }, #Predicate { !($0.token <= low) },
                ]
                for predicate in predicates {
                    // The deleted transaction, as the expiry check sees it: its token and nothing else.
                    let deleted = DefaultHistoryTransaction(
                        record: HistoryRecord(number: gap.transactionNumber, timestamp: .distantPast, author: nil,
                                              inserted: [], updated: [], deleted: []),
                        container: context.container)
                    let selectsDeleted = try predicate.evaluate(deleted)
                    let expected = try kept.filter { try predicate.evaluate($0) }.map(\.token)
                    do {
                        let found = try context.fetchHistory(HistoryDescriptor(predicate: predicate)).map(\.token)
                        #expect(found == expected, "\(predicate) with \(low), \(high)")
                        #expect(!selectsDeleted)
                    } catch HistoryError.historyTokenExpired {
                        #expect(selectsDeleted, "expired only when the deleted transaction would be selected")
                    }
                }
            }
        }
    }

    @Test("Tokens are Codable, Comparable and Hashable")
    func tokenValue() throws {
        let tokens = (1...3).map { DefaultHistoryToken(transactionNumber: UInt64($0)) }
        let data = try JSONEncoder().encode(tokens)
        #expect(try JSONDecoder().decode([DefaultHistoryToken].self, from: data) == tokens)
        #expect(tokens.sorted(by: >) == tokens.reversed())
        #expect(Set(tokens + tokens).count == 3)
    }

    @Test("A store that keeps no history says so")
    func unsupported() throws {
        let container = try ModelContainer(for: Diary.self, configurations: FailingStoreConfiguration())
        let context = ModelContext(container)
        #expect(throws: HistoryError.unsupported(store: "FailingStore")) { try all(context) }
        #expect(throws: HistoryError.self) { try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>()) }
    }
}

/// A context announces each save; a container streams every transaction.
@Suite("Save announcements")
struct SaveAnnouncementTests {
    final class Received: Sendable {
        let notifications = Mutex<[(name: Notification.Name, info: [String: [PersistentIdentifier]], token: DefaultHistoryToken?)]>([])
    }

    @Test("didSave names the inserted, updated and deleted objects, cascade deletes included",
          arguments: StoreKind.allCases)
    func didSave(kind: StoreKind) throws {
        let context = ModelContext(try kind.makeContainer([Diary.self, Page.self]))
        let received = Received()
        let observers = [ModelContext.willSave, ModelContext.didSave].map { name in
            NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { notification in
                var info: [String: [PersistentIdentifier]] = [:]
                for key in ["insertedIdentifiers", "updatedIdentifiers", "deletedIdentifiers"] {
                    info[key] = notification.userInfo?[key] as? [PersistentIdentifier]
                }
                let token = notification.userInfo?[ModelContext.NotificationKey.historyToken.rawValue] as? DefaultHistoryToken
                received.notifications.withLock { $0.append((notification.name, info, token)) }
            }
        }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }

        let diary = Diary(code: "D1")
        let page = Page(number: 1)
        diary.pages = [page]
        context.insert(diary)
        try context.save()
        diary.title = "t"
        try context.save()
        try context.delete(diary)
        try context.save()
        try context.save()   // nothing to save: nothing announced

        let notifications = received.notifications.withLock { $0 }
        #expect(notifications.map(\.name) == [ModelContext.willSave, ModelContext.didSave, ModelContext.willSave,
                                              ModelContext.didSave, ModelContext.willSave, ModelContext.didSave])
        let saves = notifications.filter { $0.name == ModelContext.didSave }
        #expect(Set(saves[0].info["insertedIdentifiers"] ?? []) == [diary.persistentModelID, page.persistentModelID])
        #expect(saves[1].info["updatedIdentifiers"] == [diary.persistentModelID])
        #expect(saves[1].info["insertedIdentifiers"] == [] && saves[1].info["deletedIdentifiers"] == [])
        #expect(Set(saves[2].info["deletedIdentifiers"] ?? []) == [diary.persistentModelID, page.persistentModelID])
        #expect(saves.map(\.token) == (1...3).map { DefaultHistoryToken(transactionNumber: UInt64($0)) })
    }

    @Test("A container streams every transaction of every context, in order", arguments: StoreKind.allCases)
    func transactionStream(kind: StoreKind) async throws {
        let container = try kind.makeContainer([Diary.self, Page.self])
        let stream = container.transactions()
        let first = ModelContext(container), second = ModelContext(container)
        first.author = "first"
        second.author = "second"
        let diary = Diary(code: "D1")
        diary.pages = [Page(number: 1), Page(number: 2)]
        first.insert(diary)
        try first.save()
        let loaded = try #require(second.fetch(FetchDescriptor<Diary>()).first)
        try second.delete(loaded)
        try second.save()

        var received: [DefaultHistoryTransaction] = []
        for await transaction in stream {
            received.append(transaction)
            if received.count == 2 { break }
        }
        #expect(received.map(\.author) == ["first", "second"])
        #expect(received.map(\.token.transactionNumber) == [1, 2])
        let deleted = received[1].changes.filter { if case .delete = $0 { true } else { false } }
        #expect(deleted.count == 3, "the diary and both pages, deleted by cascade")
    }
}

/// Seed 001's history helpers, on its persistence actor, against both stores.
@Suite("History: seed 001's deletedNoteIDs and trimHistory")
struct SeedHistoryTests {
    @Test("deletedNoteIDs(after:) reports each deleted note once, from its tombstone", arguments: StoreKind.allCases)
    func deletedNoteIDs(kind: StoreKind) async throws {
        let persistence = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        let notes = ["Heron", "Kite", "Wren"].map { FieldNote(title: $0) }
        for note in notes { try await persistence.save(note) }
        try await persistence.attachPhoto(named: "kite.jpg", data: Data([1, 2, 3]), toNote: notes[1].id)

        let start = try await persistence.deletedNoteIDs(after: nil)
        #expect(start.ids.isEmpty)
        let afterSaves = try #require(start.nextToken)

        try await persistence.deleteNote(id: notes[1].id)   // cascades to its photo: not a note, not reported
        let first = try await persistence.deletedNoteIDs(after: afterSaves)
        #expect(first.ids == [notes[1].id])
        let firstToken = try #require(first.nextToken)
        #expect(firstToken > afterSaves)

        try await persistence.deleteNote(id: notes[0].id)
        try await persistence.save(FieldNote(title: "Swift"))
        try await persistence.deleteNote(id: notes[2].id)
        let second = try await persistence.deletedNoteIDs(after: firstToken)
        #expect(second.ids == [notes[0].id, notes[2].id])

        // Nothing new: no ids, and the same token to pass next time.
        let third = try await persistence.deletedNoteIDs(after: second.nextToken)
        #expect(third.ids.isEmpty && third.nextToken == second.nextToken)
        // A consumer starting from nothing sees every deletion, in order.
        #expect(try await persistence.deletedNoteIDs(after: nil).ids == [notes[1].id, notes[0].id, notes[2].id])
    }

    @Test("trimHistory(before:) drops what was processed; a consumer behind it is told to start over",
          arguments: StoreKind.allCases)
    func trimHistory(kind: StoreKind) async throws {
        let persistence = FieldNotePersistence(modelContainer: try .fieldNotes(on: kind))
        let notes = (0..<4).map { FieldNote(title: "n\($0)") }
        for note in notes.prefix(2) { try await persistence.save(note) }
        let slowConsumer = try #require(try await persistence.deletedNoteIDs(after: nil).nextToken)
        for note in notes.dropFirst(2) { try await persistence.save(note) }
        try await persistence.deleteNote(id: notes[0].id)
        let fastConsumer = try #require(try await persistence.deletedNoteIDs(after: slowConsumer).nextToken)
        try await persistence.deleteNote(id: notes[1].id)

        // Every consumer has processed up to the fast one's token, except the slow one.
        try await persistence.trimHistory(before: fastConsumer)
        #expect(try await persistence.deletedNoteIDs(after: fastConsumer).ids == [notes[1].id])
        await #expect(throws: HistoryError.self) { try await persistence.deletedNoteIDs(after: slowConsumer) }
        // The fast consumer's own transaction was kept (trimmed *before* it), so it is not expired either.
        #expect(try await persistence.deletedNoteIDs(after: nil).ids == [notes[0].id, notes[1].id])

        try await persistence.trimHistory(before: DefaultHistoryToken(transactionNumber: .max))
        #expect(try await persistence.deletedNoteIDs(after: nil).ids.isEmpty)
    }
}
