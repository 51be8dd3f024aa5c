import NoteKit
import NoteKitStressSupport

extension ModelContainer {
    /// A FieldNotes store of `kind`, in a fresh place (the seed's `fieldNotes(inMemory:)`).
    ///
    /// - Throws: what ``StoreKind/makeContainer(_:uniquenessPolicy:)`` throws.
    public static func fieldNotes(on kind: StoreKind = .inMemory) throws -> ModelContainer {
        try kind.makeContainer(fieldNotesModels)
    }
}
