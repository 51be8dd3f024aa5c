import Foundation
import NoteKit

/// The tables a zone's data occupies on the server, derived from a schema (docs/MIRROR.md, *The server's tables*):
/// NoteKit's own five, then one table an entity and one a to-many relationship that its inverse does not already
/// record. Every name is validated here, so the statements can quote them without escaping anything.
struct ServerTables {
    /// A PostgreSQL identifier NoteKit made from a validated name, quoted.
    struct Identifier: Hashable {
        let name: String
        var quoted: String { "\"\(name)\"" }
    }

    /// A column NoteKit expects, with the type `information_schema.columns.data_type` reports for it.
    struct Column: Hashable {
        let table: String
        let name: String
        let type: String
    }

    let namespace: Identifier
    /// The statements that create what is missing, in order; each is a no-op where its table or column exists.
    let statements: [String]
    /// Every column NoteKit's tables must have after the statements, for the check that a table of the same
    /// name was not someone else's.
    let columns: [Column]

    /// The layout of NoteKit's own tables; a server whose `notekit_layout` says otherwise is not touched.
    static let layoutVersion = 1
    private static let maximumIdentifierBytes = 63

    init(schema: Schema, namespace: String) throws(MirrorError) {
        let ns = try Self.identifier(namespace, kind: "namespace", prefix: "")
        self.namespace = ns
        var tables = Statements(namespace: ns)
        tables.addOwnTables()
        for entity in schema.entities { try tables.addEntityTable(entity, schema: schema) }
        for entity in schema.entities { try tables.addLinkTables(entity, schema: schema) }
        self.statements = tables.statements
        self.columns = tables.columns
    }

    /// `prefix + name` as an identifier, or why not: PostgreSQL folds unquoted names to lower case and cuts them
    /// at 63 bytes, so NoteKit quotes every name and refuses one it could not give back exactly.
    static func identifier(_ name: String, kind: String, prefix: String) throws(MirrorError) -> Identifier {
        guard let first = name.utf8.first else { throw .invalidName(kind: kind, name: name, reason: "it is empty") }
        guard name.utf8.allSatisfy({ isWordByte($0) }), !isDigit(first) else {
            throw .invalidName(kind: kind, name: name,
                               reason: "only ASCII letters, digits and underscores, not starting with a digit")
        }
        let full = prefix + name
        guard full.utf8.count <= maximumIdentifierBytes else {
            throw .invalidName(kind: kind, name: name,
                               reason: "\"\(full)\" is longer than PostgreSQL's \(maximumIdentifierBytes) bytes")
        }
        return Identifier(name: full)
    }

    /// Checks a zone's name: it is a value, bound as a parameter, but one that devices must spell alike.
    static func validateZone(_ zone: String) throws(MirrorError) {
        guard !zone.isEmpty, zone.utf8.count <= 200 else {
            throw .invalidName(kind: "zone", name: zone, reason: "it must have 1 to 200 characters")
        }
        guard zone.utf8.allSatisfy({ isWordByte($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }) else {
            throw .invalidName(kind: "zone", name: zone, reason: "only ASCII letters, digits, '_', '-' and '.'")
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// An ASCII letter, digit or underscore.
    private static func isWordByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || isDigit(byte) || byte == UInt8(ascii: "_")
    }
}

extension ServerTables {
    /// The statements and expected columns of ``ServerTables``, built table by table in the order they run.
    private struct Statements {
        let ns: Identifier
        var statements: [String]
        var columns: [Column] = []

        init(namespace: Identifier) {
            ns = namespace
            statements = ["CREATE SCHEMA IF NOT EXISTS \(namespace.quoted)"]
        }

        /// Creates table `name` if it is missing, and adds to an existing one the columns it lacks.
        mutating func table(_ name: String, _ definitions: [(column: String, type: String, sql: String)],
                            constraints: [String]) {
            let body = (definitions.map { "\"\($0.column)\" \($0.sql)" } + constraints).joined(separator: ", ")
            statements.append("CREATE TABLE IF NOT EXISTS \(ns.quoted).\"\(name)\" (\(body))")
            // A table made by an earlier schema gains the columns added since; none is ever dropped, so a device
            // with an older schema leaves what it does not know on the server.
            let additions = definitions.map { "ADD COLUMN IF NOT EXISTS \"\($0.column)\" \($0.sql)" }
            statements.append("ALTER TABLE \(ns.quoted).\"\(name)\" " + additions.joined(separator: ", "))
            columns += definitions.map { Column(table: name, name: $0.column, type: $0.type) }
        }

        /// NoteKit's own tables: its layout, the zones and their schemas, the devices, the changes and the blobs.
        mutating func addOwnTables() {
            let zones = "\(ns.quoted).\"zones\""
            table("notekit_layout", [("version", "integer", "integer NOT NULL")], constraints: [])
            table("zones", [("zone", "text", "text NOT NULL"),
                            ("created_at", "timestamp with time zone", "timestamptz NOT NULL DEFAULT now()")],
                  constraints: ["PRIMARY KEY (\"zone\")"])
            table("zone_schemas", [("zone", "text", "text NOT NULL"), ("schema_hash", "text", "text NOT NULL"),
                                   ("major", "integer", "integer NOT NULL"), ("minor", "integer", "integer NOT NULL"),
                                   ("patch", "integer", "integer NOT NULL"), ("schema", "jsonb", "jsonb NOT NULL"),
                                   ("recorded_at", "timestamp with time zone", "timestamptz NOT NULL DEFAULT now()")],
                  constraints: ["PRIMARY KEY (\"zone\", \"schema_hash\")",
                                "FOREIGN KEY (\"zone\") REFERENCES \(zones) ON DELETE CASCADE"])
            table("devices", [("zone", "text", "text NOT NULL"), ("device", "uuid", "uuid NOT NULL"),
                              ("schema_hash", "text", "text"), ("exported_token", "bigint", "bigint"),
                              ("imported_seq", "bigint", "bigint NOT NULL DEFAULT 0"),
                              ("seen_at", "timestamp with time zone", "timestamptz")],
                  constraints: ["PRIMARY KEY (\"zone\", \"device\")",
                                "FOREIGN KEY (\"zone\") REFERENCES \(zones) ON DELETE CASCADE"])
            table("changes", [("seq", "bigint", "bigint GENERATED ALWAYS AS IDENTITY"),
                              ("zone", "text", "text NOT NULL"), ("device", "uuid", "uuid NOT NULL"), ("token", "bigint", "bigint NOT NULL"),
                              ("author", "text", "text"), ("body", "jsonb", "jsonb NOT NULL"),
                              ("pushed_at", "timestamp with time zone", "timestamptz NOT NULL DEFAULT now()")],
                  constraints: ["PRIMARY KEY (\"seq\")", "UNIQUE (\"zone\", \"device\", \"token\")",
                                "FOREIGN KEY (\"zone\") REFERENCES \(zones) ON DELETE CASCADE"])
            table("blobs", [("zone", "text", "text NOT NULL"), ("hash", "text", "text NOT NULL"),
                            ("bytes", "bytea", "bytea NOT NULL")],
                  constraints: ["PRIMARY KEY (\"zone\", \"hash\")",
                                "FOREIGN KEY (\"zone\") REFERENCES \(zones) ON DELETE CASCADE"])
        }

        /// `entity`'s table (a value and a clock column an attribute and a to-one relationship) and its indexes.
        mutating func addEntityTable(_ entity: Schema.Entity, schema: Schema) throws(MirrorError) {
            let entityTable = try ServerTables.identifier(entity.name, kind: "entity", prefix: "e_")
            var definitions: [(column: String, type: String, sql: String)] = [
                ("zone", "text", "text NOT NULL"), ("id", "text", "text NOT NULL"),
                ("created_clock", "bigint", "bigint NOT NULL"), ("deleted_clock", "bigint", "bigint"),
                // The object a unique-key collision merged this one into (docs/MIRROR.md, *Unique keys*).
                ("merged_into", "text", "text"),
            ]
            for attribute in entity.attributes {
                let value = try ServerTables.identifier(attribute.name, kind: "attribute", prefix: "ac_")
                definitions.append(("a_" + value.name.dropFirst(3), "jsonb", "jsonb"))
                definitions.append((value.name, "bigint", "bigint"))
            }
            for relationship in entity.relationships where !relationship.isToMany {
                let clock = try ServerTables.identifier(relationship.name, kind: "relationship", prefix: "rc_")
                definitions.append(("r_" + clock.name.dropFirst(3), "text", "text"))
                definitions.append((clock.name, "bigint", "bigint"))
            }
            table(entityTable.name, definitions, constraints: ["PRIMARY KEY (\"zone\", \"id\")"])
            // Unique keys are looked up at each push that touches the entity, references to such an entity when a
            // collision merges two objects: both by index.
            if !entity.uniqueConstraints.isEmpty {
                // The objects merged into one, found again when that one is merged in turn.
                let merged = try ServerTables.identifier(entity.name, kind: "entity", prefix: "m_")
                statements.append("CREATE INDEX IF NOT EXISTS \(merged.quoted) ON \(ns.quoted).\(entityTable.quoted) "
                                  + "(\"zone\", \"merged_into\") WHERE \"merged_into\" IS NOT NULL")
            }
            for (number, constraint) in entity.uniqueConstraints.enumerated() {
                let index = try ServerTables.identifier("\(entity.name)_\(number)", kind: "entity", prefix: "u_")
                let keyColumns = constraint.map { "\"a_\($0)\"" }.joined(separator: ", ")
                statements.append("CREATE INDEX IF NOT EXISTS \(index.quoted) ON \(ns.quoted).\(entityTable.quoted) "
                                  + "(\"zone\", \(keyColumns))")
            }
            for relationship in entity.relationships where !relationship.isToMany {
                guard let destination = schema.entity(named: relationship.destination),
                      !destination.uniqueConstraints.isEmpty else { continue }
                let index = try ServerTables.identifier("\(entity.name)_\(relationship.name)", kind: "relationship",
                                                        prefix: "x_")
                statements.append("CREATE INDEX IF NOT EXISTS \(index.quoted) ON \(ns.quoted).\(entityTable.quoted) "
                                  + "(\"zone\", \"r_\(relationship.name)\")")
            }
        }

        /// The link tables of `entity`'s to-many relationships. A to-many relationship whose inverse is to-one is
        /// recorded by the inverse's column; a many-to-many one by the side whose `Entity.relationship` sorts first;
        /// one without an inverse by its own link table.
        mutating func addLinkTables(_ entity: Schema.Entity, schema: Schema) throws(MirrorError) {
            for relationship in entity.relationships where relationship.isToMany {
                if let inverseName = relationship.inverse,
                   let inverse = schema.entity(named: relationship.destination)?.relationship(named: inverseName) {
                    if !inverse.isToMany { continue }
                    if (relationship.destination, inverseName) < (entity.name, relationship.name) { continue }
                }
                let link = try ServerTables.identifier("\(entity.name)_\(relationship.name)", kind: "relationship",
                                                       prefix: "l_")
                // `written_seq` and `written_by`: the change and the device that last wrote the link, so that a
                // removal never takes away a link its device had not seen (a concurrent addition wins).
                table(link.name, [("zone", "text", "text NOT NULL"), ("id", "text", "text NOT NULL"),
                                  ("target", "text", "text NOT NULL"), ("clock", "bigint", "bigint NOT NULL"),
                                  ("present", "boolean", "boolean NOT NULL"),
                                  ("written_seq", "bigint", "bigint NOT NULL DEFAULT 0"),
                                  ("written_by", "uuid", "uuid")],
                      constraints: ["PRIMARY KEY (\"zone\", \"id\", \"target\")"])
                let byTarget = try ServerTables.identifier("\(entity.name)_\(relationship.name)", kind: "relationship",
                                                           prefix: "lt_")
                statements.append("CREATE INDEX IF NOT EXISTS \(byTarget.quoted) ON \(ns.quoted).\(link.quoted) "
                                  + "(\"zone\", \"target\")")
            }
        }
    }
}
