#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one-writer rule: whoever writes holds an exclusive `flock` on the store's `LOCK` file (an exclusive open from
/// open to close, a shared one for each save), and writes its process id there for the message of a writer that
/// waits in vain (docs/FORMAT.md, *Locking*).
enum StoreLock {
    /// Takes the lock, waiting up to `timeout` seconds (nil or 0: not at all) for another holder to release it. The
    /// wait is measured by the monotonic clock: a wall clock stepped back (or ahead) neither prolongs nor cuts it.
    /// With `refusingWhenKeptInThisProcess`, the wait ends at once when an open of this process keeps the lock
    /// until it closes (``HeldStoreLock/keepUntilClose()``): only closing that open would release it.
    ///
    /// - Throws: ``FileStoreError/lockedInThisProcess(path:)`` when the lock stays held by another open of this
    ///   process, ``FileStoreError/locked(path:holder:timeout:)`` when it stays held elsewhere, or an I/O error.
    ///
    /// - Parameter kept: the lock file kept open by the caller, to lock through instead of opening `LOCK` by path.
    static func acquire(_ layout: StoreLayout, fileSystem: any StoreFileSystem,
                        timeout: Double?, clocks: StoreClocks = .system,
                        refusingWhenKeptInThisProcess: Bool = false,
                        through kept: KeptLockFile? = nil) throws -> any StoreLockHandle {
        let deadline = clocks.monotonic() + .seconds(timeout ?? 0)
        // flock has no timeout: try, then sleep, starting short (another writer's save takes well under a
        // millisecond on a fast disk) and doubling up to 10 ms.
        var pause: UInt32 = 50
        while true {
            if let kept {
                if let handle = try kept.file.tryLock() { return HeldStoreLock(handle, key: kept.key) }
            } else if let handle = try fileSystem.tryLock(layout.lock) {
                return HeldStoreLock(handle, key: HeldStoreLock.key(layout.lock))
            }
            guard let timeout, timeout > 0, clocks.monotonic() < deadline,
                  !(refusingWhenKeptInThisProcess && HeldStoreLock.isKeptUntilCloseInThisProcess(layout.lock)) else {
                if HeldStoreLock.isHeldInThisProcess(layout.lock) {
                    throw FileStoreError.lockedInThisProcess(path: layout.root)
                }
                throw FileStoreError.locked(path: layout.root, holder: holder(of: layout, fileSystem: fileSystem),
                                            timeout: max(0, timeout ?? 0))
            }
            usleep(pause)
            pause = min(pause * 2, 10_000)
        }
    }

    /// The process the lock file names, if it is alive: the holder writes its id on the first line after taking
    /// the lock and blanks it before releasing it, so an id there is the holder's, or one a holder that died left
    /// (whose process is gone, unless its id was reused), or, for a moment, the previous holder's. Only a message
    /// depends on it; the `flock` decides who holds the lock.
    static func holder(of layout: StoreLayout, fileSystem: any StoreFileSystem) -> Int32? {
        guard let bytes = try? fileSystem.read(layout.lock, from: 0, count: 32),
              let line = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).first,
              let pid = Int32(String(decoding: line.prefix { (0x30...0x39).contains($0) }, as: UTF8.self)),
              pid > 0 else { return nil }
        // Signal 0 checks that the process exists; EPERM means it exists under another user.
        return kill(pid, 0) == 0 || errno == EPERM ? pid : nil
    }
}

/// A store lock this process holds, counted by lock file, so that a refused lock can say whether an open of this
/// process holds it (a `flock` conflicts between two opens of one process too). Only the message depends on the
/// count: the `flock` decides.
final class HeldStoreLock: StoreLockHandle {
    /// How many locks this process holds, by the lock file's resolved path.
    private static let held = Locked<[String: Int]>([:])
    /// How many of them an open keeps until it closes, by the same key.
    private static let keptUntilClose = Locked<[String: Int]>([:])

    private let base: any StoreLockHandle
    private let key: String
    /// Whether it was released, and whether it is counted in ``keptUntilClose``.
    private let status = Locked((released: false, kept: false))

    /// - Parameter key: the lock file's ``key(_:)``.
    init(_ base: any StoreLockHandle, key: String) {
        self.base = base
        self.key = key
        Self.held.withLock { $0[key, default: 0] += 1 }
    }

    func unlock() {
        let wasKept: Bool? = status.withLock { status in
            guard !status.released else { return nil }
            status.released = true
            return status.kept
        }
        guard let wasKept else { return }
        base.unlock()
        Self.held.withLock { Self.decrement(&$0, key) }
        if wasKept { Self.keptUntilClose.withLock { Self.decrement(&$0, key) } }
    }

    /// Marks the lock as kept until the open holding it closes (an exclusive writable open), rather than for one
    /// save or one migration: see ``isKeptUntilCloseInThisProcess(_:)``.
    func keepUntilClose() {
        status.withLock { status in
            guard !status.released, !status.kept else { return }
            status.kept = true
            // Counted under the status lock, so that an unlock cannot come between and leave the count behind.
            Self.keptUntilClose.withLock { $0[key, default: 0] += 1 }
        }
    }

    /// Whether an open of this process holds the lock of `path`.
    static func isHeldInThisProcess(_ path: String) -> Bool {
        held.withLock { $0[key(path)] != nil }
    }

    /// Whether an open of this process keeps the lock of `path` until it closes: waiting for it in this process
    /// is waiting in vain, unless another thread happens to close that open.
    static func isKeptUntilCloseInThisProcess(_ path: String) -> Bool {
        keptUntilClose.withLock { $0[key(path)] != nil }
    }

    private static func decrement(_ counts: inout [String: Int], _ key: String) {
        counts[key, default: 1] -= 1
        if counts[key] == 0 { counts[key] = nil }
    }

    /// The path with symbolic links and `..` resolved when the file exists on this machine's disk (a store opened
    /// by two spellings of its path is one store), else as given (a simulated file system).
    static func key(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// `LOCK` kept open by a writer shared per save, from its first save to its close, with the key it is counted
/// under in this process (its path resolved once).
final class KeptLockFile: Sendable {
    let file: any StoreLockFile
    let key: String

    init(_ layout: StoreLayout, fileSystem: any StoreFileSystem) throws {
        file = try fileSystem.openLockFile(layout.lock)
        key = HeldStoreLock.key(layout.lock)
    }
}
