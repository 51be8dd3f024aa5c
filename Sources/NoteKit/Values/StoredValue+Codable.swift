#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `StoredValue` encodes as a one-key object naming its kind (`{"string": "x"}`, `{"date": 7.5e8}`, `{"null": true}`),
/// so a stored schema's default values read unambiguously: an optional attribute's `nil` default is `{"null": true}`,
/// which an absent key or a JSON `null` could not tell apart from "no default". Stores use their own record format for
/// rows; this form is for schemas and diagnostics.
extension StoredValue: Codable {
    private enum Kind: String, CodingKey {
        case null, bool, int, uint, double, string, date, data, uuid, decimal, array, dictionary, external
    }

    /// Decodes the one-key form (`{"string": "x"}`); a JSON `null` decodes as ``StoredValue/null`` too, as does
    /// `{"null": true}`.
    ///
    /// - Throws: `DecodingError.dataCorrupted` when the object has no kind key or several, a double, base64 or decimal
    ///   string is malformed, the kind is `external` (external data has no inline form), or `null` holds anything
    ///   but `true`; `DecodingError.typeMismatch` when a kind's value is of the wrong JSON type.
    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), single.decodeNil() {
            self = .null
            return
        }
        let container = try decoder.container(keyedBy: Kind.self)
        guard let kind = container.allKeys.first, container.allKeys.count == 1 else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "a stored value has exactly one kind key"))
        }
        switch kind {
        case .null:
            // One spelling: `{"null": true}`, as ``encode(to:)`` writes it.
            guard try container.decode(Bool.self, forKey: kind) else {
                throw DecodingError.dataCorruptedError(forKey: kind, in: container,
                                                       debugDescription: #"a null is {"null": true}"#)
            }
            self = .null
        case .bool: self = .bool(try container.decode(Bool.self, forKey: kind))
        case .int: self = .int(try container.decode(Int64.self, forKey: kind))
        case .uint: self = .uint(try container.decode(UInt64.self, forKey: kind))
        case .double:
            if let text = try? container.decode(String.self, forKey: kind) {
                switch text {
                case "nan": self = .double(.nan)
                case "inf": self = .double(.infinity)
                case "-inf": self = .double(-.infinity)
                default:
                    throw DecodingError.dataCorruptedError(forKey: kind, in: container,
                                                           debugDescription: "invalid double \(text)")
                }
            } else {
                self = .double(try container.decode(Double.self, forKey: kind))
            }
        case .string: self = .string(try container.decode(String.self, forKey: kind))
        case .date: self = .date(Date(timeIntervalSinceReferenceDate: try container.decode(Double.self, forKey: kind)))
        case .data:
            let text = try container.decode(String.self, forKey: kind)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(forKey: kind, in: container, debugDescription: "invalid base64")
            }
            self = .data(data)
        case .uuid: self = .uuid(try container.decode(UUID.self, forKey: kind))
        case .decimal:
            let text = try container.decode(String.self, forKey: kind)
            guard let decimal = Decimal(string: text) else {
                throw DecodingError.dataCorruptedError(forKey: kind, in: container,
                                                       debugDescription: "invalid decimal \(text)")
            }
            self = .decimal(decimal)
        case .array: self = .array(try container.decode([StoredValue].self, forKey: kind))
        case .dictionary: self = .dictionary(try container.decode([String: StoredValue].self, forKey: kind))
        case .external:
            throw DecodingError.dataCorruptedError(forKey: kind, in: container,
                                                   debugDescription: "external data has no inline form")
        }
    }

    /// Encodes the one-key form (`{"int": 3}`); NaN and infinities as `"nan"`, `"inf"`, `"-inf"`, data as base64, a
    /// decimal as its string, so that no value loses precision.
    ///
    /// - Throws: `EncodingError.invalidValue` for ``StoredValue/external(_:)``, which has no inline form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Kind.self)
        switch self {
        case .null: try container.encode(true, forKey: .null)
        case .bool(let v): try container.encode(v, forKey: .bool)
        case .int(let v): try container.encode(v, forKey: .int)
        case .uint(let v): try container.encode(v, forKey: .uint)
        case .double(let v):
            if v.isNaN { try container.encode("nan", forKey: .double) }
            else if v.isInfinite { try container.encode(v > 0 ? "inf" : "-inf", forKey: .double) }
            else { try container.encode(v, forKey: .double) }
        case .string(let v): try container.encode(v, forKey: .string)
        case .date(let v): try container.encode(v.timeIntervalSinceReferenceDate, forKey: .date)
        case .data(let v): try container.encode(v.base64EncodedString(), forKey: .data)
        case .uuid(let v): try container.encode(v, forKey: .uuid)
        case .decimal(let v): try container.encode(v.description, forKey: .decimal)
        case .array(let v): try container.encode(v, forKey: .array)
        case .dictionary(let v): try container.encode(v, forKey: .dictionary)
        case .external(let v):
            throw EncodingError.invalidValue(v, .init(codingPath: encoder.codingPath,
                                                      debugDescription: "external data \(v.name) has no inline form"))
        }
    }
}
