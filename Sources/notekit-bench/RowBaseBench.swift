import Foundation
import NoteKit
import NoteKitCommandLine

/// `notekit-bench rows`: the row storage alone, over loaded rows and over an ``InMemoryRowBase`` of the same rows
/// (the best case of a checkpoint: every row already decoded), for W1's pinned top-20 (hot), a filtered full scan,
/// and the top-20 again after 1,000 updates laid over the base. One JSON line; medians in milliseconds.
enum RowBaseBench {
    static let usage = "notekit-bench rows [--notes N] [--runs K]"

    static func main(_ words: [String]) -> Int32 {
        let arguments = Arguments.readOrExit(words, options: ["notes", "runs"], usage: "usage: \(usage)")
        let n = arguments.options["notes"].flatMap(Int.init) ?? 100_000
        let runs = arguments.options["runs"].flatMap(Int.init) ?? 201
        do {
            print(try run(notes: n, runs: max(3, runs)))
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }

    static func run(notes n: Int, runs: Int) throws -> String {
        let schema = try Schema([NoteRecord.self, NotebookRecord.self, PhotoRecord.self])
        guard let entity = schema.entity(named: "NoteRecord") else { return "{}" }
        func slot(_ name: String) -> Int { entity.attributeIndex(named: name) ?? -1 }
        let start = Date(timeIntervalSinceReferenceDate: 0)
        var rows: [ModelSnapshot] = []
        rows.reserveCapacity(n)
        for i in 0..<n {
            var attributes = [StoredValue](repeating: .null, count: entity.attributes.count)
            attributes[slot("id")] = .uuid(UUID())
            attributes[slot("title")] = .string("Note \(i)")
            attributes[slot("body")] = .string("Body of note \(i)")
            attributes[slot("createdAt")] = .date(start.addingTimeInterval(Double(i)))
            attributes[slot("updatedAt")] = .date(start.addingTimeInterval(Double(i)))
            attributes[slot("tags")] = .array([])
            attributes[slot("isPinned")] = .bool(i % W1.pinnedEvery == 0)
            rows.append(ModelSnapshot(id: PersistentIdentifier(entityName: entity.name, primaryKey: UUID()),
                                      attributes: attributes,
                                      relationships: entity.relationships.map { $0.isToMany ? .toMany([]) : .toOne(nil) },
                                      transactionNumber: 1))
        }
        let loaded = RowStorage(schema: schema)
        loaded.load(rows, transactionNumber: 1)
        let base = InMemoryRowBase(entity: entity, rows: rows)
        let based = RowStorage(schema: schema, bases: [entity.name: base], transactionNumber: 1)

        let top20 = StoreFetchRequest(entity: entity.name,
                                      filter: .compare(.attribute(slot("isPinned")), .equal, .value(.bool(true))),
                                      sort: [FetchSortKey(.attribute(slot("createdAt")), ascending: false)], limit: 20)
        let scan = StoreFetchRequest(entity: entity.name,
                                     filter: .text(.attribute(slot("title")), .contains, .value(.string("99999"))),
                                     resultType: .count)
        func median(_ storage: RowStorage, _ request: StoreFetchRequest, runs: Int) throws -> Double {
            _ = try storage.fetch(request)  // reads the rows once
            var times: [Double] = []
            for _ in 0..<runs {
                let begin = DispatchTime.now().uptimeNanoseconds
                _ = try storage.fetch(request)
                times.append(Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e6)
            }
            return times.sorted()[times.count / 2]
        }
        guard try loaded.fetch(top20).rows == based.fetch(top20).rows else { return "{\"error\":\"answers differ\"}" }
        var fields: [(String, Double)] = []
        for (name, storage) in [("loaded", loaded), ("base", based)] {
            fields.append(("\(name)_top20_ms", try median(storage, top20, runs: runs)))
            fields.append(("\(name)_scan_ms", try median(storage, scan, runs: max(3, runs / 20))))
        }
        // The base's own part of the top 20: its index scan and one read of the 20 rows, without the storage.
        let bound = IndexBound(values: [.bool(true)], isInclusive: true)
        let pinnedIndex = entity.indexes.firstIndex(of: ["isPinned", "createdAt"]) ?? 0
        var alone: [Double] = []
        for _ in 0..<runs {
            let begin = DispatchTime.now().uptimeNanoseconds
            var numbers: [Int] = []
            try base.scanIndex(pinnedIndex, from: bound, to: bound, reverse: true) { _, number in
                numbers.append(number)
                return numbers.count < 20
            }
            _ = try base.rows(numbers)
            alone.append(Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e6)
        }
        fields.append(("base_alone_top20_ms", alone.sorted()[alone.count / 2]))
        // 1,000 pinned notes edited: the top 20 now merges the base's entries with the in-memory index's.
        let edits = ChangeSet(updated: stride(from: 0, to: min(n, 50_000), by: W1.pinnedEvery).prefix(1000).map { i in
            ModelUpdate(id: rows[i].id, attributes: [AttributeChange(index: slot("updatedAt"), value: .date(.now))],
                        relationships: [])
        })
        for (name, storage) in [("loaded", loaded), ("base", based)] {
            try storage.validate(edits)
            storage.apply(edits)
            fields.append(("\(name)_top20_after_edits_ms", try median(storage, top20, runs: runs)))
        }
        guard try loaded.fetch(top20).rows == based.fetch(top20).rows else { return "{\"error\":\"answers differ\"}" }
        return "{\"notes\":\(n)," + fields.map { "\"\($0.0)\":\(String(format: "%.4f", $0.1))" }.joined(separator: ",") + "}"
    }
}
