import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
@testable import NoteKitMirror

/// A database of a test's own with a zone's tables for a schema, and a way to make devices (stores of one kind, each
/// with its mirror) of it: on the process's shared server, or, with `ownServer` (a test that stops and restarts it),
/// on a server of the test's own. The database is dropped, or the server stopped, when the zone is released.
final class MirrorZone {
    let server: TemporaryPostgres
    let configuration: MirrorConfiguration
    let kind: StoreKind
    let models: [any PersistentModel.Type]

    init(_ kind: StoreKind, zone: String = StoreMirrorTests.zone,
         models: [any PersistentModel.Type] = ModelContainer.fieldNotesModels, ownServer: Bool = false) throws {
        self.kind = kind
        self.models = models
        server = ownServer ? try TemporaryPostgres() : try TemporaryPostgres.database()
        configuration = MirrorConfiguration(connectionString: server.connectionString, zone: zone)
        try configuration.initializeSchema(for: Schema(models))
    }

    deinit { server.stop() }

    func device() throws -> (ModelContainer, StoreMirror) {
        let container = try kind.makeContainer(models)
        return (container, try StoreMirror(container: container, configuration: configuration))
    }

    func query(_ sql: String, _ parameters: [String?] = []) throws -> [[String?]] {
        try PostgresConnection(server.connectionString).execute(sql, parameters, purpose: "test").values
    }
}
