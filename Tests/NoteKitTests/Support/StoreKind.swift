import Foundation
import NoteKit

/// The stores every engine behaviour test runs on: one test body, each store.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case inMemory

    var description: String { rawValue }

    /// A container of `types` on this kind of store, in a fresh place.
    func makeContainer(_ types: [any PersistentModel.Type],
                       uniquenessPolicy: UniquenessPolicy = .upsert) throws -> ModelContainer {
        switch self {
        case .inMemory:
            try ModelContainer(for: Schema(types), uniquenessPolicy: uniquenessPolicy,
                               configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
        }
    }
}
