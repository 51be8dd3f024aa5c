#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKitStressSupport
import Testing

@testable import NoteKit

@Suite("Checksums")
struct ChecksumTests {
    // MARK: SHA-256

    @Test("SHA-256 of the FIPS 180-4 example messages")
    func sha256KnownVectors() {
        #expect(SHA256Digest.hexString(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest.hexString(Data("abc".utf8))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Digest.hexString(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test("SHA-256 of one million 'a'")
    func sha256MillionA() {
        let message = Data(repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256Digest.hexString(message) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Lengths around the padding boundaries, checked against `sha256sum`.
    @Test(
        "SHA-256 at padding boundaries matches sha256sum",
        arguments: [
            // Bytes 0, 1, 2, … (n - 1): `python3 -c "…bytes(i % 256 for i in range(n))" | sha256sum`.
            (55, false, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"),
            (56, false, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"),
            (63, false, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"),
            (64, false, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"),
            (65, false, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"),
            (119, false, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"),
            (120, false, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"),
            (128, false, "471fb943aa23c511f6f72f8d1652d9c880cfa392ad80503120547703e56a2be5"),
            // n × "a": `head -c n /dev/zero | tr '\0' a | sha256sum`.
            (55, true, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
            (56, true, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
            (63, true, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
            (64, true, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
            (65, true, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
        ])
    func sha256BoundaryLengths(length: Int, allA: Bool, expected: String) {
        let bytes: [UInt8] = allA
            ? [UInt8](repeating: UInt8(ascii: "a"), count: length)
            : (0..<length).map { UInt8(truncatingIfNeeded: $0) }
        #expect(SHA256Digest.hexString(Data(bytes)) == expected)
        #expect(SHA256Digest.hexString(bytes) == expected)
    }

    @Test("SHA-256 overloads agree, contiguous or not")
    func sha256Overloads() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let expected = SHA256Digest.hash(bytes)
        #expect(expected.count == 32)
        #expect(SHA256Digest.hash(Data(bytes)) == expected)
        #expect(SHA256Digest.hash(bytes[...]) == expected)
        #expect(SHA256Digest.hash(AnySequence(bytes)) == expected)  // not contiguous: copied first
        #expect(SHA256Digest.hash(bytes.lazy.map { $0 }) == expected)
        #expect(bytes.withUnsafeBytes { SHA256Digest.hash($0) } == expected)
        // An unaligned start inside a larger buffer.
        let shifted = [0xAA] + bytes
        #expect(SHA256Digest.hash(shifted[1...]) == expected)
        #expect(SHA256Digest.hash("abc".utf8) == SHA256Digest.hash(Data("abc".utf8)))
        let hex: [String] = expected.map { (byte: UInt8) -> String in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }
        #expect(SHA256Digest.hexString(Data(bytes)) == hex.joined())
    }

    // MARK: CRC-32C

    @Test("CRC-32C check value and known vectors")
    func crc32cKnownVectors() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum(Data("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.checksum(Data()) == 0)
    }

    @Test("CRC-32C matches a bitwise reference for every length 0…100")
    func crc32cMatchesReference() {
        var generator = SeededGenerator(seed: 0x5EED_C0DE)
        // One random buffer with room to start at every offset 0…7, so the 8-byte loads run unaligned too.
        let buffer = (0..<(100 + 8)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        for length in 0...100 {
            for start in 0..<8 {
                let slice = buffer[start..<(start + length)]
                let expected = referenceCRC32C(slice)
                #expect(CRC32C.checksum(slice) == expected, "length \(length), offset \(start)")
                #expect(CRC32C.checksum(Data(slice)) == expected, "length \(length), offset \(start)")
                #expect(CRC32C.checksum(Array(slice)) == expected, "length \(length), offset \(start)")
            }
        }
        // A longer buffer too, well past the tables' warm-up.
        let long = (0..<100_003).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        #expect(CRC32C.checksum(long) == referenceCRC32C(long))
    }

    @Test("CRC-32C continues from a seed across any split")
    func crc32cIncrementalSeed() {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<200 {
            let count = Int(generator.next() % 600)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let whole = CRC32C.checksum(bytes)
            let split = count == 0 ? 0 : Int(generator.next() % UInt64(count + 1))
            let first = CRC32C.checksum(bytes[..<split])
            #expect(CRC32C.checksum(bytes[split...], seed: first) == whole, "count \(count), split \(split)")
            // Three pieces through the raw-buffer and Data overloads.
            let second = split + (count == split ? 0 : Int(generator.next() % UInt64(count - split + 1)))
            var running: UInt32 = 0
            bytes.withUnsafeBytes { raw in
                running = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[..<split]), seed: running)
                running = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[split..<second]), seed: running)
            }
            running = CRC32C.checksum(Data(bytes[second...]), seed: running)
            #expect(running == whole, "count \(count), splits \(split), \(second)")
        }
        // Byte by byte.
        let text = Array("123456789".utf8)
        let byByte = text.reduce(UInt32(0)) { crc, byte in CRC32C.checksum([byte], seed: crc) }
        #expect(byByte == 0xE306_9283)
    }

    @Test("CRC-32C mask and unmask round-trip")
    func crc32cMask() {
        var generator = SeededGenerator(seed: 7)
        let samples: [UInt32] = [0, 1, 0xFFFF_FFFF, 0xE306_9283, 0xA282_EAD8, 0x8000_0000]
            + (0..<1000).map { _ in UInt32(truncatingIfNeeded: generator.next()) }
        for crc in samples {
            #expect(CRC32C.unmasked(CRC32C.masked(crc)) == crc)
            #expect(CRC32C.masked(CRC32C.unmasked(crc)) == crc)
        }
        // LevelDB's definition, spelled out.
        let crc: UInt32 = 0xE306_9283
        #expect(CRC32C.masked(crc) == ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8)
        #expect(CRC32C.masked(crc) != crc)
        #expect(CRC32C.masked(CRC32C.masked(crc)) != CRC32C.masked(crc))
    }
}

/// CRC-32C one bit at a time, straight from the definition.
private func referenceCRC32C(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 {
            crc = (crc & 1) == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1
        }
    }
    return crc ^ 0xFFFF_FFFF
}
