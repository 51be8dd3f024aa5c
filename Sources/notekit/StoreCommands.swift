import Foundation
import NoteKit
import NoteKitFileStore

/// The inspection commands: each reads the store by the schema stored in it, so any NoteKit store works.
enum StoreCommands {
    /// The URL of the store at `path`, after the checks every command makes first, so that each says the same
    /// thing about the same mistake.
    ///
    /// - Parameter requiringManifest: whether a directory without a MANIFEST counts as no store (`verify` reports
    ///   it as a problem instead).
    /// - Throws: ``FileStoreError/storeNotFound(path:)`` when nothing (or, with `requiringManifest`, no MANIFEST) is
    ///   there, ``NotAStore`` when `path` is a plain file.
    static func storeURL(_ path: String, requiringManifest: Bool = true) throws -> URL {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw FileStoreError.storeNotFound(path: url.path)
        }
        guard isDirectory.boolValue else { throw NotAStore(path: url.path) }
        if requiringManifest, !FileManager.default.fileExists(atPath: url.appendingPathComponent("MANIFEST").path) {
            throw FileStoreError.storeNotFound(path: url.path)
        }
        return url
    }

    static func stats(path: String, json: Bool) throws -> Int32 {
        let statistics = try StoreInspector.statistics(at: storeURL(path))
        if json {
            var object: [String: Any] = [
                "formatVersion": statistics.formatVersion,
                "schemaVersion": statistics.schemaVersion.description,
                "schemaHash": statistics.schemaHash,
                "entities": statistics.entities,
                "segments": statistics.segments,
                "bytes": statistics.bytes,
                "segmentBytes": statistics.segmentBytes,
                "blobs": statistics.blobs,
                "blobBytes": statistics.blobBytes,
                "lastTransaction": statistics.lastTransactionNumber,
                "historyTransactions": statistics.historyTransactions,
            ]
            object["historyOldest"] = statistics.historyKept.map { $0.lowerBound as Any } ?? NSNull()
            object["firstTransaction"] = statistics.firstTransactionNumber.map { $0 as Any } ?? NSNull()
            printJSON(object)
            return 0
        }
        print("format version   \(statistics.formatVersion)")
        print("schema           \(statistics.schemaVersion) (\(statistics.schemaHash))")
        print("records")
        for (entity, count) in statistics.entities.sorted(by: { $0.key < $1.key }) {
            print("  \(entity.padding(toLength: max(15, entity.count), withPad: " ", startingAt: 0)) \(count)")
        }
        print("segments         \(statistics.segments) (\(statistics.segmentBytes) bytes)")
        print("blobs            \(statistics.blobs) (\(statistics.blobBytes) bytes)")
        print("bytes            \(statistics.bytes)")
        let range = statistics.firstTransactionNumber.map { "\($0)...\(statistics.lastTransactionNumber)" }
            ?? "none in the log"
        print("log              transactions \(range) (last committed: \(statistics.lastTransactionNumber))")
        let kept = statistics.historyKept.map { "\($0.lowerBound)...\($0.upperBound)" } ?? "none"
        print("history          \(statistics.historyTransactions) transaction(s) kept: \(kept)")
        return 0
    }

    static func verify(path: String, json: Bool) throws -> Int32 {
        let url = try storeURL(path, requiringManifest: false)
        let report = try StoreVerifier.verify(at: url)
        // An incomplete last record is reported, but is not damage (VerificationReport.damage).
        let tail = report.problems.first { $0.kind == .tornTail }
        let damage = report.damage
        if json {
            printJSON([
                "ok": damage.isEmpty,
                "problems": report.problems.map {
                    ["file": $0.file, "offset": $0.offset, "kind": $0.kind.rawValue, "message": $0.message] as [String: Any]
                },
            ])
        } else if damage.isEmpty {
            print("ok: \(url.path) is healthy")
            if let tail {
                print("note: \(tail.file) ends in an incomplete record at byte \(tail.offset): a save in progress, or one "
                      + "a crash cut short, which the next writable open sets aside")
            }
            for warning in report.problems where warning.kind.isWarning {
                print("warning: \(warning.file) at byte \(warning.offset): \(warning.kind.rawValue): \(warning.message)")
            }
        } else {
            for problem in report.problems {
                fail("\(problem.file) at byte \(problem.offset): \(problem.kind.rawValue): \(problem.message)")
            }
            print("\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s") in \(url.path)")
        }
        if !damage.isEmpty { FileHandle.standardError.write(Data((salvageHint(path) + "\n").utf8)) }
        return damage.isEmpty ? ExitStatus.ok.rawValue : ExitStatus.damage.rawValue
    }

    static func dump(path: String, entity: String?, sorted: Bool) throws -> Int32 {
        let store = try StoreInspector.openReadOnly(at: storeURL(path))
        try StoreInspector.dump(store, entity: entity, sorted: sorted) { print($0) }
        return 0
    }

    /// The store's history: each transaction kept after `after`, oldest first, at most `limit`.
    static func history(path: String, after: UInt64?, limit: Int?, json: Bool) throws -> Int32 {
        let store = try StoreInspector.openReadOnly(at: storeURL(path))
        let log = try store.history()
        var records = log.records.filter { $0.number > (after ?? 0) }
        if let limit { records = Array(records.prefix(max(0, limit))) }
        if let after, log.deleted.contains(where: { $0.upperBound > after }) {
            fail("transactions after \(after) were deleted from history: "
                 + log.deleted.map { "\($0.lowerBound)...\($0.upperBound)" }.joined(separator: ", "))
        }
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        for record in records {
            if json {
                var object: [String: Any] = [
                    "tx": record.number,
                    "time": record.timestamp.formatted(time),
                    "inserted": record.inserted.map { ["entity": $0.entityName, "id": $0.primaryKey.uuidString] },
                    "updated": record.updated.map {
                        ["entity": $0.id.entityName, "id": $0.id.primaryKey.uuidString, "properties": $0.properties] as [String: Any]
                    },
                    "deleted": record.deleted.map {
                        ["entity": $0.id.entityName, "id": $0.id.primaryKey.uuidString,
                         "tombstone": $0.tombstone.mapValues { "\($0)" }] as [String: Any]
                    },
                ]
                object["author"] = record.author.map { $0 as Any } ?? NSNull()
                printJSON(object)
            } else {
                print("#\(record.number)  \(record.timestamp.formatted(time))  \(record.author ?? "-")  "
                      + "\(record.inserted.count) inserted, \(record.updated.count) updated, \(record.deleted.count) deleted")
            }
        }
        return 0
    }

    /// The store's schemas, oldest first; with `json`, `{"current": version, "schemas": [schema…]}`, each schema in
    /// its Codable form.
    static func schema(path: String, json: Bool) throws -> Int32 {
        let schemas = try StoreInspector.schemaHistory(at: storeURL(path))
        if json {
            let encoded = try schemas.map {
                try JSONSerialization.jsonObject(with: JSONEncoder().encode($0))
            }
            printJSON(["current": schemas.last.map { $0.version.description as Any } ?? NSNull(), "schemas": encoded])
            return 0
        }
        for (index, schema) in schemas.enumerated() {
            if index > 0 { print("") }
            print(index == schemas.count - 1 ? "current: \(schema.description)" : schema.description)
        }
        return 0
    }

    /// Compacts the store; with `json`, `{"bytesBefore", "bytesAfter", "segmentsRemoved", "blobsRemoved",
    /// "retiredBlobsDeleted"}`.
    static func compact(path: String, json: Bool) throws -> Int32 {
        let url = try storeURL(path)
        // Opening a large store (reading its state) takes as long as compacting it: the line covers both.
        let report = try Progress.whileRunning("compacting \(path)") {
            let store = try StoreInspector.openForWriting(at: url)
            let report = try store.compact()
            try store.close()
            return report
        }
        if json {
            printJSON([
                "bytesBefore": report.bytesBefore, "bytesAfter": report.bytesAfter,
                "segmentsRemoved": report.segmentsRemoved, "blobsRemoved": report.blobsRemoved,
                "retiredBlobsDeleted": report.retiredBlobsDeleted,
            ])
            return 0
        }
        print("compacted \(path): \(report.bytesBefore) bytes of segments before, \(report.bytesAfter) after; "
              + "removed \(report.segmentsRemoved.count) segment(s) and \(report.blobsRemoved.count) blob(s) no "
              + "object names (retired, kept for readers for a while); deleted \(report.retiredBlobsDeleted.count) "
              + "retired blob(s)")
        return 0
    }

    /// Backs the store up into `destination` (``FileStore/backup(to:)``) from a read-only open, which takes no lock;
    /// with `json`, `{"path", "lastTransaction", "objects", "historyTransactions", "blobs", "promisedBlobs",
    /// "bytes"}`.
    static func backup(path: String, to destination: String, json: Bool) throws -> Int32 {
        let url = try storeURL(path)
        let report = try Progress.whileRunning("backing up \(path)") {
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            return try store.backup(to: URL(fileURLWithPath: destination))
        }
        if json {
            printJSON([
                "path": report.path, "lastTransaction": report.lastTransactionNumber, "objects": report.objects,
                "historyTransactions": report.historyTransactions, "blobs": report.blobs,
                "promisedBlobs": report.promisedBlobs, "bytes": report.bytes,
            ])
            return 0
        }
        print("backed up \(path) to \(report.path): transaction \(report.lastTransactionNumber), "
              + "\(report.objects) object(s), "
              + "\(report.historyTransactions) transaction(s) of history, \(report.blobs) blob(s)"
              + (report.promisedBlobs > 0 ? " and \(report.promisedBlobs) promised on the mirror's server" : "")
              + ", \(report.bytes) bytes; verified")
        return 0
    }

    /// Salvages into `destination` in `mode`; with `json`, `{"mode", "complete", "transactionsKept", "objectsKept",
    /// "segmentsUsed", "skippedBytes", "skippedRecords"}`, each skipped part as `{"file", "offset", "length",
    /// "reason"}` and, for a transaction left out, its `"transaction"`.
    static func salvage(path: String, to destination: String, mode: FileStore.SalvageMode, json: Bool) throws -> Int32 {
        let report = try FileStore.salvage(from: storeURL(path), to: URL(fileURLWithPath: destination), mode: mode)
        if json {
            func parts(_ skipped: [FileStore.SalvageReport.Skipped]) -> [[String: Any]] {
                skipped.map {
                    var part: [String: Any] = ["file": $0.file, "offset": $0.offset, "length": $0.length,
                                               "reason": $0.reason]
                    if let transaction = $0.transaction { part["transaction"] = transaction }
                    return part
                }
            }
            printJSON([
                "mode": report.mode.rawValue,
                "complete": report.isComplete, "transactionsKept": report.transactionsKept,
                "objectsKept": report.objectsKept, "segmentsUsed": report.segmentsUsed,
                "skippedBytes": parts(report.skippedBytes), "skippedRecords": parts(report.skippedRecords),
            ])
            return report.isComplete ? ExitStatus.ok.rawValue : ExitStatus.damage.rawValue
        }
        let modeName = report.mode == .bestEffort ? "best effort" : "consistent prefix"
        print("salvaged \(report.transactionsKept) transaction(s) and \(report.objectsKept) object(s) into \(destination) "
              + "(\(modeName))")
        print("from \(report.segmentsUsed.isEmpty ? "no segment" : report.segmentsUsed.joined(separator: ", "))")
        for skipped in report.skippedBytes { fail("left out \(skipped)") }
        for skipped in report.skippedRecords { fail("left out \(skipped)") }
        return report.isComplete ? ExitStatus.ok.rawValue : ExitStatus.damage.rawValue
    }

    /// The line that ends every report of damage: the command that copies what is intact into a new store.
    static func salvageHint(_ path: String) -> String {
        let safe = path.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@".contains($0) }
        let quoted = safe ? path : "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return "to copy what is intact into a new store: notekit salvage \(quoted) --to NEWPATH"
    }
}
