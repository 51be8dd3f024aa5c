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
    /// Where a promised blob's bytes come from (the attached ``RemoteBlobSource``), for an open store; nil for the
    /// tools that read a store's files without opening it (verify, salvage, stats), which never fetch.
    var remote: RemoteBlobSlot? = nil

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
        if try isPromised(name) { return try fetch(name: name, size: size) }
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
        if let data = fetchUnnamed(name: name, size: size) { return data }
        throw FileStoreError.blobRemoved(name: name, path: path)
    }

    /// Whether `blobs/` holds the promise of blob `name` (a regular file: a link or a special file of that name is
    /// not the store's, and promises nothing).
    func isPromised(_ name: String) throws -> Bool {
        try fileSystem.kind(of: directory + "/" + StoreLayout.remoteBlobFileName(name)) == .regularFile
    }

    /// Fetches the promised blob `name` from the attached source, checks it against its size and name, puts it in
    /// place as ``write(_:)`` does and deletes the promise.
    ///
    /// - Throws: ``FileStoreError/blobNotFetched(name:path:)`` without a source attached in this process, the
    ///   source's error when it cannot give it, ``NoteKit/StoredValueError/externalDataUnreadable(name:reason:)`` when
    ///   the bytes it gave are not the blob's; the promise stays, so a later read tries again. A failure to keep
    ///   checked bytes on disk is not thrown: the bytes are returned and the promise stays.
    func fetch(name: String, size: Int) throws -> Data {
        guard let source = remote?.source else {
            throw FileStoreError.blobNotFetched(name: name, path: path(of: name))
        }
        let data = try Self.fetchChecked(name: name, size: size, from: source)
        do { _ = try write(data, unlocked: true) } catch {
            // The bytes are checked and this read has them; only keeping them failed (a full disk, a writable open
            // that took the temporary file for a leftover). The promise stays, and a later read fetches again.
            return data
        }
        // Another process may have fetched it at the same time and deleted the promise already.
        _ = try? FileStore.removeStoreFile(directory + "/" + StoreLayout.remoteBlobFileName(name),
                                           fileSystem: fileSystem)
        return data
    }

    /// Blob `name`'s bytes from the attached source when the store no longer names it (no blob, promise or retired
    /// copy is left): an object read before another process changed it can still read what it named, as a retired
    /// blob's reader can within the grace period. Nothing is written. Nil without a source, or when it cannot give
    /// the bytes.
    private func fetchUnnamed(name: String, size: Int) -> Data? {
        guard let source = remote?.source else { return nil }
        return try? Self.fetchChecked(name: name, size: size, from: source)
    }

    /// Blob `name`'s bytes from `source`, checked against `size` and the name: a source is never trusted.
    ///
    /// - Throws: the source's error, or ``NoteKit/StoredValueError/externalDataUnreadable(name:reason:)``.
    private static func fetchChecked(name: String, size: Int, from source: any RemoteBlobSource) throws -> Data {
        let data = try source.fetchBlob(named: name, size: size)
        guard data.count == size, SHA256Digest.hexString(data) == name else {
            throw StoredValueError.externalDataUnreadable(
                name: name, reason: "the blob's source gave \(data.count) bytes that "
                    + (data.count == size ? "do not hash to its name" : "are not the \(size) its record says"))
        }
        return data
    }

    /// Writes the promise of blob `name`, whose `size` bytes are elsewhere, durably (temporary name,
    /// flush, rename, flush of the directory), unless the blob or its promise is already here.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` when something else than a regular
    ///   file has the promise's name, an I/O error, or ``FileStoreError/writesStopped(kind:reason:)`` as ``write(_:)``.
    func promise(name: String, size: Int) throws {
        guard try fileSystem.kind(of: path(of: name)) != .regularFile else { return }
        let promise = directory + "/" + StoreLayout.remoteBlobFileName(name)
        let existing = try fileSystem.kind(of: promise)
        if let existing, existing != .regularFile {
            throw FileStoreError.unexpectedFileType(path: promise, found: existing, expected: .regularFile)
        }
        guard existing == nil else { return }
        // What a person reading the directory needs: which bytes are awaited, and how many.
        // Not the blob's own temporary name: a reader in another process may be fetching the blob itself.
        try putInPlace(Data(#"{"blob":"\#(name)","size":\#(size)}"#.utf8 + [0x0A]), at: promise,
                       temporary: StoreLayout.partialBlobFileName(name, writer: "remote"),
                       what: "the promise of blob \(name)")
    }

    /// Writes `bytes` durably at `path`: under the name `temporary` in `blobs/`, flushed, renamed into place, and the
    /// directory flushed, so a file of the final name is always whole.
    ///
    /// - Throws: an I/O error of the temporary file (nothing is in place), or
    ///   ``FileStoreError/writesStopped(kind:reason:)`` when renaming or flushing the directory failed: the file may
    ///   then be in place with its directory entry not on disk, and the next save would find it and trust it. As
    ///   after a failed flush of the log, writes stop; reopening deletes what no record names.
    private func putInPlace(_ bytes: Data, at path: String, temporary: String, what: String) throws {
        let temporary = directory + "/" + temporary
        try fileSystem.writeFlushedFile(temporary, bytes)
        do {
            try fileSystem.rename(temporary, to: path)
            try fileSystem.syncDirectory(directory)
        } catch {
            throw FileStoreError.writesStopped(kind: .blobPlacement,
                                               reason: "putting \(what) in place failed: \(error)")
        }
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
    ///   file has the blob's name, an I/O error (nothing is in place), or
    ///   ``FileStoreError/writesStopped(kind:reason:)`` when renaming or flushing the directory failed: the blob may be
    ///   in place without being durable.
    ///
    /// - Parameter unlocked: whether the caller does not hold the store's lock (a reader fetching a promised blob),
    ///   so that another process may write the same blob at once: the temporary file then has a name of its own.
    func write(_ data: Data, unlocked: Bool = false) throws -> ExternalData {
        let name = SHA256Digest.hexString(data)
        let path = path(of: name)
        let existing = try fileSystem.kind(of: path)
        if let existing, existing != .regularFile {
            throw FileStoreError.unexpectedFileType(path: path, found: existing, expected: .regularFile)
        }
        if existing == nil {
            let writer = unlocked ? StoreLayout.fetchWriterTag(now: Date()) : nil
            try putInPlace(data, at: path, temporary: StoreLayout.partialBlobFileName(name, writer: writer),
                           what: "blob \(name)")
        }
        return ExternalData(name: name, data: data)
    }

    /// What `blobs/` holds, by name only (what each entry is, the caller checks before it deletes one). Entries
    /// of other names are not the store's, and are in no list.
    struct Inventory {
        /// The names of the blobs whose bytes are here.
        var blobs: [String] = []
        /// The file names of blobs (or promises) whose writing was interrupted.
        var leftovers: [String] = []
        /// The retired blobs: file name, blob name, time of retirement.
        var retired: [(file: String, name: String, retiredAt: Int)] = []
        /// The names of the blobs promised, whose bytes are elsewhere (a blob source gives them).
        var promised: [String] = []
    }

    /// Lists `blobs/` (``Inventory``).
    func inventory() throws -> Inventory {
        var inventory = Inventory()
        for file in try fileSystem.contentsOfDirectory(directory) {
            if let name = StoreLayout.blobName(file) { inventory.blobs.append(name) }
            else if StoreLayout.partialBlobName(file) != nil { inventory.leftovers.append(file) }
            else if let copy = StoreLayout.retiredBlob(file) { inventory.retired.append((file, copy.name, copy.retiredAt)) }
            else if let name = StoreLayout.remoteBlobName(file) { inventory.promised.append(name) }
        }
        return inventory
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

    /// Retires every blob not in `referenced` (renames it to its retired name, stamped `now`), deletes the
    /// retired blobs retired more than `gracePeriod` seconds before `now` (docs/FORMAT.md, *External storage*), and
    /// deletes the promises of blobs not in `referenced` or already here. A
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
    /// - Complexity: one listing of `blobs/`, one `lstat` and one rename or deletion per blob or promise changed.
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
        // A promise holds no bytes for a reader to need: one no object names, or whose blob arrived (a local save
        // of the same bytes, a fetch that stopped before deleting it), goes at once.
        let present = Set(inventory.blobs)
        for name in inventory.promised where !referenced.contains(name) || present.contains(name) {
            try attempt {
                let promise = directory + "/" + StoreLayout.remoteBlobFileName(name)
                if try FileStore.removeStoreFile(promise, fileSystem: fileSystem) { done.removed.append(promise) }
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

/// Where an open store's promised blobs are fetched from: empty until a client attaches a source
/// (``FileStore/attachRemoteBlobSource(_:)``), shared by the store and every lazy reference it handed out.
final class RemoteBlobSlot: Sendable {
    private let slot = Locked<(any RemoteBlobSource)?>(nil)

    var source: (any RemoteBlobSource)? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}

/// Gives the bytes of a blob by its name (SHA-256) from elsewhere than the store's disk (NoteKitMirror's source is
/// its server): the hook through which an open file store fetches the blobs it was promised.
package protocol RemoteBlobSource: Sendable {
    /// The bytes of blob `name`, `size` bytes long; the store checks them against both.
    ///
    /// - Throws: the source's error when it cannot give them (the server is away, the blob is not there).
    func fetchBlob(named name: String, size: Int) throws -> Data
}
