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

/// Setting a torn tail aside: what a writable open does with the bytes after the last intact record of the last
/// segment (docs/FORMAT.md, *Recovery*).
extension FileStore {
    /// Moves a torn tail's bytes to `quarantine/` and cuts the segment back to its last intact record.
    ///
    /// `quarantine/` must be a directory of the store, not a link: the torn bytes go nowhere else. A quarantine
    /// file that already holds the same bytes from the same offset (a process died between keeping them and
    /// cutting the segment) is used again rather than copied once more. If keeping the bytes or cutting the
    /// segment fails, the copy made here is deleted again (unless the cut happened after all), so a refused open
    /// leaves no file behind.
    ///
    /// At most `limit` bytes of the tail are copied: a tail longer than a segment may be (a hole, garbage) would
    /// otherwise fill the disk with a copy; the report says how many bytes were left out.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` when `quarantine/` is not a directory,
    ///   or an I/O error.
    static func quarantine(_ torn: (segment: Int, path: String, offset: Int, length: Int, reason: String),
                           limit: Int, layout: StoreLayout,
                           fileSystem: any StoreFileSystem) throws -> RecoveryReport.TornTail {
        if let found = try fileSystem.kind(of: layout.quarantine), found != .directory {
            throw FileStoreError.unexpectedFileType(path: layout.quarantine, found: found, expected: .directory)
        }
        try fileSystem.makeDirectory(layout.quarantine)
        let base = layout.quarantine + "/" + StoreLayout.segmentName(torn.segment) + ".at-\(torn.offset)"
        var name = base + ".torn"
        var earlier: [String] = []
        var suffix = 1
        while fileSystem.exists(name) {
            if try fileSystem.kind(of: name) == .regularFile { earlier.append(name) }
            suffix += 1
            name = base + "-\(suffix).torn"
        }
        // The tail is copied in pieces (it may be large, or sparse), then compared with earlier copies of the same
        // offset: one that holds the same bytes is kept instead.
        let file = try fileSystem.create(name)
        let copied = min(torn.length, max(limit, 1))
        var omitted = 0
        do {
            try copyTail(of: torn.path, from: torn.offset, length: copied, to: file, fileSystem: fileSystem)
            // Beyond the copy, only what is not zeros counts as left out (reserved space is not part of a tail).
            if copied < torn.length {
                omitted = try nonZeroExtent(of: torn.path, from: torn.offset + copied, to: torn.offset + torn.length,
                                            fileSystem: fileSystem)
            }
            try file.sync()
            try file.close()
        } catch {
            try? file.close()
            try? fileSystem.remove(name)
            throw error
        }
        var kept = name
        if let same = try earlier.first(where: { try sameContents(name, $0, fileSystem: fileSystem) }) {
            try? fileSystem.remove(name)
            kept = same
        } else {
            do { try fileSystem.syncDirectory(layout.quarantine) } catch {
                try? fileSystem.remove(name)
                throw error
            }
        }
        do {
            try fileSystem.truncate(torn.path, to: torn.offset)
        } catch {
            // The segment still holding the tail, the copy is not needed: the next open makes it again.
            if kept == name, let size = try? fileSystem.status(torn.path)?.size, size > torn.offset {
                try? fileSystem.remove(name)
            }
            throw error
        }
        return .init(segment: torn.path, offset: torn.offset, length: torn.length, reason: torn.reason,
                     quarantinedAt: kept, omittedLength: omitted)
    }

    /// How many bytes of `path` from `start` up to `end` are left once the zeros at their end are taken off: what a
    /// quarantine that stops at `start` leaves out. Read backwards in pieces from the last byte, so that a hole of
    /// any size before a last byte costs one piece.
    private static func nonZeroExtent(of path: String, from start: Int, to end: Int,
                                      fileSystem: any StoreFileSystem) throws -> Int {
        var position = end
        while position > start {
            let count = min(position - start, SegmentScan.piece)
            let piece = try fileSystem.read(path, from: position - count, count: count)
            if let last = piece.lastIndex(where: { $0 != 0 }) { return position - count + last + 1 - start }
            position -= count
        }
        return 0
    }

    /// Whether two regular files hold the same bytes, compared in pieces.
    private static func sameContents(_ first: String, _ second: String,
                                     fileSystem: any StoreFileSystem) throws -> Bool {
        guard let size = try fileSystem.status(first)?.size, try fileSystem.status(second)?.size == size else {
            return false
        }
        var position = 0
        while position < size {
            let count = min(size - position, SegmentScan.piece)
            let a = try fileSystem.read(first, from: position, count: count)
            guard !a.isEmpty, try fileSystem.read(second, from: position, count: count) == a else { return false }
            position += a.count
        }
        return true
    }

    /// Copies `length` bytes of `path` from `offset` to `file`, a piece at a time, without the zeros at their end
    /// (reserved space after a torn record is not part of it; the first byte is always copied).
    private static func copyTail(of path: String, from offset: Int, length: Int, to file: any StoreFile,
                                 fileSystem: any StoreFileSystem) throws {
        var position = offset, pendingZeros = 0
        let end = offset + length
        let zeros = [UInt8](repeating: 0, count: 1 << 16)
        while position < end {
            let piece = try fileSystem.read(path, from: position, count: min(end - position, SegmentScan.piece))
            if piece.isEmpty { break }
            var last = piece.count
            while last > 0, piece[last - 1] == 0, position + last - 1 > offset { last -= 1 }
            if last > 0 {
                // Zeros followed by more bytes are part of the tail.
                while pendingZeros > 0 {
                    let count = min(pendingZeros, zeros.count)
                    try zeros.withUnsafeBytes { try file.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                    pendingZeros -= count
                }
                try piece.withUnsafeBytes { try file.append(UnsafeRawBufferPointer(rebasing: $0[..<last])) }
            }
            pendingZeros += piece.count - last
            position += piece.count
        }
    }
}
