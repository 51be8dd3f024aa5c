import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport

/// The process the kill test kills: saves the steps of a ``StressWorkload`` on a file store with small segments
/// and eager compaction, and reports each on standard output with write(2) as it happens, so that a line the
/// parent reads was written before the child went on.
///
/// Lines: `ready FROM`, `save STEP [blob] [large] [rotate]` before a save, `ack STEP rotations=R compactions=C`
/// after `save()` returned, `compact STEP`/`compacted STEP` around an explicit compaction, `trim STEP`/`trimmed STEP`
/// around a history deletion, `done` at the end, and `error MESSAGE` before exiting with status 1.
struct StressChild {
    let url: URL
    let workload: StressWorkload
    let configuration: FileStoreConfiguration

    /// Segments rotate after about this many bytes, so a run of a few hundred saves rotates many times.
    static let segmentSize = 48 << 10

    init(url: URL, seed: UInt64, deferred: Bool) {
        self.url = url
        workload = StressWorkload(seed: seed)
        configuration = FileStoreConfiguration(
            url: url, durability: deferred ? .deferred(interval: 0.05) : .everySave,
            maximumSegmentSize: Self.segmentSize,
            automaticCompaction: .init(minimumLogSize: 160 << 10, garbageRatio: 0.4),
            historyRetention: .latest(200))
    }

    func run(from: Int, steps: Int) -> Never {
        do {
            try saveSteps(from: from, count: steps)
            emit("done")
            exit(0)
        } catch {
            emit("error \(error)")
            exit(1)
        }
    }

    private func saveSteps(from: Int, count: Int) throws {
        let container = try ModelContainer(for: Schema(StressWorkload.models), configurations: [configuration])
        guard let store = container.store as? FileStore else { throw ChildError("the container's store is not a file store") }
        let held = try StressWorkload.stepsPresent(in: ModelContext(container)).last ?? 0
        guard held == from - 1 else { throw ChildError("the store holds steps up to \(held), not \(from - 1)") }
        emit("ready \(from)")

        for step in from..<(from + count) {
            let context = ModelContext(container)
            let plan = try workload.apply(step: step, in: context)
            let before = store.statistics.segments
            var tags: [String] = []
            if plan.writesBlob { tags.append("blob") }
            if plan.isLarge { tags.append("large") }
            if let active = before.last, activeSize(active) > Self.segmentSize { tags.append("rotate") }
            emit((["save", String(step)] + tags).joined(separator: " "))
            try context.save()

            let statistics = store.statistics
            if let error = statistics.lastCompactionError {
                throw ChildError("automatic compaction after step \(step) failed: \(error)")
            }
            let after = statistics.segments
            let compactions = before.first.map { after.contains($0) ? 0 : 1 } ?? 0
            let started = (after.last ?? 0) - (before.last ?? 0)
            emit("ack \(step) rotations=\(started - compactions) compactions=\(compactions)")

            if plan.compactsAfter {
                emit("compact \(step)")
                try store.compact()
                emit("compacted \(step)")
            }
            if plan.trimsHistoryAfter, statistics.lastTransaction > 60 {
                emit("trim \(step)")
                try store.deleteHistory([1...(statistics.lastTransaction - 50)])
                emit("trimmed \(step)")
            }
        }
        try store.close()
    }

    private func activeSize(_ segment: Int) -> Int {
        let path = url.appendingPathComponent("segments").appendingPathComponent(String(format: "%06d.seg", segment)).path
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    struct ChildError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// Writes `line` to standard output at once, unbuffered.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}
