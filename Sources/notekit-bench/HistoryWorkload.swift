import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore

/// Workload H: what following a store's history costs once it is long. A store gets `transactions` saves (each
/// inserts one note, every third also edits an earlier one, every fifth deletes one), then:
///
/// - `follow_ms`: a consumer asks for what came after the second-to-last token (one transaction): median of 11;
/// - `page_ms`: the first 100 transactions (`fetchLimit`): median of 11;
/// - `fetch_all_ms`: every transaction, then reading every change of every one;
/// - `reopen_ms`: reopening the store, which rebuilds its history from the log;
/// - `compact_ms`, `bytes_kept` and `bytes_without_history`: compacting with all history kept, and the same store
///   compacted with `historyRetention: .latest(0)`.
enum HistoryWorkload {
    static func run(transactions n: Int, directory: URL) throws -> String {
        let url = directory.appendingPathComponent("history.notekit")
        try? FileManager.default.removeItem(at: url)
        // Deferred durability: this workload measures history, not fsync.
        let configuration = FileStoreConfiguration(url: url, durability: .deferred(interval: 1), automaticCompaction: nil)
        var notes: [NoteRecord] = []
        do {
            let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
            let context = ModelContext(container)
            context.author = "bench"
            for index in 0..<n {
                let note = NoteRecord()
                note.title = "Note \(index)"
                context.insert(note)
                notes.append(note)
                if index % 3 == 2 { notes[index / 2].title = "Edited \(index)" }
                if index % 5 == 4, let victim = notes.indices.dropLast().first(where: { $0 % 7 == index % 7 }) {
                    try context.delete(notes[victim])
                    notes.remove(at: victim)
                }
                try context.save()
            }
            try (container.store as? FileStore)?.close()
        }

        var start = DispatchTime.now().uptimeNanoseconds
        let container = try ModelContainer(for: NoteRecord.self, configurations: configuration)
        let reopen = W1.milliseconds(since: start)
        let context = ModelContext(container)
        guard let last = context.currentHistoryToken(), last.transactionNumber == UInt64(n) else {
            throw W1.BenchmarkError.wrongCount("the store has \(String(describing: context.currentHistoryToken())) transactions")
        }

        let previous = DefaultHistoryToken(transactionNumber: last.transactionNumber - 1)
        let follow = try median(11) {
            let found = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > previous }))
            guard found.count == 1 else { throw W1.BenchmarkError.wrongCount("follow found \(found.count)") }
        }
        let page = try median(11) {
            var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
            descriptor.fetchLimit = 100
            guard try context.fetchHistory(descriptor).count == min(100, n) else {
                throw W1.BenchmarkError.wrongCount("a page is short")
            }
        }
        start = DispatchTime.now().uptimeNanoseconds
        let all = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        let changes = all.reduce(0) { $0 + $1.changes.count }
        let fetchAll = W1.milliseconds(since: start)

        let store = container.store as! FileStore
        start = DispatchTime.now().uptimeNanoseconds
        try store.compact()
        let compact = W1.milliseconds(since: start)
        try store.close()
        let kept = W1.directorySize(url)
        var trimmed = configuration
        trimmed.historyRetention = .latest(0)
        let second = try ModelContainer(for: NoteRecord.self, configurations: trimmed)
        try (second.store as! FileStore).compact()
        try (second.store as! FileStore).close()
        let without = W1.directorySize(url)

        func number(_ value: Double) -> String { W1.number(value, 3) }
        return "{\"workload\":\"history\",\"transactions\":\(n),\"changes\":\(changes),"
            + "\"follow_ms\":\(number(follow)),\"page_ms\":\(number(page)),\"fetch_all_ms\":\(number(fetchAll)),"
            + "\"reopen_ms\":\(number(reopen)),\"compact_ms\":\(number(compact)),\"bytes_kept\":\(kept),"
            + "\"bytes_without_history\":\(without),\"peak_rss_mb\":\(number(W1.peakResidentMegabytes()))}"
    }

    /// The median time of `runs` runs of `body`, in milliseconds.
    static func median(_ runs: Int, _ body: () throws -> Void) throws -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            times.append(W1.milliseconds(since: start))
        }
        return times.sorted()[runs / 2]
    }
}
