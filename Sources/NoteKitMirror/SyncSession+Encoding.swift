import Foundation
import NoteKit

/// How values, change bodies, keys and blobs travel to the server: as statement parameters in text form.
extension SyncSession {
    /// A PostgreSQL array literal of text elements (`{"a","b\\"c",NULL}`), for one parameter: every element quoted,
    /// backslashes and quotes escaped, so that any text passes as it is.
    static func arrayLiteral(_ elements: [String?]) -> String {
        var text = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { text += "," }
            guard let element else {
                text += "NULL"
                continue
            }
            text += "\""
            for character in element.unicodeScalars {
                if character == "\\" || character == "\"" { text.unicodeScalars.append("\\") }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }

    /// The JSON a value column holds; external-storage bytes go to `blobs` first.
    func encodedValue(_ value: StoredValue, _ attribute: MirrorPlan.Attribute) throws(MirrorError) -> String {
        do {
            var bytes: Data?
            switch value {
            case .external(let external):
                // Named by its SHA-256 already: a blob the server has (one an import brought and nothing here
                // read) is not read, nor fetched, to be sent.
                let reference = #"{"blob":"\#(external.name)"}"#
                if !external.isLoaded, try serverHasBlob(external.name) { return reference }
                do { bytes = try external.load() } catch MirrorError.blobNotOnServer {
                    // Promised here and lost on the server (a zone restored without its blobs): no copy is left to
                    // send. The row names it as before, and the device's other changes still go out.
                    return reference
                }
            case .data(let data) where attribute.isExternal: bytes = data
            default: bytes = nil
            }
            if let bytes {
                let name = SHA256Digest.hexString(bytes)
                try connection.execute("""
                    INSERT INTO \(ns)."blobs" (zone, hash, bytes) VALUES ($1, $2, decode($3, 'hex'))
                    ON CONFLICT DO NOTHING
                    """, [zone, name, Self.hex(bytes)], purpose: "store a blob")
                return #"{"blob":"\#(name)"}"#
            }
            return try coding.encode(value)
        } catch let error as MirrorError {
            throw error
        } catch {
            throw .storeFailed(operation: "read \(attribute.name)", reason: "\(error)")
        }
    }

    /// Whether the zone has blob `name` (a SHA-256) already; false for a name that is not one.
    private func serverHasBlob(_ name: String) throws -> Bool {
        guard name.utf8.count == 64 else { return false }
        return try MirrorBlobFetcher.size(of: name, zone: zone, namespace: ns, on: connection) != nil
    }

    /// A change row's body: which objects the transaction touched and how (`{"objects": [{"e": "Note", "id": …,
    /// "op": "update", "p": ["title"]}]}`). Values are in the entity tables.
    static func body(of record: HistoryRecord) -> String {
        var objects: [[String: Any]] = []
        for id in record.inserted { objects.append(["e": id.entityName, "id": key(id), "op": "insert"]) }
        for update in record.updated {
            objects.append(["e": update.id.entityName, "id": key(update.id), "op": "update", "p": update.properties])
        }
        for deletion in record.deleted {
            objects.append(["e": deletion.id.entityName, "id": key(deletion.id), "op": "delete"])
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["objects": objects], options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// An object's key on the server: its UUID in lower case.
    static func key(_ id: PersistentIdentifier) -> String { id.primaryKey.uuidString.lowercased() }

    /// Lowercase hex of `bytes`: how a blob's bytes travel as a text parameter (`decode($n, 'hex')`).
    static func hex(_ bytes: Data) -> String { SHA256Digest.hexEncoded(Array(bytes)) }

    static func bytes(hex: String) -> Data? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x61...0x66: c - 0x61 + 10
            case 0x41...0x46: c - 0x41 + 10
            default: nil
            }
        }
        var data = Data(capacity: utf8.count / 2)
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            data.append(high << 4 | low)
        }
        return data
    }
}
