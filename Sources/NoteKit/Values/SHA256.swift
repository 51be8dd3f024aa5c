#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// SHA-256 (FIPS 180-4), in pure Swift.
///
/// NoteKit uses it to give a schema a stable content hash; it runs wherever Swift does, without CryptoKit or any
/// C library. Input is processed in 64-byte blocks read straight from contiguous memory.
///
/// ```swift
/// let digest = SHA256Digest.hash(Array("abc".utf8))       // 32 bytes
/// let hex = SHA256Digest.hexString(Data("abc".utf8))       // "ba7816bf…f20015ad"
/// ```
package enum SHA256Digest {
    /// The length of a digest in bytes.
    package static let byteCount = 32

    /// The SHA-256 digest of a sequence of bytes.
    ///
    /// Contiguous collections (`[UInt8]`, `ArraySlice<UInt8>`, a `String`'s UTF-8 view, …) are hashed in place;
    /// other sequences are first copied into an array.
    ///
    /// - Parameter bytes: the message.
    /// - Returns: the 32-byte digest.
    package static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        if let digest = bytes.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) {
            return digest
        }
        return Array(bytes).withUnsafeBytes { hash($0) }
    }

    /// The SHA-256 digest of `data`.
    ///
    /// - Parameter data: the message.
    /// - Returns: the 32-byte digest.
    package static func hash(_ data: Data) -> [UInt8] {
        data.withUnsafeBytes { hash($0) }
    }

    /// The SHA-256 digest of the bytes in `buffer`.
    ///
    /// - Parameter buffer: the message.
    /// - Returns: the 32-byte digest.
    package static func hash(_ buffer: UnsafeRawBufferPointer) -> [UInt8] {
        var state = State()
        let count = buffer.count
        let fullBlocks = count / 64
        if let base = buffer.baseAddress {
            for block in 0..<fullBlocks {
                state.compress(base + block * 64)
            }
        }

        // Padding: the leftover bytes, 0x80, zeros, then the message length in bits as a big-endian UInt64,
        // filling one block, or two when fewer than 9 bytes are left in the first.
        let remainder = count - fullBlocks * 64
        let tailLength = remainder < 56 ? 64 : 128
        withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
            tail.initializeMemory(as: UInt8.self, repeating: 0)
            if remainder > 0, let base = buffer.baseAddress {
                tail.baseAddress!.copyMemory(from: base + fullBlocks * 64, byteCount: remainder)
            }
            tail[remainder] = 0x80
            let bitLength = UInt64(count) &* 8
            tail.storeBytes(of: bitLength.bigEndian, toByteOffset: tailLength - 8, as: UInt64.self)
            let tailBase = UnsafeRawPointer(tail.baseAddress!)
            state.compress(tailBase)
            if tailLength == 128 {
                state.compress(tailBase + 64)
            }
        }
        return state.digest()
    }

    /// The SHA-256 digest of `data` as 64 lowercase hexadecimal digits.
    ///
    /// - Parameter data: the message.
    /// - Returns: the digest in lowercase hex, for example
    ///   `"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"` for empty data.
    package static func hexString(_ data: Data) -> String {
        hexEncoded(hash(data))
    }

    /// The SHA-256 digest of a sequence of bytes as 64 lowercase hexadecimal digits.
    ///
    /// - Parameter bytes: the message.
    /// - Returns: the digest in lowercase hex.
    package static func hexString(_ bytes: some Sequence<UInt8>) -> String {
        hexEncoded(hash(bytes))
    }

    /// Lowercase hex of `bytes`, two digits per byte.
    package static func hexEncoded(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var characters = [UInt8]()
        characters.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            characters.append(digits[Int(byte >> 4)])
            characters.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// The round constants: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The eight working hash values between blocks.
    private struct State {
        // The initial values: the first 32 bits of the fractional parts of the square roots of the first 8 primes.
        var h0: UInt32 = 0x6a09_e667
        var h1: UInt32 = 0xbb67_ae85
        var h2: UInt32 = 0x3c6e_f372
        var h3: UInt32 = 0xa54f_f53a
        var h4: UInt32 = 0x510e_527f
        var h5: UInt32 = 0x9b05_688c
        var h6: UInt32 = 0x1f83_d9ab
        var h7: UInt32 = 0x5be0_cd19

        /// Mixes the 64-byte block at `block` into the state.
        mutating func compress(_ block: UnsafeRawPointer) {
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
                // Through pointers, with masking shifts (`&>>`) on one concrete type and the rotations written out:
                // an unoptimized (debug) build, which the tests of every app using NoteKit run, then hashes about
                // eight times faster than with generic shifts, a helper per rotation and checked subscripts.
                let w = schedule.baseAddress!
                var t = 0
                while t < 16 {
                    w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
                    t &+= 1
                }
                while t < 64 {
                    let w15 = w[t &- 15]
                    let w2 = w[t &- 2]
                    let s0: UInt32 = (w15 &>> 7 | w15 &<< 25) ^ (w15 &>> 18 | w15 &<< 14) ^ (w15 &>> 3)
                    let s1: UInt32 = (w2 &>> 17 | w2 &<< 15) ^ (w2 &>> 19 | w2 &<< 13) ^ (w2 &>> 10)
                    w[t] = s1 &+ w[t &- 7] &+ s0 &+ w[t &- 16]
                    t &+= 1
                }

                var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                SHA256Digest.roundConstants.withUnsafeBufferPointer { constants in
                    let k = constants.baseAddress!
                    var t = 0
                    while t < 64 {
                        let bigSigma1: UInt32 = (e &>> 6 | e &<< 26) ^ (e &>> 11 | e &<< 21) ^ (e &>> 25 | e &<< 7)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ bigSigma1 &+ choice &+ k[t] &+ w[t]
                        let bigSigma0: UInt32 = (a &>> 2 | a &<< 30) ^ (a &>> 13 | a &<< 19) ^ (a &>> 22 | a &<< 10)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = bigSigma0 &+ majority
                        h = g
                        g = f
                        f = e
                        e = d &+ t1
                        d = c
                        c = b
                        b = a
                        a = t1 &+ t2
                        t &+= 1
                    }
                }
                h0 &+= a
                h1 &+= b
                h2 &+= c
                h3 &+= d
                h4 &+= e
                h5 &+= f
                h6 &+= g
                h7 &+= h
            }
        }

        /// The final state as 32 big-endian bytes.
        func digest() -> [UInt8] {
            var bytes = [UInt8]()
            bytes.reserveCapacity(32)
            for word in [h0, h1, h2, h3, h4, h5, h6, h7] {
                bytes.append(UInt8(truncatingIfNeeded: word >> 24))
                bytes.append(UInt8(truncatingIfNeeded: word >> 16))
                bytes.append(UInt8(truncatingIfNeeded: word >> 8))
                bytes.append(UInt8(truncatingIfNeeded: word))
            }
            return bytes
        }
    }
}
