import Foundation
import NoteKit

/// What ``MirrorConfiguration/initializeSchema(for:)`` changed on the server: empty when its tables were already
/// what the schema needs.
public struct MirrorSchemaChanges: Sendable, Hashable, CustomStringConvertible {
    /// The tables it created, as `namespace.table`, sorted.
    public var tablesCreated: [String]
    /// The columns it added to tables that existed, as `namespace.table.column`, sorted.
    public var columnsAdded: [String]
    /// Whether the zone's record of this schema was new (its first device of this schema).
    public var schemaRecorded: Bool

    /// Whether nothing changed.
    public var isEmpty: Bool { tablesCreated.isEmpty && columnsAdded.isEmpty && !schemaRecorded }

    /// The changes in one line: what was created, added and recorded, or that the tables were up to date.
    public var description: String {
        if isEmpty { return "the server's tables are up to date" }
        var lines: [String] = []
        if !tablesCreated.isEmpty { lines.append("created " + tablesCreated.joined(separator: ", ")) }
        if !columnsAdded.isEmpty { lines.append("added " + columnsAdded.joined(separator: ", ")) }
        if schemaRecorded { lines.append("recorded the schema in the zone") }
        return lines.joined(separator: "; ")
    }
}

extension MirrorConfiguration {
    /// Creates or updates the server's tables for `schema` (SwiftData's `initializeCloudKitSchema()`), and records
    /// the schema as one the zone holds: NoteKit's own tables, one table an entity with a value and a clock column
    /// an attribute and to-one relationship, and a link table a to-many relationship its inverse does not record
    /// (docs/MIRROR.md, *The server's tables*).
    ///
    /// Idempotent: running it again with the same schema changes nothing and returns empty changes. A newer schema
    /// adds the tables and columns it needs and never drops one, so devices still on an older schema keep working
    /// and leave what they do not know on the server. It runs in one transaction under an advisory lock, so two
    /// devices initializing at once do not race; a failure leaves the server as it was.
    ///
    /// - Throws: ``MirrorError/schemaBehindZone(zone:schemaVersion:zoneVersion:)`` when the zone already holds a
    ///   schema of a newer major version; ``MirrorError/invalidName(kind:name:reason:)`` for a zone, namespace, entity or
    ///   property name NoteKit cannot map to the server exactly; ``MirrorError/unexpectedServerSchema(server:table:found:)``
    ///   when a table of NoteKit's name lacks a column NoteKit expects, or records another layout; and
    ///   connection and server errors.
    /// - Complexity: a few round trips an entity, on one connection.
    @discardableResult
    public func initializeSchema(for schema: Schema) throws(MirrorError) -> MirrorSchemaChanges {
        try ServerTables.validateZone(zone)
        let tables = try ServerTables(schema: schema, namespace: namespace)
        let connection = try PostgresConnection(connectionString)
        return try connection.transaction(purpose: "initialize the mirror schema") { () throws(MirrorError) in
            try initialize(tables, schema: schema, on: connection)
        }
    }

    private func initialize(_ tables: ServerTables, schema: Schema,
                            on connection: PostgresConnection) throws(MirrorError) -> MirrorSchemaChanges {
        // One initializer at a time on the whole server: CREATE TABLE IF NOT EXISTS races with itself.
        try connection.execute("SELECT pg_advisory_xact_lock($1::bigint)", [String(Self.schemaLock)],
                               purpose: "lock the mirror schema")
        let before = try existingColumns(tables, on: connection)
        let ns = tables.namespace.quoted
        // Nothing is altered in a namespace whose tables NoteKit did not make, or made in another layout.
        try checkOwnership(tables, before, on: connection)
        for statement in tables.statements {
            try connection.execute(statement, purpose: "create the mirror's tables")
        }
        let after = try existingColumns(tables, on: connection)
        try checkColumns(tables, after, server: connection.server)
        if before["notekit_layout"] == nil {
            try connection.execute("INSERT INTO \(ns).\"notekit_layout\" (version) VALUES ($1::integer)",
                                   [String(ServerTables.layoutVersion)], purpose: "record the mirror's layout")
        }

        try connection.execute("INSERT INTO \(ns).\"zones\" (zone) VALUES ($1) ON CONFLICT (zone) DO NOTHING", [zone],
                               purpose: "record the zone")
        let newest = try connection.execute("""
            SELECT major, minor, patch FROM \(ns)."zone_schemas" WHERE zone = $1
            ORDER BY major DESC, minor DESC, patch DESC LIMIT 1
            """, [zone], purpose: "read the zone's schemas").values.first
        if let newest, let major = newest[0].flatMap(Int.init), let minor = newest[1].flatMap(Int.init),
           let patch = newest[2].flatMap(Int.init) {
            let zoneVersion = Schema.Version(major, minor, patch)
            // Within a major version, schemas only add (semantic versioning): an older one may still write, and
            // what it does not know stays on the server. A lower major version is behind.
            if schema.version.major < zoneVersion.major {
                throw .schemaBehindZone(zone: zone, schemaVersion: schema.version.description,
                                        zoneVersion: zoneVersion.description)
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let schemaJSON: String
        do { schemaJSON = String(decoding: try encoder.encode(schema), as: UTF8.self) } catch {
            // A schema is plain values; this cannot fail, but if it does, the server is left as it was.
            throw .serverError(server: connection.server, purpose: "record the schema", sqlState: "",
                               message: "the schema could not be encoded: \(error)")
        }
        let recorded = try connection.execute("""
            INSERT INTO \(ns)."zone_schemas" (zone, schema_hash, major, minor, patch, schema)
            VALUES ($1, $2, $3::integer, $4::integer, $5::integer, $6::jsonb) ON CONFLICT DO NOTHING
            """, [zone, schema.contentHash, String(schema.version.major), String(schema.version.minor),
                  String(schema.version.patch), schemaJSON], purpose: "record the schema").affected == 1

        var created: [String] = [], added: [String] = []
        for (table, columns) in after {
            guard let previous = before[table] else {
                created.append("\(tables.namespace.name).\(table)")
                continue
            }
            for column in columns.keys where previous[column] == nil {
                added.append("\(tables.namespace.name).\(table).\(column)")
            }
        }
        return MirrorSchemaChanges(tablesCreated: created.sorted(), columnsAdded: added.sorted(),
                                   schemaRecorded: recorded)
    }

    /// Refuses a namespace that holds a table of NoteKit's names without NoteKit's layout record, or a layout other
    /// than this one, or a column of NoteKit's of another type: before anything is created or altered.
    private func checkOwnership(_ tables: ServerTables, _ existing: [String: [String: String]],
                                on connection: PostgresConnection) throws(MirrorError) {
        let planned = Set(tables.columns.map(\.table))
        let name = tables.namespace.name
        if existing["notekit_layout"] == nil {
            if let foreign = existing.keys.filter(planned.contains).sorted().first {
                throw .unexpectedServerSchema(server: connection.server, table: "\(name).\(foreign)",
                                              found: "the namespace has no notekit_layout table, so NoteKit did not make it")
            }
            return
        }
        let layouts = try connection.execute("SELECT DISTINCT version FROM \(tables.namespace.quoted).\"notekit_layout\"",
                                             purpose: "read the mirror's layout").values.compactMap { $0.first ?? nil }
        guard layouts == [String(ServerTables.layoutVersion)] else {
            throw .unexpectedServerSchema(server: connection.server, table: "\(name).notekit_layout",
                                          found: "layout \(layouts.isEmpty ? "none" : layouts.joined(separator: ", ")), " +
                                              "not \(ServerTables.layoutVersion)")
        }
        try checkColumns(tables, existing, server: connection.server, missingAllowed: true)
    }

    /// Checks that NoteKit's columns exist (unless `missingAllowed`, before they are added) with their types.
    private func checkColumns(_ tables: ServerTables, _ existing: [String: [String: String]], server: String,
                              missingAllowed: Bool = false) throws(MirrorError) {
        for column in tables.columns {
            let table = "\(tables.namespace.name).\(column.table)"
            guard let type = existing[column.table]?[column.name] else {
                if missingAllowed { continue }
                throw .unexpectedServerSchema(server: server, table: table, found: "no column \(column.name)")
            }
            guard type == column.type else {
                throw .unexpectedServerSchema(server: server, table: table,
                                              found: "column \(column.name) is \(type), not \(column.type)")
            }
        }
    }

    /// The advisory lock key of schema initialization ("NKMS").
    private static let schemaLock: Int64 = 0x4E4B_4D53

    /// The columns of the namespace's tables, by table, with their types.
    private func existingColumns(_ tables: ServerTables,
                                 on connection: PostgresConnection) throws(MirrorError) -> [String: [String: String]] {
        let rows = try connection.execute("""
            SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = $1
            """, [tables.namespace.name], purpose: "read the server's tables").values
        var found: [String: [String: String]] = [:]
        for row in rows {
            guard row.count == 3, let table = row[0], let column = row[1], let type = row[2] else { continue }
            found[table, default: [:]][column] = type
        }
        return found
    }
}

extension ModelContainer {
    /// Creates or updates the server's tables for the container's schema: seed 001's
    /// `container.initializeCloudKitSchema()`, run once after a model change (by a debug step or `notekit mirror
    /// init`). See ``MirrorConfiguration/initializeSchema(for:)``, which this calls with ``ModelContainer/schema``.
    ///
    /// - Throws: what ``MirrorConfiguration/initializeSchema(for:)`` throws.
    @discardableResult
    public func initializeMirrorSchema(_ configuration: MirrorConfiguration) throws(MirrorError) -> MirrorSchemaChanges {
        try configuration.initializeSchema(for: schema)
    }
}
