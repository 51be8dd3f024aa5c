import Foundation
import NoteKit
import Testing

/// Issue 17, item 2 (compact storage per row): a row's attribute values packed in one allocation answer every
/// read, comparison and hash exactly as the same values in an array.
@Suite("Packed attribute values")
struct AttributeValuesTests {
    /// One value of every kind, with the edges of each encoding: lengths at 15/16 (inline strings), 255/256 (the
    /// one-byte length), signed zero, NaN, the extremes of each integer, composed and decomposed text.
    static let everyKind: [StoredValue] = [
        .null, .bool(false), .bool(true),
        .int(0), .int(-1), .int(.min), .int(.max), .uint(.max), .uint(0),
        .double(0), .double(-0.0), .double(.nan), .double(-.infinity), .double(1.5e300),
        .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSinceReferenceDate: -1e9 - 0.25)),
        .string(""), .string("a"), .string(String(repeating: "x", count: 15)), .string(String(repeating: "y", count: 16)),
        .string(String(repeating: "z", count: 255)), .string(String(repeating: "w", count: 256)),
        .string("caf\u{E9}"), .string("cafe\u{301}"), .string("🗒️ notes\u{0}"),
        .data(Data()), .data(Data([0, 1, 2])), .data(Data(repeating: 7, count: 300)),
        .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!),
        .decimal(Decimal(string: "12345.6789")!), .array([]), .array([.int(1), .string("two")]),
        .dictionary(["k": .bool(true)]), .external(ExternalData(name: "blob-1", data: Data([9, 8, 7]))),
    ]

    @Test("Packed values read back every kind with the same bits")
    func roundTrip() {
        let packed = AttributeValues(packing: Self.everyKind)
        #expect(packed.isPacked)
        #expect(packed.count == Self.everyKind.count)
        for (index, value) in Self.everyKind.enumerated() {
            #expect(packed[index] == value, "value \(index): \(value)")
        }
        #expect(Array(packed) == Self.everyKind)
        #expect(packed.array == Self.everyKind)
    }

    @Test("Packed and array-held values are equal, and hash alike, exactly when their values are")
    func equalityAcrossStorage() {
        let packed = AttributeValues(packing: Self.everyKind)
        let held = AttributeValues(Self.everyKind)
        #expect(!held.isPacked)
        #expect(packed == held && held == packed)
        #expect(packed.hashValue == held.hashValue)
        #expect(packed == AttributeValues(packing: Self.everyKind))
        // Each single change is seen, in either storage: identity, not value order (0.0 is not -0.0, é composed is
        // not é decomposed, an int is not a uint).
        let changes: [(Int, StoredValue)] = [(9, .double(-0.0)), (10, .double(0)), (22, .string("cafe\u{301}")),
                                             (3, .uint(0)), (28, .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E50")!)),
                                             (29, .decimal(Decimal(string: "12345.6788")!)), (30, .array([.null]))]
        for (index, value) in changes {
            var other = Self.everyKind
            other[index] = value
            #expect(AttributeValues(packing: other) != packed, "change at \(index)")
            #expect(AttributeValues(other) != packed, "change at \(index)")
            #expect(AttributeValues(packing: other) != held, "change at \(index)")
        }
        #expect(AttributeValues(packing: Array(Self.everyKind.dropLast())) != packed)
        #expect(AttributeValues(packing: []) == AttributeValues())
    }

    @Test("Comparing one value in place agrees with StoredValue's ==, for every kind against every kind")
    func inPlaceComparison() {
        let packed = AttributeValues(packing: Self.everyKind)
        let held = AttributeValues(Self.everyKind)
        for index in Self.everyKind.indices {
            for candidate in Self.everyKind {
                let expected = Self.everyKind[index] == candidate
                #expect(packed.holds(candidate, at: index) == expected, "\(index) holds \(candidate)")
                var other = Self.everyKind
                other[index] = candidate
                let otherPacked = AttributeValues(packing: other)
                #expect(packed.hasSameValue(at: index, as: otherPacked) == expected, "\(index) vs \(candidate)")
                #expect(held.hasSameValue(at: index, as: otherPacked) == expected, "\(index) vs \(candidate)")
                #expect(packed.hasSameValue(at: index, as: AttributeValues(other)) == expected, "\(index) vs \(candidate)")
            }
        }
    }

    @Test("A string's bytes are read in place, and only a string's")
    func stringBytesInPlace() {
        for values in [AttributeValues(packing: Self.everyKind), AttributeValues(Self.everyKind)] {
            for (index, value) in Self.everyKind.enumerated() {
                let bytes = values.withStringBytes(at: index) { Array($0) }
                if case .string(let string) = value {
                    #expect(bytes == Array(string.utf8), "value \(index)")
                } else {
                    #expect(bytes == nil, "value \(index): \(value)")
                }
            }
        }
    }

    @Test("Writing a packed value unpacks the values once and changes only that value")
    func writeUnpacks() {
        var values = AttributeValues(packing: Self.everyKind)
        values[16] = .string("written")
        #expect(!values.isPacked)
        var expected = Self.everyKind
        expected[16] = .string("written")
        #expect(Array(values) == expected)
        // The copy a row shares is untouched.
        let shared = AttributeValues(packing: Self.everyKind)
        var copy = shared
        copy[0] = .int(1)
        #expect(shared == AttributeValues(Self.everyKind) && shared.isPacked)
        #expect(copy[0] == .int(1))
    }

    @Test("Offsets widen past 64 KiB: every value after a long one still reads back")
    func wideOffsets() {
        let long = String(repeating: "ab", count: 40_000)
        let values: [StoredValue] = [.int(1), .string(long), .uuid(UUID()), .data(Data(repeating: 1, count: 70_000)),
                                     .bool(true), .string("end")]
        let packed = AttributeValues(packing: values)
        #expect(packed.isPacked)
        #expect(Array(packed) == values)
        #expect(packed.heldBytes > 150_000)
    }

    @Test("A note's row packed takes about its values' bytes, far less than as an array")
    func packedIsCompact() {
        // W1's note: id, title, a 240-character body, two dates, no tags, pinned, no place.
        let body = String(repeating: "lorem ipsum ", count: 20)
        let row: [StoredValue] = [.uuid(UUID()), .string("Note 12345"), .string(body), .date(.now), .date(.now),
                                  .array([]), .bool(false), .null, .null, .null]
        let packed = AttributeValues(packing: row), held = AttributeValues(row)
        #expect(packed.heldBytes < 360, "packed: \(packed.heldBytes) bytes")
        #expect(held.heldBytes > 500, "as an array: \(held.heldBytes) bytes")
    }
}
