import Foundation
import NoteKit

// Models with a unique key, for the mirror's tests of unique keys across machines (issue 18): a label is unique by
// name, and its stickers are deleted with it, so a merge that deleted the losing label instead of pointing its
// stickers at the survivor would lose them.

/// A label, unique by name; deleting it deletes its stickers.
public final class LabelRecord: PersistentModel {
    @Attribute(.unique) public var name = ""
    @Attribute public var color = ""
    @Attribute public var rank = 0
    @Relationship(deleteRule: .cascade, inverse: \StickerRecord.label) public var stickers: [StickerRecord] = []

    public required init() {}

    public convenience init(name: String, color: String = "") {
        self.init()
        self.name = name
        self.color = color
    }
}

/// A sticker under a label.
public final class StickerRecord: PersistentModel {
    @Attribute public var id = UUID()
    @Attribute public var text = ""
    @Relationship public var label: LabelRecord?

    public required init() {}

    public convenience init(text: String) {
        self.init()
        self.text = text
    }
}

extension ModelContainer {
    /// The FieldNotes record types with labels and stickers: the schema the mirror's devices use in tests.
    public static let labelledFieldNotesModels: [any PersistentModel.Type] = fieldNotesModels
        + [LabelRecord.self, StickerRecord.self]
}
