#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file operations the file store performs, behind a protocol: the one place where it touches the disk.
///
/// `POSIXFileSystem` is the real one. Tests wrap it to fail chosen calls (the Nth write, fsync, rename or
/// directory sync; short writes; a full disk) and check that the store stays consistent.
///
/// The store's files are regular files: an implementation's reads, appends, cuts, locks and removals refuse
/// anything else at a path (a symbolic link, FIFO, socket, device, directory) with
/// ``FileStoreError/unexpectedFileType(path:found:expected:)``, without following it or blocking on it.
package protocol StoreFileSystem: Sendable {
    /// The whole content of the file at `path`.
    func read(_ path: String) throws -> [UInt8]
    /// The content of the file at `path` from `offset` on (empty past the end).
    func read(_ path: String, from offset: Int) throws -> [UInt8]
    /// At most `count` bytes of the file at `path` from `offset` (fewer at the end).
    func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8]
    /// The size and identity of the file at `path`; nil when it does not exist. A store file is a regular file:
    /// an implementation refuses anything else with ``FileStoreError/unexpectedFileType(path:found:expected:)``.
    func status(_ path: String) throws -> StoreFileStatus?
    /// Creates a new, empty file (failing if it exists) and opens it for writing.
    func create(_ path: String) throws -> any StoreFile
    /// Opens an existing file for appending at its end.
    func openForAppending(_ path: String) throws -> any StoreFile
    /// Opens an existing file for appending at `end`, leaving what the file holds after `end` in place: the next
    /// append lands at `end` and overwrites it. For a segment whose last record ends at `end`, followed by space
    /// another writer reserved (zeros), which appends then write into without changing the file's length.
    ///
    /// - Throws: the file system's error; `EINVAL` when the file is shorter than `end`.
    func openForAppending(_ path: String, at end: Int) throws -> any StoreFile
    /// Opens the regular file at `path` for reading at any offset. Reads through the handle see the file that was
    /// opened, even after another file is renamed over `path` or it is deleted: the store reads a checkpoint and the
    /// segment it describes through handles, so that another process's compaction cannot mix two files into one
    /// answer.
    ///
    /// The default reads `path` again on every read, which is right only for a file system whose files are never
    /// replaced while open (a test's); ``POSIXFileSystem`` holds a descriptor.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or the
    ///   file system's error (a missing file).
    func openForReading(_ path: String) throws -> any StoreReadableFile
    /// Renames `source` to `destination`, replacing it atomically.
    func rename(_ source: String, to destination: String) throws
    /// Deletes the regular file at `path`.
    func remove(_ path: String) throws
    /// Flushes a directory's entries (file creations, renames, deletions) to disk.
    func syncDirectory(_ path: String) throws
    /// Creates a directory (and its parents) if it does not exist.
    func makeDirectory(_ path: String) throws
    /// The names of the entries of the directory at `path`.
    func contentsOfDirectory(_ path: String) throws -> [String]
    /// Whether something exists at `path` (a link counts, whether or not what it names exists).
    func exists(_ path: String) -> Bool
    /// Cuts the file at `path` to `length` bytes and flushes it.
    func truncate(_ path: String, to length: Int) throws
    /// Takes an exclusive advisory lock on the file at `path` (creating it), or returns nil when another open
    /// file description holds it.
    func tryLock(_ path: String) throws -> (any StoreLockHandle)?
    /// Opens the lock file at `path` (creating it) and keeps it open, for a writer that takes and releases the lock
    /// again and again: each ``StoreLockFile/tryLock()`` is then a `flock` on the open file, with no open, `stat` or
    /// path resolution. The default locks through ``tryLock(_:)`` by path each time.
    func openLockFile(_ path: String) throws -> any StoreLockFile
    /// What the entry at `path` is, without following a symbolic link there (`lstat`); nil when there is none.
    /// The store deletes an entry only when this says it is a regular file, and keeps torn tails only in a
    /// directory.
    ///
    /// - Throws: an I/O error other than the entry's absence.
    func kind(of path: String) throws -> StoreFileKind?
}

/// What a directory entry is: the store keeps its files only in regular files and directories.
public enum StoreFileKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A regular file: what every store file must be.
    case regularFile
    /// A directory: what the store's directory, `segments/`, `blobs/` and `quarantine/` must be.
    case directory
    /// A symbolic link (`lstat` does not follow it).
    case symbolicLink
    /// A FIFO (named pipe), which would block an open that waited for a writer.
    case fifo
    /// A Unix-domain socket.
    case socket
    /// A character device, such as `/dev/null`.
    case characterDevice
    /// A block device, such as a disk.
    case blockDevice
    /// A kind this build has no name for: treated like any other kind that is not a regular file or a directory.
    case unknown

    /// The kind with an article, for messages: "a symbolic link", "a FIFO".
    public var description: String {
        switch self {
        case .regularFile: "a regular file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .fifo: "a FIFO (named pipe)"
        case .socket: "a socket"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .unknown: "an entry of unknown kind"
        }
    }
}

/// What a refresh needs to know to tell whether a file changed: its size and an identity that changes when the
/// file is replaced (a new inode) or modified.
package struct StoreFileStatus: Sendable, Hashable {
    /// The file's length in bytes.
    package var size: Int
    /// Changes when the file is replaced or written (for POSIX: device, inode and modification time).
    package var identity: [Int64]

    /// A status of `size` bytes and the given identity; a file system implementation returns it from
    /// ``StoreFileSystem/status(_:)``.
    package init(size: Int, identity: [Int64]) {
        self.size = size
        self.identity = identity
    }
}

extension StoreFileSystem {
    /// Writes `bytes` as a new file at `path` (a temporary name: one left by an earlier attempt is removed first),
    /// flushes it and closes it; on failure closes and removes it again. What the manifest, the checkpoint and each
    /// blob are written as before they are renamed into place.
    ///
    /// - Throws: the file system's error.
    func writeFlushedFile(_ path: String, _ bytes: some ContiguousBytes) throws {
        if exists(path) { try remove(path) }
        let file = try create(path)
        do {
            try bytes.withUnsafeBytes { try file.append($0) }
            try file.sync()
            try file.close()
        } catch {
            try? file.close()
            try? remove(path)
            throw error
        }
    }

    /// The default: a handle that reads `path` again on every read (see the requirement), after checking that
    /// `path` is a regular file now.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)``, or ``StoreIOError`` (`ENOENT`) when
    ///   nothing is at `path`.
    package func openForReading(_ path: String) throws -> any StoreReadableFile {
        guard let found = try kind(of: path) else {
            throw StoreIOError(operation: "open", path: path, code: ENOENT)
        }
        guard found == .regularFile else {
            throw FileStoreError.unexpectedFileType(path: path, found: found, expected: .regularFile)
        }
        return PathReadableFile(path: path, fileSystem: self)
    }

    /// The bytes of the file at `path` from `offset` to its end. The default reads the whole file; a file system
    /// that can read from an offset should.
    ///
    /// - Throws: an I/O error.
    package func read(_ path: String, from offset: Int) throws -> [UInt8] {
        let bytes = try read(path)
        return offset >= bytes.count ? [] : Array(bytes[offset...])
    }

    /// At most `count` bytes from `offset`. The default reads from `offset` to the end; a file system that can
    /// read a range should.
    ///
    /// - Throws: an I/O error.
    package func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        Array(try read(path, from: offset).prefix(max(0, count)))
    }

    /// The status of the file at `path`, or nil when it does not exist. The default reads the whole file.
    ///
    /// - Throws: an I/O error other than the file's absence.
    package func status(_ path: String) throws -> StoreFileStatus? {
        guard exists(path) else { return nil }
        let bytes = try read(path)
        var hasher = Hasher()
        hasher.combine(bytes)
        return StoreFileStatus(size: bytes.count, identity: [Int64(hasher.finalize())])
    }
}

/// A file opened for reading by ``StoreFileSystem/openForReading(_:)``. Reads may come from any thread.
package protocol StoreReadableFile: AnyObject, Sendable {
    /// The path the file was opened at.
    var path: String { get }
    /// The file's length now.
    ///
    /// - Throws: the file system's error, naming the file.
    func size() throws -> Int
    /// At most `count` bytes from `offset` (fewer at the end of the file, none past it).
    ///
    /// - Throws: the file system's error, naming the file.
    func read(from offset: Int, count: Int) throws -> [UInt8]
}

/// The default read handle: it reads its path again on every read.
final class PathReadableFile: StoreReadableFile {
    let path: String
    let fileSystem: any StoreFileSystem

    init(path: String, fileSystem: any StoreFileSystem) {
        self.path = path
        self.fileSystem = fileSystem
    }

    func size() throws -> Int {
        guard let status = try fileSystem.status(path) else {
            throw StoreIOError(operation: "stat", path: path, code: ENOENT)
        }
        return status.size
    }

    func read(from offset: Int, count: Int) throws -> [UInt8] {
        try fileSystem.read(path, from: offset, count: count)
    }
}

/// An open file the store writes to, returned by ``StoreFileSystem/create(_:)`` and
/// ``StoreFileSystem/openForAppending(_:)``.
package protocol StoreFile: AnyObject {
    /// How many bytes the file has.
    var size: Int { get }
    /// Writes all of `bytes` at the end of the file, or throws (having possibly written a prefix).
    func append(_ bytes: UnsafeRawBufferPointer) throws
    /// Flushes the file's data to disk (`fdatasync` on Linux, `F_FULLFSYNC` on Darwin).
    func sync() throws
    /// Closes the file.
    func close() throws
    /// Allocates the file's blocks up to `capacity` bytes, extending it with zeros, without moving ``size`` (where
    /// the next append lands). Appends into allocated space do not change the file's length, so flushing them
    /// writes no metadata: about a third less time per durable save on ext4. Best effort: a file system that
    /// cannot do it may do nothing (the default) or throw, and callers go on without it.
    func reserve(upTo capacity: Int) throws
}

extension StoreFile {
    /// Does nothing: appends extend the file as they go.
    package func reserve(upTo capacity: Int) throws {}
}

/// A lock file kept open by ``StoreFileSystem/openLockFile(_:)``.
package protocol StoreLockFile: AnyObject, Sendable {
    /// Takes the exclusive lock, or returns nil when another open file description holds it, or when this file's
    /// lock is already held (one holder at a time, whichever thread asks).
    func tryLock() throws -> (any StoreLockHandle)?
    /// Closes the file; a lock still held is released with it. Called once; later calls do nothing.
    func close()
}

extension StoreFileSystem {
    package func openLockFile(_ path: String) throws -> any StoreLockFile { PathLockFile { try tryLock(path) } }
}

/// The default ``StoreLockFile``: nothing kept open, each attempt a ``StoreFileSystem/tryLock(_:)`` by path, so a
/// file system that only knows paths (the simulated disk, a fault-injecting wrapper) sees every lock it is asked for.
private final class PathLockFile: StoreLockFile {
    let attempt: @Sendable () throws -> (any StoreLockHandle)?
    init(_ attempt: @escaping @Sendable () throws -> (any StoreLockHandle)?) { self.attempt = attempt }
    func tryLock() throws -> (any StoreLockHandle)? { try attempt() }
    func close() {}
}

/// A held advisory lock; released by `unlock()` or when the process ends.
package protocol StoreLockHandle: AnyObject, Sendable {
    /// Releases the lock. The store calls it once per handle; it cannot fail (the kernel releases a `flock` when
    /// its file is closed in any case).
    func unlock()
}

/// An I/O call that failed, naming the operation, the file and the system's error.
public struct StoreIOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation: "open", "write", "fsync", "rename"…
    public let operation: String
    /// The file or directory.
    public let path: String
    /// The `errno` value.
    public let code: Int32

    /// The error of `operation` on `path`, failed with the `errno` value `code`; the store's file operations throw
    /// it.
    package init(operation: String, path: String, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    /// The operation, the path, and the system's meaning of the error with its number: `read failed for
    /// …/segments/000002.seg: Permission denied (errno 13)`.
    public var description: String {
        "\(operation) failed for \(path): \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// A file system that passes every call to `base`, for a wrapper that changes or watches a few of them (one file
/// shown cut short, bytes counted): it implements only those.
///
/// ``StoreFileSystem/openForReading(_:)`` is not passed on: the default handle reads through the wrapper's own
/// reads, so what the wrapper does to reads it does to reads through a handle too.
package protocol ForwardingFileSystem: StoreFileSystem {
    /// The file system the calls go to.
    var base: any StoreFileSystem { get }
}

extension ForwardingFileSystem {
    package func read(_ path: String) throws -> [UInt8] { try base.read(path) }
    package func read(_ path: String, from offset: Int) throws -> [UInt8] { try base.read(path, from: offset) }
    package func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        try base.read(path, from: offset, count: count)
    }
    package func status(_ path: String) throws -> StoreFileStatus? { try base.status(path) }
    package func create(_ path: String) throws -> any StoreFile { try base.create(path) }
    package func openForAppending(_ path: String) throws -> any StoreFile { try base.openForAppending(path) }
    package func openForAppending(_ path: String, at end: Int) throws -> any StoreFile {
        try base.openForAppending(path, at: end)
    }
    package func rename(_ source: String, to destination: String) throws { try base.rename(source, to: destination) }
    package func remove(_ path: String) throws { try base.remove(path) }
    package func syncDirectory(_ path: String) throws { try base.syncDirectory(path) }
    package func makeDirectory(_ path: String) throws { try base.makeDirectory(path) }
    package func contentsOfDirectory(_ path: String) throws -> [String] { try base.contentsOfDirectory(path) }
    package func exists(_ path: String) -> Bool { base.exists(path) }
    package func truncate(_ path: String, to length: Int) throws { try base.truncate(path, to: length) }
    package func tryLock(_ path: String) throws -> (any StoreLockHandle)? { try base.tryLock(path) }
    package func kind(of path: String) throws -> StoreFileKind? { try base.kind(of: path) }
}
