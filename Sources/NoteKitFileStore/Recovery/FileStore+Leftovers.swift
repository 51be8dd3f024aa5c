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

/// What an interrupted operation leaves behind, and what a writable open deletes of it (docs/FORMAT.md, *Directory
/// layout* and *Crash safety*); the blobs live rows name, which it keeps.
extension FileStore {
    /// What a creation of the store that was interrupted before its first manifest left: nothing when `segments/`
    /// is missing or empty, else segment 1 (and `MANIFEST.tmp`) when segment 1 holds nothing but (a part of) what
    /// creating a store writes first, its `segment` and `schema` records, and `blobs/` is empty. A store has a
    /// manifest before it commits anything, so these files hold nothing to lose.
    ///
    /// - Throws: ``FileStoreError/inconsistentSegments(file:kind:reason:)`` when segments exist that a creation cannot
    ///   have left: a store that lost its manifest, which is damage.
    static func interruptedCreation(layout: StoreLayout, fileSystem: any StoreFileSystem) throws -> [String] {
        guard fileSystem.exists(layout.segments) else { return [] }
        let names = try fileSystem.contentsOfDirectory(layout.segments)
        guard !names.isEmpty else { return [] }
        let refusal = FileStoreError.inconsistentSegments(file: layout.manifest, kind: .manifestMissing,
                                                          reason: "the manifest is missing but segments exist")
        let blobs = fileSystem.exists(layout.blobs) ? try fileSystem.contentsOfDirectory(layout.blobs) : []
        guard names == [StoreLayout.segmentName(1)], blobs.isEmpty else { throw refusal }
        let path = layout.segment(1)
        let magic = MagicLine.bytes(.segment)
        let bytes = try fileSystem.read(path, from: 0, count: magic.count)
        if bytes.count >= magic.count || !magic.starts(with: bytes) {
            guard let scan = try? SegmentScan.read(path, number: 1, fileSystem: fileSystem),
                  scan.tail?.isTorn ?? true, scan.undecodable == nil else { throw refusal }
            // Segment 1 is deleted when this says it holds only a creation's records: a record it cannot read,
            // or a segment it cannot walk, says otherwise.
            var onlyCreation = true
            do {
                try scan.forEachRecord(blobs: nil) { record in
                    let kind = try? record.peek.kind
                    if kind != .segment && kind != .schema { onlyCreation = false }
                }
            } catch { throw refusal }
            guard onlyCreation else { throw refusal }
        }
        return [path] + (fileSystem.exists(layout.temporaryManifest) ? [layout.temporaryManifest] : [])
    }

    /// Deletes what no manifest reaches: a temporary manifest, segments not listed, partial blobs, and retired
    /// blobs past their grace period; retires the blobs no object references (``BlobStore/reclaim(keeping:now:gracePeriod:tolerant:)``).
    /// Only regular files of names the format produces are deleted: `blobs/` or `segments/` may be a link to a
    /// directory the user shares with other files, and anything else there is left alone (`verify` lists it).
    static func removeLeftovers(manifest: Manifest, referenced: Set<String>, layout: StoreLayout,
                                fileSystem: any StoreFileSystem, now: Date, gracePeriod: Double) throws -> [String] {
        var removed: [String] = []
        func remove(_ path: String) throws {
            if try removeStoreFile(path, fileSystem: fileSystem) { removed.append(path) }
        }
        try remove(layout.temporaryManifest)
        try remove(layout.temporaryCheckpoint)
        let listed = Set(manifest.segments)
        for name in try fileSystem.contentsOfDirectory(layout.segments) {
            guard let number = StoreLayout.segmentNumber(name), !listed.contains(number) else { continue }
            try remove(layout.segments + "/" + name)
        }
        if fileSystem.exists(layout.blobs) {
            let store = BlobStore(directory: layout.blobs, fileSystem: fileSystem)
            // A reader in another process may be writing a fetched blob under its own temporary name right now.
            for file in try store.inventory().leftovers where !StoreLayout.isPartialBlobInFlight(file, now: now) {
                try remove(layout.blobs + "/" + file)
            }
            // Not deleted at once: a reader in another process may hold an object naming one (see `compact`).
            removed += try store.reclaim(keeping: referenced, now: now, gracePeriod: gracePeriod, tolerant: false).removed
        }
        if !removed.isEmpty {
            try fileSystem.syncDirectory(layout.segments)
            if fileSystem.exists(layout.blobs) { try fileSystem.syncDirectory(layout.blobs) }
        }
        return removed
    }

    /// Deletes the store file at `path` if it is a regular file; anything else there (a directory, a link, a FIFO)
    /// is not the store's to delete.
    ///
    /// - Returns: whether a file was deleted.
    static func removeStoreFile(_ path: String, fileSystem: any StoreFileSystem) throws -> Bool {
        guard try fileSystem.kind(of: path) == .regularFile else { return false }
        do { try fileSystem.remove(path) } catch let error as StoreIOError where error.code == ENOENT {
            // Gone between the look and the deletion: a reader in another process that fetched a promised blob
            // deletes its promise without the store's lock.
            return false
        }
        return true
    }

    /// The blob names live rows reference.
    static func referencedBlobs(_ rows: [ModelSnapshot], schema: Schema) -> Set<String> {
        Set(referencedExternalData(rows, schema: schema).keys)
    }

    /// The blob names the rows of `tables` (per entity name, as a replay built them) reference: only the tables
    /// of entities with an external-storage attribute are read.
    static func referencedBlobs(_ tables: [String: OrderedRows], schema: Schema) -> Set<String> {
        let holding = schema.entities.filter { $0.attributes.contains { $0.has(.externalStorage) } }
        return referencedBlobs(holding.flatMap { tables[$0.name]?.rows ?? [] }, schema: schema)
    }

    /// The blobs live rows reference, by name, with the size their records give.
    static func referencedExternalData(_ rows: [ModelSnapshot], schema: Schema) -> [String: ExternalData] {
        var blobs: [String: ExternalData] = [:]
        var externalSlots: [String: [Int]] = [:]
        for entity in schema.entities {
            let slots = entity.attributes.indices.filter { entity.attributes[$0].has(.externalStorage) }
            if !slots.isEmpty { externalSlots[entity.name] = slots }
        }
        guard !externalSlots.isEmpty else { return [:] }
        for row in rows {
            for slot in externalSlots[row.id.entityName] ?? [] {
                if case .external(let blob) = row.attributes[slot] { blobs[blob.name] = blob }
            }
        }
        return blobs
    }
}
