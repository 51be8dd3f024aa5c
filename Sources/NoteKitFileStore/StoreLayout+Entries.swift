#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one rule of what kind each fixed entry of a store's directory must be (docs/FORMAT.md, *File types*). Every
/// open asks it before it reads (``PinnedRead``), a writable open also for what only writing uses, and
/// ``StoreVerifier`` reports each entry it refuses: a store `verify` calls healthy is never one an open refuses for
/// the kind of its entries.
extension StoreLayout {
    /// One fixed entry and what the store keeps there.
    struct Entry {
        let path: String
        let expected: StoreFileKind
        /// Whether a symbolic link there is followed (`segments/` and `blobs/` may live on another disk).
        let followsLink: Bool
        /// Whether only writing uses it, so that a read-only open (which writes nothing) does not refuse it.
        let writingOnly: Bool
    }

    /// The fixed entries, in the order they are checked.
    var entries: [Entry] {
        [Entry(path: manifest, expected: .regularFile, followsLink: false, writingOnly: false),
         Entry(path: segments, expected: .directory, followsLink: true, writingOnly: false),
         Entry(path: blobs, expected: .directory, followsLink: true, writingOnly: false),
         Entry(path: lock, expected: .regularFile, followsLink: false, writingOnly: true),
         Entry(path: quarantine, expected: .directory, followsLink: false, writingOnly: true)]
    }

    /// Every fixed entry that exists and is not of the kind the store keeps there, as the error an open refuses it
    /// with (``FileStoreError/unexpectedFileType(path:found:expected:)``); an entry that does not exist is not
    /// refused (a store creates it when it needs it). A followed link is judged by what it leads to: a link to a
    /// directory is a directory, a dangling link or one to anything else is refused as a symbolic link.
    ///
    /// - Parameter writing: whether to include the entries only a writable open uses (`LOCK`, `quarantine/`).
    /// - Complexity: one `lstat` per entry, two for a followed link.
    func misplacedEntries(writing: Bool, fileSystem: any StoreFileSystem) -> [FileStoreError] {
        entries.compactMap { entry in
            guard writing || !entry.writingOnly else { return nil }
            let found: StoreFileKind?
            do {
                found = try kind(of: entry, fileSystem: fileSystem)
            } catch {
                return nil  // An I/O error is reported by the read that meets it, with its own cause.
            }
            guard let found, found != entry.expected else { return nil }
            return .unexpectedFileType(path: entry.path, found: found, expected: entry.expected)
        }
    }

    /// Throws the first refusal of ``misplacedEntries(writing:fileSystem:)``.
    ///
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)``.
    func checkEntries(writing: Bool, fileSystem: any StoreFileSystem) throws {
        if let refusal = misplacedEntries(writing: writing, fileSystem: fileSystem).first { throw refusal }
    }

    /// What is at `entry`'s path, following a link there when the entry allows it; nil when there is nothing.
    private func kind(of entry: Entry, fileSystem: any StoreFileSystem) throws -> StoreFileKind? {
        guard let found = try fileSystem.kind(of: entry.path) else { return nil }
        guard found == .symbolicLink, entry.followsLink else { return found }
        // `path/.` resolves the link and names a directory only when the link leads to one.
        return try fileSystem.kind(of: entry.path + "/.") == .directory ? .directory : .symbolicLink
    }
}
