import Foundation
import NoteKit
@testable import NoteKitFileStore
import NoteKitTestSupport
import Testing

// Models whose store holds every record kind and every nested object the format has: tombstones, external
// storage, a `Codable` value with a nil inside (a tagged null), to-one and to-many relationships. V2 adds an
// attribute with a generated default, so that opening a V1 store with it appends a migration with updates.
enum PermutedV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Shelf.self, Box.self] }
    struct Label: Codable, Hashable, Sendable {
        var text: String
        var printed: Date?
        var tags: [String?]
    }
    final class Shelf: PersistentModel {
        @Attribute var name = ""
        @Relationship(inverse: \Box.shelf) var boxes: [Box] = []
        static var entityName: String { "Shelf" }
        required init() {}
    }
    final class Box: PersistentModel {
        @Attribute(.preserveValueOnDeletion) var code = ""
        @Attribute var count = 0
        @Attribute var label = Label(text: "", printed: nil, tags: [])
        @Attribute(.externalStorage) var photo: Data?
        @Relationship var shelf: Shelf?
        static var entityName: String { "Box" }
        required init() {}
    }
}

enum PermutedV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Shelf.self, Box.self] }
    typealias Label = PermutedV1.Label
    final class Shelf: PersistentModel {
        @Attribute var name = ""
        @Relationship(inverse: \Box.shelf) var boxes: [Box] = []
        static var entityName: String { "Shelf" }
        required init() {}
    }
    final class Box: PersistentModel {
        @Attribute(.preserveValueOnDeletion) var code = ""
        @Attribute var count = 0
        @Attribute var label = Label(text: "", printed: nil, tags: [])
        @Attribute(.externalStorage) var photo: Data?
        @Attribute var serial = UUID()
        @Relationship var shelf: Shelf?
        static var entityName: String { "Box" }
        required init() {}
    }
}

/// docs/FORMAT.md, *The payload JSON*: "readers accept any order". Every reader of a store (open and replay,
/// verify, dump, the schema history, stats, salvage, the check for an interrupted creation) is run on a
/// store and on the same store with the members of every object of every record in reverse order (`"k"` last),
/// re-framed with correct checksums, and must give the same answers.
@Suite("Permuted keys: members of a record object may come in any order")
struct PermutedKeysTests {
    /// A store whose files hold every record kind: segment, schema, tx (insert, update, delete with tombstone),
    /// a compaction's history, snapshot and rows, a trim, a migration with updates, and the manifest.
    static func everyKindStore() throws -> URL {
        let url = TemporaryStores.newURL()
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: PermutedV1.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(container)
            let shelf = PermutedV1.Shelf()
            shelf.name = "top"
            context.insert(shelf)
            for index in 0..<4 {
                let box = PermutedV1.Box()
                box.code = "B\(index)"
                box.count = index
                box.label = PermutedV1.Label(text: "box \(index)", printed: index == 0 ? Date(timeIntervalSinceReferenceDate: 8e8) : nil,
                                             tags: ["a", nil])
                box.photo = index == 1 ? Data(repeating: 7, count: 100) : nil
                box.shelf = index < 3 ? shelf : nil
                context.insert(box)
            }
            try context.save()
            let boxes = try context.fetch(FetchDescriptor<PermutedV1.Box>(sortBy: [SortDescriptor(\.count)]))
            boxes[2].count = 20
            boxes[3].shelf = shelf
            try context.delete(boxes[0])
            try context.save()
            let store = StoreFiles.store(container)
            _ = try store.compact()
            boxes[1].label = PermutedV1.Label(text: "relabelled", printed: nil, tags: [nil])
            try context.save()
            try store.deleteHistory([1...1])
            try StoreFiles.close(container)
        }
        do {
            // Opening with V2 migrates (a migration record filling `serial`), then a save in the new schema.
            let container = try ModelContainer(for: Schema(versionedSchema: PermutedV2.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            let context = ModelContext(container)
            let box = PermutedV2.Box()
            box.code = "B9"
            context.insert(box)
            try context.save()
            try StoreFiles.close(container)
        }
        return url
    }

    /// What every reader says about the store at `url`, as text to compare (a reader that throws says its error).
    static func readings(_ url: URL) -> [String: String] {
        var result: [String: String] = [:]
        func reading(_ name: String, _ body: () throws -> String) {
            do { result[name] = try body() } catch { result[name] = "error: \(error)" }
        }
        reading("schema history") {
            try StoreInspector.schemaHistory(at: url).map { "\($0.version) \($0.contentHash)" }.joined(separator: "\n")
        }
        reading("verify") { try StoreVerifier.verify(at: url).problems.map(\.description).joined(separator: "\n") }
        reading("dump") {
            var lines: [String] = []
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            try StoreInspector.dump(store) { lines.append($0) }
            return lines.joined(separator: "\n")
        }
        reading("history") {
            let store = try StoreInspector.openReadOnly(at: url)
            defer { try? store.close() }
            return try store.history().records.map { record in
                let tombstones = record.deleted.map { $0.tombstone.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } }
                return "\(record.number) \(record.timestamp.timeIntervalSinceReferenceDate) inserted \(record.inserted.count) "
                    + "updated \(record.updated.map(\.properties)) deleted \(tombstones)"
            }.joined(separator: "\n")
        }
        reading("stats") {
            var statistics = try StoreInspector.statistics(at: url)
            let entities = statistics.entities.sorted { $0.key < $1.key }
            statistics.entities = [:]
            return "\(statistics) \(entities)"
        }
        reading("open") {
            // A writable open through the models (its migration session reads the schema history first).
            let container = try ModelContainer(for: Schema(versionedSchema: PermutedV2.self),
                                               configurations: [FileStoreConfiguration(url: url)])
            defer { try? StoreFiles.close(container) }
            let boxes = try ModelContext(container).fetch(FetchDescriptor<PermutedV2.Box>(sortBy: [SortDescriptor(\.count)]))
            return boxes.map { "\($0.code) \($0.count) \($0.label) \($0.photo?.count ?? -1) \($0.serial) \($0.shelf?.name ?? "-")" }
                .joined(separator: "\n")
        }
        reading("salvage") {
            let salvaged = TemporaryStores.newURL()
            let report = try FileStore.salvage(from: url, to: salvaged)
            var lines: [String] = []
            let store = try StoreInspector.openReadOnly(at: salvaged)
            defer { try? store.close() }
            try StoreInspector.dump(store) { lines.append($0) }
            return "\(report.skippedBytes) \(report.skippedRecords) " + lines.joined(separator: "\n")
        }
        return result
    }

    @Test("Every record kind with its members in reverse order opens, verifies, dumps, stats and salvages the same")
    func everyKindPermuted() throws {
        let url = try Self.everyKindStore()
        let permuted = try StoreFiles.copy(url)
        let kinds = try PermutedRecords.rewrite(permuted)
        #expect(kinds.sorted() == ["history", "manifest", "migration", "rows", "schema", "segment", "snapshot", "trim", "tx"],
                "the store holds every record kind of docs/FORMAT.md")
        #expect(StoreFiles.contents(of: permuted) != StoreFiles.contents(of: url), "the records were rewritten")
        let expected = Self.readings(url)
        let found = Self.readings(permuted)
        #expect(expected["verify"] == "", "the original store is healthy")
        #expect(!expected.values.contains { $0.hasPrefix("error:") }, "every reader reads the original store")
        for (reader, text) in expected.sorted(by: { $0.key < $1.key }) {
            #expect(found[reader] == text, "\(reader) differs on the permuted store")
        }
    }

    @Test("A creation interrupted before its manifest is recognised whatever the order of its records' members")
    func interruptedCreationPermuted() throws {
        let url = TemporaryStores.newURL()
        let container = try ModelContainer(for: Schema(versionedSchema: PermutedV1.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        try StoreFiles.close(container)
        _ = try PermutedRecords.rewrite(url)
        try FileManager.default.removeItem(at: url.appendingPathComponent("MANIFEST"))
        // Only segment 1 with its segment and schema records: an interrupted creation, which an open creates anew.
        let reopened = try ModelContainer(for: Schema(versionedSchema: PermutedV1.self),
                                          configurations: [FileStoreConfiguration(url: url)])
        #expect(try ModelContext(reopened).fetchCount(FetchDescriptor<PermutedV1.Box>()) == 0)
        try StoreFiles.close(reopened)
    }
}

/// Rewrites a store's records with the members of every JSON object in reverse order.
enum PermutedRecords {
    /// Rewrites the manifest and every segment of the store at `url`, re-framing each record.
    ///
    /// - Returns: the record kinds met, in the order first met.
    static func rewrite(_ url: URL) throws -> [String] {
        var kinds: [String] = []
        // The checkpoint describes the segment's bytes, which this rewrites: it goes, as derived data may.
        try? FileManager.default.removeItem(at: url.appendingPathComponent("CHECKPOINT"))
        let segments = url.appendingPathComponent("segments")
        let files = try FileManager.default.contentsOfDirectory(atPath: segments.path).sorted()
            .map { segments.appendingPathComponent($0) } + [url.appendingPathComponent("MANIFEST")]
        for file in files where FileManager.default.fileExists(atPath: file.path) {
            let bytes = [UInt8](try Data(contentsOf: file))
            let magicEnd = try #require(bytes.firstIndex(of: 0x0A)) + 1
            var output = Array(bytes[..<magicEnd])
            var offset = magicEnd
            try bytes.withUnsafeBytes { buffer in
                while offset < buffer.count {
                    guard case let .record(payload, next) = RecordFrame.scan(buffer, at: offset) else {
                        Issue.record("a record that does not scan in \(file.lastPathComponent) at \(offset)")
                        return
                    }
                    let value = try RawJSON.parse(Array(buffer[payload]))
                    if case .object(let members) = value, let kind = members.first(where: { $0.key == #""k""# }),
                       case .scalar(let text) = kind.value {
                        let name = String(text.dropFirst().dropLast())
                        if !kinds.contains(name) { kinds.append(name) }
                    }
                    var writer = RecordFrame.writer(reservingCapacity: payload.count)
                    writer.raw(Array(value.reversed.text.utf8))
                    output += RecordFrame.seal(writer)
                    offset = next
                }
            }
            try Data(output).write(to: file)
        }
        return kinds
    }
}

/// JSON text as a tree whose scalars keep their exact text (numbers read back bit for bit).
indirect enum RawJSON {
    case object([(key: String, value: RawJSON)])
    case array([RawJSON])
    case scalar(String)

    /// The same value with every object's members in reverse order, at every depth.
    var reversed: RawJSON {
        switch self {
        case .object(let members): .object(members.reversed().map { ($0.key, $0.value.reversed) })
        case .array(let items): .array(items.map(\.reversed))
        case .scalar: self
        }
    }

    var text: String {
        switch self {
        case .object(let members): "{" + members.map { "\($0.key):\($0.value.text)" }.joined(separator: ",") + "}"
        case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
        case .scalar(let text): text
        }
    }

    struct Parser {
        let bytes: [UInt8]
        var position = 0
    }

    /// The tree of one JSON value's text (as the store writes it: no whitespace between tokens).
    static func parse(_ bytes: [UInt8]) throws -> RawJSON {
        var parser = Parser(bytes: bytes)
        return try parser.value()
    }
}

extension RawJSON.Parser {
    struct Malformed: Error {}

    mutating func value() throws -> RawJSON {
        guard position < bytes.count else { throw Malformed() }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            position += 1
            var members: [(key: String, value: RawJSON)] = []
            if bytes[position] == UInt8(ascii: "}") { position += 1; return .object([]) }
            while true {
                let key = try string()
                guard bytes[position] == UInt8(ascii: ":") else { throw Malformed() }
                position += 1
                members.append((key, try value()))
                let separator = bytes[position]
                position += 1
                if separator == UInt8(ascii: "}") { return .object(members) }
                guard separator == UInt8(ascii: ",") else { throw Malformed() }
            }
        case UInt8(ascii: "["):
            position += 1
            var items: [RawJSON] = []
            if bytes[position] == UInt8(ascii: "]") { position += 1; return .array([]) }
            while true {
                items.append(try value())
                let separator = bytes[position]
                position += 1
                if separator == UInt8(ascii: "]") { return .array(items) }
                guard separator == UInt8(ascii: ",") else { throw Malformed() }
            }
        case UInt8(ascii: "\""):
            return .scalar(try string())
        default:
            let start = position
            while position < bytes.count, !",}]".utf8.contains(bytes[position]) { position += 1 }
            return .scalar(String(decoding: bytes[start..<position], as: UTF8.self))
        }
    }

    /// A string with its quotes and escapes, as written.
    mutating func string() throws -> String {
        guard bytes[position] == UInt8(ascii: "\"") else { throw Malformed() }
        let start = position
        position += 1
        while bytes[position] != UInt8(ascii: "\"") {
            position += bytes[position] == UInt8(ascii: "\\") ? 2 : 1
        }
        position += 1
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }
}
