#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Looking inside any NoteKit store without its model types: by the schema stored in it. What the `notekit` tool
/// is made of.
public enum StoreInspector {
    /// Every schema the store at `url` was written with, oldest first. Takes no lock: it reads again when another
    /// process replaced the manifest while it read (docs/FORMAT.md, *Reading while another process writes*).
    ///
    /// - Throws: ``FileStoreError`` when the manifest or a segment cannot be read (damage seen twice in a row over an
    ///   unchanged manifest), ``FileStoreError/storeKeptChanging(path:attempts:seconds:)`` when other processes kept
    ///   replacing the manifest for 5 seconds.
    public static func schemaHistory(at url: URL) throws -> [Schema] {
        try schemaHistory(at: url, fileSystem: POSIXFileSystem())
    }

    /// ``schemaHistory(at:)`` through `fileSystem`.
    package static func schemaHistory(at url: URL, fileSystem: any StoreFileSystem) throws -> [Schema] {
        let layout = StoreLayout(root: url.path)
        guard fileSystem.exists(layout.manifest) else { throw FileStoreError.storeNotFound(path: layout.root) }
        return try LogReplay.schemaHistory(layout: layout, fileSystem: fileSystem)
    }

    /// Opens the store at `url` read-only, in the schema stored in it: nothing is written, not even recovery. The
    /// schema and the state are read from one manifest: another process migrating the store in between makes it
    /// read both again. The store is a snapshot, as a tool's report needs (its counts and its history agree): its
    /// reads do not pick up later commits by themselves (`automaticRefreshInterval` nil); ``FileStore/refresh()``
    /// does.
    ///
    /// - Throws: what opening a store throws.
    public static func openReadOnly(at url: URL, recovery: FileStoreConfiguration.RecoveryMode = .tolerateTornTail)
        throws -> FileStore {
        try openReadOnly(at: url, recovery: recovery, fileSystem: POSIXFileSystem())
    }

    /// ``openReadOnly(at:recovery:)`` through `fileSystem`.
    package static func openReadOnly(at url: URL, recovery: FileStoreConfiguration.RecoveryMode = .tolerateTornTail,
                                     fileSystem: any StoreFileSystem) throws -> FileStore {
        try PinnedRead(layout: StoreLayout(root: url.path), fileSystem: fileSystem).run { _ in
            guard let schema = try schemaHistory(at: url, fileSystem: fileSystem).last else {
                throw FileStoreError.undecodableRecord(file: url.path, offset: 0, reason: "the store records no schema")
            }
            let configuration = FileStoreConfiguration(url: url, mode: .readOnly, recovery: recovery,
                                                       automaticCompaction: nil, automaticRefreshInterval: nil,
                                                       fileSystem: fileSystem)
            return try FileStore(configuration: configuration, schema: schema)
        }
    }

    /// Opens the store at `url` for writing, in the schema stored in it (for compaction by a tool). The schema is
    /// read before the lock is taken, pinned as every read is: another process compacting meanwhile makes the open
    /// wait for the lock, or refuse with ``FileStoreError/locked(path:holder:timeout:)``, never report damage.
    ///
    /// - Throws: what opening a store throws.
    public static func openForWriting(at url: URL) throws -> FileStore {
        try openForWriting(at: url, fileSystem: POSIXFileSystem())
    }

    /// ``openForWriting(at:)`` through `fileSystem`.
    package static func openForWriting(at url: URL, fileSystem: any StoreFileSystem) throws -> FileStore {
        guard let schema = try schemaHistory(at: url, fileSystem: fileSystem).last else {
            throw FileStoreError.undecodableRecord(file: url.path, offset: 0, reason: "the store records no schema")
        }
        let configuration = FileStoreConfiguration(url: url, mode: .readWrite(createIfMissing: false),
                                                   automaticCompaction: nil, fileSystem: fileSystem)
        return try FileStore(configuration: configuration, schema: schema)
    }

    /// A store's sizes and counts.
    public struct Statistics: Sendable, Hashable {
        /// The format version of the manifest.
        public var formatVersion: Int
        /// The current schema's version and content hash.
        public var schemaVersion: Schema.Version
        /// The current schema's content hash: the SHA-256 of its entities' canonical JSON, in lowercase hex.
        public var schemaHash: String
        /// Live objects per entity.
        public var entities: [String: Int]
        /// The segment files the manifest lists.
        public var segments: Int
        /// Bytes of every file of the store (manifest, segments, blobs, retired blobs).
        public var bytes: Int
        /// Bytes of the segments.
        public var segmentBytes: Int
        /// Blob files and their bytes (not counting retired blobs, which no object names).
        public var blobs: Int
        /// The bytes of those blob files, from the file system's metadata (no blob is read).
        public var blobBytes: Int
        /// The numbers of the first and last transactions still in the log (nil when there are none).
        public var firstTransactionNumber: UInt64?
        /// The number of the last committed transaction (0 for a store that has committed none).
        public var lastTransactionNumber: UInt64
        /// How many transactions the store's history keeps, and the numbers of the oldest and newest.
        public var historyTransactions: Int
        /// The numbers of the oldest and newest transaction the history keeps; nil when it keeps none.
        public var historyKept: ClosedRange<UInt64>?
    }

    /// The statistics of the store at `url`, read without writing. Blob sizes come from the file system's
    /// metadata (no blob is read); segments are read as an open reads them, in bounded pieces. The counts and the
    /// sizes are of one manifest (docs/FORMAT.md, *Reading while another process writes*).
    ///
    /// - Throws: what opening the store read-only throws.
    public static func statistics(at url: URL) throws -> Statistics {
        try statistics(at: url, fileSystem: POSIXFileSystem())
    }

    /// ``statistics(at:)`` through `fileSystem`.
    package static func statistics(at url: URL, fileSystem: any StoreFileSystem) throws -> Statistics {
        let layout = StoreLayout(root: url.path)
        return try PinnedRead(layout: layout, fileSystem: fileSystem).run { pin in
            try statistics(pin, at: url, layout: layout, fileSystem: fileSystem)
        }
    }

    private static func statistics(_ pin: PinnedRead.Pin, at url: URL, layout: StoreLayout,
                                   fileSystem: any StoreFileSystem) throws -> Statistics {
        let manifest = try pin.manifest
        let store = try openReadOnly(at: url, fileSystem: fileSystem)
        let manifestBytes = try fileSystem.status(layout.manifest)?.size ?? 0
        let formatVersion = try fileSystem.read(layout.manifest, from: 0, count: 64).withUnsafeBytes {
            try MagicLine.parse($0, expecting: .manifest, file: layout.manifest).version
        }
        var segmentBytes = 0
        var firstTransactionNumber: UInt64?
        for number in manifest.segments {
            let scan = try SegmentScan.read(layout.segment(number), number: number, fileSystem: fileSystem)
            segmentBytes += scan.fileSize - scan.reserved
            if firstTransactionNumber == nil { firstTransactionNumber = try scan.firstTransactionNumber() }
        }
        let blobStore = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
        let inventory = fileSystem.exists(layout.blobs) ? try blobStore.inventory() : BlobStore.Inventory()
        let blobNames = inventory.blobs
        // From the file system's metadata: a blob is not read to learn its size.
        let blobBytes = try blobNames.reduce(0) { $0 + (try fileSystem.status(blobStore.path(of: $1))?.size ?? 0) }
        // Retired blobs, kept for readers until their grace period passes, take space but are not the store's
        // blobs; one deleted meanwhile counts nothing.
        var retiredBytes = 0
        for copy in inventory.retired {
            if let status = try? fileSystem.status(layout.blobs + "/" + copy.file) { retiredBytes += status.size }
        }
        let statistics = store.statistics
        let history = try store.history()
        return Statistics(formatVersion: formatVersion, schemaVersion: store.schema.version,
                          schemaHash: store.schema.contentHash, entities: statistics.rowsPerEntity,
                          segments: manifest.segments.count, bytes: manifestBytes + segmentBytes + blobBytes + retiredBytes,
                          segmentBytes: segmentBytes, blobs: blobNames.count, blobBytes: blobBytes,
                          firstTransactionNumber: firstTransactionNumber.map {
                              min($0, statistics.lastTransactionNumber)
                          },
                          lastTransactionNumber: statistics.lastTransactionNumber,
                          historyTransactions: history.records.count,
                          historyKept: history.records.first.map { $0.number...history.records.last!.number })
    }
}

extension SegmentScan {
    /// The number of the first transaction (or migration) record of the segment, read ahead of the rest of each
    /// record (``RecordDecoding/peek(_:offset:file:)``).
    ///
    /// - Throws: ``FileStoreError/undecodableRecord(file:offset:reason:)`` for a record that names no kind, or an
    ///   unsupported format version.
    func firstTransactionNumber() throws -> UInt64? {
        var first: UInt64?
        try forEachRecord(blobs: nil) { record in
            if first == nil { first = try record.peek.transaction }
        }
        return first
    }
}

extension StoreInspector {
    /// Every live object of `store` (of `name` only, when given) as one JSON object per line:
    /// `{"entity":…,"id":…,"attributes":{…},"relationships":{…}}`, values in the store format's JSON forms except
    /// dates, which are ISO 8601 text in UTC to the millisecond (`2026-03-01T09:30:00.000Z`) rather than the stored
    /// seconds since 2001.
    ///
    /// - Parameters:
    ///   - store: the store to read, usually from ``openReadOnly(at:recovery:)``.
    ///   - name: the entity to print; nil prints every entity.
    ///   - sorted: whether to print each entity's objects by identifier and each to-many relationship's targets by
    ///     identifier, so that two stores holding the same objects print the same lines (a mirror's devices: the
    ///     order of insertion, and of a to-many relationship, is each store's own).
    ///   - body: receives each line, in entity order then insertion order (identifier order when `sorted`).
    /// - Throws: NoteKit's `FetchError.unknownEntity(_:)` when `name` is not in the schema.
    /// - Complexity: O(objects printed); one line is built at a time (sorted: O(n log n), the rows of an entity
    ///   held at once).
    public static func dump(_ store: FileStore, entity name: String? = nil, sorted: Bool = false,
                            _ body: (String) -> Void) throws {
        let entities = try name.map { name in
            guard let entity = store.schema.entity(named: name) else { throw FetchError.unknownEntity(name) }
            return [entity]
        } ?? store.schema.entities
        var encoder = RecordEncoder()
        encoder.datesAsISO8601 = true
        for entity in entities {
            var rows = try store.fetch(StoreFetchRequest(entity: entity.name)).rows
            if sorted { rows.sort { $0.id.primaryKey.uuidString < $1.id.primaryKey.uuidString } }
            for row in rows {
                var writer = JSONWriter(reservingCapacity: 512)
                writer.beginObject()
                writer.key("entity"); writer.string(entity.name)
                writer.key("id"); writer.uuid(row.id.primaryKey)
                writer.key("attributes")
                writer.beginObject()
                for (slot, attribute) in entity.attributes.enumerated() {
                    writer.key(attribute.name)
                    encoder.writeValue(row.attributes[slot], type: attribute.type, to: &writer)
                }
                writer.endObject()
                writer.key("relationships")
                writer.beginObject()
                for (slot, relationship) in entity.relationships.enumerated() {
                    writer.key(relationship.name)
                    switch row.relationships[slot] {
                    case .toOne(let target):
                        if let target { writer.uuid(target.primaryKey) } else { writer.null() }
                    case .toMany(let targets):
                        writer.beginArray()
                        let keys = targets.map(\.primaryKey)
                        for key in sorted ? keys.sorted(by: { $0.uuidString < $1.uuidString }) : keys { writer.uuid(key) }
                        writer.endArray()
                    }
                }
                writer.endObject()
                writer.endObject()
                body(String(decoding: writer.bytes, as: UTF8.self))
            }
        }
    }
}
