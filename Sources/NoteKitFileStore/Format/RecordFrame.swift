import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The framing of one record: `<length:8 hex> <masked crc32c:8 hex> <payload>\n` (docs/FORMAT.md, *Records*).
///
/// The framing is the same in every format version, so a reader can find records without decoding payloads.
enum RecordFrame {
    /// Bytes before the payload: two 8-digit hexadecimal fields and two spaces.
    static let headerLength = 18
    /// The largest payload a record may have.
    static let maximumPayloadLength = 1 << 30
    /// The most zero bytes that may follow the last record of the last segment as reserved space (docs/FORMAT.md,
    /// *Reserved space*): a writer reserves no more; more zeros than this are damage.
    static let maximumReservedSpace = 64 << 20

    /// The length and checksum a record header at `offset` claims, or nil when the header is malformed (or not all
    /// in `bytes`).
    static func parseHeader(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (length: Int, checksum: UInt32)? {
        guard bytes.count - offset >= headerLength, let length = parseHex(bytes, at: offset), bytes[offset + 8] == 0x20,
              let checksum = parseHex(bytes, at: offset + 9), bytes[offset + 17] == 0x20 else { return nil }
        return (Int(length), checksum)
    }

    /// The index of the first byte of `bytes` that is not zero, if any.
    ///
    /// Compares 4 KiB at a time with a page of zeros by `memcmp`, which the C library vectorizes, and looks at single
    /// bytes only inside the piece that differs: reserved space runs to 64 MiB of zeros, which a byte or word loop
    /// in an unoptimized (debug) build took a large part of a second to cross.
    static func firstNonZero(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        let count = bytes.count
        var position = 0
        return zeroPage.withUnsafeBytes { zeros -> Int? in
            let page = zeros.count
            while count &- position >= page, memcmp(base + position, zeros.baseAddress!, page) == 0 {
                position &+= page
            }
            while position < count {
                if base.load(fromByteOffset: position, as: UInt8.self) != 0 { return position }
                position &+= 1
            }
            return nil
        }
    }

    /// 4 KiB of zeros, for ``firstNonZero(_:)``.
    private static let zeroPage = [UInt8](repeating: 0, count: 4096)

    /// A writer whose buffer starts with room for the header, to be sealed by ``seal(_:)``.
    static func writer(reservingCapacity capacity: Int) -> JSONWriter {
        JSONWriter(prefix: [UInt8](repeating: 0x20, count: headerLength), reservingCapacity: capacity + 1)
    }

    /// The record whose payload `writer` wrote after the header room: the header filled in, the newline appended.
    static func seal(_ writer: consuming JSONWriter) -> [UInt8] {
        var bytes = writer.finish()
        let payloadLength = bytes.count - headerLength
        let checksum = bytes.withUnsafeBytes {
            CRC32C.masked(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[headerLength...])))
        }
        var header: [UInt8] = []
        header.reserveCapacity(headerLength)
        appendHex(UInt32(payloadLength), to: &header)
        header.append(0x20)
        appendHex(checksum, to: &header)
        header.append(0x20)
        bytes.replaceSubrange(0..<headerLength, with: header)
        bytes.append(0x0A)
        return bytes
    }

    /// What was found at an offset of a file.
    enum Scan: Equatable {
        /// An intact record: its payload's range, and where the next record starts.
        case record(payload: Range<Int>, next: Int)
        /// The bytes end before the record does: nothing beyond this offset can be a record.
        case truncated(reason: String)
        /// The bytes are all there but are not a valid record: `damage` says how (never
        /// ``RecordDamage/truncated``).
        case invalid(RecordDamage, reason: String)

        /// The kind of damage found, if the bytes are not an intact record.
        var damage: RecordDamage? {
            switch self {
            case .record: nil
            case .truncated: .truncated
            case .invalid(let damage, _): damage
            }
        }
    }

    /// Reads the record starting at `offset`.
    static func scan(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Scan {
        let available = bytes.count - offset
        guard available >= headerLength else {
            return .truncated(reason: "\(available) bytes left, fewer than a record header")
        }
        guard let length = parseHex(bytes, at: offset), bytes[offset + 8] == 0x20,
              let checksum = parseHex(bytes, at: offset + 9), bytes[offset + 17] == 0x20 else {
            return .invalid(.malformed, reason: "malformed record header")
        }
        let payloadLength = Int(length)
        guard payloadLength <= maximumPayloadLength else {
            return .invalid(.malformed,
                            reason: "record length \(payloadLength) exceeds the maximum of \(maximumPayloadLength)")
        }
        let start = offset + headerLength
        guard start + payloadLength + 1 <= bytes.count else {
            return .truncated(reason: "record of \(payloadLength) bytes ends \(start + payloadLength + 1 - bytes.count) "
                              + "bytes past the end of the file")
        }
        guard bytes[start + payloadLength] == 0x0A else {
            return .invalid(.malformed, reason: "record does not end with a newline")
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + payloadLength)])
        // A record is one line: a payload never holds a raw newline. Looking for one stops at the first, so checking
        // this before the checksum keeps a search for the next intact record linear, whatever lengths the lines claim.
        if payloadLength > 0, memchr(payload.baseAddress!, 0x0A, payloadLength) != nil {
            return .invalid(.malformed, reason: "a newline inside the record's payload")
        }
        guard CRC32C.masked(CRC32C.checksum(payload)) == checksum else {
            return .invalid(.checksumMismatch, reason: "checksum mismatch")
        }
        return .record(payload: start..<(start + payloadLength), next: start + payloadLength + 1)
    }

    /// Whether the bytes from `offset` to the end are all zero: space reserved at the end of the last segment
    /// (docs/FORMAT.md, *Reserved space*), where no record has been written yet. A record never starts with a
    /// zero byte. O(bytes after `offset`).
    static func isReservedSpace(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> Bool {
        guard offset < bytes.count else { return false }
        var position = offset
        // Eight bytes at a time once aligned; the space is as large as the reservation.
        while position < bytes.count, (Int(bitPattern: bytes.baseAddress!) + position) % 8 != 0 {
            guard bytes[position] == 0 else { return false }
            position += 1
        }
        while position + 8 <= bytes.count {
            guard bytes.load(fromByteOffset: position, as: UInt64.self) == 0 else { return false }
            position += 8
        }
        while position < bytes.count {
            guard bytes[position] == 0 else { return false }
            position += 1
        }
        return true
    }

    /// The offset of the next intact record after `offset`, if any: used to tell a torn tail (nothing intact
    /// follows) from damage in the middle of a file.
    static func nextIntactRecord(in bytes: UnsafeRawBufferPointer, after offset: Int) -> Int? {
        var position = offset
        while position < bytes.count {
            // Records start right after a newline.
            guard let newline = (position..<bytes.count).first(where: { bytes[$0] == 0x0A }) else { return nil }
            position = newline + 1
            if case .record = scan(bytes, at: position) { return position }
        }
        return nil
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func appendHex(_ value: UInt32, to output: inout [UInt8]) {
        for shift in stride(from: 28, through: 0, by: -4) {
            output.append(hexDigits[Int((value >> UInt32(shift)) & 0xF)])
        }
    }

    private static func parseHex(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32? {
        var value: UInt32 = 0
        for index in offset..<(offset + 8) {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: return nil
            }
            value = value << 4 | digit
        }
        return value
    }
}

/// The first line of every store file (docs/FORMAT.md, *Files begin with a magic line*).
package enum MagicLine {
    /// The format versions this build reads, each with its decoder.
    package static let supportedVersions: [Int] = [1, 2]
    /// The version this build writes. Version 2 (docs/FORMAT.md, *Version 2*) adds the schema history to the
    /// manifest; its segments hold the records version 1's do.
    package static let currentVersion = 2

    enum Kind: String {
        case segment, manifest
    }

    static func bytes(_ kind: Kind, version: Int = currentVersion) -> [UInt8] {
        Array("NOTEKIT/\(version) \(kind.rawValue)\n".utf8)
    }

    /// Parses the magic line at the start of `bytes`.
    ///
    /// - Returns: the format version and the offset of the first record.
    /// - Throws: ``FileStoreError`` naming `file` when the line is missing, of another kind, or of a version this
    ///   build does not read. The message quotes no byte of the file: it may be anything (`/etc/passwd` copied
    ///   over a segment), and only a NoteKit file's magic line is known to say nothing private.
    static func parse(_ bytes: UnsafeRawBufferPointer, expecting kind: Kind, file: String) throws -> (version: Int, end: Int) {
        let limit = min(bytes.count, 64)
        let notNoteKit = FileStoreError.notAStoreFile(
            file: file, kind: bytes.isEmpty ? .empty : .notNoteKit, reason: bytes.isEmpty ? "the file is empty"
                : "not a NoteKit \(kind.rawValue): it does not begin with a NOTEKIT/<version> \(kind.rawValue) line")
        guard let newline = (0..<limit).first(where: { bytes[$0] == 0x0A }) else { throw notNoteKit }
        let line = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<newline]), as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count == 2, parts[0].hasPrefix("NOTEKIT/"), let version = Int(parts[0].dropFirst(8)) else {
            throw notNoteKit
        }
        guard parts[1] == kind.rawValue else {
            guard let other = Kind(rawValue: String(parts[1])) else { throw notNoteKit }
            throw FileStoreError.notAStoreFile(file: file, kind: .otherKind,
                                               reason: "it is a NoteKit \(other.rawValue), not a \(kind.rawValue)")
        }
        guard supportedVersions.contains(version) else {
            throw FileStoreError.unsupportedFormatVersion(file: file, found: version, supported: supportedVersions)
        }
        return (version, newline + 1)
    }
}
