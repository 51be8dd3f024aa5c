#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
/// Appends compact JSON (RFC 8259) to a byte buffer: the one encoder of record payloads.
///
/// Values are written in order; the writer places commas and colons itself, keeping a small stack of the containers
/// that are open:
///
/// ```swift
/// var writer = JSONWriter(reservingCapacity: 256)
/// writer.beginObject()
/// writer.key("k"); writer.string("tx")
/// writer.key("tx"); writer.int(42)
/// writer.key("insert"); writer.beginArray(); writer.endArray()
/// writer.endObject()
/// // writer.bytes == Array(#"{"k":"tx","tx":42,"insert":[]}"#.utf8)
/// ```
///
/// Misuse (a value in an object without its key, an `endArray()` closing an object, a second top-level value) is a
/// programming error and stops the process: a record that does not parse would be lost data.
///
/// ## Topics
/// ### Containers
/// - ``beginObject()``, ``endObject()``, ``key(_:)``, ``beginArray()``, ``endArray()``
/// ### Values
/// - ``string(_:)``, ``int(_:)``, ``uint(_:)``, ``double(_:)``, ``bool(_:)``, ``null()``, ``raw(_:)``
struct JSONWriter {
    /// The JSON written so far.
    private(set) var bytes: [UInt8]

    /// Where the next token goes.
    private enum Context: UInt8 {
        case topLevel
        case array
        case objectExpectingKey
        case objectExpectingValue
    }

    private var context = Context.topLevel
    /// The contexts of the containers that enclose the current one, innermost last.
    private var enclosing: [Context] = []
    /// Whether the current container (or the top level) already holds an element, so the next one needs a comma.
    private var hasElement = false

    /// Creates an empty writer whose buffer can grow to `capacity` bytes without reallocating.
    init(reservingCapacity capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Creates a writer whose buffer starts with `prefix` (a record header to fill in later), so the finished record
    /// needs no copy.
    init(prefix: [UInt8], reservingCapacity capacity: Int) {
        bytes = prefix
        bytes.reserveCapacity(prefix.count + capacity)
    }

    /// Hands the buffer over (the writer is done).
    consuming func finish() -> [UInt8] { bytes }

    /// Writes a UUID as a string, uppercase (as `UUID.uuidString`), without making a `String`.
    mutating func uuid(_ value: UUID) {
        beginValue()
        bytes.append(UInt8(ascii: "\""))
        UUIDText.append(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    // MARK: Containers

    /// Opens an object; write members with ``key(_:)`` followed by one value each, then ``endObject()``.
    mutating func beginObject() {
        beginValue()
        enclosing.append(context)
        context = .objectExpectingKey
        hasElement = false
        bytes.append(UInt8(ascii: "{"))
    }

    /// Closes the innermost open object.
    mutating func endObject() {
        precondition(
            context == .objectExpectingKey, "JSONWriter.endObject() needs an open object whose last key has a value")
        bytes.append(UInt8(ascii: "}"))
        endContainer()
    }

    /// Opens an array; write its elements, then ``endArray()``.
    mutating func beginArray() {
        beginValue()
        enclosing.append(context)
        context = .array
        hasElement = false
        bytes.append(UInt8(ascii: "["))
    }

    /// Closes the innermost open array.
    mutating func endArray() {
        precondition(context == .array, "JSONWriter.endArray() needs an open array")
        bytes.append(UInt8(ascii: "]"))
        endContainer()
    }

    /// Writes an object member's key; the next value written is its value.
    ///
    /// Disfavored so that a literal key (`writer.key("tx")`) takes the `StaticString` overload, which copies the
    /// literal's bytes without making a `String`.
    @_disfavoredOverload
    mutating func key(_ name: String) {
        beginKey()
        var name = name
        name.withUTF8 { appendQuoted($0) }
        bytes.append(UInt8(ascii: ":"))
    }

    /// Writes an object member's key from a literal, without creating a `String`.
    mutating func key(_ name: StaticString) {
        beginKey()
        name.withUTF8Buffer { appendQuoted($0) }
        bytes.append(UInt8(ascii: ":"))
    }

    // MARK: Values

    /// Writes a string, escaping `"`, `\` and the control characters below U+0020; everything else is raw UTF-8.
    mutating func string(_ value: String) {
        beginValue()
        var value = value
        value.withUTF8 { appendQuoted($0) }
    }

    /// Writes a string given as its UTF-8 (which must be valid), escaped as ``string(_:)`` escapes.
    mutating func string(utf8: UnsafeRawBufferPointer) {
        beginValue()
        appendQuoted(utf8.assumingMemoryBound(to: UInt8.self))
    }

    /// Writes a signed integer in decimal.
    mutating func int(_ value: Int64) {
        beginValue()
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        appendDecimal(value.magnitude)
    }

    /// Writes an unsigned integer in decimal.
    mutating func uint(_ value: UInt64) {
        beginValue()
        appendDecimal(value)
    }

    /// Writes a double in the shortest form that reads back bit for bit (`0.1`, `1e-5`, `5e20`, `786054000`, `-0.0`);
    /// NaN and the infinities, which JSON numbers cannot express, as the strings `"nan"`, `"inf"` and `"-inf"`.
    ///
    /// A NaN's payload and sign are not kept: every NaN is written as `"nan"`.
    mutating func double(_ value: Double) {
        beginValue()
        if value.isNaN {
            bytes.append(contentsOf: #""nan""#.utf8)
            return
        }
        if value.isInfinite {
            bytes.append(contentsOf: value < 0 ? #""-inf""#.utf8 : #""inf""#.utf8)
            return
        }
        // `description` is the shortest digit string that reads back as the same Double (and a small string, not a
        // heap allocation, when it is at most 15 bytes long). It is already JSON; trim what a reader does not need.
        var text = value.description
        text.withUTF8 { appendShortestDouble($0, isNegativeZero: value == 0 && value.sign == .minus) }
    }

    /// Writes `true` or `false`.
    mutating func bool(_ value: Bool) {
        beginValue()
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    /// Writes `null`.
    mutating func null() {
        beginValue()
        bytes.append(contentsOf: "null".utf8)
    }

    /// Splices one value that is already encoded as JSON; the bytes are copied as they are, without checking.
    mutating func raw(_ encoded: some Collection<UInt8>) {
        beginValue()
        bytes.append(contentsOf: encoded)
    }

    // MARK: Structure

    private mutating func beginValue() {
        switch context {
        case .array:
            if hasElement { bytes.append(UInt8(ascii: ",")) }
            hasElement = true
        case .objectExpectingValue:
            context = .objectExpectingKey
        case .objectExpectingKey:
            preconditionFailure("JSONWriter: a value in an object needs a key(_:) first")
        case .topLevel:
            precondition(!hasElement, "JSONWriter: a JSON text holds one top-level value")
            hasElement = true
        }
    }

    private mutating func beginKey() {
        precondition(
            context == .objectExpectingKey, "JSONWriter.key(_:) needs an open object whose last key has a value")
        if hasElement { bytes.append(UInt8(ascii: ",")) }
        hasElement = true
        context = .objectExpectingValue
    }

    private mutating func endContainer() {
        context = enclosing.removeLast()
        // The container just closed is an element of the enclosing one.
        hasElement = true
    }

    // MARK: Encoding

    /// Appends `utf8` as a quoted JSON string, copying runs of bytes that need no escape in bulk.
    private mutating func appendQuoted(_ utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        let count = utf8.count
        var runStart = 0
        var index = 0
        while index < count {
            // Eight bytes at a time while none of them needs an escape.
            while index + 8 <= count {
                let word = UnsafeRawBufferPointer(utf8).loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let flags = Self.escapeFlags(UInt64(littleEndian: word))
                if flags != 0 {
                    index += flags.trailingZeroBitCount / 8
                    break
                }
                index += 8
            }
            guard index < count else { break }
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            if runStart < index {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            }
            appendEscape(for: byte)
            index += 1
            runStart = index
        }
        if runStart < count {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Sets the high bit of each byte of `word` that is `"`, `\` or below 0x20. A byte above one that is set may be
    /// set too (a borrow), so only the lowest set byte is exact; bytes of 0x80 and above are never set.
    @inline(__always)
    private static func escapeFlags(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let isQuote = (quote &- ones) & ~quote
        let isBackslash = (backslash &- ones) & ~backslash
        return (control | isQuote | isBackslash) & highBits
    }

    private mutating func appendEscape(for byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(contentsOf: "u00".utf8)
            bytes.append(hex.utf8Start[Int(byte >> 4)])
            bytes.append(hex.utf8Start[Int(byte & 0x0F)])
        }
    }

    /// Appends `value` in decimal, two digits at a time, from a stack buffer.
    private mutating func appendDecimal(_ value: UInt64) {
        let pairs: StaticString = """
            00010203040506070809101112131415161718192021222324252627282930313233343536373839\
            40414243444546474849505152535455565758596061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899
            """
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            var rest = value
            while rest >= 100 {
                let pair = Int(rest % 100) * 2
                rest /= 100
                start -= 2
                digits[start] = pairs.utf8Start[pair]
                digits[start + 1] = pairs.utf8Start[pair + 1]
            }
            if rest >= 10 {
                let pair = Int(rest) * 2
                start -= 2
                digits[start] = pairs.utf8Start[pair]
                digits[start + 1] = pairs.utf8Start[pair + 1]
            } else {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest)
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Appends Swift's shortest round-trip `description` of a finite double, trimmed: a whole number loses its `.0`
    /// (`100.0` → `100`; `-0.0` keeps it, to stay visibly negative), and an exponent loses its `+` and leading zeros
    /// (`1e-05` → `1e-5`, `5e+20` → `5e20`).
    private mutating func appendShortestDouble(_ text: UnsafeBufferPointer<UInt8>, isNegativeZero: Bool) {
        guard let e = text.firstIndex(of: UInt8(ascii: "e")) else {
            if !isNegativeZero, text.count > 2, text[text.count - 2] == UInt8(ascii: "."),
                text[text.count - 1] == UInt8(ascii: "0")
            {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[0..<(text.count - 2)]))
            } else {
                bytes.append(contentsOf: text)
            }
            return
        }
        var mantissaEnd = e
        if e > 2, text[e - 2] == UInt8(ascii: "."), text[e - 1] == UInt8(ascii: "0") { mantissaEnd -= 2 }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[0..<mantissaEnd]))
        bytes.append(UInt8(ascii: "e"))
        var index = e + 1
        if index < text.count, text[index] == UInt8(ascii: "-") || text[index] == UInt8(ascii: "+") {
            if text[index] == UInt8(ascii: "-") { bytes.append(UInt8(ascii: "-")) }
            index += 1
        }
        while index < text.count - 1, text[index] == UInt8(ascii: "0") { index += 1 }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[index..<text.count]))
    }
}
