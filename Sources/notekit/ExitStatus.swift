import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
import NoteKitMirror

/// The exit status of every command, one per kind of outcome, so a script can tell them apart without reading the
/// message. Decided from the error's type and case, never from its text; `notekit help` lists them.
enum ExitStatus: Int32 {
    /// The command did what it was asked; `verify` found nothing wrong.
    case ok = 0
    /// Damage found: `verify` or `salvage` found something wrong, or reading the store met a damaged record.
    case damage = 1
    /// The command line is wrong: an unknown command or option, a missing argument, an entity the store lacks.
    case usage = 2
    /// There is no store at the path, or what is there is not one.
    case notAStore = 3
    /// Another open holds the store's lock (a writer that keeps it, or another compaction).
    case locked = 4
    /// The store needs another build of NoteKit: it was written in a format version or with a schema newer than
    /// this build's, or a migration was refused. The store is left untouched.
    case refused = 5
    /// Anything else: an I/O error (permissions, a full disk), or other processes kept changing the store.
    case failed = 6

    /// The table `notekit help` prints.
    static let table = """
        exit codes:
          0  ok (verify: healthy)
          1  damage found (verify, salvage, or a damaged record met while reading)
          2  usage error (unknown command or option, missing argument, unknown entity, a --to path that exists)
          3  no store at the path, or not a store (a missing path, a plain file)
          4  the store is locked by another open
          5  refused: the store's format or schema is newer than this build, or a migration was refused
          6  any other failure (I/O error, the store kept changing)
        """

    /// The status for `error`.
    init(_ error: any Error) {
        switch error {
        case is UsageError:
            self = .usage
        case is NotAStore:
            self = .notAStore
        case let error as FetchError:
            if case .unknownEntity = error { self = .usage } else { self = .failed }
        case is MigrationError:
            self = .refused
        case let error as FileStoreError:
            switch error {
            case .locked, .lockedInThisProcess:
                self = .locked
            case .storeNotFound, .notAStoreFile, .unexpectedFileType:
                self = .notAStore
            case .unsupportedFormatVersion:
                self = .refused
            case .damagedRecord, .undecodableRecord, .inconsistentSegments, .danglingReference, .nothingToSalvage,
                 .blobRemoved:
                self = .damage
            case .destinationExists:
                self = .usage
            case .writesStopped, .storeKeptChanging, .blobNotFetched, .backupNotVerified:
                self = .failed
            }
        case let error as MirrorError:
            switch error {
            case .invalidConnectionString, .invalidName:
                self = .usage
            case .schemaBehindZone, .unexpectedServerSchema, .schemaNotInitialized,
                 .stateOfAnotherZone:
                self = .refused
            case .connectionFailed, .serverError, .stateUnreadable, .stateUnwritable, .storeFailed, .blobNotOnServer:
                self = .failed
            }
        default:
            self = .failed
        }
    }
}

/// A path that names something other than a store directory (a plain file): one message for every command, before
/// any of them tries to read it.
struct NotAStore: Error, CustomStringConvertible {
    let path: String

    var description: String { "\(path) is a file, not a NoteKit store (a store is a directory holding a MANIFEST)" }
}
