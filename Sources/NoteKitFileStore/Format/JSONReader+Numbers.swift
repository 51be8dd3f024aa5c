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

/// Numbers: scanning a number by RFC 8259's grammar and converting it, exactly, to the type asked for.
extension JSONReader {
    /// A number's grammar, checked, and its first 19 significant digits.
    struct ScannedNumber {
        var start: Int
        var end: Int
        var isNegative: Bool
        var isInteger: Bool
        /// The first 19 significant digits, as an integer.
        var significand: UInt64
        /// How many significant digits there are (from the first that is not zero), counting those past 19.
        var significantDigits: Int
        /// The number is `significand × 10^exponent` when `significantDigits <= 19`.
        var exponent: Int
        /// Where the digits before the `.` are, and the `.` or the exponent's `e` or the end.
        var integerDigits: Range<Int>
        /// The digits after the `.`, empty without one.
        var fractionDigits: Range<Int>
        /// The exponent written after `e`, with its sign; saturated at ±100,000,000.
        var writtenExponent: Int

        /// The number as a Double when it converts with one correctly rounded operation (Clinger's fast path):
        /// a significand of at most 2^53 and a power of ten of at most 10^22, both exact as doubles.
        func exactDouble() -> Double? {
            guard significantDigits <= 19, significand <= 1 << 53 else { return nil }
            let powers = Self.powersOfTen
            let value: Double
            if exponent >= 0, exponent <= 22 {
                value = Double(significand) * powers[exponent]
            } else if exponent < 0, exponent >= -22 {
                value = Double(significand) / powers[-exponent]
            } else if exponent > 22, exponent <= 22 + 15 {
                // 1e30 is 10^8 × 10^22: still exact while the significand times 10^8 is at most 2^53.
                var scaled = significand
                for _ in 0..<(exponent - 22) {
                    scaled *= 10
                    if scaled > 1 << 53 { return nil }
                }
                value = Double(scaled) * powers[22]
            } else {
                return nil
            }
            return isNegative ? -value : value
        }

        private static let powersOfTen: [Double] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
            1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ]
    }

    /// Scans the number at `position` by RFC 8259's grammar and leaves `position` after it: its sign, its integer
    /// digits, then its fraction and its exponent when it has them.
    mutating func scanNumber(expecting what: String = "a number") throws -> ScannedNumber {
        let count = input.count
        var index = position
        let isNegative = index < count && input[index] == UInt8(ascii: "-")
        if isNegative { index += 1 }
        guard index < count, input[index] &- UInt8(ascii: "0") < 10 else {
            if isNegative { throw failure("expected a digit after '-', found \(found(at: index))", at: index) }
            throw expected(what)
        }
        var number = ScannedNumber(
            start: position, end: index, isNegative: isNegative, isInteger: true,
            significand: 0, significantDigits: 0, exponent: 0,
            integerDigits: index..<index, fractionDigits: index..<index, writtenExponent: 0)
        try scanIntegerDigits(of: &number, at: &index)
        number.fractionDigits = index..<index
        if index < count, input[index] == UInt8(ascii: ".") {
            try scanFractionDigits(of: &number, at: &index)
        }
        if index < count, input[index] | 0x20 == UInt8(ascii: "e") {
            try scanExponent(of: &number, at: &index)
        }
        number.end = index
        position = index
        return number
    }

    /// Scans the digits before the `.` (at least one, at `index`): a lone `0`, or digits not starting with one.
    @inline(__always)
    private func scanIntegerDigits(of number: inout ScannedNumber, at index: inout Int) throws {
        let count = input.count
        let integerStart = index
        if input[index] == UInt8(ascii: "0") {
            index += 1
            if index < count, input[index] &- UInt8(ascii: "0") < 10 {
                throw failure("leading zeros are not allowed in a number", at: integerStart)
            }
        } else {
            while index < count {
                let digit = input[index] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                if number.significantDigits < 19 {
                    number.significand = number.significand &* 10 &+ UInt64(digit)
                } else {
                    number.exponent += 1
                }
                number.significantDigits += 1
                index += 1
            }
        }
        number.integerDigits = integerStart..<index
    }

    /// Scans the `.` at `index` and the digits after it (at least one).
    @inline(__always)
    private func scanFractionDigits(of number: inout ScannedNumber, at index: inout Int) throws {
        let count = input.count
        number.isInteger = false
        index += 1
        let fractionStart = index
        while index < count {
            let digit = input[index] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            if number.significantDigits == 0, digit == 0 {
                number.exponent -= 1
            } else {
                if number.significantDigits < 19 {
                    number.significand = number.significand &* 10 &+ UInt64(digit)
                    number.exponent -= 1
                }
                number.significantDigits += 1
            }
            index += 1
        }
        guard index > fractionStart else {
            throw failure("expected a digit after '.' in a number, found \(found(at: index))", at: index)
        }
        number.fractionDigits = fractionStart..<index
    }

    /// Scans the `e` or `E` at `index`, the exponent's sign if written, and its digits (at least one).
    @inline(__always)
    private func scanExponent(of number: inout ScannedNumber, at index: inout Int) throws {
        let count = input.count
        number.isInteger = false
        index += 1
        var exponentIsNegative = false
        if index < count, input[index] == UInt8(ascii: "-") || input[index] == UInt8(ascii: "+") {
            exponentIsNegative = input[index] == UInt8(ascii: "-")
            index += 1
        }
        let exponentStart = index
        var writtenExponent = 0
        while index < count {
            let digit = input[index] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            if writtenExponent < 100_000_000 { writtenExponent = writtenExponent * 10 + Int(digit) }
            index += 1
        }
        guard index > exponentStart else {
            throw failure("expected a digit in the exponent of a number, found \(found(at: index))", at: index)
        }
        if exponentIsNegative { writtenExponent = -writtenExponent }
        number.writtenExponent = writtenExponent
        number.exponent += writtenExponent
    }

    /// The magnitude of an integer number, exactly.
    func integerMagnitude(of number: ScannedNumber, type: String) throws -> UInt64 {
        guard number.isInteger else {
            throw failure("number \(quoted(number.start, number.end)) is not an integer", at: number.start)
        }
        if number.significantDigits <= 19 { return number.significand }
        // 20 digits may still fit a UInt64; more never do.
        guard number.significantDigits == 20 else { throw doesNotFit(number, type) }
        let (tens, overflow) = number.significand.multipliedReportingOverflow(by: 10)
        let (value, carry) = tens.addingReportingOverflow(UInt64(input[number.end - 1] - UInt8(ascii: "0")))
        guard !overflow, !carry else { throw doesNotFit(number, type) }
        return value
    }

    func doesNotFit(_ number: ScannedNumber, _ type: String) -> JSONReadError {
        failure("number \(quoted(number.start, number.end)) does not fit \(type)", at: number.start)
    }

    /// Converts a number the fast path cannot with `strtod`, which rounds correctly. The number is rewritten as
    /// `<digits>e<exponent>`, without its `.`: the one character of a number that `strtod` reads by the C locale.
    func roundedDouble(_ number: ScannedNumber) throws -> Double {
        guard number.end - number.start <= Self.maximumNumberLength else {
            throw failure(
                "number \(quoted(number.start, number.end)) is longer than \(Self.maximumNumberLength) bytes",
                at: number.start)
        }
        let value = convertWithStrtod(number)
        guard value.isFinite else { throw doesNotFit(number, "a Double") }
        return value
    }

    /// `strtod` of the number, rewritten in a stack buffer.
    private func convertWithStrtod(_ number: ScannedNumber) -> Double {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Self.maximumNumberLength + 24) { text in
            var length = 0
            func append(_ byte: UInt8) {
                text[length] = CChar(bitPattern: byte)
                length += 1
            }
            if number.isNegative { append(UInt8(ascii: "-")) }
            for index in number.integerDigits { append(input[index]) }
            for index in number.fractionDigits { append(input[index]) }
            append(UInt8(ascii: "e"))
            let exponent = number.writtenExponent - number.fractionDigits.count
            if exponent < 0 { append(UInt8(ascii: "-")) }
            var digits = exponent.magnitude
            let firstDigit = length
            repeat {
                append(UInt8(ascii: "0") + UInt8(digits % 10))
                digits /= 10
            } while digits > 0
            text[firstDigit..<length].reverse()
            append(0)
            return strtod(text.baseAddress!, nil)
        }
    }
}
