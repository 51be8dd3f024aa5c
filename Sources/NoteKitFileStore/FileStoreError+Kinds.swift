import NoteKit

// The kinds of the FileStoreError cases a caller may branch on. Each case of FileStoreError that carries one also
// carries the sentence that says exactly what was found (its `reason`), for a person; the kind is for code.

/// How a file fails to be the NoteKit store file expected: the kind of a
/// ``FileStoreError/notAStoreFile(file:kind:reason:)``.
public enum StoreFileMismatch: Sendable, Hashable {
    /// The file is empty.
    case empty
    /// The file does not begin with a NoteKit magic line (`NOTEKIT/<version> <kind>`): it is not a NoteKit file.
    case notNoteKit
    /// The file is a NoteKit file of another kind (a manifest where a segment belongs, a segment where the
    /// checkpoint belongs).
    case otherKind
}

/// What is wrong with the manifest's list of segments, or with a segment it lists: the kind of a
/// ``FileStoreError/inconsistentSegments(file:kind:reason:)``.
public enum SegmentInconsistency: Sendable, Hashable {
    /// There is no `MANIFEST` (in a store whose segments exist, or that a read found gone).
    case manifestMissing
    /// The manifest lists a segment that does not exist.
    case segmentMissing
    /// The manifest lists a segment twice.
    case segmentListedTwice
    /// The manifest lists segment numbers that are impossible before its next segment number.
    case impossibleSegmentNumbers
    /// A segment's own segment record names another store.
    case segmentOfAnotherStore
    /// A segment's own segment record gives another number than its file name.
    case segmentNumberMismatch
    /// A segment does not begin with its own segment record.
    case segmentRecordMissing
}

/// Why a transaction of the log does not apply to the state before it: the kind of a
/// ``FileStoreError/danglingReference(file:offset:kind:reason:)``.
public enum TransactionConflictKind: Sendable, Hashable {
    /// The transaction's number does not follow the last one applied.
    case outOfSequence
    /// The transaction inserts an object of an entity the schema does not have.
    case unknownEntity
    /// The transaction inserts an object that already exists.
    case objectExists
    /// The transaction updates or deletes an object that does not exist.
    case objectMissing
    /// The transaction sets a relationship to an object that does not exist.
    case targetMissing
    /// The transaction gives a unique key that another object holds.
    case uniqueKeyTaken
    /// The transaction writes a value that the property's type does not admit.
    case valueDoesNotMatchType
}

/// The write whose failure left the store's files in doubt, so that the store accepts no more writes until it is
/// reopened: the kind of a ``FileStoreError/writesStopped(kind:reason:)``. Reopening the store finds the last
/// intact record and removes what no record names.
public enum InterruptedWrite: Sendable, Hashable {
    /// Appending a record failed, and cutting off what part of it reached the segment failed too.
    case append
    /// Flushing the log failed (what was not flushed may or may not be on disk).
    case flush
    /// Flushing the log failed, and cutting back the records not flushed failed too.
    case flushAndCutBack
    /// Flushing a full segment before starting the next one failed.
    case segmentRotation
    /// Replacing the manifest (the rename, or flushing the directory) failed.
    case manifestReplacement
    /// Putting a blob file in place (the rename, or flushing `blobs/`) failed.
    case blobPlacement
}

/// Why a salvage found nothing whole to copy: the kind of a
/// ``FileStoreError/nothingToSalvage(path:kind:reason:)``.
public enum SalvageFailure: Sendable, Hashable {
    /// No segment holds a readable schema.
    case noReadableSchema
    /// Segments with a schema were left out, and nothing whole precedes them: a snapshot whose rows did not all
    /// arrive, or a segment of another store.
    case segmentsLeftOut
}
