import Foundation
import NoteKit
import NoteKitFileStore
import Synchronization

/// Reads external-storage bytes from the zone's `blobs` table, for a store that first reads a blob an import
/// brought without its bytes (docs/MIRROR.md, *Blobs*). A file store keeps the promise of such a blob until then
/// (docs/FORMAT.md, *Promised blobs*); an in-memory store keeps the reference this fetcher loads.
///
/// It opens its own connection on the first fetch and keeps it, apart from the sync's, since a read can come from
/// any thread while a sync runs; a failed fetch closes it, and the next one connects again.
final class MirrorBlobFetcher: RemoteBlobSource {
    let configuration: MirrorConfiguration
    /// The namespace, quoted (``MirrorPlan/namespace``).
    let namespace: String
    private let connection = Mutex<PostgresConnection?>(nil)

    init(configuration: MirrorConfiguration, namespace: String) {
        self.configuration = configuration
        self.namespace = namespace
    }

    /// The bytes of blob `name` (its SHA-256) from the zone's `blobs`.
    ///
    /// - Throws: ``MirrorError/blobNotOnServer(zone:name:)`` when the zone has no such blob, connection and server
    ///   errors. The store checks the bytes against the size and the name.
    func fetchBlob(named name: String, size: Int) throws -> Data {
        try connection.withLock { connection throws(MirrorError) -> Data in
            do throws(MirrorError) {
                let open: PostgresConnection
                if let connection { open = connection } else {
                    open = try PostgresConnection(configuration.connectionString)
                    connection = open
                }
                return try Self.read(name, zone: configuration.zone, namespace: namespace, on: open)
            } catch {
                if case .blobNotOnServer = error {} else { connection = nil }
                throw error
            }
        }
    }

    /// The bytes of blob `name` in `zone`, as the server has them (the caller checks them).
    static func read(_ name: String, zone: String, namespace: String, on connection: PostgresConnection)
        throws(MirrorError) -> Data {
        let rows = try connection.execute("""
            SELECT encode(bytes, 'hex') FROM \(namespace)."blobs" WHERE zone = $1 AND hash = $2
            """, [zone, name], purpose: "read a blob").values
        guard let hex = rows.first?[0], let bytes = SyncSession.bytes(hex: hex) else {
            throw .blobNotOnServer(zone: zone, name: name)
        }
        return bytes
    }

    /// The length of blob `name` in `zone`, or nil when the zone has no such blob: what an import records without
    /// reading the bytes.
    static func size(of name: String, zone: String, namespace: String, on connection: PostgresConnection)
        throws(MirrorError) -> Int? {
        let rows = try connection.execute("""
            SELECT octet_length(bytes) FROM \(namespace)."blobs" WHERE zone = $1 AND hash = $2
            """, [zone, name], purpose: "look up a blob").values
        return rows.first?[0].flatMap { Int($0) }
    }
}

extension StoreMirror {
    /// Fetches now every blob this store names whose bytes an import left on the server (a file store's promised
    /// blobs), so that processes that do not mirror the store (extensions, tools) can read them too. Each is
    /// checked against its size and name before it is put in place.
    ///
    /// Without this call a blob is fetched the first time a process that mirrors the store reads it. An in-memory
    /// store has no other process to serve: its references fetch on first read, and this returns 0.
    ///
    /// A blob that cannot be fetched does not stop the others: every blob is tried, and the first failure is
    /// thrown once all have been.
    ///
    /// Like every first read of a blob, each fetch waits for the server for as long as the connection string allows
    /// (libpq's `connect_timeout`; none by default).
    ///
    /// - Returns: the number of blobs fetched and kept on disk.
    /// - Throws: ``MirrorError/blobNotOnServer(zone:name:)``, connection and server errors, or
    ///   ``MirrorError/storeFailed(operation:reason:)`` when the store cannot list or keep them: the first failure,
    ///   after trying every blob; the blobs fetched stay fetched.
    /// - Complexity: one server round trip a blob not fetched yet; reads the rows of the entities with an
    ///   external-storage attribute.
    @discardableResult
    public func fetchRemoteBlobs() throws(MirrorError) -> Int {
        guard let store = container.store as? FileStore else { return 0 }
        var fetched = 0
        var failure: MirrorError?
        func record(_ error: any Error) {
            guard failure == nil else { return }
            failure = (error as? MirrorError) ?? .storeFailed(operation: "fetch its blobs", reason: "\(error)")
        }
        do {
            for blob in try store.promisedBlobs() {
                do {
                    if try store.fetchPromisedBlob(name: blob.name, size: blob.size) { fetched += 1 }
                } catch {
                    record(error)
                }
            }
        } catch {
            record(error)
        }
        if let failure { throw failure }
        return fetched
    }
}
