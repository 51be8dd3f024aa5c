import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport

/// `notekit-stress backup-writer`: the writer of the hot-backup test (``BackupWorkload``). Creates the store at a
/// path and saves its steps one by one until standard input ends (or `--steps` are saved), printing `ack STEP` once
/// each is durable and `compacted STEP` after each compaction, pausing `--pause-ms` milliseconds before each step. Exit 0, or 1 with `error MESSAGE` on a failure.
enum BackupWriter {
    static func run(store: URL, steps: Int?, pauseMilliseconds: Int) -> Never {
        let stop = Stop()
        Thread.detachNewThread {
            while readLine() != nil {}
            stop.flag.withLock { $0 = true }
        }
        do {
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                               configurations: [BackupWorkload.configuration(store)])
            let context = ModelContext(container)
            var step = 0
            while !stop.flag.withLock({ $0 }), steps.map({ step < $0 }) ?? true {
                step += 1
                if pauseMilliseconds > 0 { usleep(useconds_t(pauseMilliseconds * 1_000)) }
                try BackupWorkload.save(step: step, in: context)
                say("ack \(step)")
                if BackupWorkload.compacts(after: step) {
                    try (container.store as? FileStore)?.compact()
                    say("compacted \(step)")
                }
            }
            try container.close()
            exit(0)
        } catch {
            say("error \(error)")
            exit(1)
        }
    }

    /// Writes `line` to standard output at once (the test reacts to each line as it comes).
    private static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    final class Stop: Sendable {
        let flag = Locked(false)
    }
}
