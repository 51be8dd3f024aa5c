import FoundationEssentials
import NoteKit

/// External-storage bytes, one file per distinct content in `blobs/`, named by the SHA-256 of the bytes
/// (docs/FORMAT.md, *External storage*).
struct BlobStore: Sendable {
    let directory: String
    let fileSystem: any StoreFileSystem

    /// The file name of the blob named `name`.
    func path(of name: String) -> String { directory + "/" + StoreLayout.blobFileName(name) }

    /// A reference to the blob `name`, read from disk on first use and checked against its recorded size and its
    /// name (the SHA-256 of its bytes), so that damage to the file is reported rather than read as the value.
    /// Hashing costs about as much as reading the file (O(size), once per read); at most `size + 1` bytes are read.
    func reference(name: String, size: Int) -> ExternalData {
        let path = path(of: name), fileSystem = fileSystem
        return ExternalData(name: name, size: size) {
            let bytes: [UInt8]
            // One byte more than the record says, to tell a longer file, and never more: a blob whose length is a
            // hole of any size costs no more memory than the value.
            do { bytes = try fileSystem.read(path, from: 0, count: size + 1) } catch {
                throw StoredValueError.externalDataUnreadable(name: name, reason: "\(error)")
            }
            guard bytes.count == size else {
                throw StoredValueError.externalDataUnreadable(
                    name: name, reason: "\(path) has \(bytes.count > size ? "more than \(size)" : "\(bytes.count)") "
                        + "bytes, the record says \(size)")
            }
            let data = Data(bytes)
            guard SHA256Digest.hexString(data) == name else {
                throw StoredValueError.externalDataUnreadable(
                    name: name, reason: "\(path) is damaged: its bytes do not hash to its name")
            }
            return data
        }
    }

    /// Writes `data` durably (unless a blob with the same content exists) and returns its reference.
    ///
    /// The file is written under a temporary name, flushed, renamed into place, and the directory flushed, so a
    /// blob file that exists is always whole. Only a regular file counts as the blob existing: a link or a special
    /// file of its name is refused, never trusted as the blob (nor written through).
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` when something else than a regular
    ///   file has the blob's name, an I/O error (nothing is in place), or ``FileStoreError/writesStopped(reason:)``
    ///   when renaming or flushing the directory failed: the blob may be in place without being durable.
    func write(_ data: Data) throws -> ExternalData {
        let name = SHA256Digest.hexString(data)
        let path = path(of: name)
        let existing = try fileSystem.kind(of: path)
        if let existing, existing != .regularFile {
            throw FileStoreError.unexpectedFileType(path: path, found: existing, expected: .regularFile)
        }
        if existing == nil {
            let temporary = directory + "/" + StoreLayout.partialBlobFileName(name)
            if fileSystem.exists(temporary) { try fileSystem.remove(temporary) }
            let file = try fileSystem.create(temporary)
            do {
                try data.withUnsafeBytes { try file.append($0) }
                try file.sync()
                try file.close()
            } catch {
                try? file.close()
                try? fileSystem.remove(temporary)
                throw error
            }
            do {
                try fileSystem.rename(temporary, to: path)
                try fileSystem.syncDirectory(directory)
            } catch {
                // The blob may now be in place with its directory entry not on disk, and the next save of the same
                // bytes would find it and trust it. As after a failed flush of the log, writes stop; reopening
                // deletes a blob no record names.
                throw FileStoreError.writesStopped(reason: "putting blob \(name) in place failed: \(error)")
            }
        }
        return ExternalData(name: name, data: data)
    }

    /// The names of the blobs in `blobs/`, and the file names of blobs whose writing was interrupted: by name
    /// only (what each entry is, the caller checks before it deletes one). Entries of other names are not the
    /// store's, and are in neither list.
    func inventory() throws -> (blobs: [String], leftovers: [String]) {
        var blobs: [String] = [], leftovers: [String] = []
        for file in try fileSystem.contentsOfDirectory(directory) {
            if let name = StoreLayout.blobName(file) { blobs.append(name) }
            else if StoreLayout.partialBlobName(file) != nil { leftovers.append(file) }
        }
        return (blobs, leftovers)
    }
}
