/// Describes a store a ``ModelContainer`` opens (SwiftData's `DataStoreConfiguration`).
///
/// NoteKit provides ``ModelConfiguration`` (in memory) and, in `NoteKitFileStore`, the file store's
/// configuration. A custom store conforms to this protocol and to ``DataStore``.
public protocol DataStoreConfiguration: Sendable {
    /// A name for the store, used in error messages.
    var name: String { get }

    /// Opens or creates the store for `schema`.
    ///
    /// - Throws: the store's own errors (a damaged file, a lock held by another process, a refused migration).
    func makeStore(schema: Schema) throws -> any DataStore
}

/// The configuration of an in-memory store.
///
/// ```swift
/// let container = try ModelContainer(for: Folder.self,
///                                    configurations: ModelConfiguration(isStoredInMemoryOnly: true))
/// ```
///
/// Persistent storage is `NoteKitFileStore`'s `FileStoreConfiguration`; the core library has no file format
/// of its own, so `isStoredInMemoryOnly: false` is refused with ``ModelContainerError/noPersistentStore(name:)``.
public struct ModelConfiguration: DataStoreConfiguration {
    /// The configuration's name, used in error messages (`default` unless one is given).
    public var name: String
    /// Whether the store lives in memory only.
    public var isStoredInMemoryOnly: Bool

    /// A configuration named `name`.
    public init(_ name: String? = nil, isStoredInMemoryOnly: Bool = true) {
        self.name = name ?? "default"
        self.isStoredInMemoryOnly = isStoredInMemoryOnly
    }

    /// Creates an empty in-memory store for `schema`; each call makes a new, independent store.
    ///
    /// - Throws: ``ModelContainerError/noPersistentStore(name:)`` when ``isStoredInMemoryOnly`` is false: the core
    ///   library has no persistent store (use `NoteKitFileStore`'s `FileStoreConfiguration`).
    public func makeStore(schema: Schema) throws -> any DataStore {
        guard isStoredInMemoryOnly else { throw ModelContainerError.noPersistentStore(name: name) }
        return InMemoryStore(schema: schema)
    }
}
