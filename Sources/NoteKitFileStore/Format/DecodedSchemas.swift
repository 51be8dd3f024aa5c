#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
import Synchronization

/// The schemas this process decoded from stored bytes, by those bytes. Every open reads the store's `schema` records
/// and hashes what they hold; a process that opens a store again, or several stores of one app, decodes the same
/// few bytes each time. A schema decoded once is reused, with its content hash once computed, for the same bytes
/// only: two spellings of one schema (members in another order, canonically equivalent strings) decode apart.
enum DecodedSchemas {
    /// At most this many are kept; past it, all are forgotten. A process sees a handful of schemas.
    static let capacity = 32

    private static let decoded = Mutex<[Data: Schema]>([:])

    /// The schema `bytes` hold, decoded and validated (`Schema.init(from:)`) unless these bytes were before.
    ///
    /// - Throws: what `JSONDecoder` throws for bytes that do not decode to a valid schema; nothing is kept then.
    /// - Complexity: O(bytes) to hash and compare them once decoded; decoding them otherwise.
    static func schema(from bytes: Data) throws -> Schema {
        if let known = decoded.withLock({ $0[bytes] }) { return known }
        let schema = try JSONDecoder().decode(Schema.self, from: bytes)
        decoded.withLock { kept in
            if kept.count >= capacity { kept.removeAll() }
            kept[bytes] = schema
        }
        return schema
    }
}
