import Foundation
import NoteKitFileStore
import Synchronization

/// A file system that runs the test's action between two of the store's calls: just before a read of a file whose
/// path contains a given text. It makes a race with another process deterministic: a compaction that lands after
/// a reader read the manifest and before it read the segments the manifest lists, say. Every other call goes
/// straight to the real file system (``ForwardingFileSystem``).
///
/// ```swift
/// let racing = InterleavingFileSystem()
/// racing.interleave(beforeReadsOf: url.path + "/segments/") { try compactInAnotherOpen(url) }
/// let report = try StoreVerifier.verify(at: url, fileSystem: racing)
/// ```
package final class InterleavingFileSystem: ForwardingFileSystem {
    private struct Interleaving {
        var path: String
        var remaining: Int?
        var action: @Sendable (String) throws -> Void
    }

    /// Where every call goes, after the action for a read.
    package let base: any StoreFileSystem
    private let interleaving = Mutex<Interleaving?>(nil)
    private let ran = Mutex(0)

    package init(base: any StoreFileSystem = POSIXFileSystem()) {
        self.base = base
    }

    /// Runs `action` before each of the next `times` reads (nil: every read from now on) of a file whose path
    /// contains `path`, replacing any interleaving set before. An error `action` throws is that read's error.
    package func interleave(beforeReadsOf path: String, times: Int? = 1,
                            _ action: @escaping @Sendable () throws -> Void) {
        interleave(beforeReadsOf: path, times: times) { (_: String) in try action() }
    }

    /// Runs `action` with the path about to be read, as ``interleave(beforeReadsOf:times:_:)`` does.
    package func interleave(beforeReadsOf path: String, times: Int? = 1,
                           _ action: @escaping @Sendable (_ path: String) throws -> Void) {
        interleaving.withLock { $0 = Interleaving(path: path, remaining: times, action: action) }
    }

    /// Stops interleaving.
    package func stop() { interleaving.withLock { $0 = nil } }

    /// How many times an action ran.
    package var interleavings: Int { ran.withLock { $0 } }

    private func beforeRead(_ path: String) throws {
        let action = interleaving.withLock { interleaving -> (@Sendable (String) throws -> Void)? in
            guard let current = interleaving, path.contains(current.path) else { return nil }
            if let remaining = current.remaining {
                interleaving = remaining > 1 ? Interleaving(path: current.path, remaining: remaining - 1,
                                                            action: current.action) : nil
            }
            return current.action
        }
        guard let action else { return }
        ran.withLock { $0 += 1 }
        try action(path)
    }

    package func read(_ path: String) throws -> [UInt8] {
        try beforeRead(path)
        return try base.read(path)
    }

    package func read(_ path: String, from offset: Int) throws -> [UInt8] {
        try beforeRead(path)
        return try base.read(path, from: offset)
    }

    package func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        try beforeRead(path)
        return try base.read(path, from: offset, count: count)
    }

}
