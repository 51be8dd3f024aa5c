// SortDescriptor is in Foundation proper on Linux.
import Foundation

extension SortDescriptor where Compared: PersistentModel {
    /// Sorts models by a `Bool` attribute, `false` before `true` in `.forward` order (SwiftData's SQLite store
    /// orders them as 0 and 1), as seed 003's note list does:
    ///
    /// ```swift
    /// FetchDescriptor<Note>(sortBy: [SortDescriptor(\.isPinned, order: .reverse),   // pinned notes first
    ///                                SortDescriptor(\.createdAt, order: .reverse)])
    /// ```
    ///
    /// `Bool` is not `Comparable`, so Foundation's own initializer does not accept it, and neither NoteKit nor your
    /// code should conform a standard type retroactively. This one sorts by a comparable stand-in that the store
    /// maps back to the attribute: the sort runs in the store and uses an index that leads with the attribute,
    /// like any other (``ModelContext/explain(_:)`` shows it). Sorting objects in Swift with the descriptor
    /// (`notes.sorted(using:)`) gives the same order.
    ///
    /// - Parameters:
    ///   - keyPath: a `Bool` property of the model.
    ///   - order: `.forward` puts `false` first, `.reverse` puts `true` first.
    public init(_ keyPath: KeyPath<Compared, Bool> & Sendable, order: SortOrder = .forward) {
        self.init(\Compared.[boolSortKey: keyPath], order: order)
    }

    /// Sorts models by an optional `Bool` attribute: `nil`, then `false`, then `true` in `.forward` order (`nil`
    /// first, as Foundation's sort descriptors order optionals). Runs in the store, as the `Bool` form does.
    ///
    /// - Parameters:
    ///   - keyPath: a `Bool?` property of the model.
    ///   - order: `.forward` puts `nil` first, `.reverse` puts `true` first.
    public init(_ keyPath: KeyPath<Compared, Bool?> & Sendable, order: SortOrder = .forward) {
        self.init(\Compared.[boolSortKey: keyPath], order: order)
    }
}

/// What a `Bool` sort descriptor compares: a Bool's rank in the store's order (`nil < false < true`, as
/// ``StoredValue/compare(_:_:)`` orders them), so that `Bool` itself never needs to be `Comparable`.
struct BoolSortKey: Comparable {
    let rank: Int8
    /// The `Bool` key path read, set only when read on a type's prototype: it is how the sort compiler maps the
    /// descriptor's key path (this subscript) to the attribute (see ``ModelMetadata/property(for:)``).
    let source: AnyKeyPath?

    init(_ value: Bool?, source: AnyKeyPath?) {
        rank = switch value {
        case nil: 0
        case false?: 1
        case true?: 2
        }
        self.source = source
    }

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
    static func == (lhs: Self, rhs: Self) -> Bool { lhs.rank == rhs.rank }
}

extension PersistentModelProtocol where Self: ModelObject {
    /// The sort key of a `Bool` property, read by the key path a `Bool` sort descriptor holds.
    subscript(boolSortKey keyPath: KeyPath<Self, Bool> & Sendable) -> BoolSortKey {
        BoolSortKey(self[keyPath: keyPath], source: _$isPrototype ? keyPath : nil)
    }

    /// The sort key of a `Bool?` property.
    subscript(boolSortKey keyPath: KeyPath<Self, Bool?> & Sendable) -> BoolSortKey {
        BoolSortKey(self[keyPath: keyPath], source: _$isPrototype ? keyPath : nil)
    }
}
