#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a record payload is not the JSON the store format allows, and the byte where that shows.
struct JSONReadError: Error, CustomStringConvertible, Equatable {
    /// The absolute byte offset of the problem: the reader's `baseOffset` plus the position in its buffer.
    let offset: Int
    /// What is wrong, in words a person can act on: "expected ':' after object key".
    let reason: String

    var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// The kind of the value a ``JSONReader`` is positioned at.
enum JSONValueKind: Sendable, Equatable {
    case object, array, string, number, bool, null
}

/// An object member's key, as ``JSONReader/readObject(_:)`` hands it over: a view of the key's bytes in the input,
/// without a copy (a key written with escapes, which the store never writes, is unescaped into a `String`).
///
/// Compare it with a literal, or match it in a `switch`:
///
/// ```swift
/// try reader.readObject { reader, key in
///     switch key {
///     case "title": title = try reader.readString()
///     default: throw NoteDecodingError.unknownKey(key.string)
///     }
/// }
/// ```
struct JSONKey: CustomStringConvertible {
    /// The key's raw bytes between the quotes.
    fileprivate let utf8: UnsafeRawBufferPointer
    /// The key unescaped, when its raw bytes hold an escape.
    fileprivate let unescaped: String?

    /// The key as a `String` (this allocates when the key is longer than 15 bytes).
    var string: String { unescaped ?? String(decoding: utf8, as: UTF8.self) }

    var description: String { string }

    static func == (key: JSONKey, name: StaticString) -> Bool {
        name.withUTF8Buffer { key.hasBytes(UnsafeRawBufferPointer($0)) }
    }

    /// Disfavored so that `key == "title"` compares with the literal's bytes, without making a `String`.
    @_disfavoredOverload
    static func == (key: JSONKey, name: String) -> Bool {
        var name = name
        return name.withUTF8 { key.hasBytes(UnsafeRawBufferPointer($0)) }
    }

    /// Whether the key is `bytes` (a name's UTF-8, kept as bytes by a caller that compares it often).
    func isUTF8(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { hasBytes($0) } }

    /// Lets a `switch` over a key match literals without creating strings.
    static func ~= (pattern: StaticString, key: JSONKey) -> Bool { key == pattern }

    private func hasBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var unescaped else { return bytesEqual(utf8, bytes) }
        return unescaped.withUTF8 { bytesEqual(UnsafeRawBufferPointer($0), bytes) }
    }
}

private func bytesEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
}

private func bytesEqual(_ a: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
    literal.withUTF8Buffer { bytesEqual(a, UnsafeRawBufferPointer($0)) }
}

/// A pull parser for one JSON text (RFC 8259) in memory: the one decoder of record payloads.
///
/// The caller reads the values it expects, in order, and the reader checks the grammar as it goes. Every error is a
/// ``JSONReadError`` naming the absolute byte offset of the problem. On any input, however damaged or hostile, the
/// reader throws rather than crashes, nests at most ``maximumDepth`` containers deep, and allocates no more than
/// the strings it returns, a list of the open objects' key positions (at most 32 per object) and, for an object of
/// more than 32 keys, a set of its keys: memory in proportion to the input, and time linear in it.
///
/// ```swift
/// try bytes.withUnsafeBytes { buffer in
///     var reader = JSONReader(buffer, baseOffset: recordOffset)
///     try reader.readObject { reader, key in
///         switch key {
///         case "k": kind = try reader.readString()
///         case "tx": number = try reader.readInt64()
///         default: try reader.skipValue()
///         }
///     }
///     try reader.finish()
/// }
/// ```
///
/// The reader accepts what the format allows and nothing else: no duplicate keys, no invalid UTF-8, no lone
/// surrogates, no raw control characters in strings, no number that does not fit the type asked for.
///
/// Its methods throw untyped errors (always a ``JSONReadError``): with `throws(JSONReadError)`, Swift 6.3.1's
/// optimizer crashed ("swifterror value can only be loaded and stored from") compiling a caller that catches them.
///
/// ## Topics
/// ### Containers
/// - ``readObject(_:)``, ``readArray(_:)``, ``skipValue()``, ``peek()``, ``finish()``
/// ### Values
/// - ``readString()``, ``readInt64()``, ``readUInt64()``, ``readDouble()``, ``readBool()``, ``readNullIfPresent()``
struct JSONReader {
    /// The deepest nesting of objects and arrays a reader accepts.
    static let maximumDepth = 256
    /// The longest number, in bytes, that ``readDouble()`` accepts when it needs an exact conversion.
    static let maximumNumberLength = 400

    // Not private: the scanners of strings and numbers (`JSONReader+Strings.swift`, `+Numbers`) read and advance them.
    let input: UnsafeRawBufferPointer
    let baseOffset: Int
    var position = 0
    private var depth = 0
    /// The keys of the objects being read, outermost first, for duplicate detection; each object truncates it back.
    private var openKeys: [KeySpan] = []

    private struct KeySpan {
        var start: Int
        var count: Int
    }

    /// Creates a reader of the JSON text in `buffer`, which must stay valid while the reader is used.
    ///
    /// - parameters:
    ///   - buffer: the JSON text, in UTF-8.
    ///   - baseOffset: the offset of `buffer`'s first byte in its file, added to every offset the reader reports.
    init(_ buffer: UnsafeRawBufferPointer, baseOffset: Int = 0) {
        input = buffer
        self.baseOffset = baseOffset
    }

    /// The absolute offset of the next byte to read.
    var offset: Int { baseOffset + position }

    /// The JSON text being read; the byte at absolute offset `o` is `buffer[o - baseOffset]`.
    var buffer: UnsafeRawBufferPointer { input }

    // MARK: Containers

    /// Reads an object, calling `body` for each member with its key; `body` reads the member's value, exactly one
    /// (with a `read` method or ``skipValue()``).
    ///
    /// - throws: ``JSONReadError`` when the input is not an object, a key appears twice, nesting passes
    ///   ``maximumDepth``, or `body` reads no value; and whatever `body` throws.
    mutating func readObject(_ body: (inout JSONReader, JSONKey) throws -> Void) throws {
        skipWhitespace()
        guard position < input.count, input[position] == UInt8(ascii: "{") else { throw expected("an object") }
        try enterContainer()
        defer { depth -= 1 }
        position += 1
        skipWhitespace()
        if position < input.count, input[position] == UInt8(ascii: "}") {
            position += 1
            return
        }
        let firstKey = openKeys.count
        defer { openKeys.removeSubrange(firstKey...) }
        // Past 32 keys (or at an escaped key) the keys go in a set, so a huge object costs linear time, not quadratic.
        var manyKeys: Set<String>? = nil
        var isFirstKey = true
        while true {
            skipWhitespace()
            guard position < input.count, input[position] == UInt8(ascii: "\"") else {
                throw failure(
                    "expected a string key \(isFirstKey ? "or '}'" : "after ','"), found \(found(at: position))",
                    at: position)
            }
            let keyStart = position
            let key = try readKey()
            isFirstKey = false
            if manyKeys == nil, key.unescaped == nil, openKeys.count - firstKey < 32 {
                let span = KeySpan(start: keyStart + 1, count: key.utf8.count)
                // Indices, not a slice: a slice of `openKeys` costs a retain and a release per key.
                var earlier = firstKey
                while earlier < openKeys.count {
                    if openKeys[earlier].count == span.count, bytesEqual(bytes(openKeys[earlier]), key.utf8) {
                        throw duplicate(key, at: keyStart)
                    }
                    earlier += 1
                }
                openKeys.append(span)
            } else {
                if manyKeys == nil {
                    manyKeys = Set(openKeys[firstKey...].map { String(decoding: bytes($0), as: UTF8.self) })
                }
                guard manyKeys!.insert(key.string).inserted else { throw duplicate(key, at: keyStart) }
            }
            skipWhitespace()
            guard position < input.count, input[position] == UInt8(ascii: ":") else {
                throw failure("expected ':' after object key, found \(found(at: position))", at: position)
            }
            position += 1
            skipWhitespace()
            let valueStart = position
            try body(&self, key)
            if position == valueStart {
                throw failure(
                    "the value of key \"\(key.string)\" was not read (a reader must consume every value)",
                    at: valueStart)
            }
            skipWhitespace()
            guard position < input.count else {
                throw failure("unexpected end of input, expected ',' or '}'", at: position)
            }
            switch input[position] {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "}"):
                position += 1
                return
            default:
                throw failure("expected ',' or '}' after object member, found \(found(at: position))", at: position)
            }
        }
    }

    /// Reads an array, calling `body` once for each element; `body` reads the element, exactly one value.
    ///
    /// - throws: ``JSONReadError`` when the input is not an array, nesting passes ``maximumDepth``, or `body` reads
    ///   no value; and whatever `body` throws.
    mutating func readArray(_ body: (inout JSONReader) throws -> Void) throws {
        skipWhitespace()
        guard position < input.count, input[position] == UInt8(ascii: "[") else { throw expected("an array") }
        try enterContainer()
        defer { depth -= 1 }
        position += 1
        skipWhitespace()
        if position < input.count, input[position] == UInt8(ascii: "]") {
            position += 1
            return
        }
        while true {
            skipWhitespace()
            let valueStart = position
            if position < input.count, input[position] == UInt8(ascii: "]") {
                throw failure("expected a value after ',', found ']' (a trailing comma is not allowed)", at: position)
            }
            try body(&self)
            if position == valueStart {
                throw failure("an array element was not read (a reader must consume every value)", at: valueStart)
            }
            skipWhitespace()
            guard position < input.count else {
                throw failure("unexpected end of input, expected ',' or ']'", at: position)
            }
            switch input[position] {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "]"):
                position += 1
                return
            default:
                throw failure("expected ',' or ']' after array element, found \(found(at: position))", at: position)
            }
        }
    }

    /// Reads one value of any kind and discards it, checking it as strictly as the `read` methods would.
    ///
    /// - throws: ``JSONReadError`` when the value is not valid JSON.
    mutating func skipValue() throws {
        skipWhitespace()
        guard position < input.count else { throw expected("a value") }
        switch input[position] {
        case UInt8(ascii: "{"): try readObject { reader, _ in try reader.skipValue() }
        case UInt8(ascii: "["): try readArray { reader in try reader.skipValue() }
        case UInt8(ascii: "\""): _ = try scanString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try scanNumber()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try readBool()
        default: guard readNullIfPresent() else { throw expected("a value") }
        }
    }

    /// The kind of the next value, without reading it.
    ///
    /// - throws: ``JSONReadError`` at the end of the input, or at a byte that starts no JSON value.
    mutating func peek() throws -> JSONValueKind {
        skipWhitespace()
        guard position < input.count else { throw expected("a value") }
        switch input[position] {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        default: throw expected("a value")
        }
    }

    /// Checks that nothing but whitespace follows the value read.
    ///
    /// - throws: ``JSONReadError`` at the first byte of anything else.
    mutating func finish() throws {
        skipWhitespace()
        guard position == input.count else {
            throw failure("unexpected \(found(at: position)) after the JSON value", at: position)
        }
    }

    // MARK: Values

    /// Reads a string, unescaping it.
    ///
    /// - throws: ``JSONReadError`` when the value is not a string, or the string holds invalid UTF-8, a raw control
    ///   character, an invalid escape or a lone surrogate, or is not terminated.
    mutating func readString() throws -> String {
        let (start, end, hasEscapes) = try scanStringValue()
        return makeString(start, end, hasEscapes: hasEscapes)
    }

    /// Reads a string and hands its unescaped UTF-8 (checked) to `body`, without making a `String` when it has no
    /// escapes; returns what `body` returns. The bytes are valid only during the call.
    ///
    /// - throws: as ``readString()``, and what `body` throws.
    mutating func readStringBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        let (start, end, hasEscapes) = try scanStringValue()
        let contents = UnsafeRawBufferPointer(rebasing: input[start..<end])
        guard hasEscapes else { return try body(contents) }
        var unescaped = Self.unescapedString(contents)
        return try unescaped.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }

    /// Scans the string value that comes next (after whitespace): its checked contents' range, and whether it
    /// holds escapes.
    private mutating func scanStringValue() throws -> (start: Int, end: Int, hasEscapes: Bool) {
        skipWhitespace()
        guard position < input.count, input[position] == UInt8(ascii: "\"") else { throw expected("a string") }
        return try scanString()
    }

    /// Reads a string holding a UUID (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`, either case) without making a `String`.
    ///
    /// - throws: ``JSONReadError`` when the value is not a string or not a UUID.
    mutating func readUUID() throws -> UUID {
        skipWhitespace()
        guard position < input.count, input[position] == UInt8(ascii: "\"") else { throw expected("a UUID string") }
        let stringStart = position
        let (start, end, hasEscapes) = try scanString()
        guard !hasEscapes, end - start == 36, let uuid = UUIDText.parse(UnsafeRawBufferPointer(rebasing: input[start..<end]))
        else {
            throw failure("\(found(at: stringStart)) is not a UUID", at: stringStart)
        }
        return uuid
    }

    /// Reads an integer number exactly.
    ///
    /// - throws: ``JSONReadError`` when the value is not a number, has a fraction or an exponent, or does not fit.
    mutating func readInt64() throws -> Int64 {
        skipWhitespace()
        let number = try scanNumber(expecting: "an integer")
        let magnitude = try integerMagnitude(of: number, type: "an Int64")
        if number.isNegative {
            guard magnitude <= Int64.min.magnitude else { throw doesNotFit(number, "an Int64") }
            return Int64(truncatingIfNeeded: 0 &- magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { throw doesNotFit(number, "an Int64") }
        return Int64(magnitude)
    }

    /// Reads a non-negative integer number exactly.
    ///
    /// - throws: ``JSONReadError`` when the value is not a number, has a fraction or an exponent, is negative, or
    ///   does not fit.
    mutating func readUInt64() throws -> UInt64 {
        skipWhitespace()
        let number = try scanNumber(expecting: "an integer")
        let magnitude = try integerMagnitude(of: number, type: "a UInt64")
        guard !number.isNegative || magnitude == 0 else { throw doesNotFit(number, "a UInt64") }
        return magnitude
    }

    /// Reads any JSON number as the nearest Double, as `strtod` rounds it, or one of the strings `"nan"`, `"inf"`
    /// and `"-inf"`. A number too small for a Double reads as zero of its sign.
    ///
    /// Plain integers and decimals of up to 15 digits convert without a library call; others go through `strtod`.
    ///
    /// - throws: ``JSONReadError`` when the value is neither, or its magnitude is too large for a Double.
    mutating func readDouble() throws -> Double {
        skipWhitespace()
        if position < input.count, input[position] == UInt8(ascii: "\"") {
            let stringStart = position
            let (start, end, _) = try scanString()
            let text = UnsafeRawBufferPointer(rebasing: input[start..<end])
            if bytesEqual(text, "nan") { return .nan }
            if bytesEqual(text, "inf") { return .infinity }
            if bytesEqual(text, "-inf") { return -.infinity }
            throw failure(
                "expected a number (or \"nan\", \"inf\", \"-inf\"), found the string \(quoted(start - 1, end + 1))",
                at: stringStart)
        }
        let number = try scanNumber()
        if number.significantDigits == 0 { return number.isNegative ? -0.0 : 0.0 }
        if let exact = number.exactDouble() { return exact }
        return try roundedDouble(number)
    }

    /// Reads `true` or `false`.
    ///
    /// - throws: ``JSONReadError`` when the value is neither.
    mutating func readBool() throws -> Bool {
        skipWhitespace()
        if hasLiteral("true") {
            position += 4
            return true
        }
        if hasLiteral("false") {
            position += 5
            return false
        }
        throw expected("true or false")
    }

    /// Reads `null` and returns `true` if it is next; otherwise reads nothing and returns `false`.
    mutating func readNullIfPresent() -> Bool {
        skipWhitespace()
        guard hasLiteral("null") else { return false }
        position += 4
        return true
    }

    // MARK: Structure

    @inline(__always)
    private mutating func skipWhitespace() {
        while position < input.count {
            switch input[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): position += 1
            default: return
            }
        }
    }

    private mutating func enterContainer() throws {
        guard depth < Self.maximumDepth else {
            throw failure("nesting deeper than \(Self.maximumDepth) levels", at: position)
        }
        depth += 1
    }

    private func hasLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard input.count - position >= count else { return false }
        return bytesEqual(UnsafeRawBufferPointer(rebasing: input[position..<(position + count)]), literal)
    }

    private func bytes(_ span: KeySpan) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: input[span.start..<(span.start + span.count)])
    }

    private mutating func readKey() throws -> JSONKey {
        let (start, end, hasEscapes) = try scanString()
        return JSONKey(
            utf8: UnsafeRawBufferPointer(rebasing: input[start..<end]),
            unescaped: hasEscapes ? makeString(start, end, hasEscapes: true) : nil)
    }

    // MARK: Errors

    func failure(_ reason: String, at position: Int) -> JSONReadError {
        JSONReadError(offset: baseOffset + position, reason: reason)
    }

    func expected(_ what: String) -> JSONReadError {
        failure("expected \(what), found \(found(at: position))", at: position)
    }

    private func duplicate(_ key: JSONKey, at keyStart: Int) -> JSONReadError {
        failure("duplicate key \"\(key.string)\" in object", at: keyStart)
    }

    /// Names the byte at `index` for an error message: `'x'`, `byte 0xC3` or `end of input`.
    func found(at index: Int) -> String {
        guard index < input.count else { return "end of input" }
        let byte = input[index]
        if byte > 0x20, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(Self.hex(byte))"
    }

    /// The input's bytes `start..<end` as text for an error message, shortened to 40 bytes.
    func quoted(_ start: Int, _ end: Int) -> String {
        let shown = min(end, start + 40)
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: input[start..<shown]), as: UTF8.self)
        return shown < end ? text + "…" : text
    }

    /// A byte in two hex digits, for an error message.
    static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count == 1 ? "0" + digits : digits
    }

    /// A UTF-16 unit in four hex digits, for an error message.
    static func hex(_ unit: UInt16) -> String {
        let digits = String(unit, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}
