import Foundation

/// A server row a sync could not apply, and why: reported and skipped, never applied in part.
public struct MirrorSkippedRow: Sendable, Hashable, CustomStringConvertible {
    /// The zone the row belongs to.
    public var zone: String
    /// The entity of the row's table (`e_<entity>`).
    public var entity: String
    /// The row's key: the object's primary key, as the server holds it.
    public var id: String
    /// What is wrong with it.
    public var reason: String

    /// `zone/Entity/id: reason`.
    public var description: String { "\(zone)/\(entity)/\(id): \(reason)" }
}
