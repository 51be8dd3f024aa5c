import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitStressSupport

/// A reader of a store other processes write (`notekit-stress reader`, started by the share test,
/// docs/reliability/share.md): reads it again and again by every read path, chosen at random, and reports each
/// read on standard output as it ends, until its standard input ends or says `stop`. It takes the paths in turn, in
/// an order of its seed, so that a short run reads by every path.
///
/// Lines (``ShareRead`` parses them): `read PATH STARTED OUTCOME DETAIL`, where STARTED is when the read began
/// (``ShareClock``, nanoseconds), OUTCOME is `ok`, `damage`, `inconsistent`, `locked` or `other`, and DETAIL is,
/// for `ok`, the last step of each writer the read saw (`w1=12,w2=40`, or `-` when the path sees no steps), and
/// for the others the error, on one line.
///
/// `damage` is a typed error that says the store is damaged (``FileStoreError`` of a damage kind, a store file
/// that does not exist, a verifier problem other than a torn tail, a blob the store lists that cannot be read);
/// `inconsistent` is a read that succeeded but saw what no commit left: part of a writer's steps, or a history with
/// a hole.
struct StressReader {
    let url: URL
    let paths: [ShareRead.Path]
    private let control = ControlInput()
    /// The read-only open that `refresh` reads: opened once, refreshed again and again, reopened after a failure.
    private var lasting: (container: ModelContainer, store: FileStore)?

    init(url: URL, seed: UInt64) {
        self.url = url
        var rng = SeededGenerator(seed: seed)
        paths = ShareRead.Path.allCases.shuffled(using: &rng)
    }

    mutating func run() -> Never {
        for turn in 0... {
            switch control.nextLine(waiting: false) {
            case .some(nil), .some("stop"?):
                // The parent is gone, or done.
                exit(0)
            default:
                break
            }
            let path = paths[turn % paths.count]
            let started = ShareClock.now
            let (outcome, detail) = read(path)
            let line = detail.replacingOccurrences(of: "\n", with: " ")
            emit("read \(path.rawValue) \(started) \(outcome.rawValue) \(line.isEmpty ? "-" : line)")
        }
        exit(0)
    }

    private mutating func read(_ path: ShareRead.Path) -> (ShareRead.Outcome, String) {
        do {
            return try attempt(path)
        } catch let error as ShareRead.Inconsistent {
            return (.inconsistent, error.description)
        } catch {
            if path == .refresh { lasting = nil }
            return (Self.classify(error), "\(error)")
        }
    }

    private mutating func attempt(_ path: ShareRead.Path) throws -> (ShareRead.Outcome, String) {
        switch path {
        case .open:
            let container = try Self.openReadOnly(url)
            return (.ok, try Self.steps(in: ModelContext(container)))
        case .refresh:
            let lasting = try self.lasting ?? Self.openLasting(url)
            self.lasting = lasting
            try lasting.store.refresh()
            return (.ok, try Self.steps(in: ModelContext(lasting.container)))
        case .drawings:
            // Reading an external-storage attribute reads its blob file, after the open.
            let context = ModelContext(try Self.openReadOnly(url))
            for drawing in try context.fetch(FetchDescriptor<NoteDrawing>()) { _ = drawing.data }
            if let failure = context.readFailures.first {
                return (.damage, "\(context.readFailures.count) blob reads failed, the first: \(failure)")
            }
            return (.ok, "-")
        case .fetchHistory:
            let context = ModelContext(try Self.openReadOnly(url))
            let records = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.record)
            try Self.checkHistory(records)
            return (.ok, "-")
        case .verify:
            let report = try StoreVerifier.verify(at: url)
            let damage = report.damage
            guard damage.isEmpty else {
                return (.damage, damage.prefix(3).map(\.description).joined(separator: "; "))
            }
            return (.ok, "-")
        case .stats:
            let statistics = try StoreInspector.statistics(at: url)
            if let kept = statistics.historyKept, kept.upperBound != statistics.lastTransactionNumber {
                throw ShareRead.Inconsistent("stats: history ends at transaction \(kept.upperBound), the store at "
                                             + "\(statistics.lastTransactionNumber)")
            }
            return (.ok, "-")
        case .dump:
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            var numbers: [Int] = []
            try StoreInspector.dump(store) { line in
                guard line.hasPrefix(#"{"entity":"StressStep""#), let range = line.range(of: #""number":"#) else {
                    return
                }
                if let number = Int(line[range.upperBound...].prefix { $0.isNumber }) { numbers.append(number) }
            }
            return (.ok, try Self.steps(numbers))
        case .schema:
            let schemas = try StoreInspector.schemaHistory(at: url)
            guard schemas.last?.entity(named: "StressStep") != nil else {
                throw ShareRead.Inconsistent("schema: the stored schema has no StressStep")
            }
            return (.ok, "-")
        case .history:
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            let records = try store.history().records
            try Self.checkHistory(records)
            if let last = records.last, last.number != store.statistics.lastTransactionNumber {
                throw ShareRead.Inconsistent("history ends at transaction \(last.number), the store at "
                                             + "\(store.statistics.lastTransactionNumber)")
            }
            return (.ok, "-")
        }
    }

    static func openReadOnly(_ url: URL) throws -> ModelContainer {
        let configuration = FileStoreConfiguration(url: url, mode: .readOnly, automaticCompaction: nil)
        return try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
    }

    /// A read-only open with its file store, for `refresh` to keep.
    static func openLasting(_ url: URL) throws -> (container: ModelContainer, store: FileStore) {
        let container = try openReadOnly(url)
        guard let store = container.store as? FileStore else {
            throw ShareRead.Inconsistent("the container's store is not a file store")
        }
        return (container, store)
    }

    /// The last step of each writer `context` sees, checking that it sees each writer's steps whole: the last
    /// ``StressWorkload/window`` of a prefix.
    static func steps(in context: ModelContext) throws -> String {
        try steps(context.fetch(FetchDescriptor<StressStep>()).map(\.number))
    }

    static func steps(_ numbers: [Int]) throws -> String {
        let byWriter = Dictionary(grouping: numbers) { $0 / StressWorkload.markerStride }
        var seen: [String] = []
        for (writer, markers) in byWriter.sorted(by: { $0.key < $1.key }) {
            let steps = markers.map { $0 % StressWorkload.markerStride }.sorted()
            let last = steps.last ?? 0
            guard steps == StressWorkload.expectedSteps(through: last) else {
                throw ShareRead.Inconsistent("writer \(writer)'s steps are not the last \(StressWorkload.window) of "
                                             + "a prefix: \(steps.first ?? 0)…\(last), \(steps.count) of them")
            }
            seen.append("w\(writer)=\(last)")
        }
        return seen.isEmpty ? "-" : seen.joined(separator: ",")
    }

    /// A history is a run of consecutive transactions, in which each writer's steps go up one at a time.
    static func checkHistory(_ records: [HistoryRecord]) throws {
        var previous: UInt64?
        var lastStep: [Int: Int] = [:]
        for record in records {
            if let previous, record.number != previous + 1 {
                throw ShareRead.Inconsistent("history: transaction \(record.number) follows \(previous)")
            }
            previous = record.number
            guard let (writer, step) = ShareRead.author(record.author) else { continue }
            if let last = lastStep[writer], step != last + 1 {
                throw ShareRead.Inconsistent("history: writer \(writer)'s step \(step) follows its step \(last)")
            }
            lastStep[writer] = step
        }
    }

    /// What a failed read reports, by the error's type and case.
    static func classify(_ error: any Error) -> ShareRead.Outcome {
        switch error {
        case let error as FileStoreError:
            switch error {
            case .locked, .lockedInThisProcess: .locked
            case .storeKeptChanging: .busy
            case .storeNotFound, .notAStoreFile, .unsupportedFormatVersion, .damagedRecord, .undecodableRecord,
                 .inconsistentSegments, .danglingReference:
                .damage
            case .unexpectedFileType, .writesStopped, .nothingToSalvage, .blobRemoved, .blobNotFetched,
                 .destinationExists, .backupNotVerified:
                .other
            }
        // A store file that vanished under the read, reported as such, unwrapped.
        case let error as StoreIOError where error.code == ENOENT: .damage
        default: .other
        }
    }
}
