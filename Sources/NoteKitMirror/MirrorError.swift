/// What can go wrong between a store and its mirror server. Every case names the server by host, port, database
/// and user only: a password in the connection string never appears in an error.
public enum MirrorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// libpq could not parse the connection string (the message is libpq's, which never repeats a password).
    case invalidConnectionString(String)
    /// The server could not be reached, refused the connection, or dropped it.
    case connectionFailed(server: String, message: String)
    /// The server rejected a statement: `sqlState` is PostgreSQL's five-character error code.
    case serverError(server: String, purpose: String, sqlState: String, message: String)
    /// A name the server would need (a zone, the namespace, an entity or property) is not one NoteKit maps to a
    /// PostgreSQL identifier: ASCII letters, digits and underscores, not starting with a digit, and short enough
    /// for PostgreSQL's 63 bytes with NoteKit's prefix.
    case invalidName(kind: String, name: String, reason: String)
    /// The zone already holds data of a schema of a newer major version than this device's: it must not write until
    /// it is updated. (A newer minor or patch version only adds, so an older device of the same major version keeps
    /// writing, and what it does not know stays on the server.)
    case schemaBehindZone(zone: String, schemaVersion: String, zoneVersion: String)
    /// The server's tables for the zone are not what this version of NoteKit made (`found` says what differs).
    case unexpectedServerSchema(server: String, table: String, found: String)
    /// The server has no tables for this schema in the zone yet: run `ModelContainer.initializeMirrorSchema(_:)`
    /// (or `notekit mirror init`) first.
    case schemaNotInitialized(zone: String, namespace: String)
    /// The store's mirroring state (`MIRROR` in its directory) cannot be read: it is damaged or not NoteKit's.
    case stateUnreadable(path: String, reason: String)
    /// The store's mirroring state cannot be written.
    case stateUnwritable(path: String, reason: String)
    /// The store's mirroring state belongs to another zone or namespace: a store mirrors to one zone.
    case stateOfAnotherZone(zone: String, namespace: String)
    /// The store refused what the mirror asked of it (a save, a read of its history).
    case storeFailed(operation: String, reason: String)
    /// The zone has no blob `name` (a SHA-256) for a store to fetch: the server lost it (a restored backup, a
    /// zone dropped by hand). The object that names it keeps the reference; reading it fails until a device that
    /// has the bytes saves them again.
    case blobNotOnServer(zone: String, name: String)

    /// What went wrong and where, in one line, for a log or a command-line tool.
    public var description: String {
        switch self {
        case let .invalidConnectionString(message):
            "mirror: the connection string is not valid: \(message)"
        case let .connectionFailed(server, message):
            "mirror: cannot talk to \(server): \(message)"
        case let .serverError(server, purpose, sqlState, message):
            "mirror: \(server) refused to \(purpose) (SQLSTATE \(sqlState)): \(message)"
        case let .invalidName(kind, name, reason):
            "mirror: the \(kind) name \"\(name)\" cannot name a server table or column: \(reason)"
        case let .schemaBehindZone(zone, schemaVersion, zoneVersion):
            "mirror: zone \"\(zone)\" holds schema \(zoneVersion), a newer major version than this store's \(schemaVersion): " +
                "update the program before it mirrors"
        case let .unexpectedServerSchema(server, table, found):
            "mirror: \(server) has a table \(table) that NoteKit did not make: \(found)"
        case let .schemaNotInitialized(zone, namespace):
            "mirror: zone \"\(zone)\" in namespace \(namespace) has no tables for this schema: run " +
                "initializeMirrorSchema (notekit mirror init) first"
        case let .stateUnreadable(path, reason):
            "mirror: the mirroring state \(path) cannot be read: \(reason)"
        case let .stateUnwritable(path, reason):
            "mirror: the mirroring state \(path) cannot be written: \(reason)"
        case let .stateOfAnotherZone(zone, namespace):
            "mirror: this store mirrors to zone \"\(zone)\" in namespace \(namespace), not to the one configured"
        case let .storeFailed(operation, reason):
            "mirror: the store refused to \(operation): \(reason)"
        case let .blobNotOnServer(zone, name):
            "mirror: zone \"\(zone)\" has no blob \(name) to fetch: the server lost it; a device that has its bytes "
                + "can save them again"
        }
    }
}
