#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

extension FileStoreConfiguration: MigratableStoreConfiguration {
    /// Takes the store's write lock for a whole migration plan, waiting for another process that holds it (up to
    /// `lockTimeout`, or 30 seconds when none is set: a process that finds the store being migrated waits and then
    /// finds it migrated, rather than failing). The lock is held from before the stored schema is read until the
    /// migrated store is open, in every ``FileStoreConfiguration/Sharing`` mode: a custom stage runs in one process
    /// only, and its saves take no lock of their own.
    ///
    /// - Throws: ``FileStoreError/locked(path:holder:timeout:)`` after the wait; ``FileStoreError/lockedInThisProcess(path:)`` at
    ///   once when an exclusive open of this process has the store (it keeps the lock until it closes); errors
    ///   reading the store's schema history.
    package func beginMigration() throws -> any StoreMigrationSession {
        try FileStoreMigrationSession(configuration: self)
    }
}

/// A file store held for a migration plan: the lock, and the schema the store was written with.
final class FileStoreMigrationSession: StoreMigrationSession {
    let configuration: FileStoreConfiguration
    let storedSchemaHistory: [Schema]
    var storedSchema: Schema? { storedSchemaHistory.last }
    private var lock: (any StoreLockHandle)?
    private var open: FileStore?

    init(configuration: FileStoreConfiguration) throws {
        self.configuration = configuration
        let layout = StoreLayout(root: configuration.url.path)
        let fileSystem = configuration.fileSystem
        if configuration.mode != .readOnly && fileSystem.exists(layout.root) {
            lock = try StoreLock.acquire(layout, fileSystem: fileSystem, timeout: configuration.lockTimeout ?? 30,
                                         clocks: configuration.clocks, refusingWhenKeptInThisProcess: true)
        }
        do {
            storedSchemaHistory = fileSystem.exists(layout.manifest)
                ? try LogReplay.schemaHistory(layout: layout, fileSystem: fileSystem,
                                              timeout: configuration.readRetryTimeout) : []
        } catch {
            lock?.unlock()
            throw error
        }
    }

    func openStore(schema: Schema, keepingLock: Bool) throws -> any DataStore {
        try open?.close()
        open = nil
        if configuration.mode == .readOnly {
            return try FileStore(configuration: configuration, schema: schema)
        }
        guard let held = lock else {
            // The store did not exist: the open creates it and takes the lock itself.
            let store = try FileStore(configuration: configuration, schema: schema)
            if !keepingLock { open = store }
            return store
        }
        if keepingLock {
            let store = try FileStore(configuration: configuration, schema: schema, lockSource: .adopt(held))
            lock = nil
            return store
        }
        let store = try FileStore(configuration: configuration, schema: schema, lockSource: .heldBySession)
        open = store
        return store
    }

    /// Opens the store with the migration to `schema` applied in memory only; saves stay in memory too, until
    /// ``commitStage(_:)`` writes the whole state by compaction, which replaces the manifest atomically.
    func openStoreForStage(schema: Schema) throws -> any DataStore {
        try open?.close()
        open = nil
        guard configuration.mode != .readOnly, lock != nil else {
            return try openStore(schema: schema, keepingLock: false)
        }
        let store = try FileStore(configuration: configuration, schema: schema, lockSource: .heldBySession,
                                  holdingMigration: true)
        open = store
        return store
    }

    func commitStage(_ store: any DataStore) throws {
        try (store as? FileStore)?.commitHeldMigration()
    }

    func end() {
        try? open?.close()
        open = nil
        lock?.unlock()
        lock = nil
    }

    var isReadOnly: Bool { configuration.mode == .readOnly }
}

extension LogReplay {
    /// The schemas a store was written with, oldest first, read without decoding its transactions, over a pinned
    /// manifest (``PinnedRead``), so that a compaction in another process is not taken for a missing segment.
    ///
    /// - Throws: ``FileStoreError`` for damage, or ``FileStoreError/storeKeptChanging(path:attempts:seconds:)``
    ///   after `timeout` seconds of other processes replacing the manifest.
    static func schemaHistory(layout: StoreLayout, fileSystem: any StoreFileSystem,
                              timeout: Double = FileStoreConfiguration.defaultReadRetryTimeout) throws -> [Schema] {
        try PinnedRead(layout: layout, fileSystem: fileSystem, timeout: timeout).run { pin in
            try schemaHistory(pin.manifest, layout: layout, fileSystem: fileSystem)
        }
    }

    private static func schemaHistory(_ manifest: Manifest, layout: StoreLayout,
                                      fileSystem: any StoreFileSystem) throws -> [Schema] {
        var schemas: [Schema] = []
        for number in manifest.segments {
            let scan = try SegmentScan.read(layout.segment(number), number: number, fileSystem: fileSystem)
            try scan.forEachRecord(blobs: nil) { record in
                // Only schema and migration records need decoding: the kind is read ahead, in any order.
                let kind = try record.peek.kind
                guard kind == .schema || kind == .migration else { return }
                switch try record.decode(schema: schemas.last) {
                case .schema(let schema): schemas.append(schema)
                case .migration(let migration): schemas.append(migration.schema)
                default: break
                }
            }
        }
        return schemas
    }
}
