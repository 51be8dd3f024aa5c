import Foundation
import NoteKit

// Models for the mirror's tests (issue 18). A label is unique by name, and its stickers are deleted with it, so a
// merge that deleted the losing label instead of pointing its stickers at the survivor would lose them. Boards and
// pins are many-to-many, and a board features labels through a relationship without an inverse.

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

/// A board of pins: many-to-many with ``PinRecord``, and a to-many relationship without an inverse to labels.
public final class BoardRecord: PersistentModel {
    @Attribute public var id = UUID()
    @Attribute public var name = ""
    @Relationship(deleteRule: .nullify, inverse: \PinRecord.boards) public var pins: [PinRecord] = []
    @Relationship public var featured: [LabelRecord] = []

    public required init() {}

    public convenience init(name: String) {
        self.init()
        self.name = name
    }
}

/// A pin, on any number of boards.
public final class PinRecord: PersistentModel {
    @Attribute public var id = UUID()
    @Attribute public var text = ""
    @Relationship public var boards: [BoardRecord] = []

    public required init() {}

    public convenience init(text: String) {
        self.init()
        self.text = text
    }
}

extension ModelContainer {
    /// The FieldNotes record types with labels, stickers, boards and pins: the schema the mirror's devices use in
    /// tests (unique keys, many-to-many relationships, a to-many relationship without an inverse).
    public static let labelledFieldNotesModels: [any PersistentModel.Type] = fieldNotesModels
        + [LabelRecord.self, StickerRecord.self, BoardRecord.self, PinRecord.self]
}
