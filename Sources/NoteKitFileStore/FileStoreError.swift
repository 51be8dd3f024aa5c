import NoteKit

/// Why a file store could not be opened, read or written. Each case names the file and, for damage, the byte
/// offset, so a person can look at the spot with a text editor.
public enum FileStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Another process holds the store's lock (it has the store open exclusively, or is in the middle of a save,
    /// a compaction, a migration), and kept it for the whole busy timeout this open waited, `timeout` seconds
    /// (``FileStoreConfiguration/lockTimeout``). `holder` is that process's id when the lock file names a live
    /// process; the lock itself decides, the id is only for the message.
    case locked(path: String, holder: Int32?, timeout: Double)
    /// Another open of this process (another container's `FileStore`) has the store open for writing.
    case lockedInThisProcess(path: String)
    /// The path holds no store (and the configuration did not ask to create one).
    case storeNotFound(path: String)
    /// A file is not a NoteKit store file of the expected kind: `kind` says how (empty, not a NoteKit file, a
    /// NoteKit file of another kind), `reason` in a sentence.
    case notAStoreFile(file: String, kind: StoreFileMismatch, reason: String)
    /// Where the store keeps a regular file (or a directory, `expected`) there is something else: a symbolic
    /// link, a FIFO, a socket, a device, a directory. The store follows no symbolic link to its files and opens no
    /// special file, so nothing was read or written through it (docs/FORMAT.md, *File types*).
    case unexpectedFileType(path: String, found: StoreFileKind, expected: StoreFileKind)
    /// A file was written by a format version this build does not read.
    case unsupportedFormatVersion(file: String, found: Int, supported: [Int])
    /// A record is damaged where a torn tail cannot explain it: `kind` says how the bytes at `offset` fail to
    /// frame a record (the same kinds ``StoreVerifier`` reports), `reason` what exactly was found.
    case damagedRecord(file: String, offset: Int, kind: RecordDamage, reason: String)
    /// A record is intact but its content is not what the format allows. `reason` is the decoder's diagnostic (the
    /// field, value or record concerned), for a person: it has no kind, as every such record is refused alike;
    /// ``StoreVerifier`` reports it as ``VerificationReport/Kind/undecodableRecord``.
    case undecodableRecord(file: String, offset: Int, reason: String)
    /// The manifest is missing, names a segment that is missing, or lists segments in an impossible order, or a
    /// segment is not the one the manifest names: `kind` says which.
    case inconsistentSegments(file: String, kind: SegmentInconsistency, reason: String)
    /// A transaction of the log does not apply to the state before it: it references an object the store does not
    /// have, or is out of sequence (`kind` says which).
    case danglingReference(file: String, offset: Int, kind: TransactionConflictKind, reason: String)
    /// The store stopped accepting writes after an I/O failure whose outcome on disk is unknown: `kind` names the
    /// write that failed, `reason` the error. Reopening the store makes it writable again.
    case writesStopped(kind: InterruptedWrite, reason: String)
    /// A salvage found no whole state in the store at `path`: no segment with a readable schema, or only
    /// snapshots whose rows did not all arrive (`kind` says which).
    case nothingToSalvage(path: String, kind: SalvageFailure, reason: String)
    /// Other processes kept changing the store at `path` (compacting, rotating, migrating) for all of the `seconds`
    /// a read was willing to retry, over `attempts` attempts: no consistent view of it was read. Not damage: read
    /// again, or allow longer (``FileStoreConfiguration/readRetryTimeout``).
    case storeKeptChanging(path: String, attempts: Int, seconds: Double)
    /// The blob `name` that an object this open read names is neither at `path` nor kept retired beside it. Its
    /// cause in a healthy store: another process changed or deleted that object, and a compaction (or a writable
    /// open) removed the blob it no longer named, once it had been retired longer than
    /// ``FileStoreConfiguration/retiredBlobGracePeriod``. Fetching again reads the object's current value. (When
    /// a fresh fetch still names the blob, the store is damaged; ``StoreVerifier`` reports it as a missing blob.)
    case blobRemoved(name: String, path: String)
    /// The blob `name` is on the server of the store's mirror and has not been fetched into `path` yet, and this
    /// process has no mirror to fetch it from: a mirror's import records a blob that arrives from another machine
    /// without its bytes, and the first read in a process that mirrors the store (NoteKitMirror's `StoreMirror`, or
    /// `notekit mirror fetch-blobs`) fetches them. Nothing is lost; read again once the mirroring process has.
    case blobNotFetched(name: String, path: String)
    /// Something is at `path`, where a backup (``FileStore/backup(to:)``) or a salvage was to create a new store:
    /// neither ever writes into or over an existing file or directory.
    case destinationExists(path: String)
    /// The copy a backup wrote for `path` did not pass ``StoreVerifier``: `problems` lists what it found. The copy
    /// was deleted and nothing is at `path`; the store itself is unchanged (run `notekit verify` on it).
    case backupNotVerified(path: String, problems: [VerificationReport.Problem])

    /// A sentence a person can act on: what is wrong, the file and byte offset concerned, and, where one helps,
    /// what to do next.
    public var description: String {
        switch self {
        case let .locked(path, holder, timeout):
            "\(path) is locked by another process\(holder.map { " (pid \($0))" } ?? ""), which kept the lock for "
                + "all of the \(Self.seconds(timeout)) s this open waited (lockTimeout): it has the store open "
                + "exclusively (sharing: .exclusive), or is in a long save, compaction or migration; open the store "
                + "read-only, or wait longer"
        case .lockedInThisProcess(let path):
            "\(path) is already open for writing in this process, by another container's FileStore; close that "
                + "container or its FileStore (FileStore.close()) first, or open this one read-only"
        case .storeNotFound(let path): "there is no NoteKit store at \(path)"
        case let .notAStoreFile(file, _, reason): "\(file) is not a NoteKit store file: \(reason)"
        case let .unexpectedFileType(path, found, expected):
            "\(path) is \(found), where the store keeps \(expected)" + Self.why(found)
                + " (docs/FORMAT.md, File types); replace it with \(expected)"
        case let .unsupportedFormatVersion(file, found, supported):
            "\(file) is in store format version \(found); this build reads version"
                + "\(supported.count == 1 ? "" : "s") \(supported.map(String.init).joined(separator: ", "))"
        case let .damagedRecord(file, offset, _, reason): "\(file) is damaged at byte \(offset): \(reason)"
        case let .undecodableRecord(file, offset, reason):
            "\(file) has a record at byte \(offset) that cannot be decoded: \(reason)"
        case let .inconsistentSegments(file, _, reason): "\(file): \(reason)"
        case let .danglingReference(file, offset, _, reason): "\(file) at byte \(offset): \(reason)"
        case .writesStopped(_, let reason):
            "the store accepts no more writes until it is reopened: \(reason)"
        case let .nothingToSalvage(path, _, reason): "nothing whole could be salvaged from \(path): \(reason)"
        case let .storeKeptChanging(path, attempts, seconds):
            "\(path) kept changing under this read: in \(seconds) seconds, each of \(attempts) attempts found the "
                + "manifest replaced (other processes compacted, rotated or migrated the store) or the segments "
                + "changing; nothing was found damaged. Read again, or allow longer "
                + "(FileStoreConfiguration.readRetryTimeout)"
        case let .blobRemoved(name, path):
            "blob \(name) is gone from \(path): another process's compaction removed it after this open read the "
                + "object that names it (that object has been changed or deleted since, and a blob no object names "
                + "is kept only for FileStoreConfiguration.retiredBlobGracePeriod); fetch again to read the current "
                + "value. If a fresh fetch still names this blob, the store is damaged: run notekit verify"
        case .destinationExists(let path):
            "\(path) exists: a backup or a salvage creates a new store and writes into or over nothing; choose a path "
                + "where nothing is"
        case let .backupNotVerified(path, problems):
            "the backup for \(path) did not verify, and was deleted (the store is unchanged): "
                + problems.prefix(3).map(\.description).joined(separator: "; ")
                + (problems.count > 3 ? "; and \(problems.count - 3) more" : "")
        case let .blobNotFetched(name, path):
            "blob \(name) is on the store's mirror server and not fetched into \(path) yet, and this process does "
                + "not mirror the store: the process that mirrors it (StoreMirror) fetches it when it first reads it, "
                + "or notekit mirror fetch-blobs fetches every such blob now"
        }
    }
}

extension FileStoreError {
    /// Why an entry of kind `found` is refused, for a message: nothing to add for a file or a directory in the wrong
    /// place.
    private static func why(_ found: StoreFileKind) -> String {
        switch found {
        case .regularFile, .directory: ""
        case .symbolicLink: ": NoteKit follows no symbolic link there"
        case .fifo, .socket, .characterDevice, .blockDevice, .unknown: ": NoteKit opens no special file"
        }
    }

    /// Seconds for a message: `5`, `0.25`.
    private static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}

/// How the bytes where a record belongs fail to frame one (docs/FORMAT.md, *Records*): the kind of a
/// ``FileStoreError/damagedRecord(file:offset:kind:reason:)``, beside the sentence that says exactly what was found.
public enum RecordDamage: Sendable, Hashable {
    /// The frame is whole but its payload does not match its checksum: bytes changed after they were written.
    case checksumMismatch
    /// The bytes end before the record does: fewer than a header, a length that runs past the end of the file, a
    /// segment cut before its opening records end.
    case truncated
    /// The bytes do not frame a record: a header that does not parse, a length past the maximum, a missing newline
    /// or one inside the payload, zeros where a record belongs, bytes after the manifest's record.
    case malformed
}
