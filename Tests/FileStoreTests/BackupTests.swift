import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

/// Issue 34, item 6: `FileStore.backup(to:)` and `notekit backup` give a consistent, verified copy of the last
/// commit while other processes write, rotate and compact the store: SQLite's `VACUUM INTO`, GRDB's `backup(to:)`.
/// A plain directory copy of a live store can mix moments or miss blobs (docs/FORMAT.md, *Copying a store*).
@Suite("Hot backup: a verified copy of the last commit while others write", .serialized)
struct BackupTests {
    static let stress = CommandLineTests.executable.deletingLastPathComponent().appendingPathComponent("notekit-stress")

    /// A `notekit-stress backup-writer` process, its lines collected as they come.
    final class Writer: Sendable {
        let process = Process()
        private let input = Pipe()
        let lines = Locked<[String]>([])

        init(store: URL) throws {
            process.executableURL = BackupTests.stress
            // Paced, so that the store stays small enough for a quick test while saves, rotations and compactions
            // keep coming between the backups.
            process.arguments = ["backup-writer", "--store", store.path, "--pause-ms", "10"]
            let output = Pipe()
            process.standardOutput = output
            process.standardInput = input
            try process.run()
            let handle = output.fileHandleForReading
            let lines = lines
            Thread.detachNewThread {
                var pending = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    pending += chunk
                    while let end = pending.firstIndex(of: 0x0A) {
                        let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                        pending = Data(pending[(end + 1)...])
                        lines.withLock { $0.append(line) }
                    }
                }
            }
        }

        /// The last step acknowledged, and how many compactions were reported.
        var progress: (acked: Int, compactions: Int, errors: [String]) {
            lines.withLock { lines in
                (lines.last { $0.hasPrefix("ack ") }.flatMap { Int($0.dropFirst(4)) } ?? 0,
                 lines.filter { $0.hasPrefix("compacted ") }.count,
                 lines.filter { $0.hasPrefix("error") })
            }
        }

        func waitFor(step: Int, seconds: Double = 60) -> Bool {
            let end = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < end {
                if progress.acked >= step { return true }
                if !process.isRunning { return false }
                usleep(2_000)
            }
            return false
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    @Test("Item 6: backups taken while another process saves, rotates and compacts each open as a committed prefix, verified, with every blob readable")
    func backupsBesideAWriter() throws {
        let url = TemporaryStores.newURL("backup-live")
        let writer = try Writer(store: url)
        defer { writer.stop() }
        #expect(writer.waitFor(step: 3), "\(writer.lines.withLock { $0 })")
        let backups = TemporaryStores.newURL("backups")
        try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: true)
        // One open kept across backups (it reads the writer's new commits each time), fresh opens, and the tool.
        let kept = try StoreInspector.openReadOnly(at: url)
        defer { try? kept.close() }
        var previous: UInt64 = 0
        for round in 0..<18 {
            let destination = backups.appendingPathComponent("backup-\(round)")
            let report: FileStore.BackupReport
            switch round % 3 {
            case 0:
                report = try kept.backup(to: destination)
            case 1:
                let store = try StoreInspector.openReadOnly(at: url)
                defer { try? store.close() }
                report = try store.backup(to: destination)
            default:
                let run = try CommandLineTests.run(CommandLineTests.executable,
                                                   ["backup", url.path, "--to", destination.path, "--json"])
                #expect(run.status == 0, "\(run)")
                let json = run.json
                report = FileStore.BackupReport(path: json["path"] as? String ?? "",
                                                lastTransactionNumber: UInt64(json["lastTransaction"] as? Int ?? -1),
                                                objects: json["objects"] as? Int ?? -1,
                                                historyTransactions: json["historyTransactions"] as? Int ?? -1,
                                                blobs: json["blobs"] as? Int ?? -1,
                                                promisedBlobs: json["promisedBlobs"] as? Int ?? -1,
                                                bytes: json["bytes"] as? Int ?? -1)
            }
            #expect(report.path == destination.path)
            #expect(report.lastTransactionNumber >= previous,
                    "backups go forward: \(report.lastTransactionNumber) after \(previous)")
            #expect(report.lastTransactionNumber <= UInt64(writer.progress.acked + 1))
            #expect(report.blobs == BackupWorkload.expected(after: Int(report.lastTransactionNumber)).count)
            previous = report.lastTransactionNumber
            #expect(try StoreVerifier.verify(at: destination).problems.isEmpty)
            #expect(try BackupWorkload.check(backup: destination) == nil)
            // Give the writer a moment to move on: save, rotate, compact.
            _ = writer.waitFor(step: writer.progress.acked + 2, seconds: 5)
        }
        let progress = writer.progress
        #expect(progress.errors.isEmpty, "\(progress.errors)")
        #expect(progress.compactions >= 3, "the writer compacted \(progress.compactions) times during the backups")
        let names = try FileManager.default.contentsOfDirectory(atPath: backups.path)
        #expect(names.allSatisfy { $0.hasPrefix("backup-") }, "a backup's temporary directory was left: \(names)")
    }

    @Test("A backup from an open that fell behind reads the last commit first, blobs another open's compaction retired included")
    func retiredBlobsAreCopied() throws {
        let url = TemporaryStores.newURL("backup-retired")
        let app = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                     configurations: [BackupWorkload.configuration(url)])
        let context = ModelContext(app)
        for step in 1...6 { try BackupWorkload.save(step: step, in: context) }
        let reader = try StoreInspector.openReadOnly(at: url)
        defer { try? reader.close() }
        _ = try reader.refresh()
        // The reader holds step 6's state; the app moves on and compacts, retiring blobs the reader's rows name.
        for step in 7...9 { try BackupWorkload.save(step: step, in: context) }
        try (app.store as? FileStore)?.compact()
        try app.close()
        let destination = TemporaryStores.newURL("backup-of-retired")
        let report = try reader.backup(to: destination)
        #expect(report.lastTransactionNumber == 9, "a backup reads the last commit first")
        #expect(try BackupWorkload.check(backup: destination) == nil)
    }

    @Test("A backup refuses a destination that exists, and leaves it as it was")
    func refusesAnExistingDestination() throws {
        let url = TemporaryStores.newURL("backup-exists")
        let app = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                     configurations: [BackupWorkload.configuration(url)])
        defer { try? app.close() }
        try BackupWorkload.save(step: 1, in: ModelContext(app))
        let store = try #require(app.store as? FileStore)
        let destination = TemporaryStores.newURL("taken")
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: destination.appendingPathComponent("file"))
        #expect(throws: FileStoreError.destinationExists(path: destination.path)) { try store.backup(to: destination) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination.path) == ["file"])
        let run = try CommandLineTests.run(CommandLineTests.executable, ["backup", url.path, "--to", destination.path])
        #expect(run.status == 2 && run.errors.contains("exists"), "\(run)")
    }
}
