import Foundation
import NoteKit

/// The first step of a sync: the zone's schemas checked against the store's, and the device recorded.
extension SyncSession {
    /// Checks the zone's schemas and records the device; a server that has no record of a device this state says
    /// has exported before (a new or reset server) gets everything again.
    mutating func register() throws(MirrorError) {
        let schema = container.schema
        let schemas: PostgresConnection.Rows
        do {
            schemas = try connection.execute("""
                SELECT schema_hash, major, minor, patch FROM \(ns)."zone_schemas" WHERE zone = $1
                """, [zone], purpose: "read the zone's schemas")
        } catch MirrorError.serverError(_, _, "42P01", _) {
            throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace)
        }
        var newest: Schema.Version?
        var known = false
        for row in schemas.values {
            if row[0] == schema.contentHash { known = true }
            if let major = row[1].flatMap(Int.init), let minor = row[2].flatMap(Int.init),
               let patch = row[3].flatMap(Int.init) {
                let version = Schema.Version(major, minor, patch)
                if newest.map({ version > $0 }) ?? true { newest = version }
            }
        }
        // Behind means an older major version; an older minor one writes what it knows and leaves the rest.
        if let newest, schema.version.major < newest.major {
            throw .schemaBehindZone(zone: zone, schemaVersion: schema.version.description,
                                    zoneVersion: newest.description)
        }
        guard known else { throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace) }
        // Tables made by an earlier version of NoteKit lack what this one writes (`merged_into`, the links'
        // `written_seq`): refused before anything is written, until initializeMirrorSchema adds them.
        let present = Set(try connection.execute("""
            SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = $1
            """, [configuration.namespace], purpose: "check the mirror's tables").values.compactMap { $0[0] })
        if expectedColumns.contains(where: { !present.contains("\($0.table).\($0.name)") }) {
            throw .schemaNotInitialized(zone: zone, namespace: configuration.namespace)
        }
        let device = try connection.execute("""
            INSERT INTO \(ns)."devices" AS d (zone, device, schema_hash, seen_at) VALUES ($1, $2::uuid, $3, now())
            ON CONFLICT (zone, device) DO UPDATE SET schema_hash = EXCLUDED.schema_hash, seen_at = now()
            RETURNING exported_token, (xmax = 0)
            """, [zone, state.device.uuidString, schema.contentHash], purpose: "record the device")
        let isNew = device.values.first?[1] == "t"
        let serverExported = device.values.first?[0].flatMap { $0 }.flatMap(UInt64.init)
        if isNew && (state.exportedThrough > 0 || state.importedSequence > 0) {
            // The server never saw this device: it lost the zone or is another server. Start over with it.
            state.exportedThrough = 0
            state.importedSequence = 0
            needsBaseline = true
        } else if let serverExported, serverExported > state.exportedThrough {
            // The server committed an export whose local record was lost to a crash.
            state.exportedThrough = serverExported
            state.pendingClocks.removeAll { $0.transaction <= serverExported }
        }
    }
}
