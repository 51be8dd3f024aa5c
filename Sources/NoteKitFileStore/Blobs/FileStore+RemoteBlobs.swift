#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Blobs whose bytes are elsewhere than on this disk, fetched through a source attached to the open store
/// (docs/FORMAT.md, *Promised blobs*).
extension FileStore {
    /// Makes `source` the place this open fetches promised blobs from (NoteKitMirror attaches its server); nil
    /// detaches it, and a read of a blob not fetched yet then throws ``FileStoreError/blobNotFetched(name:path:)``.
    package func attachRemoteBlobSource(_ source: (any RemoteBlobSource)?) {
        blobs.remote?.source = source
    }

    /// The names of the blobs promised in this store and not fetched yet (docs/FORMAT.md, *Promised blobs*): the
    /// rows' current values name them, and `blobs/` has their promise but not their bytes.
    ///
    /// - Throws: the I/O error of listing `blobs/`.
    package func promisedBlobs() throws -> [(name: String, size: Int)] {
        guard fileSystem.exists(layout.blobs) else { return [] }
        let inventory = try blobs.inventory()
        let promised = Set(inventory.promised).subtracting(inventory.blobs)
        guard !promised.isEmpty else { return [] }
        var rows: [ModelSnapshot] = []
        for entity in schema.entities where entity.attributes.contains(where: { $0.has(.externalStorage) }) {
            let ids = try fetch(StoreFetchRequest(entity: entity.name, resultType: .identifiers)).identifiers
            rows += self.rows(for: ids).compactMap { $0 }
        }
        return Self.referencedExternalData(rows, schema: schema).values
            .filter { promised.contains($0.name) }
            .map { ($0.name, $0.size) }
            .sorted { $0.name < $1.name }
    }

    /// Fetches the promised blob `name` now, through the attached source, unless its bytes are here already.
    ///
    /// - Returns: whether its bytes are on disk now and were not before.
    /// - Throws: as ``BlobStore/fetch(name:size:)``.
    @discardableResult
    package func fetchPromisedBlob(name: String, size: Int) throws -> Bool {
        guard try blobs.isPromised(name), try fileSystem.kind(of: blobs.path(of: name)) == nil else { return false }
        _ = try blobs.fetch(name: name, size: size)
        return try fileSystem.kind(of: blobs.path(of: name)) == .regularFile
    }
}
