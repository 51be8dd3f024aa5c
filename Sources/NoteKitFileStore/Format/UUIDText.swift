#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// UUIDs as the store writes them (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`), formatted and parsed directly on bytes:
/// Foundation's `uuidString` and `UUID(uuidString:)` go through `printf` and `scanf`, which cost more than the rest
/// of a row.
enum UUIDText {
    private static let digits = Array("0123456789ABCDEF".utf8)

    /// Appends the 36 characters of `uuid`.
    static func append(_ uuid: UUID, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: uuid.uuid) { raw in
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                let byte = raw[index]
                bytes.append(digits[Int(byte >> 4)])
                bytes.append(digits[Int(byte & 0x0F)])
            }
        }
    }

    /// Parses 36 characters (either case); nil when they are not a UUID.
    static func parse(_ text: UnsafeRawBufferPointer) -> UUID? {
        guard text.count == 36 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &value) { out -> Bool in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = nibble(text[position]), let low = nibble(text[position + 1]) else { return false }
                out[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return ok ? UUID(uuid: value) : nil
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
