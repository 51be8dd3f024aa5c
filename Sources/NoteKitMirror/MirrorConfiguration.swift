/// Where a store mirrors to: a PostgreSQL server, the zone on it whose data this is, and the namespace (a
/// PostgreSQL schema) that holds NoteKit's tables. The counterpart of SwiftData's
/// `ModelConfiguration(cloudKitDatabase: .private("iCloud.com.example.app"))`: a process that passes one mirrors, a
/// process that opens the same store without one (an extension, a tool) does not.
public struct MirrorConfiguration: Sendable, Hashable {
    /// A libpq connection string (`host=db.example.com dbname=notes user=app sslmode=verify-full`) or URI
    /// (`postgresql://app@db.example.com/notes?sslmode=verify-full`). Every libpq option passes through, TLS
    /// included; the `PG…` environment variables fill in what it leaves out, as for `psql`. A password here is used
    /// to connect and never logged, printed or written into the store (prefer `~/.pgpass` or `PGPASSFILE`).
    public var connectionString: String
    /// Whose data this is: every device of one zone converges to the same objects; two zones on one server share
    /// nothing. ASCII letters, digits, `_`, `-` and `.`, at most 200 characters (`"iCloud.com.example.fieldnotes"`).
    public var zone: String
    /// The PostgreSQL schema that holds NoteKit's tables on the server, `notekit` unless given; created when
    /// missing.
    public var namespace: String

    /// A mirror configuration.
    ///
    /// The values are checked when the mirror first uses them (``MirrorError/invalidName(kind:name:reason:)``,
    /// ``MirrorError/invalidConnectionString(_:)``), not here.
    public init(connectionString: String, zone: String, namespace: String = "notekit") {
        self.connectionString = connectionString
        self.zone = zone
        self.namespace = namespace
    }
}

extension MirrorConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The server (host, port, database, user: never a password), the zone and the namespace.
    public var description: String {
        let server = (try? PostgresConnection.describe(connectionString)) ?? "(a connection string libpq cannot parse)"
        return "MirrorConfiguration(server: \(server), zone: \(zone), namespace: \(namespace))"
    }

    /// As ``description``: the connection string is left out, since it may hold a password.
    public var debugDescription: String { description }

    /// What `dump(_:)` and the debugger show: the server without the password, the zone and the namespace.
    public var customMirror: Mirror {
        let server = (try? PostgresConnection.describe(connectionString)) ?? "(unparsable)"
        return Mirror(self, children: ["server": server, "zone": zone, "namespace": namespace],
                      displayStyle: .struct)
    }
}
