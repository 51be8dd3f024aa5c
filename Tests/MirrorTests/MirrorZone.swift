import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
@testable import NoteKitMirror

/// A server of a test's own with a zone's tables for a schema, and a way to make devices (stores of one kind, each
/// with its mirror) of it. The server stops when the zone is released.
final class MirrorZone {
    let server: TemporaryPostgres
    let configuration: MirrorConfiguration
    let kind: StoreKind
    let models: [any PersistentModel.Type]

    init(_ kind: StoreKind, zone: String = StoreMirrorTests.zone,
         models: [any PersistentModel.Type] = ModelContainer.fieldNotesModels) throws {
        self.kind = kind
        self.models = models
        server = try TemporaryPostgres()
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
