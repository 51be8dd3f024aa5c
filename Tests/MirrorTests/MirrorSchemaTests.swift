import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing
@testable import NoteKitMirror

/// Issue 18, item 2: `initializeMirrorSchema` (seed 001's `initializeCloudKitSchema`) creates or updates the
/// server's tables for a schema, and running it twice changes nothing. Each test has a PostgreSQL database of its
/// own (``TemporaryPostgres/database()``).
@Suite("The server's tables for a schema", .enabled(if: TemporaryPostgres.runsServerTests,
                                                     Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorSchemaTests {
    static let zone = "iCloud.com.example.fieldnotes"

    /// Every column of the namespace's tables, `table.column type`, sorted, and the zone's recorded schemas: what
    /// a second initialization must leave as it is.
    static func serverState(_ server: TemporaryPostgres, namespace: String = "notekit") throws -> [String] {
        let connection = try PostgresConnection(server.connectionString)
        let namespaceExists = try connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [namespace],
                                                     purpose: "find the namespace").values.isEmpty == false
        guard namespaceExists else { return [] }
        let columns = try connection.execute("""
            SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
            FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1
            """, [namespace], purpose: "read the columns").values.map { $0[0] ?? "" }
        let constraints = try connection.execute("""
            SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
            WHERE connamespace = $1::regnamespace ORDER BY 1
            """, [namespace], purpose: "read the constraints").values.map { $0[0] ?? "" }
        let hasSchemas = try connection.execute("SELECT to_regclass($1) IS NOT NULL",
                                                ["\"\(namespace)\".zone_schemas"], purpose: "find zone_schemas").values
        guard hasSchemas.first?.first == "t" else { return columns + constraints }
        let schemas = try connection.execute("""
            SELECT zone || ' ' || schema_hash || ' ' || major || '.' || minor || '.' || patch || ' ' || recorded_at
            FROM "\(namespace)"."zone_schemas" ORDER BY 1
            """, purpose: "read the zone's schemas").values.map { $0[0] ?? "" }
        return columns + constraints + schemas
    }

    @Test("initializeMirrorSchema creates NoteKit's tables, a table an entity and a value and clock column a property")
    func createsTables() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let container = try ModelContainer(for: Schema(versionedSchema: FieldNotesSchemaV2.self),
                                           configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        let changes = try container.initializeMirrorSchema(
            MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone))
        #expect(changes.tablesCreated == ["blobs", "changes", "devices", "e_NoteRecord", "e_NotebookRecord",
                                          "e_PhotoRecord", "notekit_layout", "zone_schemas", "zones"]
            .map { "notekit.\($0)" })
        #expect(changes.columnsAdded.isEmpty && changes.schemaRecorded)
        let state = try Self.serverState(server)
        for column in ["e_NoteRecord.a_title jsonb YES", "e_NoteRecord.ac_title bigint YES",
                       "e_NoteRecord.a_placeName jsonb YES", "e_NoteRecord.r_notebook text YES",
                       "e_NoteRecord.rc_notebook bigint YES", "e_NoteRecord.created_clock bigint NO",
                       "e_PhotoRecord.a_data jsonb YES", "e_PhotoRecord.r_note text YES"] {
            #expect(state.contains(column), "missing \(column)")
        }
        // Both to-many relationships have a to-one inverse, whose column records them: no link table.
        #expect(!state.contains { $0.hasPrefix("l_") })
        #expect(!state.contains { $0.hasPrefix("e_NotebookRecord.r_notes") })
        #expect(state.contains { $0.hasPrefix("\(Self.zone) \(container.schema.contentHash) 2.0.0 ") })
    }

    @Test("Running initializeMirrorSchema twice changes nothing")
    func idempotent() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let schema = try Schema(versionedSchema: FieldNotesSchemaV2.self)
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        try configuration.initializeSchema(for: schema)
        let first = try Self.serverState(server)
        let again = try configuration.initializeSchema(for: schema)
        #expect(again.isEmpty, "\(again)")
        #expect(try Self.serverState(server) == first)
    }

    @Test("A newer schema adds its columns and drops none; an older one is refused as behind the zone")
    func schemaVersions() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let v1 = try Schema(versionedSchema: FieldNotesSchemaV1.self)
        let v2 = try Schema(versionedSchema: FieldNotesSchemaV2.self)
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        try configuration.initializeSchema(for: v1)
        let upgrade = try configuration.initializeSchema(for: v2)
        #expect(upgrade.tablesCreated.isEmpty && upgrade.schemaRecorded)
        #expect(upgrade.columnsAdded == ["a_latitude", "a_longitude", "a_placeName", "ac_latitude", "ac_longitude",
                                         "ac_placeName"].map { "notekit.e_NoteRecord.\($0)" })
        let afterUpgrade = try Self.serverState(server)
        #expect(throws: MirrorError.schemaBehindZone(zone: Self.zone, schemaVersion: "1.0.0", zoneVersion: "2.0.0")) {
            try configuration.initializeSchema(for: v1)
        }
        #expect(try Self.serverState(server) == afterUpgrade)
        // Another zone on the same server is not behind anything.
        let other = MirrorConfiguration(connectionString: server.connectionString, zone: "another-zone")
        #expect(try other.initializeSchema(for: v1).schemaRecorded)
    }

    @Test("Two devices initializing at once both succeed, and the tables are made once")
    func concurrentInitialization() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let schema = try Schema(versionedSchema: FieldNotesSchemaV2.self)
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        let results = Mutex<[Result<MirrorSchemaChanges, MirrorError>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let result = Result { () throws(MirrorError) in try configuration.initializeSchema(for: schema) }
            results.withLock { $0.append(result) }
        }
        let changes = try results.withLock { $0 }.map { try $0.get() }
        #expect(changes.filter { !$0.tablesCreated.isEmpty }.count == 1)
        #expect(changes.filter(\.schemaRecorded).count == 1)
    }

    @Test("A table of NoteKit's name that NoteKit did not make is refused, and nothing is created")
    func foreignTable() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let connection = try PostgresConnection(server.connectionString)
        try connection.execute("CREATE SCHEMA notekit", purpose: "set up")
        try connection.execute("CREATE TABLE notekit.zones (name text)", purpose: "set up")
        let configuration = MirrorConfiguration(connectionString: server.connectionString, zone: Self.zone)
        let schema = try Schema(versionedSchema: FieldNotesSchemaV2.self)
        do {
            try configuration.initializeSchema(for: schema)
            Issue.record("a foreign notekit.zones was accepted")
        } catch {
            guard case let .unexpectedServerSchema(_, table, found) = error else {
                Issue.record("expected unexpectedServerSchema, got \(error)")
                return
            }
            #expect(table == "notekit.zones" && found.contains("no notekit_layout"), "\(found)")
        }
        // The foreign table is as it was, and nothing else was made.
        #expect(try Self.serverState(server, namespace: "notekit") == ["zones.name text YES"])
    }
}

/// What the connection reads back is what the server holds.
@Suite("What a connection to the server reads", .enabled(if: TemporaryPostgres.runsServerTests,
                                                         Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct PostgresConnectionTests {
    @Test("A value is read back exactly, whitespace and all; NULL reads as nil")
    func valuesExactly() throws {
        let server = try TemporaryPostgres.database()
        defer { server.stop() }
        let connection = try PostgresConnection(server.connectionString)
        let value = "  two spaces before, a tab and a newline after\t\n"
        let rows = try connection.execute("SELECT $1::text, $2::text", [value, nil], purpose: "read back").values
        #expect(rows == [[value, nil]])
    }
}

/// Names and credentials: what the server could not hold exactly is refused before anything is sent, and a
/// password never shows.
@Suite("What the mirror refuses to send or say")
struct MirrorNameTests {
    final class Cafe: PersistentModel {
        @Attribute var café = ""
        required init() {}
    }

    final class Wordy: PersistentModel {
        @Attribute var aPropertyNameThatIsFarTooLongForPostgresIdentifiersOnceNoteKitPrefixesIt = 0
        required init() {}
    }

    @Test("Names PostgreSQL cannot hold exactly are refused with a typed error naming them",
          arguments: [("zone", "a zone"), ("namespace", "Robert'); DROP TABLE x;--"), ("attribute", "café"),
                      ("attribute", "aPropertyNameThatIsFarTooLongForPostgresIdentifiersOnceNoteKitPrefixesIt")])
    func invalidNames(kind: String, name: String) throws {
        let schema: Schema = switch name {
        case "café": try Schema([Cafe.self])
        case _ where name.hasPrefix("aProperty"): try Schema([Wordy.self])
        default: try Schema(versionedSchema: FieldNotesSchemaV2.self)
        }
        // An unreachable server: the name is refused before any connection is tried.
        let configuration = MirrorConfiguration(connectionString: "host=/nonexistent port=1 dbname=x",
                                                zone: kind == "zone" ? name : "zone",
                                                namespace: kind == "namespace" ? name : "notekit")
        do {
            try configuration.initializeSchema(for: schema)
            Issue.record("\(kind) \(name) was accepted")
        } catch {
            guard case let .invalidName(foundKind, foundName, _) = error else {
                Issue.record("expected invalidName, got \(error)")
                return
            }
            #expect(foundKind == kind && foundName == name)
            #expect(error.description.contains(name))
        }
    }

    @Test("A password in the connection string appears in no error, description or dump")
    func passwordNeverShown() throws {
        let configuration = MirrorConfiguration(
            connectionString: "host=/nonexistent-notekit port=1 user=app dbname=notes password=hunter2-secret",
            zone: "zone")
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [configuration.description, configuration.debugDescription, String(describing: configuration),
                     String(reflecting: configuration), dumped] {
            #expect(!text.contains("hunter2"), "\(text)")
            #expect(text.contains("app@/nonexistent-notekit:1/notes"), "\(text)")
        }
        let schema = try Schema(versionedSchema: FieldNotesSchemaV2.self)
        do {
            try configuration.initializeSchema(for: schema)
            Issue.record("a server at /nonexistent-notekit answered")
        } catch {
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(error)")
                return
            }
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.description.contains("app@/nonexistent-notekit:1/notes"), "\(error)")
        }
        let malformed = MirrorConfiguration(connectionString: "host=x password='hunter2-secret", zone: "zone")
        #expect(!malformed.description.contains("hunter2"))
        #expect(throws: MirrorError.self) { try malformed.initializeSchema(for: schema) }
    }
}
