import Foundation
import NoteKit
import NoteKitFileStore

/// The stores every engine behaviour test runs on: one test body, each store.
public enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case inMemory
    case file

    public var description: String { rawValue }

    /// A container of `types` on this kind of store, in a fresh place (a new directory for the file store, removed
    /// when the test process ends).
    public func makeContainer(_ types: [any PersistentModel.Type],
                       uniquenessPolicy: UniquenessPolicy = .upsert) throws -> ModelContainer {
        let configuration: any DataStoreConfiguration = switch self {
        case .inMemory: ModelConfiguration(isStoredInMemoryOnly: true)
        case .file: FileStoreConfiguration(url: TemporaryStores.newURL())
        }
        return try ModelContainer(for: Schema(types), uniquenessPolicy: uniquenessPolicy,
                                  configurations: [configuration])
    }
}

/// Fresh directories for test stores, all under one directory of this process that is removed at exit.
public enum TemporaryStores {
    public static let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("notekit-tests-\(ProcessInfo.processInfo.processIdentifier)")

    private static let prepared: Bool = {
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TemporaryStores.root) }
        return true
    }()

    /// A path that does not exist yet, for a new store.
    public static func newURL(_ name: String = "store") -> URL {
        _ = prepared
        return root.appendingPathComponent("\(name)-\(UUID().uuidString).notekit")
    }
}
