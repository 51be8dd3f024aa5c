#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit

/// Version 1's history records (`history`, `trim`) and the history records they carry.
extension RecordDecoderV1 {
    func decodeHistory(_ reader: inout JSONReader) throws -> StoreRecord {
        var records: [HistoryRecord] = []
        var deleted: [ClosedRange<UInt64>] = []
        var sawTransactions = false
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "deleted": deleted = try readRanges(&member)
            case "tx":
                sawTransactions = true
                try member.readArray { element in
                    let record = try readHistoryRecord(&element)
                    if let last = records.last, record.number <= last.number {
                        throw fail(element, "history transaction \(record.number) follows transaction \(last.number)")
                    }
                    records.append(record)
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a history record")
            }
        }
        guard sawTransactions else { throw fail(start, "a history record lacks tx") }
        return .history(records: records, deleted: deleted)
    }

    func decodeTrim(_ reader: inout JSONReader) throws -> StoreRecord {
        var deleted: [ClosedRange<UInt64>]?
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "k": _ = try member.readString()
            case "deleted": deleted = try readRanges(&member)
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a trim record")
            }
        }
        guard let deleted else { throw fail(start, "a trim record lacks deleted") }
        return .trim(deleted: deleted)
    }

    /// `[[low, high], …]`, each range with low ≤ high, in increasing order.
    private func readRanges(_ reader: inout JSONReader) throws -> [ClosedRange<UInt64>] {
        var ranges: [ClosedRange<UInt64>] = []
        try reader.readArray { element in
            var bounds: [UInt64] = []
            let at = element
            try element.readArray { bounds.append(try $0.readUInt64()) }
            guard bounds.count == 2, bounds[0] <= bounds[1] else {
                throw fail(at, "a range of transactions is [low, high] with low ≤ high")
            }
            if let last = ranges.last, bounds[0] <= last.upperBound {
                throw fail(at, "ranges of transactions must increase")
            }
            ranges.append(bounds[0]...bounds[1])
        }
        return ranges
    }

    private func readHistoryRecord(_ reader: inout JSONReader) throws -> HistoryRecord {
        var number: UInt64?, time: Date?, author: String?
        var inserted: [PersistentIdentifier] = []
        var updated: [HistoryRecord.Update] = []
        var deleted: [ModelDeletion] = []
        let start = reader
        try reader.readObject { member, key in
            switch key {
            case "tx": number = try readTransactionNumber(&member)
            case "time": time = Date(timeIntervalSinceReferenceDate: try member.readDouble())
            case "author": author = try member.readString()
            case "insert":
                try member.readArray { run in
                    var entity: String?
                    try run.readArray { element in
                        guard let entity else {
                            entity = try element.readString()
                            return
                        }
                        inserted.append(PersistentIdentifier(entityName: entity, primaryKey: try element.readUUID()))
                    }
                    if entity == nil { throw fail(run, "a run of inserted objects names no entity") }
                }
            case "update":
                try member.readArray { element in
                    var entity: String?, id: UUID?, properties: [String] = []
                    let at = element
                    try element.readObject { field, name in
                        switch name {
                        case "e": entity = try field.readString()
                        case "id": id = try field.readUUID()
                        case "p": try field.readArray { properties.append(try $0.readString()) }
                        default: throw fail(field, "unknown key \(String(reflecting: name.string)) in a history update")
                        }
                    }
                    guard let entity, let id else { throw fail(at, "a history update lacks e or id") }
                    updated.append(.init(id: PersistentIdentifier(entityName: entity, primaryKey: id), properties: properties))
                }
            case "delete":
                try member.readArray { element in
                    var entity: String?, id: UUID?, tombstone: [String: StoredValue] = [:]
                    let at = element
                    try element.readObject { field, name in
                        switch name {
                        case "e": entity = try field.readString()
                        case "id": id = try field.readUUID()
                        case "tombstone":
                            try field.readObject { value, attribute in tombstone[attribute.string] = try readTagged(&value) }
                        default: throw fail(field, "unknown key \(String(reflecting: name.string)) in a history delete")
                        }
                    }
                    guard let entity, let id else { throw fail(at, "a history delete lacks e or id") }
                    deleted.append(ModelDeletion(id: PersistentIdentifier(entityName: entity, primaryKey: id),
                                                 tombstone: tombstone))
                }
            default: throw fail(member, "unknown key \(String(reflecting: key.string)) in a history transaction")
            }
        }
        guard let number, let time else { throw fail(start, "a history transaction lacks tx or time") }
        return HistoryRecord(number: number, timestamp: time, author: author, inserted: inserted, updated: updated,
                             deleted: deleted)
    }
}
