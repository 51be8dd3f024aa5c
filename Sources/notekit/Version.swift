import NoteKitFileStore
import NoteKitNotes

/// What `notekit --version` reports. The library version lives here, in the tool, because only the tool prints it:
/// the libraries' behaviour does not depend on it, and a dependent asks SwiftPM, not the code, which release it
/// resolved. Bump it with each release tag (CHANGELOG.md).
enum NoteKitVersion {
    /// The release of NoteKit this tool was built from: semantic versioning, `-dev` between releases.
    static let current = "0.1.0-dev"

    /// The lines of `notekit --version`.
    static var text: String {
        """
        notekit \(current)
        store format \(MagicLine.currentVersion) (reads \(MagicLine.supportedVersions.map(String.init).joined(separator: ", ")))
        notes schema \(NotesSchema.versionIdentifier)
        """
    }

    /// `notekit --version --json`: `version`, `formatVersion` (written), `formatVersions` (read),
    /// `notesSchemaVersion`.
    static var json: [String: Any] {
        [
            "version": current,
            "formatVersion": MagicLine.currentVersion,
            "formatVersions": MagicLine.supportedVersions,
            "notesSchemaVersion": NotesSchema.versionIdentifier.description,
        ]
    }
}
