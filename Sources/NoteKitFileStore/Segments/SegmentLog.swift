#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Writes a store's files: appends records to the active segment, starts new segments, and replaces the
/// manifest, always in the order docs/FORMAT.md (*Crash safety*) prescribes.
final class SegmentLog {
    let layout: StoreLayout
    let fileSystem: any StoreFileSystem
    private(set) var manifest: Manifest
    private var active: any StoreFile
    /// The active segment's size after its last successful flush (or when this log opened or created it).
    private var flushedSize: Int
    /// How far ahead of its end the active segment's space is reserved when an append reaches the end of what is
    /// reserved (docs/FORMAT.md, *Reserved space*); 0 reserves nothing.
    var reservation = 0
    /// The length the active segment's file has been given by reservations (at least its size).
    private(set) var reservedEnd: Int
    private let encoder = RecordEncoder()

    /// The segment appended to.
    var activeSegment: Int { manifest.segments.last! }
    /// The active segment's size in bytes.
    var activeSize: Int { active.size }

    private init(layout: StoreLayout, fileSystem: any StoreFileSystem, manifest: Manifest, active: any StoreFile) {
        self.layout = layout
        self.fileSystem = fileSystem
        self.manifest = manifest
        self.active = active
        flushedSize = active.size
        reservedEnd = active.size
    }

    /// Opens the log of an existing store for appending to its last segment, whose records end at `end`: reserved
    /// space after them (zeros) is cut off, so that appends land at `end` and the file is as long as its records.
    /// With `keepingZerosUpTo` (a writer shared per save taking the log over from another, which found zeros
    /// after `end`), the zeros stay, and appends write into them.
    static func open(layout: StoreLayout, fileSystem: any StoreFileSystem, manifest: Manifest, end: Int,
                     keepingZerosUpTo zerosEnd: Int? = nil) throws -> SegmentLog {
        let path = layout.segment(manifest.segments.last!)
        if let zerosEnd, zerosEnd > end {
            let log = SegmentLog(layout: layout, fileSystem: fileSystem, manifest: manifest,
                                 active: try fileSystem.openForAppending(path, at: end))
            log.reservedEnd = zerosEnd
            return log
        }
        var file = try fileSystem.openForAppending(path)
        if file.size > end {
            try? file.close()
            try fileSystem.truncate(path, to: end)
            file = try fileSystem.openForAppending(path)
        }
        return SegmentLog(layout: layout, fileSystem: fileSystem, manifest: manifest, active: file)
    }

    /// Creates the files of a new store: its first segment (with the framed `records` after the segment record),
    /// then its manifest, which copies `schemas`, the history those records hold. `recorded` gets each record as it
    /// goes into the segment, as ``startSegment(with:replacingAll:schemas:now:recorded:)`` gives it.
    static func create(layout: StoreLayout, fileSystem: any StoreFileSystem, store: UUID, now: Date,
                       records: some Sequence<[UInt8]>, schemas: [Schema],
                       recorded: (_ offset: Int, _ record: [UInt8]) -> Void = { _, _ in }) throws -> SegmentLog {
        for directory in [layout.root, layout.segments, layout.blobs] { try fileSystem.makeDirectory(directory) }
        let manifest = Manifest(store: store, segments: [1], nextSegment: 2, created: now,
                                schemas: ManifestSchema.copies(of: schemas))
        let file = try createSegment(1, store: store, now: now, records: records, layout: layout, fileSystem: fileSystem,
                                     recorded: recorded)
        let log = SegmentLog(layout: layout, fileSystem: fileSystem, manifest: manifest, active: file)
        try log.replaceManifest(with: manifest)
        // The store's own directory is new too: until its entry in the parent is flushed, a power loss could take
        // the whole store, acknowledged saves and all.
        try fileSystem.syncDirectory(layout.parent)
        return log
    }

    /// Appends a framed record (as ``RecordEncoder`` makes them) to the active segment, without flushing.
    ///
    /// - Throws: the write's error. A partly written record is cut off again when possible; if even that fails,
    ///   the error says so and the caller must stop writing.
    func append(_ framed: [UInt8]) throws {
        let before = active.size
        defer {
            // Reserved after the record is written, never before: the zeros after the last record are then never
            // more than the reservation, even when the process dies between the two calls (docs/FORMAT.md,
            // *Reserved space*). Best effort: without the reservation appends extend the file, as they always could.
            if reservation > 0, active.size > reservedEnd {
                let target = active.size + reservation
                if (try? active.reserve(upTo: target)) != nil { reservedEnd = target }
            }
        }
        do {
            try framed.withUnsafeBytes { try active.append($0) }
        } catch {
            // Cut off whatever part of the record reached the file, and reopen it so the next append starts at the
            // true end. If that fails too, the file's end is unknown: no more appends.
            do {
                try cutBack(to: before)
            } catch {
                throw FileStoreError.writesStopped(kind: .append,
                                                   reason: "a failed append could not be undone: \(error)")
            }
            throw error
        }
    }

    /// Flushes the active segment to disk.
    ///
    /// - Throws: the flush's error, after cutting the segment back to its size at the last successful flush. Linux
    ///   drops the pages a failed `fsync` could not write and reports the error once: a later `fsync` succeeds
    ///   without writing them, while reads go on returning them until they are evicted. Left in place, those bytes
    ///   would be read back as committed (by this process after reopening, or by a reader) and written after, and a
    ///   power loss could then leave a hole before records that were flushed. If even the cut fails, the error is
    ///   ``FileStoreError/writesStopped(kind:reason:)``.
    func sync() throws {
        do {
            try active.sync()
        } catch {
            do {
                try cutBack(to: flushedSize)
            } catch let cutError {
                throw FileStoreError.writesStopped(kind: .flushAndCutBack,
                                                   reason: "flushing failed (\(error)) and cutting back the "
                                                       + "unflushed records failed too: \(cutError)")
            }
            throw error
        }
        flushedSize = active.size
    }

    /// Cuts the active segment to `size` (flushed) and reopens it, so the next append starts at the true end.
    private func cutBack(to size: Int) throws {
        let path = layout.segment(activeSegment)
        try? active.close()
        try fileSystem.truncate(path, to: size)
        active = try fileSystem.openForAppending(path)
        reservedEnd = active.size
    }

    /// Takes the active segment's length as found under the store's lock (a writer shared per save catching up, its
    /// log current): zeros another writer reserved, written into without reserving again; or no zeros, when another
    /// writer cut them off, and then the next append reserves.
    func adoptLength(_ length: Int) {
        reservedEnd = max(active.size, length)
    }

    /// Cuts the active segment's reserved space off, so that the file ends with its last record: done before the
    /// segment stops being the last one, since only the last segment may end in zeros.
    private func trimReservedSpace() throws {
        guard reservedEnd > active.size else { return }
        try fileSystem.truncate(layout.segment(activeSegment), to: active.size)
        reservedEnd = active.size
    }

    /// Closes the active segment and starts a new one holding `records`, then replaces the manifest so it lists
    /// the new segment after the current ones (rotation) or alone (compaction). The manifest copies `schemas`, the
    /// whole schema history (a compaction writes it again), or keeps its copy when nil (rotation).
    ///
    /// `recorded` gets each record as it goes into the file, the `segment` record first, with the offset of its
    /// header: where a checkpoint finds the records it describes, without reading the file again.
    ///
    /// - Returns: the segments the manifest no longer lists.
    @discardableResult
    func startSegment(with records: some Sequence<[UInt8]>, replacingAll: Bool, schemas: [Schema]? = nil,
                      now: Date, recorded: (_ offset: Int, _ record: [UInt8]) -> Void = { _, _ in }) throws -> [Int] {
        if !replacingAll {
            // The segment being closed stays in the store: with deferred durability its last records may not be
            // flushed yet, and nothing would flush them once appends go to the next segment.
            do { try sync() } catch {
                throw FileStoreError.writesStopped(kind: .segmentRotation,
                                                   reason: "flushing segment \(activeSegment) before closing it "
                                                       + "failed: \(error)")
            }
            // A failure leaves the segment the last one, where reserved space is allowed: the save fails, and the
            // next one tries again.
            try trimReservedSpace()
        }
        let number = manifest.nextSegment
        let file = try Self.createSegment(number, store: manifest.store, now: now, records: records,
                                          layout: layout, fileSystem: fileSystem, recorded: recorded)
        var next = manifest
        next.segments = replacingAll ? [number] : manifest.segments + [number]
        next.nextSegment = number + 1
        if let schemas { next.schemas = ManifestSchema.copies(of: schemas) }
        do {
            try replaceManifest(with: next)
        } catch {
            try? file.close()
            // Before the rename no manifest names the new segment: on a full disk its space is given back at once
            // rather than when the store is next opened. After it (writes stopped), the manifest may name it.
            if case FileStoreError.writesStopped = error {} else { try? fileSystem.remove(layout.segment(number)) }
            throw error
        }
        let dropped = replacingAll ? manifest.segments : []
        try? active.close()
        active = file
        flushedSize = file.size
        reservedEnd = file.size
        manifest = next
        return dropped
    }

    /// Replaces the manifest with one whose copy of the schema history is `schemas` (the segments'), unless it
    /// holds exactly that already: after a migration's record is flushed, and when a writable open finds the copy
    /// missing (a version 1 manifest), short (a crash between a migration's record and its manifest) or different.
    ///
    /// - Returns: whether the manifest was replaced.
    /// - Throws: the write's errors; ``FileStoreError/writesStopped(kind:reason:)`` when the rename or the directory's
    ///   flush failed (whether the new manifest is in place is then unknown).
    @discardableResult
    func replaceSchemas(with schemas: [Schema]) throws -> Bool {
        guard !ManifestSchema.copies(manifest.schemas, match: schemas) else { return false }
        var next = manifest
        next.schemas = ManifestSchema.copies(of: schemas)
        try replaceManifest(with: next)
        manifest = next
        return true
    }

    /// Writes the manifest under a temporary name, flushes it, renames it over `MANIFEST` and flushes the directory.
    private func replaceManifest(with manifest: Manifest) throws {
        try fileSystem.writeFlushedFile(layout.temporaryManifest,
                                        MagicLine.bytes(.manifest) + encoder.manifest(manifest))
        // From the rename on, the manifest on disk may already be the new one: a failure leaves the store's state
        // on disk unknown to this process, which must stop writing until it reopens the store.
        do {
            try fileSystem.rename(layout.temporaryManifest, to: layout.manifest)
            try fileSystem.syncDirectory(layout.root)
        } catch {
            throw FileStoreError.writesStopped(kind: .manifestReplacement,
                                               reason: "replacing the manifest failed: \(error)")
        }
    }

    private static func createSegment(_ number: Int, store: UUID, now: Date, records: some Sequence<[UInt8]>,
                                      layout: StoreLayout, fileSystem: any StoreFileSystem,
                                      recorded: (_ offset: Int, _ record: [UInt8]) -> Void = { _, _ in })
        throws -> any StoreFile {
        let path = layout.segment(number)
        // A file of this number can only be a leftover of an interrupted operation: no manifest names it.
        if fileSystem.exists(path) { try fileSystem.remove(path) }
        var bytes = MagicLine.bytes(.segment)
        let segmentRecord = RecordEncoder().segment(SegmentHeader(store: store, number: number, created: now))
        recorded(bytes.count, segmentRecord)
        bytes += segmentRecord
        // The file offset of `bytes[0]`.
        var written = 0
        let file = try fileSystem.create(path)
        do {
            // Written in pieces of about 8 MiB rather than concatenated: a compaction's records are as large as
            // the store, and one buffer of all of them (grown by doubling) would hold up to three times that.
            // `records` may be lazy (a compaction encodes its rows as they are written), so each record is
            // dropped once it is in the file.
            let piece = 8 << 20
            bytes.reserveCapacity(piece)
            for record in records {
                if !bytes.isEmpty && bytes.count + record.count > piece {
                    try bytes.withUnsafeBytes { try file.append($0) }
                    written += bytes.count
                    bytes.removeAll(keepingCapacity: true)
                }
                recorded(written + bytes.count, record)
                if record.count >= piece {
                    written += record.count
                    try record.withUnsafeBytes { try file.append($0) }
                } else {
                    bytes += record
                }
            }
            if !bytes.isEmpty { try bytes.withUnsafeBytes { try file.append($0) } }
            try file.sync()
            try fileSystem.syncDirectory(layout.segments)
        } catch {
            try? file.close()
            // No manifest names it: a partial segment (a compaction at a full disk) is removed at once, so that
            // its space is free for the saves that go on.
            try? fileSystem.remove(path)
            throw error
        }
        return file
    }

    /// Lets go of the active segment without flushing or cutting it: for a log shared per save that another
    /// writer has moved past. Its sizes are stale, so a flush that failed would cut the segment back to this log's
    /// last flush, taking the other writers' committed records with it. (Whoever appended after this log flushed
    /// the file, and with it what this log appended.)
    func abandon() {
        try? active.close()
    }

    /// Closes a log shared per save, without the store's lock: flushes what this log appended, but cuts nothing
    /// when the flush fails, since other writers may have appended after it.
    func closeShared() throws {
        defer { try? active.close() }
        try active.sync()
    }

    /// Flushes and closes the active segment.
    func close() throws {
        try sync()
        // A store closed cleanly ends with its last record; if the cut fails, the zeros left are allowed there.
        try? trimReservedSpace()
        try active.close()
    }

    /// The longest manifest a reader reads.
    static let maximumManifestSize = 16 << 20

    /// Reads the manifest of the store at `layout`.
    ///
    /// - Throws: ``FileStoreError`` when it is missing, damaged or of an unknown version.
    static func readManifest(layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> Manifest {
        guard let bytes = try manifestBytes(layout: layout, fileSystem: fileSystem) else {
            throw FileStoreError.inconsistentSegments(file: layout.manifest, kind: .manifestMissing,
                                                      reason: "the manifest is missing")
        }
        return try decodeManifest(bytes, layout: layout)
    }

    /// The bytes of the manifest file (at most one more than a manifest may have), or nil when there is none.
    ///
    /// - Throws: an I/O error other than the file's absence.
    static func manifestBytes(layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> [UInt8]? {
        // A manifest lists segment numbers: 16 MiB holds more than a million. Reading one byte more tells a longer
        // file (a hole, say) without reading it.
        do {
            return try fileSystem.read(layout.manifest, from: 0, count: maximumManifestSize + 1)
        } catch let error as StoreIOError where error.code == 2 {
            return nil
        }
    }

    /// Decodes the manifest from the bytes of its file.
    ///
    /// - Throws: ``FileStoreError`` when it is damaged (a ``FileStoreError/damagedRecord(file:offset:kind:reason:)``
    ///   says how its record fails to frame) or of an unknown version.
    static func decodeManifest(_ bytes: [UInt8], layout: StoreLayout) throws -> Manifest {
        guard bytes.count <= maximumManifestSize else {
            throw FileStoreError.damagedRecord(file: layout.manifest, offset: maximumManifestSize, kind: .malformed,
                                               reason: "the manifest is longer than \(maximumManifestSize) bytes")
        }
        return try bytes.withUnsafeBytes { buffer in
            let (version, start) = try MagicLine.parse(buffer, expecting: .manifest, file: layout.manifest)
            let scanned = RecordFrame.scan(buffer, at: start)
            switch scanned {
            case let .record(payload, next):
                guard next == buffer.count else {
                    throw FileStoreError.damagedRecord(file: layout.manifest, offset: next, kind: .malformed,
                                                       reason: "bytes follow the manifest record")
                }
                guard let decoder = RecordDecoders.decoder(for: version, blobs: nil) else {
                    throw FileStoreError.unsupportedFormatVersion(file: layout.manifest, found: version,
                                                                  supported: MagicLine.supportedVersions)
                }
                let record = try decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[payload]),
                                                offset: payload.lowerBound, file: layout.manifest, schema: nil)
                guard case .manifest(let manifest) = record else {
                    throw FileStoreError.undecodableRecord(file: layout.manifest, offset: payload.lowerBound,
                                                           reason: "the record is not a manifest")
                }
                // Segment numbers stay below 2^31, so that numbering the next one never overflows.
                guard !manifest.segments.isEmpty, manifest.nextSegment <= Int(Int32.max),
                      manifest.segments.allSatisfy({ $0 > 0 && $0 < manifest.nextSegment })
                else {
                    throw FileStoreError.inconsistentSegments(
                        file: layout.manifest, kind: .impossibleSegmentNumbers,
                        reason: "segments \(manifest.segments) are impossible before segment "
                            + "\(manifest.nextSegment)")
                }
                return manifest
            case .truncated(let reason):
                throw FileStoreError.damagedRecord(file: layout.manifest, offset: start, kind: .truncated,
                                                   reason: reason)
            case let .invalid(damage, reason):
                throw FileStoreError.damagedRecord(file: layout.manifest, offset: start, kind: damage, reason: reason)
            }
        }
    }
}
