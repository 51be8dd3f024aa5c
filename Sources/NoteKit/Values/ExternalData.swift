#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Bytes of an external-storage attribute that live outside the store's main files.
///
/// A store that keeps blobs in files of their own hands the engine an `ExternalData` instead of the bytes; the
/// bytes are read from disk the first time a model property reads them, and then kept. Fetching models never
/// reads blob files.
///
/// Two references are equal when they name the same blob.
public final class ExternalData: Sendable, Hashable {
    /// The blob's name inside its store (for the file store, its file name).
    public let name: String
    /// The blob's length in bytes, known without reading it.
    public let size: Int
    private let loader: @Sendable () throws -> Data
    private let cache = Mutex<Data?>(nil)
    /// Whether the bytes are elsewhere than in any store (a value imported from another replica, whose loader
    /// fetches them on first read): a file store that saves such a reference records a promise of the blob instead
    /// of its bytes, and fetches them later through the blob source attached to it.
    package let isRemote: Bool

    /// Creates a reference to bytes that `loader` reads on first use.
    ///
    /// - Parameters:
    ///   - name: the blob's name inside its store.
    ///   - size: the blob's length in bytes.
    ///   - loader: reads the bytes; it may throw when the blob is missing or damaged.
    public init(name: String, size: Int, loader: @escaping @Sendable () throws -> Data) {
        self.name = name
        self.size = size
        self.loader = loader
        isRemote = false
    }

    /// A reference to bytes elsewhere than in any store (on a server, another replica's), named by their SHA-256,
    /// that `loader` fetches on first use.
    package init(remoteName name: String, size: Int, loader: @escaping @Sendable () throws -> Data) {
        self.name = name
        self.size = size
        self.loader = loader
        isRemote = true
    }

    /// Creates a reference whose bytes are already in memory (a blob written by this process).
    public init(name: String, data: Data) {
        self.name = name
        self.size = data.count
        self.loader = { data }
        isRemote = false
        cache.withLock { $0 = data }
    }

    /// Whether the bytes have been read into memory.
    public var isLoaded: Bool { cache.withLock { $0 != nil } }

    /// The bytes, read from the store on first use.
    ///
    /// - Throws: whatever the store's loader throws when the blob is missing or damaged.
    /// - Complexity: O(size) on first use, O(1) after.
    public func load() throws -> Data {
        if let data = cache.withLock({ $0 }) { return data }
        let data = try loader()
        cache.withLock { $0 = data }
        return data
    }

    /// Two external values are equal when they have the same name: the name identifies the bytes in the store, so
    /// comparing them never loads them.
    public static func == (lhs: ExternalData, rhs: ExternalData) -> Bool { lhs.name == rhs.name }
    /// Hashes the name, consistently with `==`; the bytes are not read.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}
