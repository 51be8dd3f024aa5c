/// A schema frozen at one version: its number and the model types declared for it.
///
/// Declare the models of a shipped version inside the enum, so they stay as they were when the code moves on:
/// ```swift
/// enum FieldNotesSchemaV1: VersionedSchema {
///     static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
///     static var models: [any PersistentModel.Type] { [NoteRecord.self, NotebookRecord.self] }
///     final class NoteRecord: PersistentModel { … }
/// }
/// ```
///
/// Its metatype is `Sendable` (``MigrationStage`` holds versions and is kept in `static let`s), so a conformance
/// cannot be isolated to a global actor.
public protocol VersionedSchema: SendableMetatype {
    /// The schema's version.
    static var versionIdentifier: Schema.Version { get }
    /// The schema's model types (types reachable from them are registered too).
    static var models: [any PersistentModel.Type] { get }
}
