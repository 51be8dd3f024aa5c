import NoteKit

/// The notes domain's current schema: version 4, with attachments.
///
/// Earlier versions grew by additive steps, each reopened by lightweight migration with no migration plan:
/// version 1 had notes, folders and drawings; version 2 added revisions; version 3 nested folders; version 4
/// attachments. Registering any one of the models registers all five (M2).
public enum NotesSchema: VersionedSchema {
    /// 4.0.0, the notes schema's current version (`notekit --version` prints it).
    public static var versionIdentifier: Schema.Version { Schema.Version(4, 0, 0) }
    /// The five models, in the order the schema lists them: ``Note``, ``Folder``, ``NoteDrawing``,
    /// ``NoteRevision``, ``NoteAttachment``. A container takes them as `Schema(versionedSchema: NotesSchema.self)`,
    /// which records version 4.0.0, or as `Schema(NotesSchema.models)`.
    public static var models: [any PersistentModel.Type] {
        [Note.self, Folder.self, NoteDrawing.self, NoteRevision.self, NoteAttachment.self]
    }
}
