extension Schema {
    /// The type of an attribute, as the schema records it.
    ///
    /// Encoded as a short readable string (`"String"`, `"Date?"`, `"[String]"`, `"[String: Int]"`,
    /// `"Priority(Int)"`, `"codable NoteLocation"`), so a stored schema reads like the declaration it came from.
    public indirect enum AttributeType: Sendable, Hashable, Codable, CustomStringConvertible {
        /// A `Bool`.
        case bool
        /// A signed integer of the width its name says (`Int` is 64 bits); a stored value out of range throws
        /// ``StoredValueError/integerOverflow(value:type:)`` when read.
        case int, int8, int16, int32, int64
        /// An unsigned integer of the width its name says (`UInt` is 64 bits).
        case uint, uint8, uint16, uint32, uint64
        /// A `Double` or a `Float` (a `Float` is stored as a `Double` and widened without loss).
        case double, float
        /// A `String`, `Date`, `Data`, `UUID`, `URL` (stored as its absolute string) or `Decimal`.
        case string, date, data, uuid, url, decimal
        /// An optional of the wrapped type: `nil` is stored as null.
        case optional(AttributeType)
        /// An array whose elements have the given type.
        case array(AttributeType)
        /// A dictionary with `String` keys whose values have the given type.
        case dictionary(AttributeType)
        /// An enum (or other `RawRepresentable` type) stored as its raw value.
        case rawRepresentable(typeName: String, rawType: AttributeType)
        /// A `Codable` value type stored through its encoding.
        case codable(typeName: String)

        /// Whether `nil` is a valid value.
        public var isOptional: Bool {
            if case .optional = self { return true }
            return false
        }

        /// The type without its optionality.
        public var nonOptional: AttributeType {
            if case .optional(let wrapped) = self { return wrapped }
            return self
        }

        /// Whether values of this type can be ordered and compared with `<` in predicates and indexes.
        public var isScalar: Bool {
            switch nonOptional {
            case .array, .dictionary, .codable, .optional: false
            case .rawRepresentable(_, let raw): raw.isScalar
            default: true
            }
        }

        private static let names: [(AttributeType, String)] = [
            (.bool, "Bool"), (.int, "Int"), (.int8, "Int8"), (.int16, "Int16"), (.int32, "Int32"),
            (.int64, "Int64"), (.uint, "UInt"), (.uint8, "UInt8"), (.uint16, "UInt16"), (.uint32, "UInt32"),
            (.uint64, "UInt64"), (.double, "Double"), (.float, "Float"), (.string, "String"), (.date, "Date"),
            (.data, "Data"), (.uuid, "UUID"), (.url, "URL"), (.decimal, "Decimal"),
        ]

        /// The readable form the schema is encoded in, such as `"String"`, `"Date?"` or `"[String: Int]"`;
        /// decoding reads it back.
        public var description: String {
            switch self {
            case .optional(let wrapped): return wrapped.description + "?"
            case .array(let element): return "[\(element)]"
            case .dictionary(let value): return "[String: \(value)]"
            case let .rawRepresentable(name, raw): return "\(name)(\(raw))"
            case .codable(let name): return "codable \(name)"
            default: return Self.names.first { $0.0 == self }!.1
            }
        }

        /// The deepest nesting of optionals, arrays, dictionaries and raw values that ``init(parsing:)`` reads, as deep
        /// as the store's JSON nests.
        package static let maximumNesting = 256

        /// Parses the form `description` produces; nil for anything else, or for nesting deeper than
        /// ``maximumNesting``.
        package init?(parsing text: some StringProtocol) {
            self.init(parsing: Substring(text), depth: 0)
        }

        /// Reads a slice of the text without copying it, so a long hostile type name costs linear time and memory.
        private init?(parsing text: Substring, depth: Int) {
            guard depth < Self.maximumNesting else { return nil }
            if text.hasSuffix("?") {
                guard let wrapped = AttributeType(parsing: text.dropLast(), depth: depth + 1) else { return nil }
                self = .optional(wrapped)
            } else if text.hasPrefix("[String: "), text.hasSuffix("]") {
                guard let value = AttributeType(parsing: text.dropFirst(9).dropLast(), depth: depth + 1) else { return nil }
                self = .dictionary(value)
            } else if text.hasPrefix("["), text.hasSuffix("]") {
                guard let element = AttributeType(parsing: text.dropFirst().dropLast(), depth: depth + 1) else { return nil }
                self = .array(element)
            } else if text.hasPrefix("codable ") {
                self = .codable(typeName: String(text.dropFirst(8)))
            } else if let open = text.firstIndex(of: "("), text.hasSuffix(")") {
                guard let raw = AttributeType(parsing: text[text.index(after: open)...].dropLast(), depth: depth + 1)
                else { return nil }
                self = .rawRepresentable(typeName: String(text[..<open]), rawType: raw)
            } else if let match = Self.names.first(where: { $0.1 == text }) {
                self = match.0
            } else {
                return nil
            }
        }

        /// Reads the readable form (``description``) from a single string value.
        ///
        /// - Throws: `DecodingError.dataCorrupted` when the string is not the readable form of a type.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let type = AttributeType(parsing: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                        debugDescription: "unknown attribute type \(text)"))
            }
            self = type
        }

        /// Writes the readable form (``description``) as a single string value.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(description)
        }
    }
}
