import Foundation
import NoteKit
import NoteKitFileStore
import Testing
import NoteKitTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `StoreFileSystem.openForReading`: the handle a checkpoint and its segment are read through.
@Suite("Read handles")
struct ReadHandleTests {
    private func directory() throws -> URL {
        let url = TemporaryStores.newURL("handles")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("A read handle reads the file it opened after another file is renamed over its path, and after a delete")
    func handleKeepsItsFile() throws {
        let url = try directory()
        defer { try? FileManager.default.removeItem(at: url) }
        let path = url.appendingPathComponent("CHECKPOINT").path
        try Data("first file".utf8).write(to: URL(fileURLWithPath: path))
        let handle = try POSIXFileSystem().openForReading(path)
        let other = url.appendingPathComponent("CHECKPOINT.tmp").path
        try Data("second".utf8).write(to: URL(fileURLWithPath: other))
        try POSIXFileSystem().rename(other, to: path)
        #expect(try handle.read(from: 6, count: 4) == Array("file".utf8))
        try POSIXFileSystem().remove(path)
        #expect(try handle.read(from: 0, count: 100) == Array("first file".utf8))
        #expect(try handle.read(from: 50, count: 4).isEmpty)
    }

    @Test("Opening a link, a FIFO or a directory for reading is refused by type, on both implementations",
          arguments: [true, false])
    func handleRefusesWhatIsNotARegularFile(posix: Bool) throws {
        let url = try directory()
        defer { try? FileManager.default.removeItem(at: url) }
        let target = url.appendingPathComponent("target").path
        try Data("x".utf8).write(to: URL(fileURLWithPath: target))
        let link = url.appendingPathComponent("link").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let fifo = url.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let fileSystem: any StoreFileSystem = posix ? POSIXFileSystem() : PathOnlyFileSystem()
        for (path, kind) in [(link, StoreFileKind.symbolicLink), (fifo, .fifo), (url.path, .directory)] {
            #expect(throws: FileStoreError.unexpectedFileType(path: path, found: kind, expected: .regularFile)) {
                _ = try fileSystem.openForReading(path)
            }
        }
        #expect(throws: StoreIOError.self) { _ = try fileSystem.openForReading(url.appendingPathComponent("none").path) }
    }
}

/// POSIX calls, without its read handle: the protocol's default handle.
private struct PathOnlyFileSystem: ForwardingFileSystem {
    let base: any StoreFileSystem = POSIXFileSystem()
}
