#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// UUIDs as the store writes them (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`), formatted and parsed directly on bytes:
/// Foundation's `uuidString` and `UUID(uuidString:)` go through `printf` and `scanf`, which cost more than the rest
/// of a row.
enum UUIDText {
    /// Appends the 36 characters of `uuid`, in upper case.
    ///
    /// Written into a buffer on the stack and appended at once: a bulk save writes two or three identifiers a row,
    /// and 36 appends each checked the array's capacity and uniqueness.
    static func append(_ uuid: UUID, to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { text in
            withUnsafeBytes(of: uuid.uuid) { raw in
                var at = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[at] = UInt8(ascii: "-")
                        at &+= 1
                    }
                    let byte = raw[index]
                    text[at] = hexDigit(byte &>> 4)
                    text[at &+ 1] = hexDigit(byte & 0x0F)
                    at &+= 2
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(text))
        }
    }

    /// The upper-case hexadecimal digit of `nibble` (0…15).
    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble &+ (nibble < 10 ? UInt8(ascii: "0") : UInt8(ascii: "A") &- 10)
    }

    /// Parses 36 characters (either case); nil when they are not a UUID.
    ///
    /// Every identifier a replay reads goes through here (three a note in W1): the digits are looked up in a table,
    /// at fixed places, with one check of them all at the end.
    static func parse(_ text: UnsafeRawBufferPointer) -> UUID? {
        guard text.count == 36, text[8] == dash, text[13] == dash, text[18] == dash, text[23] == dash else {
            return nil
        }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var invalid: UInt8 = 0
        withUnsafeMutableBytes(of: &value) { out in
            hexValues.withUnsafeBufferPointer { table in
                byteStarts.withUnsafeBufferPointer { starts in
                    for index in 0..<16 {
                        let high = table[Int(text[starts[index]])], low = table[Int(text[starts[index] + 1])]
                        invalid |= high | low
                        out[index] = high << 4 | low
                    }
                }
            }
        }
        return invalid & notHex == 0 ? UUID(uuid: value) : nil
    }

    private static let dash = UInt8(ascii: "-")
    /// Where each of the 16 bytes' two digits start in the 36 characters.
    private static let byteStarts = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]
    /// The bit that marks a character that is not a hexadecimal digit in `hexValues`.
    private static let notHex: UInt8 = 0x10
    /// Each byte's value as a hexadecimal digit (either case), or `notHex`.
    private static let hexValues: [UInt8] = (0..<256).map { byte in
        switch UInt8(byte) {
        case 0x30...0x39: UInt8(byte) - 0x30
        case 0x41...0x46: UInt8(byte) - 0x41 + 10
        case 0x61...0x66: UInt8(byte) - 0x61 + 10
        default: notHex
        }
    }
}
