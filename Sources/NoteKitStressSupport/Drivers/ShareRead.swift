import Foundation

/// One read of the share test's readers (`notekit-stress reader`, docs/reliability/share.md): what was read, when,
/// and how it ended, as the reader writes it (`read PATH STARTED OUTCOME DETAIL`) and the driver parses it.
public struct ShareRead: Sendable, Hashable {
    /// The read paths a reader runs, one per read.
    public enum Path: String, Sendable, Hashable, CaseIterable {
        /// A read-only open of the store, then a fetch of every writer's steps.
        case open
        /// `FileStore.refresh()` of a read-only open kept from read to read, then the same fetch.
        case refresh
        /// A read-only open, then every drawing's external-storage bytes, each read from its blob file.
        case drawings
        /// A read-only open, then `ModelContext.fetchHistory` of every transaction kept.
        case fetchHistory
        /// `StoreVerifier.verify(at:)`: every byte of the store.
        case verify
        /// `StoreInspector.statistics(at:)` (`notekit stats`).
        case stats
        /// `StoreInspector.openReadOnly` and `dump` (`notekit dump`).
        case dump
        /// `StoreInspector.schemaHistory(at:)` (`notekit schema`).
        case schema
        /// `StoreInspector.openReadOnly` and `FileStore.history()` (`notekit history`).
        case history
    }

    /// How a read ended.
    public enum Outcome: String, Sendable, Hashable, CaseIterable {
        case ok
        /// A typed error, or a verifier problem, that says the store is damaged.
        case damage
        /// The read succeeded but saw a state no commit left: part of a writer's steps, a history with a hole.
        case inconsistent
        /// Refused with `FileStoreError.locked`.
        case locked
        /// Gave up with `FileStoreError.storeKeptChanging`: other processes replaced the manifest at every attempt
        /// for the whole read retry timeout (not damage; counted to show how often readers starve).
        case busy
        /// Any other error.
        case other
    }

    /// What a read found wrong in what it read, though nothing threw.
    public struct Inconsistent: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public var path: Path
    /// When the read began, by ``ShareClock``.
    public var started: UInt64
    public var outcome: Outcome
    /// For `ok`: the last step of each writer the read saw, when the path reads steps.
    public var steps: [Int: Int]?
    /// For the other outcomes: the error.
    public var detail: String

    /// Parses a reader's line; nil for a line of another kind.
    public init?(_ line: Substring) {
        let words = line.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: false)
        guard words.count == 5, words[0] == "read", let path = Path(rawValue: String(words[1])),
              let started = UInt64(words[2]), let outcome = Outcome(rawValue: String(words[3])) else { return nil }
        self.path = path
        self.started = started
        self.outcome = outcome
        detail = String(words[4])
        if outcome == .ok, detail != "-" {
            var steps: [Int: Int] = [:]
            for pair in detail.split(separator: ",") {
                let parts = pair.dropFirst().split(separator: "=")
                guard pair.hasPrefix("w"), parts.count == 2, let writer = Int(parts[0]), let step = Int(parts[1])
                else { return nil }
                steps[writer] = step
            }
            self.steps = steps
        }
    }

    /// A transaction author of a shared writer, `w<K>-step<N>`, as (K, N).
    public static func author(_ author: String?) -> (writer: Int, step: Int)? {
        guard let author, author.hasPrefix("w"), let dash = author.firstIndex(of: "-"),
              let writer = Int(author[author.index(after: author.startIndex)..<dash]),
              author[dash...].hasPrefix("-step"), let step = Int(author[author.index(dash, offsetBy: 5)...]) else {
            return nil
        }
        return (writer, step)
    }
}

/// The clock the share test's processes compare their moments by: `CLOCK_MONOTONIC`, one for every process of the
/// machine, in nanoseconds.
public enum ShareClock {
    public static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
