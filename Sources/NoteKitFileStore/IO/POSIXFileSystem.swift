import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, through POSIX calls.
public struct POSIXFileSystem: StoreFileSystem {
    public init() {}

    public func read(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open", path: path, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw StoreIOError(operation: "stat", path: path, code: errno) }
        let expected = Int(status.st_size)
        var bytes = [UInt8](repeating: 0, count: expected)
        var filled = 0
        while filled < expected {
            let count = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(descriptor, buffer.baseAddress! + filled, expected - filled)
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

    /// The bytes from `offset` to the end, read with `pread`: a refresh reads only what was appended.
    public func read(_ path: String, from offset: Int) throws -> [UInt8] {
        try read(path, from: offset, count: nil)
    }

    public func read(_ path: String, from offset: Int, count limit: Int) throws -> [UInt8] {
        try read(path, from: offset, count: Optional(limit))
    }

    private func read(_ path: String, from offset: Int, count limit: Int?) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open", path: path, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw StoreIOError(operation: "stat", path: path, code: errno) }
        let expected = min(max(0, Int(status.st_size) - offset), limit ?? Int.max)
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
            if count == 0 { break }
            filled += count
        }
        if filled < expected { bytes.removeSubrange(filled...) }
        return bytes
    }

    /// One `stat`: size, device, inode and modification time.
    public func status(_ path: String) throws -> StoreFileStatus? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw StoreIOError(operation: "stat", path: path, code: errno)
        }
        return StoreFileStatus(size: Int(status.st_size), identity: [
            Int64(bitPattern: UInt64(status.st_dev)), Int64(bitPattern: UInt64(status.st_ino)),
            Int64(status.st_mtim.tv_sec), Int64(status.st_mtim.tv_nsec),
        ])
    }

    public func create(_ path: String) throws -> any StoreFile {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreIOError(operation: "create", path: path, code: errno) }
        return POSIXFile(descriptor: descriptor, path: path, size: 0)
    }

    public func openForAppending(_ path: String) throws -> any StoreFile {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open", path: path, code: errno) }
        let end = lseek(descriptor, 0, SEEK_END)
        guard end >= 0 else {
            let code = errno
            _ = Glibc.close(descriptor)
            throw StoreIOError(operation: "seek", path: path, code: code)
        }
        return POSIXFile(descriptor: descriptor, path: path, size: Int(end))
    }

    public func rename(_ source: String, to destination: String) throws {
        guard Glibc.rename(source, destination) == 0 else {
            throw StoreIOError(operation: "rename", path: "\(source) -> \(destination)", code: errno)
        }
    }

    public func remove(_ path: String) throws {
        guard unlink(path) == 0 else { throw StoreIOError(operation: "unlink", path: path, code: errno) }
    }

    public func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open directory", path: path, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw StoreIOError(operation: "fsync directory", path: path, code: errno) }
    }

    public func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw StoreIOError(operation: "mkdir", path: prefix, code: errno)
            }
        }
    }

    public func contentsOfDirectory(_ path: String) throws -> [String] {
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

    public func exists(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0
    }

    public func truncate(_ path: String, to length: Int) throws {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open", path: path, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        guard ftruncate(descriptor, off_t(length)) == 0 else {
            throw StoreIOError(operation: "truncate", path: path, code: errno)
        }
        guard fsync(descriptor) == 0 else { throw StoreIOError(operation: "fsync", path: path, code: errno) }
    }

    public func tryLock(_ path: String) throws -> (any StoreLockHandle)? {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreIOError(operation: "open", path: path, code: errno) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return POSIXLock(descriptor: descriptor) }
        let code = errno
        _ = Glibc.close(descriptor)
        if code == EWOULDBLOCK { return nil }
        throw StoreIOError(operation: "flock", path: path, code: code)
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
        guard fdatasync(descriptor) == 0 else { throw StoreIOError(operation: "fsync", path: path, code: errno) }
    }

    func reserve(upTo capacity: Int) throws {
        // posix_fallocate returns the error rather than setting errno; where the file system has no fallocate,
        // glibc writes the zeros itself.
        #if canImport(Glibc)
        let result = posix_fallocate(descriptor, 0, off_t(capacity))
        guard result == 0 else { throw StoreIOError(operation: "fallocate", path: path, code: result) }
        #endif
    }

    func close() throws {
        guard descriptor >= 0 else { return }
        let result = Glibc.close(descriptor)
        descriptor = -1
        guard result == 0 else { throw StoreIOError(operation: "close", path: path, code: errno) }
    }

    deinit { if descriptor >= 0 { _ = Glibc.close(descriptor) } }
}

/// An exclusive `flock` on an open file description.
final class POSIXLock: StoreLockHandle, @unchecked Sendable {
    private let descriptor: Int32

    init(descriptor: Int32) { self.descriptor = descriptor }

    func unlock() {
        _ = flock(descriptor, LOCK_UN)
        _ = Glibc.close(descriptor)
    }
}
