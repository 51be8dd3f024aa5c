/// NoteKit's versioning rule: how a store written with some schemas opens with another (docs/MIGRATIONS.md,
/// *Versioning*). One rule for every store and for a migration plan's steps, so that a downgrade is refused the
/// same way wherever it is tried.
///
/// A versioned schema is ordered by its number against the store's latest; an unversioned one (a plain model
/// list) by its content hash against the store's whole schema history:
///
/// | opening schema | against the store's latest schema | result |
/// |---|---|---|
/// | versioned, lower number | any hash | refused: ``MigrationError/storeIsNewer(stored:current:)`` |
/// | versioned, higher number | any hash | migration, which may drop stored data; records its number |
/// | unversioned, or the same number | the same hash | opens as it is, nothing written |
/// | unversioned, or the same number | the hash of an earlier schema of the history | refused: ``MigrationError/schemaIsOlderThanStore(hash:stored:storedHash:)`` |
/// | unversioned, or the same number | a hash the store never had | migration that may not drop stored data; records the store's number |
package enum SchemaVersioning {
    /// What opening a store does.
    package enum Decision: Sendable {
        /// The store is at this schema already: nothing to write. The schema is the opening one at the version the
        /// store records.
        case current(Schema)
        /// A lightweight migration to this schema (the opening one, at the version it will record).
        case migrate(to: Schema)
    }

    /// Decides how a store whose schemas are `history` (oldest first, not empty) opens with `schema`.
    ///
    /// - Throws: ``MigrationError/storeIsNewer(stored:current:)`` or
    ///   ``MigrationError/schemaIsOlderThanStore(hash:stored:storedHash:)``: opening would migrate backwards.
    /// - Complexity: O(schemas in the history); each content hash is computed once.
    package static func decide(_ schema: Schema, history: [Schema]) throws -> Decision {
        guard let latest = history.last else { return .current(schema) }
        if schema.isVersioned {
            if schema.version < latest.version {
                throw MigrationError.storeIsNewer(stored: latest.version, current: schema.version)
            }
            if schema.version > latest.version { return .migrate(to: schema) }
        }
        let hash = schema.contentHash, latestHash = latest.contentHash
        if hash == latestHash { return .current(schema.carrying(latest.version)) }
        if history.dropLast().contains(where: { $0.contentHash == hash }) {
            throw MigrationError.schemaIsOlderThanStore(hash: hash, stored: latest.version, storedHash: latestHash)
        }
        return .migrate(to: schema.carrying(latest.version))
    }

    /// `schema` at the version of the newest schema of `plan` with the same content hash, when `schema` declares
    /// no version of its own: the models given to a container with a plan are one of the plan's versions.
    ///
    /// - Throws: ``SchemaError`` for an invalid versioned schema of the plan.
    package static func resolving(_ schema: Schema, in plan: any SchemaMigrationPlan.Type) throws -> Schema {
        guard !schema.isVersioned else { return schema }
        let hash = schema.contentHash
        guard let version = try plan.schemas.last(where: { try Schema(versionedSchema: $0).contentHash == hash })
        else { return schema }
        var resolved = schema
        resolved.version = version.versionIdentifier
        return resolved
    }
}
