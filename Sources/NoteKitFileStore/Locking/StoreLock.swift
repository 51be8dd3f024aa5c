import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The one-writer rule: a writable open holds an exclusive `flock` on the store's `LOCK` file.
enum StoreLock {
    /// Takes the lock, waiting up to `timeout` seconds (nil: not at all) for another process to release it. The
    /// wait is measured by the monotonic clock: a wall clock stepped back (or ahead) neither prolongs nor cuts it.
    ///
    /// - Throws: ``FileStoreError/locked(path:)`` when the lock stays held, or an I/O error.
    static func acquire(_ layout: StoreLayout, fileSystem: any StoreFileSystem,
                        timeout: Double?, clocks: StoreClocks = .system) throws -> any StoreLockHandle {
        let deadline = clocks.monotonic() + .seconds(timeout ?? 0)
        // flock has no timeout: try, then sleep, starting short (another writer's save takes well under a
        // millisecond on a fast disk) and doubling up to 10 ms.
        var pause: UInt32 = 50
        while true {
            if let handle = try fileSystem.tryLock(layout.lock) { return handle }
            guard let timeout, timeout > 0, clocks.monotonic() < deadline else { throw FileStoreError.locked(path: layout.root) }
            usleep(pause)
            pause = min(pause * 2, 10_000)
        }
    }
}
