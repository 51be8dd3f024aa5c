#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    ///
    /// When the blob's file is missing, the object that names it was read before another process's compaction
    /// retired it: the load reads the retired copy instead (one listing of `blobs/`, on this miss only). Past the
    /// grace period the copy is gone too, and the load throws ``FileStoreError/blobRemoved(name:path:)``.
    func reference(name: String, size: Int) -> ExternalData {
        let store = self
        return ExternalData(name: name, size: size) { try store.load(name: name, size: size) }
    }

    /// The bytes of blob `name`, from its file or, when that is missing, from a retired copy.
    ///
    /// - Throws: ``FileStoreError/blobRemoved(name:path:)`` when there is neither,
    ///   ``NoteKit/StoredValueError/externalDataUnreadable(name:reason:)`` when the file found cannot be read or
    ///   its size or hash is not the record's.
    func load(name: String, size: Int) throws -> Data {
        let path = path(of: name)
        if let data = try read(path, name: name, size: size) { return data }
        // A copy can be deleted (its grace passed) or re-dated (its time was ahead of the clock) between the
        // listing and the read, and the blob written again meanwhile: one more look settles it.
        var failure: (any Error)?
        for _ in 0..<2 {
            let copies = (try? fileSystem.contentsOfDirectory(directory)) ?? []
            let retired = copies.compactMap { file in
                StoreLayout.retiredBlob(file).flatMap { $0.name == name ? (file: file, at: $0.retiredAt) : nil }
            }
            for (file, _) in retired.sorted(by: { $0.at > $1.at }) {
                // Only a regular file is a retired copy: a link or a special file of that name is not the store's.
                let copy = directory + "/" + file
                guard (try? fileSystem.kind(of: copy)) == .regularFile else { continue }
                do { if let data = try read(copy, name: name, size: size) { return data } } catch {
                    failure = failure ?? error
                }
            }
            if let data = try read(path, name: name, size: size) { return data }
        }
        if let failure { throw failure }
        throw FileStoreError.blobRemoved(name: name, path: path)
    }

    /// The checked bytes of the blob file at `path`, or nil when there is no file there.
    private func read(_ path: String, name: String, size: Int) throws -> Data? {
        let bytes: [UInt8]
        // One byte more than the record says, to tell a longer file, and never more: a blob whose length is a
        // hole of any size costs no more memory than the value.
        do { bytes = try fileSystem.read(path, from: 0, count: size + 1) } catch {
            if (error as? StoreIOError)?.code == ENOENT { return nil }
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
            try fileSystem.writeFlushedFile(temporary, data)
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

    /// The names of the blobs in `blobs/`, the file names of blobs whose writing was interrupted, and the retired
    /// blobs (file name, blob name, time of retirement): by name only (what each entry is, the caller checks
    /// before it deletes one). Entries of other names are not the store's, and are in no list.
    func inventory() throws
        -> (blobs: [String], leftovers: [String], retired: [(file: String, name: String, retiredAt: Int)]) {
        var blobs: [String] = [], leftovers: [String] = [], retired: [(file: String, name: String, retiredAt: Int)] = []
        for file in try fileSystem.contentsOfDirectory(directory) {
            if let name = StoreLayout.blobName(file) { blobs.append(name) }
            else if StoreLayout.partialBlobName(file) != nil { leftovers.append(file) }
            else if let copy = StoreLayout.retiredBlob(file) { retired.append((file, copy.name, copy.retiredAt)) }
        }
        return (blobs, leftovers, retired)
    }

    /// What ``reclaim(keeping:now:gracePeriod:tolerant:)`` did.
    struct Reclaimed {
        /// The blobs no object names any more, taken out of their place: retired, or deleted with a grace period
        /// of 0.
        var unreferenced: [String] = []
        /// The files of retired blobs deleted because their grace period had passed.
        var expired: [String] = []
        /// Every file deleted.
        var removed: [String] = []
    }

    /// Retires every blob not in `referenced` (renames it to its retired name, stamped `now`) and deletes the
    /// retired blobs retired more than `gracePeriod` seconds before `now` (docs/FORMAT.md, *External storage*). A
    /// retirement time ahead of `now` counts as now: such a copy is stamped `now` again, so that a wall clock
    /// stepped back neither deletes it early nor keeps it for as long as the step. With a grace period of 0 (or
    /// less) an unreferenced blob is deleted at once.
    ///
    /// Only regular files are renamed or deleted, and a blob is not retired onto a name something else holds: a
    /// link or a special file with a store file's name is left alone (`verify` lists it).
    ///
    /// - Parameter tolerant: whether a failure to retire or delete one file is passed over (a compaction, whose
    ///   new state is committed already) rather than thrown (a writable open's cleanup).
    /// - Throws: the I/O error of the listing, or (unless `tolerant`) of a rename, a deletion or the flush of the
    ///   directory.
    /// - Complexity: one listing of `blobs/`, one `lstat` and one rename or deletion per blob changed.
    func reclaim(keeping referenced: Set<String>, now: Date, gracePeriod: Double, tolerant: Bool) throws -> Reclaimed {
        var done = Reclaimed()
        let inventory = try inventory()
        // Whole seconds since 1970; a clock before 1970 (or past any year a file name needs) is clamped.
        let seconds = Int(min(max(0, now.timeIntervalSince1970), 1e15).rounded(.down))
        func attempt(_ body: () throws -> Void) throws {
            if tolerant { try? body() } else { try body() }
        }
        for name in inventory.blobs where !referenced.contains(name) {
            try attempt {
                let blob = path(of: name)
                guard try fileSystem.kind(of: blob) == .regularFile else { return }
                if gracePeriod <= 0 {
                    try fileSystem.remove(blob)
                    done.removed.append(blob)
                    done.unreferenced.append(name)
                    return
                }
                let retired = directory + "/" + StoreLayout.retiredBlobFileName(name, retiredAt: seconds)
                guard (try fileSystem.kind(of: retired) ?? .regularFile) == .regularFile else { return }
                try fileSystem.rename(blob, to: retired)
                done.unreferenced.append(name)
            }
        }
        var restamped = false
        for copy in inventory.retired {
            try attempt {
                let path = directory + "/" + copy.file
                guard try fileSystem.kind(of: path) == .regularFile else { return }
                if copy.retiredAt > seconds {
                    let now = directory + "/" + StoreLayout.retiredBlobFileName(copy.name, retiredAt: seconds)
                    guard try fileSystem.kind(of: now) == nil else { return }
                    try fileSystem.rename(path, to: now)
                    restamped = true
                } else if Double(seconds - copy.retiredAt) >= gracePeriod {
                    try fileSystem.remove(path)
                    done.removed.append(path)
                    done.expired.append(path)
                }
            }
        }
        if !done.unreferenced.isEmpty || !done.removed.isEmpty || restamped {
            try attempt { try fileSystem.syncDirectory(directory) }
        }
        return done
    }
}
