#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

// `close`, `read` and `rename` under names that no method shadows: inside `POSIXFileSystem` and `POSIXFile`, those
// names are their own methods, and a C library module's name (`Glibc.close`) differs from platform to platform.
private func closeDescriptor(_ descriptor: Int32) -> Int32 { close(descriptor) }
private func renamePath(_ source: String, _ destination: String) -> Int32 { rename(source, destination) }

/// Flushes what was written to `descriptor` to stable storage; -1 with `errno` set when that fails.
///
/// Linux: `fdatasync` with `dataOnly` (the file's data, and its length when that changed), else `fsync`. Darwin has
/// no `fdatasync`, and its `fsync` leaves the data in the drive's write cache: `F_FULLFSYNC` asks the drive to
/// write it out, and a file system that does not support it gets `fsync`, as in SQLite. Any other failure is
/// returned, not followed by an `fsync` that could succeed over data the failed flush dropped
/// (docs/FORMAT.md, *A failed flush*).
private func flush(_ descriptor: Int32, dataOnly: Bool) -> Int32 {
    #if os(Linux)
    return dataOnly ? fdatasync(descriptor) : fsync(descriptor)
    #elseif canImport(Darwin)
    if fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
    guard errno == ENOTSUP || errno == ENOTTY || errno == EINVAL else { return -1 }
    return fsync(descriptor)
    #else
    return fsync(descriptor)
    #endif
}

/// The real file system, through POSIX calls.
///
/// Every file it opens for the store is a regular file reached without a symbolic link at its last component
/// (`O_NOFOLLOW`, then `fstat`), opened without blocking (a FIFO cannot hang an open), and it deletes regular files
/// only: a link, FIFO, socket, device or directory where a store file belongs is refused with
/// ``FileStoreError/unexpectedFileType(path:found:expected:)`` before a byte is read or written. Directories are
/// followed: a store's `blobs/` or `segments/` may be a link to a directory elsewhere (docs/FORMAT.md, *File types*).
package struct POSIXFileSystem: StoreFileSystem {
    /// The real file system. It holds no state: every instance behaves the same.
    package init() {}

    /// The whole content of the regular file at `path`, read in a loop until its length at open.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or a
    ///   ``StoreIOError`` naming the failed call.
    /// - Complexity: allocates the file's length; the store reads segments in bounded pieces instead.
    package func read(_ path: String) throws -> [UInt8] {
        try read(path, from: 0, count: nil)
    }

    /// The bytes from `offset` to the end, read with `pread`: a refresh reads only what was appended.
    package func read(_ path: String, from offset: Int) throws -> [UInt8] {
        try read(path, from: offset, count: nil)
    }

    /// At most `count` bytes from `offset`, read with `pread` (fewer at the end of the file).
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or a
    ///   ``StoreIOError``.
    /// - Complexity: allocates at most `count` bytes, whatever the file's length.
    package func read(_ path: String, from offset: Int, count limit: Int) throws -> [UInt8] {
        try read(path, from: offset, count: Optional(limit))
    }

    private func read(_ path: String, from offset: Int, count limit: Int?) throws -> [UInt8] {
        let (descriptor, status) = try openRegularFile(path, O_RDONLY)
        defer { _ = closeDescriptor(descriptor) }
        return try preadFully(descriptor, size: Int(status.st_size), from: offset, count: limit ?? Int.max,
                              path: path)
    }

    /// Opens the regular file at `path` (no link at its last component, no FIFO or device) and keeps its
    /// descriptor until the handle is released: reads see that file even after another is renamed over `path`.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or the
    ///   open's ``StoreIOError``.
    package func openForReading(_ path: String) throws -> any StoreReadableFile {
        let (descriptor, _) = try openRegularFile(path, O_RDONLY)
        return POSIXReadableFile(path: path, descriptor: descriptor)
    }

    /// Opens the store file at `path` with `flags`, refusing anything but a regular file reached without a
    /// symbolic link at its last component: `O_NOFOLLOW` makes a link fail the open, `O_NONBLOCK` makes a FIFO
    /// open at once (it is cleared again, so reads and writes block as usual), and `fstat` on the descriptor says
    /// what was opened. A device is opened (without blocking) before it is refused, and nothing is read from it.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or
    ///   the open's ``StoreIOError``.
    private func openRegularFile(_ path: String, _ flags: Int32, creating: Bool = false) throws
        -> (descriptor: Int32, status: stat) {
        let descriptor = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let code = errno
            // ELOOP is a link, ENXIO a socket (or a FIFO opened to write), EISDIR a directory opened to write.
            if code != ENOENT, let found = try? kind(of: path), found != .regularFile {
                throw FileStoreError.unexpectedFileType(path: path, found: found, expected: .regularFile)
            }
            throw StoreIOError(operation: creating ? "open or create" : "open", path: path, code: code)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            _ = closeDescriptor(descriptor)
            throw StoreIOError(operation: "stat", path: path, code: code)
        }
        let found = Self.kind(of: status.st_mode)
        guard found == .regularFile else {
            _ = closeDescriptor(descriptor)
            throw FileStoreError.unexpectedFileType(path: path, found: found, expected: .regularFile)
        }
        let current = fcntl(descriptor, F_GETFL)
        guard current >= 0, fcntl(descriptor, F_SETFL, current & ~O_NONBLOCK) == 0 else {
            let code = errno
            _ = closeDescriptor(descriptor)
            throw StoreIOError(operation: "fcntl", path: path, code: code)
        }
        return (descriptor, status)
    }

    /// What `lstat` says is at `path`: a link is reported as such, not followed.
    package func kind(of path: String) throws -> StoreFileKind? {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw StoreIOError(operation: "lstat", path: path, code: errno)
        }
        return Self.kind(of: status.st_mode)
    }

    private static func kind(of mode: mode_t) -> StoreFileKind {
        switch mode & S_IFMT {
        case S_IFREG: .regularFile
        case S_IFDIR: .directory
        case S_IFLNK: .symbolicLink
        case S_IFIFO: .fifo
        case S_IFSOCK: .socket
        case S_IFCHR: .characterDevice
        case S_IFBLK: .blockDevice
        default: .unknown
        }
    }

    /// One `lstat`: size, device, inode and modification time of a regular file. Anything else (a link, a FIFO, a
    /// socket, a device, a directory) is refused here, as opening it is, since its size means nothing: a reader that
    /// sizes its reads by the status never mistakes a FIFO for an empty file.
    package func status(_ path: String) throws -> StoreFileStatus? {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw StoreIOError(operation: "stat", path: path, code: errno)
        }
        let found = Self.kind(of: status.st_mode)
        guard found == .regularFile else {
            throw FileStoreError.unexpectedFileType(path: path, found: found, expected: .regularFile)
        }
        #if canImport(Darwin)
        let modified = status.st_mtimespec
        #else
        let modified = status.st_mtim
        #endif
        // `truncatingIfNeeded`: `dev_t` is unsigned on Linux and signed on Darwin; either way its bits are kept.
        return StoreFileStatus(size: Int(status.st_size), identity: [
            Int64(truncatingIfNeeded: status.st_dev), Int64(truncatingIfNeeded: status.st_ino),
            Int64(modified.tv_sec), Int64(modified.tv_nsec),
        ])
    }

    /// Creates a new, empty file with `O_EXCL` (no link is followed; an existing entry of any kind refuses it) and
    /// opens it for writing.
    ///
    /// - Throws: a ``StoreIOError`` (`EEXIST` when something is at `path`).
    package func create(_ path: String) throws -> any StoreFile {
        // O_EXCL fails on any existing entry, a link (dangling or not) included: nothing is created through one.
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreIOError(operation: "create", path: path, code: errno) }
        return POSIXFile(descriptor: descriptor, path: path, size: 0)
    }

    /// Opens the existing regular file at `path` for writing at its end.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or a
    ///   ``StoreIOError``.
    package func openForAppending(_ path: String) throws -> any StoreFile {
        try openForWriting(path, at: nil)
    }

    /// Opens the regular file at `path` for writing at `end` (appends are `pwrite`s at the position the file
    /// keeps, so nothing after `end` moves or is cut).
    ///
    /// - Throws: a ``StoreIOError`` naming the path; `EINVAL` when the file is shorter than `end`.
    package func openForAppending(_ path: String, at end: Int) throws -> any StoreFile {
        try openForWriting(path, at: end)
    }

    /// The regular file at `path` open for writing at `end`, or at its end when `end` is nil.
    private func openForWriting(_ path: String, at end: Int?) throws -> POSIXFile {
        let (descriptor, _) = try openRegularFile(path, O_WRONLY)
        let length = lseek(descriptor, 0, SEEK_END)
        guard length >= 0 else {
            let code = errno
            _ = closeDescriptor(descriptor)
            throw StoreIOError(operation: "seek", path: path, code: code)
        }
        guard let end else { return POSIXFile(descriptor: descriptor, path: path, size: Int(length)) }
        guard end >= 0, end <= length else {
            _ = closeDescriptor(descriptor)
            throw StoreIOError(operation: "open at \(end)", path: path, code: EINVAL)
        }
        return POSIXFile(descriptor: descriptor, path: path, size: end)
    }

    /// Renames `source` to `destination` with `rename(2)`, replacing `destination` atomically. Not durable until
    /// the directory is flushed (``syncDirectory(_:)``).
    ///
    /// - Throws: a ``StoreIOError`` naming both paths.
    package func rename(_ source: String, to destination: String) throws {
        guard renamePath(source, destination) == 0 else {
            throw StoreIOError(operation: "rename", path: "\(source) -> \(destination)", code: errno)
        }
    }

    /// Deletes the regular file at `path` (a link there is not followed, and is refused like any other kind).
    package func remove(_ path: String) throws {
        if let found = try kind(of: path), found != .regularFile {
            throw FileStoreError.unexpectedFileType(path: path, found: found, expected: .regularFile)
        }
        guard unlink(path) == 0 else { throw StoreIOError(operation: "unlink", path: path, code: errno) }
    }

    /// Flushes the directory at `path` (`fsync` of the directory), making its creations, renames and deletions
    /// durable.
    ///
    /// - Throws: a ``StoreIOError``.
    package func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open directory", path: path, code: errno) }
        defer { _ = closeDescriptor(descriptor) }
        guard fsync(descriptor) == 0 else { throw StoreIOError(operation: "fsync directory", path: path, code: errno) }
    }

    /// Creates the directory at `path` and any missing parent, each with mode 0755; an existing one is left as it
    /// is.
    ///
    /// - Throws: a ``StoreIOError`` naming the component that could not be created.
    package func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw StoreIOError(operation: "mkdir", path: prefix, code: errno)
            }
        }
    }

    /// The names of the entries of the directory at `path`, sorted, without `.` and `..`.
    ///
    /// - Throws: a ``StoreIOError``.
    package func contentsOfDirectory(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else {
            throw StoreIOError(operation: "opendir", path: path, code: errno)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Whether anything is at `path`, a dangling link included (`lstat`).
    package func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// Cuts the regular file at `path` to `length` bytes and flushes it (`fsync`, data and length).
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` for anything but a regular file, or a
    ///   ``StoreIOError``.
    package func truncate(_ path: String, to length: Int) throws {
        let (descriptor, _) = try openRegularFile(path, O_WRONLY)
        defer { _ = closeDescriptor(descriptor) }
        guard ftruncate(descriptor, off_t(length)) == 0 else {
            throw StoreIOError(operation: "truncate", path: path, code: errno)
        }
        guard flush(descriptor, dataOnly: false) == 0 else {
            throw StoreIOError(operation: "fsync", path: path, code: errno)
        }
    }

    /// Opens the lock file at `path` as ``tryLock(_:)`` does, and keeps it open (see ``POSIXLockFile``).
    package func openLockFile(_ path: String) throws -> any StoreLockFile {
        POSIXLockFile(descriptor: try openRegularFile(path, O_RDWR | O_CREAT, creating: true).descriptor, path: path)
    }

    /// Takes the lock on the regular file at `path`, creating it; a link there (dangling or not) is refused
    /// rather than followed, so nothing is created outside the store. Once it holds the lock, it writes this
    /// process's id on the file's first line (no flush: it is only for the message of a process that waits).
    /// Unlocking closes the file.
    package func tryLock(_ path: String) throws -> (any StoreLockHandle)? {
        let descriptor = try openRegularFile(path, O_RDWR | O_CREAT, creating: true).descriptor
        let file = POSIXLockFile(descriptor: descriptor, path: path, closingOnUnlock: true)
        // When another holds the lock, the file is closed as it is let go here (deinit).
        return try file.tryLock()
    }
}

/// A lock file held open, whose `flock` is taken and released on its descriptor: `LOCK` kept open by a writer shared
/// per save from its first save to its close (docs/FORMAT.md, *Locking*), or opened for one lock that closes it
/// (``POSIXFileSystem/tryLock(_:)``). One holder at a time: a second `flock` on the same open file description would
/// succeed, so the file itself refuses a lock it already holds.
final class POSIXLockFile: StoreLockFile {
    private let descriptor: Int32
    private let path: String
    /// Whether releasing the lock closes the file (a lock taken by path) or keeps it open for the next.
    private let closingOnUnlock: Bool
    /// The process id written as the holder (taken once: a child process does not save through its parent's store).
    private let pid = getpid()
    /// Whether the lock is held through this file, and whether the file is closed.
    private let status = Mutex<(held: Bool, closed: Bool)>((false, false))

    init(descriptor: Int32, path: String, closingOnUnlock: Bool = false) {
        self.descriptor = descriptor
        self.path = path
        self.closingOnUnlock = closingOnUnlock
    }

    deinit { close() }

    func tryLock() throws -> (any StoreLockHandle)? {
        try status.withLock { status in
            guard !status.closed else { throw StoreIOError(operation: "flock", path: path, code: EBADF) }
            guard !status.held else { return nil }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let code = errno
                if code == EWOULDBLOCK { return nil }
                throw StoreIOError(operation: "flock", path: path, code: code)
            }
            status.held = true
            writeHolder()
            return Held(file: self)
        }
    }

    func close() {
        status.withLock { status in
            guard !status.closed else { return }
            status.closed = true
            _ = closeDescriptor(descriptor)
        }
    }

    /// Writes the process id as the file's first line, in a fixed width so that the line is always whole and
    /// nothing needs cutting: one `pwrite` to the page cache, no flush, no change of the file's length. Nothing is
    /// written when the line already says it (a process taking the lock again): a write changes the file's times,
    /// and on ext4 without a journal the inode's block, shared with the segments' inodes, is then written by the
    /// next save's `fdatasync` too.
    private func writeHolder() {
        let text = String(pid)
        let line = Array((text + String(repeating: " ", count: max(0, 11 - text.count)) + "\n").utf8)
        var current = [UInt8](repeating: 0, count: line.count)
        let read = current.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        if read == line.count, current == line { return }
        _ = line.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    }

    /// Releases the `flock`, and closes the file when it was opened for this one lock. The holder's pid stays in
    /// the file: it names a process only in the message of one that waits while the lock is held, and every holder
    /// that is a store writes its own first.
    private func release() {
        status.withLock { status in
            guard status.held, !status.closed else { return }
            status.held = false
            _ = flock(descriptor, LOCK_UN)
        }
        if closingOnUnlock { close() }
    }

    private final class Held: StoreLockHandle {
        let file: POSIXLockFile
        init(file: POSIXLockFile) { self.file = file }
        func unlock() { file.release() }
    }
}

/// A file opened by `POSIXFileSystem`.
final class POSIXFile: StoreFile {
    private var descriptor: Int32
    let path: String
    private(set) var size: Int

    init(descriptor: Int32, path: String, size: Int) {
        self.descriptor = descriptor
        self.path = path
        self.size = size
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        var written = 0
        while written < bytes.count {
            // pwrite at the size we know, so a failed earlier write never shifts where the next one lands.
            let count = pwrite(descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(size + written))
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreIOError(operation: "write", path: path, code: errno)
            }
            written += count
        }
        size += written
    }

    func sync() throws {
        guard flush(descriptor, dataOnly: true) == 0 else {
            throw StoreIOError(operation: "fsync", path: path, code: errno)
        }
    }

    func reserve(upTo capacity: Int) throws {
        // posix_fallocate returns the error rather than setting errno; where the file system has no fallocate,
        // glibc writes the zeros itself. Darwin has no posix_fallocate, and its F_PREALLOCATE allocates blocks
        // without extending the file, so appends would still change its length, which is what reserving avoids:
        // there nothing is reserved (as the protocol allows) and appends extend the file.
        #if os(Linux)
        let result = posix_fallocate(descriptor, 0, off_t(capacity))
        guard result == 0 else { throw StoreIOError(operation: "fallocate", path: path, code: result) }
        #endif
    }

    func close() throws {
        guard descriptor >= 0 else { return }
        let result = closeDescriptor(descriptor)
        descriptor = -1
        guard result == 0 else { throw StoreIOError(operation: "close", path: path, code: errno) }
    }

    deinit { if descriptor >= 0 { _ = closeDescriptor(descriptor) } }
}

/// A regular file held open for reading with `pread` (thread-safe: each read names its offset).
final class POSIXReadableFile: StoreReadableFile {
    let path: String
    private let descriptor: Int32

    init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { _ = closeDescriptor(descriptor) }

    /// The file's length by `lseek` to its end, not `fstat`: see ``FileStore/tailFile(_:_:)`` for what a `stat`
    /// costs a writer on Linux 6.13 and later. (Reads name their offset, so the descriptor's own offset is free.)
    func size() throws -> Int {
        let end = lseek(descriptor, 0, SEEK_END)
        guard end >= 0 else { throw StoreIOError(operation: "seek", path: path, code: errno) }
        return Int(end)
    }

    /// A read of at most 64 KiB (a page, a row, the byte after the last record) takes no `lseek` for the length:
    /// the buffer is as long as asked and cut to what `pread` found. A longer one is bounded by the length first.
    func read(from offset: Int, count limit: Int) throws -> [UInt8] {
        let end = offset.addingReportingOverflow(max(0, limit))
        let size = limit <= 1 << 16 ? (end.overflow ? Int.max : end.partialValue) : try self.size()
        return try preadFully(descriptor, size: size, from: offset, count: limit, path: path)
    }
}

/// At most `limit` bytes from `offset` of the open `descriptor`, read with `pread` in a loop: never more than the
/// file held (`size`, its length when the caller looked), so a claimed count allocates nothing past the file.
private func preadFully(_ descriptor: Int32, size: Int, from offset: Int, count limit: Int,
                            path: String) throws -> [UInt8] {
    guard offset >= 0 else { return [] }
    let expected = min(max(0, size - offset), max(0, limit))
    var bytes = [UInt8](repeating: 0, count: expected)
    var filled = 0
    while filled < expected {
        let count = bytes.withUnsafeMutableBytes { buffer in
            pread(descriptor, buffer.baseAddress! + filled, expected - filled, off_t(offset + filled))
        }
        if count < 0 {
            if errno == EINTR { continue }
            throw StoreIOError(operation: "read", path: path, code: errno)
        }
        if count == 0 { break }   // the file shrank while being read
        filled += count
    }
    if filled < expected { bytes.removeSubrange(filled...) }
    return bytes
}
