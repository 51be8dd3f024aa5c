#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where the files of a store live (docs/FORMAT.md, *Directory layout*).
struct StoreLayout: Sendable {
    let root: String

    var manifest: String { root + "/MANIFEST" }
    var temporaryManifest: String { root + "/MANIFEST.tmp" }
    var lock: String { root + "/LOCK" }
    /// The last transaction history trimming may delete (``FileStore/holdHistory(after:)``): a client reading the
    /// history as a queue has not consumed the later ones.
    var historyHold: String { root + "/HISTORY-HOLD" }
    var temporaryHistoryHold: String { root + "/HISTORY-HOLD.tmp" }
    var segments: String { root + "/segments" }
    var blobs: String { root + "/blobs" }
    var quarantine: String { root + "/quarantine" }
    /// The directory holding the store's directory, whose entry for it a new store flushes.
    var parent: String {
        let path = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The path of segment `number`.
    func segment(_ number: Int) -> String { segments + "/" + Self.segmentName(number) }

    /// `000042.seg`.
    static func segmentName(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".seg"
    }

    /// The segment number a file name denotes, if it is a segment's name.
    static func segmentNumber(_ name: String) -> Int? {
        guard name.hasSuffix(".seg"), let number = Int(name.dropLast(4)), number > 0 else { return nil }
        return name == segmentName(number) ? number : nil
    }

    /// `<sha256>.blob`: the file of the blob whose bytes hash to `name` (64 lowercase hexadecimal digits).
    static func blobFileName(_ name: String) -> String { name + ".blob" }

    /// `.<sha256>.partial`: a blob being written under the store's lock, renamed to its ``blobFileName(_:)`` (or,
    /// for a promise, ``remoteBlobFileName(_:)``) once flushed. A reader that fetches a promised blob holds no lock,
    /// and another may fetch the same one at once: each writes under a name of its own, `.<sha256>.<writer>.partial`
    /// (`writer`: 1 to 32 lowercase letters and digits; a reader's is ``fetchWriterTag(now:)``).
    static func partialBlobFileName(_ name: String, writer: String? = nil) -> String {
        "." + name + (writer.map { "." + $0 } ?? "") + ".partial"
    }

    /// The blob name a file name of `blobs/` denotes, if it is a blob's name.
    static func blobName(_ fileName: String) -> String? {
        guard fileName.hasSuffix(".blob") else { return nil }
        let name = String(fileName.dropLast(5))
        return isBlobName(name) ? name : nil
    }

    /// `<sha256>.remote`: the promise of a blob whose bytes are elsewhere, not on this disk yet. A save of a remote
    /// reference (`ExternalData.isRemote`) writes it, flushed, before the record that names the blob; the
    /// first read of the blob in a process with a blob source attached (``FileStore/attachRemoteBlobSource(_:)``)
    /// fetches the bytes, puts ``blobFileName(_:)`` in place and deletes the promise (docs/FORMAT.md,
    /// *Promised blobs*).
    static func remoteBlobFileName(_ name: String) -> String { name + ".remote" }

    /// The blob name a file name of `blobs/` denotes, if it is a remote blob's promise.
    static func remoteBlobName(_ fileName: String) -> String? {
        guard fileName.hasSuffix(".remote") else { return nil }
        let name = String(fileName.dropLast(7))
        return isBlobName(name) ? name : nil
    }

    /// A fetching reader's writer tag: the wall clock in whole seconds since 1970, `t`, and 16 random hexadecimal
    /// digits, so that a writable open can tell a file still being written from a leftover.
    static func fetchWriterTag(now: Date) -> String {
        let seconds = Int(min(max(0, now.timeIntervalSince1970), 1e15).rounded(.down))
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return "\(seconds)t" + String(repeating: "0", count: 16 - random.count) + random
    }

    /// How long a fetching reader's temporary file may take to write, flush and rename: 10 minutes, far more than a
    /// blob's local write takes (the bytes are fetched before the file is made).
    static let fetchWriteAllowance: Double = 600

    /// Whether `fileName` is a fetching reader's temporary file stamped within ``fetchWriteAllowance`` of `now`
    /// (either side, for a wall clock stepped back): still being written, so not a leftover to delete.
    static func isPartialBlobInFlight(_ fileName: String, now: Date) -> Bool {
        guard partialBlobName(fileName) != nil else { return false }
        let writer = fileName.dropFirst(1 + 64 + 1).dropLast(8)
        guard let t = writer.firstIndex(of: "t"), let seconds = Int(writer[..<t]) else { return false }
        return abs(Double(seconds) - now.timeIntervalSince1970) <= fetchWriteAllowance
    }

    /// The blob name a file name of `blobs/` denotes, if it is the name of a blob being written.
    static func partialBlobName(_ fileName: String) -> String? {
        guard fileName.hasPrefix("."), fileName.hasSuffix(".partial") else { return nil }
        let middle = fileName.dropFirst().dropLast(8)
        let name = String(middle.prefix(64))
        guard isBlobName(name) else { return nil }
        let writer = middle.dropFirst(64)
        if writer.isEmpty { return name }
        guard writer.first == ".", (2...33).contains(writer.utf8.count),
              writer.utf8.dropFirst().allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) })
        else { return nil }
        return name
    }

    /// `retired-<unix seconds>-<sha256>`: a blob no object names any more, taken out of its place by a compaction or
    /// a writable open's cleanup at `seconds` (the wall clock, whole seconds since 1970, never negative) and kept
    /// under this name for readers that read an object naming it before; deleted once it has been retired longer
    /// than ``FileStoreConfiguration/retiredBlobGracePeriod`` (docs/FORMAT.md, *External storage*). It can be
    /// neither a blob's name (which ends in `.blob`) nor a partial blob's (which starts with `.`).
    static func retiredBlobFileName(_ name: String, retiredAt seconds: Int) -> String {
        "retired-\(max(0, seconds))-" + name
    }

    /// The blob name and the time of retirement a file name of `blobs/` denotes, if it is a retired blob's name
    /// (exactly as ``retiredBlobFileName(_:retiredAt:)`` spells it: no sign, no leading zero).
    static func retiredBlob(_ fileName: String) -> (name: String, retiredAt: Int)? {
        guard fileName.hasPrefix("retired-") else { return nil }
        let rest = fileName.dropFirst(8)
        guard let dash = rest.firstIndex(of: "-"), let seconds = Int(rest[..<dash]), seconds >= 0 else { return nil }
        let name = String(rest[rest.index(after: dash)...])
        guard isBlobName(name), fileName == retiredBlobFileName(name, retiredAt: seconds) else { return nil }
        return (name, seconds)
    }

    /// Whether `name` is a SHA-256 in lowercase hexadecimal, as blob names are (and nothing that is a path).
    static func isBlobName(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
