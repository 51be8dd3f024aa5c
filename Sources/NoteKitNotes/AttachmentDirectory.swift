// FileHandle and FileManager's directory listing are in Foundation proper on Linux.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NoteKit

/// The file operations attachments need, behind a protocol so tests can make them fail.
public protocol AttachmentFileSystem: Sendable {
    /// Writes `data` to `url` durably: when this returns, the file and its name are on disk.
    func write(_ data: Data, to url: URL) throws
    /// Reads the file at `url`.
    func read(_ url: URL) throws -> Data
    /// Removes the file at `url`.
    func remove(_ url: URL) throws
    /// The names of the files in the directory at `url`.
    func fileNames(in url: URL) throws -> [String]
}

/// The local file system.
public struct LocalAttachmentFileSystem: AttachmentFileSystem {
    /// The local file system, through `FileManager` and POSIX calls; it holds no state.
    public init() {}

    /// Writes to a temporary file beside `url`, flushes it, renames it into place and flushes the directory, so a
    /// crash leaves either no file or the whole file (and at worst a temporary file, which a sweep removes).
    public func write(_ data: Data, to url: URL) throws {
        let directory = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).partial")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
        }
        let handle = try FileHandle(forWritingTo: temporary)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(at: temporary)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let descriptor = open(directory.path, O_RDONLY)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            _ = close(descriptor)
        }
    }

    /// The whole content of the file at `url`.
    ///
    /// - Throws: Foundation's error when the file is missing or unreadable.
    public func read(_ url: URL) throws -> Data { try Data(contentsOf: url) }

    /// Removes the file at `url`.
    ///
    /// - Throws: Foundation's error when nothing is there or it cannot be removed.
    public func remove(_ url: URL) throws { try FileManager.default.removeItem(at: url) }

    /// The names of the entries of the directory at `url`, in no particular order; empty when the directory does
    /// not exist yet (no file was ever attached).
    ///
    /// - Throws: Foundation's error when the directory exists but cannot be listed.
    public func fileNames(in url: URL) throws -> [String] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: url.path)
    }
}

/// The application's attachments directory: where attached files live, outside the store (R9).
public struct AttachmentDirectory: Sendable {
    /// The directory.
    public let url: URL
    /// How files are written, read and removed.
    public let fileSystem: any AttachmentFileSystem

    /// The attachments directory at `url`, created when the first file is written (the demo keeps it beside the
    /// store, as `PATH.attachments`).
    public init(url: URL, fileSystem: any AttachmentFileSystem = LocalAttachmentFileSystem()) {
        self.url = url
        self.fileSystem = fileSystem
    }

    /// Where the file named `fileName` lives.
    public func url(of fileName: String) -> URL { url.appendingPathComponent(fileName) }
}
