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

/// Strings: scanning a string value (its UTF-8, escapes and control characters) and making a `String` of it.
extension JSONReader {
    /// Scans the string whose opening quote is at `position`, checking its UTF-8 and escapes; leaves `position` after
    /// the closing quote and returns the range of the contents.
    mutating func scanString() throws -> (start: Int, end: Int, hasEscapes: Bool) {
        let open = position
        let count = input.count
        var index = position + 1
        var hasEscapes = false
        while true {
            // Eight bytes at a time while none is a quote, a backslash, a control character or non-ASCII.
            while index + 8 <= count {
                let word = input.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let flags = Self.stringFlags(UInt64(littleEndian: word))
                if flags != 0 {
                    index += flags.trailingZeroBitCount >> 3
                    break
                }
                index += 8
            }
            guard index < count else {
                throw failure("unterminated string (it starts at byte \(baseOffset + open))", at: count)
            }
            let byte = input[index]
            if byte == UInt8(ascii: "\"") {
                position = index + 1
                return (open + 1, index, hasEscapes)
            } else if byte == UInt8(ascii: "\\") {
                hasEscapes = true
                index = try scanEscape(at: index, stringStart: open)
            } else if byte >= 0x80 {
                index = try scanUTF8Sequence(at: index, stringStart: open)
            } else if byte < 0x20 {
                throw failure("raw control character 0x\(Self.hex(byte)) in string (it must be escaped)", at: index)
            } else {
                index += 1
            }
        }
    }

    /// Sets the high bit of each byte of `word` that is `"`, `\`, below 0x20 or 0x80 and above. A byte above one that
    /// is set may be set too (a borrow), so only the lowest set byte is exact.
    @inline(__always)
    private static func stringFlags(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return ((word &- ones &* 0x20) | (quote &- ones) | (backslash &- ones) | word) & (ones &* 0x80)
    }

    /// Checks the escape whose backslash is at `index`; returns the index after it.
    private func scanEscape(at index: Int, stringStart: Int) throws -> Int {
        guard index + 1 < input.count else {
            throw failure("unterminated string (it starts at byte \(baseOffset + stringStart))", at: input.count)
        }
        switch input[index + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return index + 2
        case UInt8(ascii: "u"):
            let unit = try hexEscape(at: index, stringStart: stringStart)
            switch unit {
            case 0xD800...0xDBFF:
                guard index + 7 < input.count,
                    input[index + 6] == UInt8(ascii: "\\"), input[index + 7] == UInt8(ascii: "u"),
                    case 0xDC00...0xDFFF = try hexEscape(at: index + 6, stringStart: stringStart)
                else {
                    throw failure(
                        "lone surrogate \\u\(Self.hex(unit)) in string "
                            + "(a high surrogate must be followed by a \\u escape of a low one)",
                        at: index)
                }
                return index + 12
            case 0xDC00...0xDFFF:
                throw failure(
                    "lone surrogate \\u\(Self.hex(unit)) in string (a low surrogate must follow a high one)", at: index)
            default:
                return index + 6
            }
        default:
            let escaped = input[index + 1]
            let shown = escaped > 0x20 && escaped < 0x7F
                ? "'\\\(Character(Unicode.Scalar(escaped)))'" : "'\\' before \(found(at: index + 1))"
            throw failure("invalid escape \(shown) in string", at: index)
        }
    }

    /// The code unit of the `\uXXXX` escape whose backslash is at `index`.
    private func hexEscape(at index: Int, stringStart: Int) throws -> UInt16 {
        guard index + 6 <= input.count else {
            throw failure("unterminated string (it starts at byte \(baseOffset + stringStart))", at: input.count)
        }
        guard let unit = Self.hexValue(input, at: index + 2) else {
            throw failure("invalid \\u escape in string (it needs four hexadecimal digits)", at: index)
        }
        return unit
    }

    private static func hexValue(_ bytes: UnsafeRawBufferPointer, at index: Int) -> UInt16? {
        var value: UInt16 = 0
        for offset in 0..<4 {
            let byte = bytes[index + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    /// Checks the multi-byte UTF-8 sequence that starts at `index` (RFC 3629: no overlong forms, no surrogates,
    /// nothing above U+10FFFF); returns the index after it.
    private func scanUTF8Sequence(at index: Int, stringStart: Int) throws -> Int {
        let lead = input[index]
        let continuations: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: continuations = 1
        case 0xE0: continuations = 2; secondRange = 0xA0...0xBF
        case 0xED: continuations = 2; secondRange = 0x80...0x9F
        case 0xE1...0xEF: continuations = 2
        case 0xF0: continuations = 3; secondRange = 0x90...0xBF
        case 0xF4: continuations = 3; secondRange = 0x80...0x8F
        case 0xF1...0xF3: continuations = 3
        default: throw invalidUTF8(at: index, length: 1)
        }
        for offset in 1...continuations {
            guard index + offset < input.count else {
                throw failure("unterminated string (it starts at byte \(baseOffset + stringStart))", at: input.count)
            }
            let byte = input[index + offset]
            guard (offset == 1 ? secondRange : 0x80...0xBF).contains(byte) else {
                throw invalidUTF8(at: index, length: offset + 1)
            }
        }
        return index + 1 + continuations
    }

    private func invalidUTF8(at index: Int, length: Int) -> JSONReadError {
        let shown = (index..<(index + length)).map { Self.hex(input[$0]) }.joined(separator: " ")
        return failure("invalid UTF-8 in string (bytes \(shown))", at: index)
    }

    /// The string whose checked contents are `input[start..<end]`.
    func makeString(_ start: Int, _ end: Int, hasEscapes: Bool) -> String {
        let contents = UnsafeRawBufferPointer(rebasing: input[start..<end])
        guard hasEscapes else { return String(decoding: contents, as: UTF8.self) }
        return Self.unescapedString(contents)
    }

    static func unescapedString(_ contents: UnsafeRawBufferPointer) -> String {
        // Every escape is longer than the UTF-8 it stands for, so the contents' length is enough room.
        String(unsafeUninitializedCapacity: contents.count) { unescape(contents, into: $0) }
    }

    /// Unescapes checked string contents into `output`; returns the number of bytes written.
    private static func unescape(
        _ contents: UnsafeRawBufferPointer, into output: UnsafeMutableBufferPointer<UInt8>
    ) -> Int {
        let outputBytes = UnsafeMutableRawBufferPointer(output)
        var written = 0
        var index = 0
        while index < contents.count {
            let runStart = contents.baseAddress! + index
            let remaining = contents.count - index
            let backslash = memchr(runStart, Int32(UInt8(ascii: "\\")), remaining)
            let run = backslash.map { UnsafeRawPointer($0) - runStart } ?? remaining
            if run > 0 {
                (outputBytes.baseAddress! + written).copyMemory(from: contents.baseAddress! + index, byteCount: run)
                written += run
                index += run
            }
            guard index < contents.count else { break }
            let escaped = contents[index + 1]
            index += 2
            var scalar: UInt32
            switch escaped {
            case UInt8(ascii: "b"): scalar = 0x08
            case UInt8(ascii: "f"): scalar = 0x0C
            case UInt8(ascii: "n"): scalar = 0x0A
            case UInt8(ascii: "r"): scalar = 0x0D
            case UInt8(ascii: "t"): scalar = 0x09
            case UInt8(ascii: "u"):
                scalar = UInt32(hexValue(contents, at: index)!)
                index += 4
                if scalar >= 0xD800, scalar <= 0xDBFF {
                    let low = UInt32(hexValue(contents, at: index + 2)!)
                    index += 6
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
                }
            default: scalar = UInt32(escaped)  // '"', '\' or '/'
            }
            for byte in Unicode.UTF8.encode(Unicode.Scalar(scalar)!)! {
                output[written] = byte
                written += 1
            }
        }
        return written
    }
}
