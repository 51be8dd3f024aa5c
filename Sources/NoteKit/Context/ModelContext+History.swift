import Foundation

extension ModelContext {
    /// The transactions of the store's history that `descriptor` selects: those its predicate accepts, in the order
    /// of its `sortBy` (oldest first when it has none), and of those the first `fetchLimit`.
    ///
    /// ```swift
    /// var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
    /// descriptor.predicate = #Predicate { $0.token > lastToken }
    /// for transaction in try context.fetchHistory(descriptor) { … }
    /// ```
    ///
    /// History covers saves of every context of the store (and of other processes a file store has picked up),
    /// not only this one's; it survives reopening and compaction up to what ``deleteHistory(_:)`` deleted.
    ///
    /// - Throws: ``HistoryError/historyTokenExpired(oldestRetained:)`` when the predicate selects transactions that
    ///   were deleted from history (a token older than the history kept: start over from the current state);
    ///   ``HistoryError/unsupported(store:)`` for a store without history; what evaluating the predicate throws.
    /// - Complexity: O(log transactions kept) to find where a predicate comparing `token` with a constant (and `&&` of
    ///   such comparisons) can match, then one predicate evaluation per transaction there; O(transactions kept)
    ///   evaluations for other predicates. Without `sortBy`, or with one whose first descriptor is by `\.token` (or
    ///   `\.id`), a `fetchLimit` stops the evaluations once it is reached, from the newest end for `.reverse`; any
    ///   other order evaluates the predicate on every transaction there and sorts the m matches, O(m log m)
    ///   comparisons. A transaction's ``HistoryTransaction/changes`` are built only when read.
    public func fetchHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws
        -> [DefaultHistoryTransaction] {
        try core.checkOpen()
        let log = try store.history()
        if let predicate = descriptor.predicate {
            // The predicate is asked about each deleted range's first and last transaction, without changes: a
            // consumer whose token is older than the history kept is told so, instead of silently missing changes.
            for range in log.deleted {
                for number in Set([range.lowerBound, range.upperBound]) {
                    let probe = DefaultHistoryTransaction(
                        record: HistoryRecord(number: number, timestamp: .distantPast, author: nil,
                                              inserted: [], updated: [], deleted: []),
                        container: container)
                    if try predicate.evaluate(probe) {
                        throw HistoryError.historyTokenExpired(
                            oldestRetained: log.oldestRetained.map(DefaultHistoryToken.init(transactionNumber:)))
                    }
                }
            }
        }
        let limit = descriptor.fetchLimit.flatMap { $0 > 0 ? $0 : nil } ?? .max
        let candidates = log.records[TransactionBounds.of(descriptor.predicate).positions(in: log.records)]
        func matches(_ records: some Sequence<HistoryRecord>, upTo limit: Int) throws -> [DefaultHistoryTransaction] {
            var transactions: [DefaultHistoryTransaction] = []
            for record in records {
                let transaction = DefaultHistoryTransaction(record: record, container: container)
                guard try descriptor.predicate?.evaluate(transaction) ?? true else { continue }
                transactions.append(transaction)
                if transactions.count == limit { break }
            }
            return transactions
        }
        switch HistoryOrder(descriptor.sortBy) {
        case .committed:
            return try matches(candidates, upTo: limit)
        case .newestFirst:
            return try matches(candidates.reversed(), upTo: limit)
        case .sorted(let descriptors):
            // Swift's sort is stable, so transactions the descriptors leave tied stay oldest first.
            let sorted = try matches(candidates, upTo: .max).sorted { lhs, rhs in
                for descriptor in descriptors {
                    switch descriptor.compare(lhs, rhs) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                return false
            }
            return Array(sorted.prefix(limit))
        }
    }

    /// Deletes the transactions `descriptor`'s predicate selects (every transaction kept, when it has none) from
    /// the store's history; a file store records the deletion and reclaims the space at its next compaction.
    /// The descriptor's `sortBy` and `fetchLimit` are ignored: every transaction the predicate selects is deleted.
    ///
    /// Delete what every consumer has processed: `#Predicate { $0.token < oldestTokenStillNeeded }`. A consumer
    /// whose token is older then gets ``HistoryError/historyTokenExpired(oldestRetained:)`` from
    /// ``fetchHistory(_:)``. A store whose history is held keeps the transactions after the hold, whatever the
    /// predicate selects: a client that reads history as its queue holds what it has not consumed (NoteKitMirror's
    /// `StoreMirror`, for one, holds the transactions it has not sent).
    ///
    /// - Throws: ``HistoryError/unsupported(store:)``, what evaluating the predicate throws, or the store's I/O
    ///   errors (nothing is deleted then).
    /// - Complexity: O(transactions kept) for the deletion; predicate evaluations as for ``fetchHistory(_:)``.
    public func deleteHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws {
        try core.checkOpen()
        let log = try store.history()
        var numbers: [UInt64] = []
        for record in log.records[TransactionBounds.of(descriptor.predicate).positions(in: log.records)] {
            if let predicate = descriptor.predicate {
                guard try predicate.evaluate(DefaultHistoryTransaction(record: record, container: container)) else {
                    continue
                }
            }
            numbers.append(record.number)
        }
        guard !numbers.isEmpty else { return }
        try store.deleteHistory(HistoryLog.ranges(of: numbers))
    }

    /// The token of the store's last committed transaction; nil when nothing was ever saved. A consumer that
    /// starts from the current state reads it first, then asks for the history after it.
    public func currentHistoryToken() -> DefaultHistoryToken? {
        let last = store.transactionNumber
        return last == 0 ? nil : DefaultHistoryToken(transactionNumber: last)
    }
}

/// The order a history fetch returns its matches in, read from a descriptor's `sortBy`.
enum HistoryOrder {
    /// The order of the log: oldest first.
    case committed
    /// The log's order reversed: newest first.
    case newestFirst
    /// Sorted by the descriptors, ties oldest first.
    case sorted([SortDescriptor<DefaultHistoryTransaction>])

    init(_ descriptors: [SortDescriptor<DefaultHistoryTransaction>]) {
        guard let first = descriptors.first else {
            self = .committed
            return
        }
        // Transaction numbers are unique, so a first descriptor by token decides every comparison alone.
        if first.keyPath == \DefaultHistoryTransaction.token || first.keyPath == \DefaultHistoryTransaction.id {
            self = first.order == .forward ? .committed : .newestFirst
        } else {
            self = .sorted(descriptors)
        }
    }
}

extension ModelContainer {
    /// Every transaction committed to the store from now on, by any context of any container on the store (and,
    /// for a file store, by other processes once the file store's `refresh()` or automatic refresh picked them up),
    /// until the consumer stops iterating or the store closes.
    ///
    /// ```swift
    /// for await transaction in container.transactions() {
    ///     let deleted = transaction.changes.filter { if case .delete = $0 { true } else { false } }
    ///     …
    /// }
    /// ```
    ///
    /// The stream buffers what its consumer has not read yet; stop iterating to unsubscribe.
    public func transactions() -> AsyncMapSequence<AsyncStream<HistoryRecord>, DefaultHistoryTransaction> {
        store.transactions().map { [self] record in DefaultHistoryTransaction(record: record, container: self) }
    }
}

extension ModelContext {
    /// Posted by a context before it saves, with the context as the notification's object.
    public static let willSave = Notification.Name("NoteKit.ModelContext.willSave")
    /// Posted by a context after a save committed a transaction, with the context as the notification's object
    /// and the identifiers of what the transaction inserted, updated and deleted (objects deleted by a cascade
    /// delete rule included) in `userInfo` under ``NotificationKey``.
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) { note in
    ///     let deleted = note.userInfo?[ModelContext.NotificationKey.deletedIdentifiers.rawValue]
    ///         as? [PersistentIdentifier] ?? []
    /// }
    /// ```
    public static let didSave = Notification.Name("NoteKit.ModelContext.didSave")

    /// The keys of ``didSave``'s `userInfo`.
    public enum NotificationKey: String, Sendable {
        /// `[PersistentIdentifier]`: the objects inserted.
        case insertedIdentifiers
        /// `[PersistentIdentifier]`: the objects updated.
        case updatedIdentifiers
        /// `[PersistentIdentifier]`: the objects deleted.
        case deletedIdentifiers
        /// ``DefaultHistoryToken``: the transaction's token in the store's history.
        case historyToken
    }

    func postWillSave() {
        NotificationCenter.default.post(name: Self.willSave, object: self)
    }

    func postDidSave(_ changes: ChangeSet, transaction: UInt64) {
        NotificationCenter.default.post(name: Self.didSave, object: self, userInfo: [
            NotificationKey.insertedIdentifiers.rawValue: changes.inserted.map(\.id),
            NotificationKey.updatedIdentifiers.rawValue: changes.updated.map(\.id),
            NotificationKey.deletedIdentifiers.rawValue: changes.deleted.map(\.id),
            NotificationKey.historyToken.rawValue: DefaultHistoryToken(transactionNumber: transaction),
        ])
    }
}
