import NoteKitStressSupport
import Testing

@testable import NoteKitFileStore

/// The JSON that record payloads are written in (docs/FORMAT.md, "The payload JSON"): what `JSONWriter` writes, what
/// `JSONReader` accepts, and the byte offset each refusal names.
@Suite("JSON codec")
struct JSONCodecTests {
    // MARK: Strings

    @Test("a string with every escape is written with the short escapes and reads back")
    func everyEscapeRoundTrips() throws {
        let text = "quote \" backslash \\ slash / newline \n tab \t return \r backspace \u{8} form feed \u{C} "
            + "nul \u{0} unit separator \u{1F} escape \u{1B} delete \u{7F}"
        let json = encoded { $0.string(text) }
        #expect(
            String(decoding: json, as: UTF8.self)
                == #""quote \" backslash \\ slash / newline \n tab \t return \r backspace \b form feed \f "#
                + #"nul \u0000 unit separator \u001f escape \u001b delete "# + "\u{7F}\"")
        let decoded = try read(json) { try $0.readString() }
        #expect(Array(decoded.utf8) == Array(text.utf8))
    }

    @Test("non-ASCII text is written as raw UTF-8 and reads back byte for byte")
    func nonASCIIRoundTrips() throws {
        let samples = [
            "😀", "👨‍👩‍👧 family", "🇫🇷🇯🇵", "e\u{301} combining acute", "é precomposed", "Crème brûlée", "日本語のメモ",
            "\u{0}", "a\u{0}b", "", "\u{10FFFF}\u{FEFF}\u{2028}\u{2029}", String(repeating: "ü", count: 100),
        ]
        for text in samples {
            let json = encoded { $0.string(text) }
            #expect(json == [0x22] + Array(text.utf8).flatMap { byte -> [UInt8] in
                byte == 0 ? Array(#"\u0000"#.utf8) : [byte]
            } + [0x22])
            let decoded = try read(json) { try $0.readString() }
            // Compare bytes: String's == treats "e\u{301}" and "é" as equal, the store must not.
            #expect(Array(decoded.utf8) == Array(text.utf8), "\(text)")
        }
    }

    @Test("an escape at every position of a long string is found, written and read back")
    func escapesAtEveryPosition() throws {
        for position in 0..<40 {
            for special in ["\"", "\\", "\n", "\u{1}", "é", "😀"] {
                let text = String(repeating: "a", count: position) + special + String(repeating: "b", count: 40 - position)
                let decoded = try read(encoded { $0.string(text) }) { try $0.readString() }
                #expect(Array(decoded.utf8) == Array(text.utf8), "\(position) \(special)")
            }
        }
    }

    @Test("escapes decode, \\uD83D\\uDE00 to 😀")
    func escapesDecode() throws {
        let decoded = try read(#""\"\\\/\b\f\n\r\t\u0041\u00e9\u4E2D\uD83D\uDE00\u0000\ud83d\ude00\uD800\uDC00\uDBFF\uDFFF""#) {
            try $0.readString()
        }
        #expect(Array(decoded.utf8) == Array("\"\\/\u{8}\u{C}\n\r\tAé中😀\u{0}😀\u{10000}\u{10FFFF}".utf8))
        let emoji = try read(#""\uD83D\uDE00""#) { try $0.readString() }
        #expect(emoji == "😀")
        #expect(Array(emoji.utf8) == [0xF0, 0x9F, 0x98, 0x80])
    }

    @Test(
        "lone surrogates and bad escapes are rejected at their backslash",
        arguments: [
            (#""ab\uD83D""#, 3, "lone surrogate \\uD83D"),
            (#""\uD83Dx""#, 1, "lone surrogate"),
            (#""\uD83D\u0041""#, 1, "lone surrogate"),
            (#""\uD83D\uD83D""#, 1, "lone surrogate"),
            (#""\uD83D\n""#, 1, "lone surrogate"),
            (#""abcdefghij\uDE00""#, 11, "lone surrogate \\uDE00"),
            (#""\uDFFF""#, 1, "lone surrogate \\uDFFF"),
            (#""\uDBFF\uE000""#, 1, "lone surrogate \\uDBFF"),
            (#""\u12G4""#, 1, "four hexadecimal digits"),
            (#""\x""#, 1, "invalid escape '\\x' in string"),
            (#""\U0041""#, 1, "invalid escape"),
        ])
    func badEscapesRejected(json: String, offset: Int, reason: String) {
        expectRejected(json, at: offset, reason) { _ = try $0.readString() }
        expectRejected(json, at: offset, reason) { try $0.skipValue() }
    }

    @Test(
        "invalid UTF-8 is rejected at the first byte of the bad sequence",
        arguments: [
            [0xC3, 0x28],  // a lead byte without its continuation
            [0xC0, 0x80],  // overlong NUL
            [0xC1, 0xBF],  // overlong
            [0xE0, 0x80, 0x80],  // overlong, three bytes
            [0xED, 0xA0, 0x80],  // the surrogate U+D800
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xF5, 0x80, 0x80, 0x80],
            [0x80],  // a continuation byte alone
            [0xFF],
            [0xE2, 0x82, 0x22],  // cut short by the closing quote
        ] as [[UInt8]])
    func invalidUTF8Rejected(sequence: [UInt8]) {
        // Short and long prefixes: the bad byte is found by the byte loop and by the eight-byte scan.
        for prefix in ["", "a", "abcdefghijklmnop"] {
            let json = [0x22] + Array(prefix.utf8) + sequence + Array("tail\"".utf8)
            expectRejected(json, at: 1 + prefix.utf8.count, "invalid UTF-8 in string") { _ = try $0.readString() }
            expectRejected(json, at: 1 + prefix.utf8.count, "invalid UTF-8 in string") { try $0.skipValue() }
            let object = Array(#"{"#.utf8) + json + Array(#":1}"#.utf8)
            expectRejected(object, at: 2 + prefix.utf8.count, "invalid UTF-8 in string") { try $0.skipValue() }
        }
    }

    @Test("a raw control character in a string is rejected where it is")
    func rawControlCharacterRejected() {
        expectRejected("\"ab\ncd\"", at: 3, "raw control character 0x0A") { _ = try $0.readString() }
        expectRejected("\"abcdefghijkl\tm\"", at: 13, "raw control character 0x09") { _ = try $0.readString() }
        expectRejected("\"\u{0}\"", at: 1, "raw control character 0x00") { _ = try $0.readString() }
        expectRejected("{\"a\u{1F}\":1}", at: 3, "raw control character 0x1F") { try $0.skipValue() }
        // At every position of a long string, so the eight-byte scan meets it too.
        for position in 0..<40 {
            for control in [0x00, 0x09, 0x0A, 0x1F] as [UInt8] {
                var json = [0x22] + Array(repeating: UInt8(ascii: "a"), count: 48) + [0x22]
                json[1 + position] = control
                expectRejected(json, at: 1 + position, "raw control character") { _ = try $0.readString() }
            }
        }
    }

    @Test("an unterminated string is an error at the end of the input")
    func unterminatedString() {
        expectRejected(#""abc"#, at: 4, "unterminated string (it starts at byte 0)") { _ = try $0.readString() }
        expectRejected(#""abc\"#, at: 5, "unterminated string") { _ = try $0.readString() }
        expectRejected(#"  "abc\u00"#, at: 10, "unterminated string (it starts at byte 2)") { _ = try $0.readString() }
        expectRejected([0x22, 0xE2, 0x82], at: 3, "unterminated string") { _ = try $0.readString() }
    }

    // MARK: Integers

    @Test("Int64.min, Int64.max and UInt64.max are written and read exactly")
    func integerLimits() throws {
        for value in [Int64.min, Int64.min + 1, -1, 0, 1, 9, 10, 99, 100, 12345, Int64.max - 1, Int64.max] {
            let json = encoded { $0.int(value) }
            #expect(String(decoding: json, as: UTF8.self) == String(value))
            #expect(try read(json) { try $0.readInt64() } == value)
        }
        for value in [UInt64.min, 1, 10_000_000_000_000_000_000, UInt64(Int64.max) + 1, UInt64.max - 1, UInt64.max] {
            let json = encoded { $0.uint(value) }
            #expect(String(decoding: json, as: UTF8.self) == String(value))
            #expect(try read(json) { try $0.readUInt64() } == value)
        }
        #expect(try read("-0") { try $0.readInt64() } == 0)
        #expect(try read("-0") { try $0.readUInt64() } == 0)
    }

    @Test(
        "integers that do not fit, fractions and exponents are rejected as integers",
        arguments: [
            ("9223372036854775808", 0, "does not fit an Int64"),
            ("-9223372036854775809", 0, "does not fit an Int64"),
            ("99999999999999999999", 0, "does not fit an Int64"),
            ("123456789012345678901234567890", 0, "does not fit an Int64"),
            ("  1.5", 2, "number 1.5 is not an integer"),
            ("1e3", 0, "is not an integer"),
            ("1.0", 0, "is not an integer"),
            ("\"1\"", 0, "expected an integer, found '\"'"),
            ("01", 0, "leading zeros"),
            ("-", 1, "expected a digit after '-'"),
            ("", 0, "expected an integer, found end of input"),
        ])
    func integerRejected(json: String, offset: Int, reason: String) {
        expectRejected(json, at: offset, reason) { _ = try $0.readInt64() }
    }

    @Test("UInt64 refuses negative numbers and numbers past UInt64.max")
    func unsignedRejected() {
        expectRejected("-1", at: 0, "number -1 does not fit a UInt64") { _ = try $0.readUInt64() }
        expectRejected("18446744073709551616", at: 0, "does not fit a UInt64") { _ = try $0.readUInt64() }
        expectRejected("[1,99999999999999999999]", at: 3, "does not fit a UInt64") {
            try $0.readArray { _ = try $0.readUInt64() }
        }
    }

    // MARK: Doubles

    @Test(
        "special doubles are written in their shortest JSON form and read back bit for bit",
        arguments: [
            (0.1, "0.1"), (Double.leastNonzeroMagnitude, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e308"),
            (-0.0, "-0.0"), (0.0, "0"), (1e-5, "1e-5"), (-2.5e-10, "-2.5e-10"), (5e20, "5e20"), (1e16, "1e16"),
            (1e15, "1000000000000000"), (100, "100"), (786054321.25, "786054321.25"), (786054000, "786054000"),
            (0.30000000000000004, "0.30000000000000004"), (2.2250738585072014e-308, "2.2250738585072014e-308"),
            (Double.infinity, #""inf""#), (-Double.infinity, #""-inf""#),
        ])
    func specialDoubles(value: Double, text: String) throws {
        let json = encoded { $0.double(value) }
        #expect(String(decoding: json, as: UTF8.self) == text)
        let decoded = try read(json) { try $0.readDouble() }
        #expect(decoded.bitPattern == value.bitPattern)
    }

    @Test("NaN, whatever its payload, is written as \"nan\" and reads back as NaN")
    func notANumber() throws {
        for value in [Double.nan, -Double.nan, Double.signalingNaN, Double(bitPattern: 0x7FF0_0000_0000_0001)] {
            let json = encoded { $0.double(value) }
            #expect(json == Array(#""nan""#.utf8))
            #expect(try read(json) { try $0.readDouble() }.isNaN)
        }
    }

    @Test("4,000 random bit patterns round-trip bit for bit, and their text is what Double(String) reads")
    func randomBitPatternsRoundTrip() throws {
        var random = SeededGenerator(seed: 0x5EED_0001)
        var values: [Double] = []
        for index in 0..<4_000 {
            switch index % 4 {
            case 0, 1: values.append(Double(bitPattern: random.next()))
            case 2: values.append(Double(Int64(bitPattern: random.next()) % 100_000_000) / 100)  // dates, prices
            default: values.append(Double(random.next() >> 11) * 0x1p-53 * 1e6)  // ordinary magnitudes
            }
        }
        for value in values where value.isFinite {
            let text = String(decoding: encoded { $0.double(value) }, as: UTF8.self)
            #expect(Double(text)?.bitPattern == value.bitPattern, "\(value) written as \(text)")
        }
        let json = encoded { writer in
            writer.beginArray()
            for value in values { writer.double(value) }
            writer.endArray()
        }
        var decoded: [Double] = []
        try read(json) { reader in try reader.readArray { decoded.append(try $0.readDouble()) } }
        #expect(decoded.count == values.count)
        for (read, written) in zip(decoded, values) {
            #expect(read.bitPattern == written.bitPattern || (read.isNaN && written.isNaN), "\(written)")
        }
    }

    @Test("3,000 random decimal texts read as strtod rounds them (Swift's Double(String) is the oracle)")
    func randomDecimalTextsRoundCorrectly() throws {
        var random = SeededGenerator(seed: 0x5EED_0002)
        for _ in 0..<3_000 {
            let digitCount = 1 + Int(random.next() % 25)
            var digits = String(1 + random.next() % 9)
            for _ in 1..<digitCount { digits += String(random.next() % 10) }
            let point = Int(random.next() % UInt64(digitCount + 1))
            var text = random.next() % 2 == 0 ? "-" : ""
            if point == 0 {
                text += "0." + digits
            } else if point < digitCount {
                text += String(digits.prefix(point)) + "." + String(digits.dropFirst(point))
            } else {
                text += digits
            }
            if random.next() % 3 != 0 { text += "e" + String(Int(random.next() % 700) - 350) }
            let expected = try #require(Double(text))
            if expected.isInfinite {
                expectRejected(text, at: 0, "does not fit a Double") { _ = try $0.readDouble() }
            } else {
                let decoded = try read(text) { try $0.readDouble() }
                #expect(decoded.bitPattern == expected.bitPattern, "\(text)")
            }
        }
    }

    @Test(
        "numbers at the edges of rounding read as strtod reads them",
        arguments: [
            ("9007199254740993", 9007199254740992.0),  // halfway, to even
            ("9007199254740995", 9007199254740996.0),
            ("2.2250738585072011e-308", Double(bitPattern: 0x000F_FFFF_FFFF_FFFF)),  // the largest subnormal
            ("2.4703282292062327e-324", 0),  // just below half the smallest subnormal
            ("2.4703282292062328e-324", Double.leastNonzeroMagnitude),
            ("1.7976931348623158e308", 1.7976931348623157e308),
            ("1e-400", 0), ("-1e-400", -0.0), ("0e999999999999999999", 0), ("-0", -0.0), ("-0.000", -0.0),
            ("1E+2", 100), ("1e-0", 1), ("0.1e1", 1), ("1e30", 1e30), ("123456789012345678901234567890", 1.2345678901234568e29),
            ("0.000000000000000000000000000001", 1e-30), ("  \n786054321.25", 786054321.25), (#""nan""#, .nan),
            (#""inf""#, .infinity), (#""-inf""#, -.infinity),
        ])
    func edgeDecimals(text: String, expected: Double) throws {
        let decoded = try read(text) { try $0.readDouble() }
        #expect(decoded.bitPattern == expected.bitPattern || (decoded.isNaN && expected.isNaN), "\(text)")
    }

    @Test(
        "malformed and out-of-range numbers are rejected where the problem is",
        arguments: [
            ("01", 0, "leading zeros"), ("-01", 1, "leading zeros"), ("1.", 2, "expected a digit after '.'"),
            (".5", 0, "expected a number, found '.'"), ("-", 1, "expected a digit after '-'"),
            ("1e", 2, "expected a digit in the exponent"), ("1e+", 3, "expected a digit in the exponent"),
            ("1.e5", 2, "expected a digit after '.'"), ("+1", 0, "expected a number, found '+'"),
            ("--1", 1, "expected a digit after '-'"), ("1e400", 0, "number 1e400 does not fit a Double"),
            ("-1e400", 0, "does not fit a Double"), ("1.7976931348623159e308", 0, "does not fit a Double"),
            ("NaN", 0, "expected a number"), ("Infinity", 0, "expected a number"),
            (#""NaN""#, 0, "found the string \"NaN\""), (#""1.5""#, 0, "found the string"),
            ("0x10", 1, "unexpected 'x' after the JSON value"), ("1 2", 2, "unexpected '2'"),
            ("0." + String(repeating: "0", count: 500) + "1", 0, "longer than 400 bytes"),
        ])
    func malformedNumbersRejected(json: String, offset: Int, reason: String) {
        expectRejected(json, at: offset, reason) { _ = try $0.readDouble() }
    }

    // MARK: Literals and kinds

    @Test("booleans, null and peek")
    func literalsAndPeek() throws {
        let json = #"[true, false, null, {}, [], "s", -1, 2.5]"#
        let kinds: [JSONValueKind] = [.bool, .bool, .null, .object, .array, .string, .number, .number]
        var seen: [JSONValueKind] = []
        try read(json) { reader in
            try reader.readArray { reader in
                let kind = try reader.peek()
                seen.append(kind)
                #expect(try reader.peek() == kind, "peek reads nothing")
                #expect(reader.readNullIfPresent() == (kind == .null))
                if kind != .null { try reader.skipValue() }
            }
        }
        #expect(seen == kinds)
        #expect(try read("true") { try $0.readBool() } == true)
        #expect(try read(" false") { try $0.readBool() } == false)
        expectRejected("tru", at: 0, "expected true or false, found 't'") { _ = try $0.readBool() }
        expectRejected("nul", at: 0, "expected a string, found 'n'") { reader in
            #expect(reader.readNullIfPresent() == false)
            _ = try reader.readString()
        }
        expectRejected("  ?", at: 2, "expected a value, found '?'") { _ = try $0.peek() }
        expectRejected("", at: 0, "expected a value, found end of input") { try $0.skipValue() }
    }

    // MARK: Objects and arrays

    @Test("keys compare with literals and strings, and match in a switch")
    func keys() throws {
        var seen: [String] = []
        try read(#"{"title":1,"body":2,"ti\u0074le2":3,"":4,"😀":5}"#) { reader in
            try reader.readObject { reader, key in
                switch key {
                case "title": #expect(key == String("title") && !(key == "titl") && !(key == "body"))
                case "body": #expect(key.string == "body")
                case "title2": #expect(key == "title2" && key.description == "title2")
                case "": #expect(key == String())
                case "😀": #expect(key == "😀" as String)
                default: Issue.record("unexpected key \(key)")
                }
                seen.append(key.string)
                try reader.skipValue()
            }
        }
        #expect(seen == ["title", "body", "title2", "", "😀"])
    }

    @Test(
        "duplicate keys are rejected at the second one, in any object at any depth",
        arguments: [
            (#"{"a":1,"b":2,"a":3}"#, 13, "duplicate key \"a\""),
            (#"{"a":1,"\u0061":2}"#, 7, "duplicate key \"a\""),
            (#"{"\u0061":1,"a":2}"#, 12, "duplicate key \"a\""),
            (#"{"a":{"b":1,"b":2}}"#, 12, "duplicate key \"b\""),
            (#"{"a":{"b":1},"b":2,"a":3}"#, 19, "duplicate key \"a\""),
            (#"[{"a":1},{"a":1,"a":2}]"#, 16, "duplicate key"),
        ])
    func duplicateKeysRejected(json: String, offset: Int, reason: String) {
        expectRejected(json, at: offset, reason) { try $0.skipValue() }
    }

    @Test("the same key in different objects is not a duplicate, and large objects are checked too")
    func duplicatesAcrossObjectsAndInLargeObjects() throws {
        try read(#"{"a":{"a":{"a":1},"b":[{"a":1,"b":2},{"a":1}]},"b":{"a":2}}"#) { try $0.skipValue() }
        let keys = (0..<100).map { "key\($0)" }
        let large = "{" + keys.map { "\"\($0)\":0" }.joined(separator: ",") + "}"
        var count = 0
        try read(large) { reader in
            try reader.readObject { reader, _ in
                count += 1
                try reader.skipValue()
            }
        }
        #expect(count == 100)
        let withDuplicate = String(large.dropLast()) + #","key3":1}"#
        expectRejected(withDuplicate, at: withDuplicate.utf8.count - 9, "duplicate key \"key3\"") { try $0.skipValue() }
        let escapedLate = String(large.dropLast()) + #","key\u0039":1}"#
        expectRejected(escapedLate, at: escapedLate.utf8.count - 14, "duplicate key \"key9\"") { try $0.skipValue() }
    }

    @Test(
        "structural errors name the offending byte",
        arguments: [
            (#"{"a" 1}"#, 5, "expected ':' after object key, found '1'"),
            (#"{"a":1 "b":2}"#, 7, "expected ',' or '}' after object member, found '\"'"),
            (#"{"a":1,}"#, 7, "expected a string key after ',', found '}'"),
            (#"{1:2}"#, 1, "expected a string key or '}', found '1'"),
            (#"{"a":1"#, 6, "unexpected end of input, expected ',' or '}'"),
            (#"[1,]"#, 3, "trailing comma"),
            (#"[1 2]"#, 3, "expected ',' or ']' after array element, found '2'"),
            (#"[1"#, 2, "unexpected end of input, expected ',' or ']'"),
            (#"[1}"#, 2, "expected ',' or ']'"),
            (#"{"a":]"#, 5, "expected a value, found ']'"),
            ("[\u{0}]", 1, "expected a value, found byte 0x00"),
        ])
    func structuralErrors(json: String, offset: Int, reason: String) {
        expectRejected(json, at: offset, reason) { try $0.skipValue() }
    }

    @Test("a body that reads no value is an error, not a silent skip")
    func bodyMustConsumeOneValue() {
        expectRejected(#"{"a":1}"#, at: 5, "the value of key \"a\" was not read") { try $0.readObject { _, _ in } }
        expectRejected(#"[null]"#, at: 1, "an array element was not read") { reader in
            try reader.readArray { _ = try $0.peek() }
        }
        expectRejected(#"[1,2]"#, at: 2, "expected an integer, found ','") { reader in
            try reader.readArray { reader in
                _ = try reader.readInt64()
                _ = try reader.readInt64()
            }
        }
    }

    @Test("skipValue skips complex values and leaves the reader at the next one")
    func skipValueSkipsComplexValues() throws {
        let json = #"[{"a":[1,2.5e-3,{"b":null,"c":[[],{}]}],"d":"x\"y]}\u00e9"}, true ,-1.5e3,"s",[[[]]],{"e":{}}]"#
        var index = 0
        try read(json) { reader in
            try reader.readArray { reader in
                switch index {
                case 1: #expect(try reader.readBool() == true)
                case 2: #expect(try reader.readDouble() == -1500)
                case 3: #expect(try reader.readString() == "s")
                default: try reader.skipValue()
                }
                index += 1
            }
        }
        #expect(index == 6)
    }

    @Test("finish() allows trailing whitespace and refuses anything else")
    func finishRefusesTrailingGarbage() throws {
        try read("{} \n\t\r ") { try $0.skipValue() }
        expectRejected("{} x", at: 3, "unexpected 'x' after the JSON value") { try $0.skipValue() }
        expectRejected("{}{}", at: 2, "unexpected '{' after the JSON value") { try $0.skipValue() }
        expectRejected("\"a\"\u{0}", at: 3, "unexpected byte 0x00 after the JSON value") { try $0.skipValue() }
        expectRejected("[]]", at: 2, "unexpected ']'") { try $0.skipValue() }
    }

    // MARK: Nesting

    @Test("256 levels of nesting read; a 257th is rejected at its bracket, also in 100,000 '['")
    func nestingLimit() throws {
        let deepest = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        try read(deepest) { try $0.skipValue() }
        try read(deepest) { try readNested(&$0) }
        let tooDeep = String(repeating: "[", count: 257) + String(repeating: "]", count: 257)
        expectRejected(tooDeep, at: 256, "nesting deeper than 256 levels") { try $0.skipValue() }
        let hostile = String(repeating: "[", count: 100_000)
        expectRejected(hostile, at: 256, "nesting deeper than 256 levels") { try $0.skipValue() }
        expectRejected(hostile, at: 256, "nesting deeper than 256 levels") { try readNested(&$0) }
        let objects = String(repeating: #"{"a":"#, count: 300) + "1" + String(repeating: "}", count: 300)
        expectRejected(objects, at: 256 * 5, "nesting deeper than 256 levels") { try $0.skipValue() }
    }

    // MARK: Damage

    @Test("every truncation of a record is an error naming an offset inside it, never a crash")
    func everyTruncationIsAnError() throws {
        let record = Array(Self.sampleRecord.utf8)
        let whole = try read(record) { try JSONValue.read(from: &$0) }
        #expect(whole == Self.sampleValue)
        for length in 0..<record.count {
            let prefix = Array(record[0..<length])
            for strategy in 0..<2 {
                do {
                    try read(prefix) { reader in
                        if strategy == 0 { _ = try JSONValue.read(from: &reader) } else { try reader.skipValue() }
                    }
                    Issue.record("the first \(length) bytes read without an error")
                } catch let error as JSONReadError {
                    #expect(error.offset <= length, "\(error)")
                }
            }
        }
    }

    @Test("5,000 mutations of a record and random byte strings never crash the reader")
    func mutationsNeverCrash() {
        var random = SeededGenerator(seed: 0x5EED_0003)
        let record = Array(Self.sampleRecord.utf8)
        let interesting: [UInt8] = Array(#"{}[]",:\-+.eE0123456789tfnu "#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xED, 0xF4, 0xFF]
        for round in 0..<5_000 {
            var bytes = record
            if round % 5 == 4 {
                bytes = (0..<Int(random.next() % 64)).map { _ in interesting[Int(random.next() % UInt64(interesting.count))] }
            } else {
                for _ in 0...Int(random.next() % 3) {
                    let index = Int(random.next() % UInt64(bytes.count))
                    let byte = interesting[Int(random.next() % UInt64(interesting.count))]
                    switch random.next() % 3 {
                    case 0: bytes[index] = byte
                    case 1: bytes.insert(byte, at: index)
                    default: bytes.remove(at: index)
                    }
                }
            }
            for strategy in 0..<2 {
                do {
                    try read(bytes) { reader in
                        if strategy == 0 { _ = try JSONValue.read(from: &reader) } else { try reader.skipValue() }
                    }
                } catch let error as JSONReadError {
                    #expect(error.offset >= 0 && error.offset <= bytes.count, "\(error)")
                } catch {
                    Issue.record("unexpected error \(error)")
                }
            }
        }
    }

    // MARK: Writer

    @Test("the writer places commas and colons itself, and splices raw JSON as one value")
    func writerStructure() {
        let json = encoded { writer in
            writer.beginObject()
            writer.key("a")
            writer.beginArray()
            writer.int(1)
            writer.beginObject()
            writer.key("b"); writer.bool(true)
            writer.key(String("c")); writer.null()
            writer.endObject()
            writer.beginArray(); writer.endArray()
            writer.endArray()
            writer.key("d"); writer.beginObject(); writer.endObject()
            writer.key("e\"q"); writer.string("x")
            writer.key("f"); writer.raw(#"{"x":[1,2]}"#.utf8)
            writer.key("g"); writer.beginArray(); writer.raw("7".utf8); writer.uint(8); writer.double(-0.5); writer.endArray()
            writer.endObject()
        }
        #expect(
            String(decoding: json, as: UTF8.self)
                == #"{"a":[1,{"b":true,"c":null},[]],"d":{},"e\"q":"x","f":{"x":[1,2]},"g":[7,8,-0.5]}"#)
    }

    @Test("200 random documents round-trip through the writer and the reader")
    func randomDocumentsRoundTrip() throws {
        var random = SeededGenerator(seed: 0x5EED_0004)
        for _ in 0..<200 {
            let value = JSONValue.random(using: &random, depth: 0)
            let json = encoded { value.write(to: &$0) }
            let decoded = try read(json) { try JSONValue.read(from: &$0) }
            #expect(decoded == value, "\(String(decoding: json, as: UTF8.self))")
        }
    }

    @Test("errors report absolute offsets and say where in their description")
    func errorsReportAbsoluteOffsets() {
        let bytes = Array(#"{"a":tru}"#.utf8)
        bytes.withUnsafeBytes { buffer in
            var reader = JSONReader(buffer, baseOffset: 1_000)
            #expect(reader.offset == 1_000)
            #expect(reader.buffer.baseAddress == buffer.baseAddress && reader.buffer.count == buffer.count)
            do {
                try reader.skipValue()
                Issue.record("read a broken object")
            } catch let error as JSONReadError {
                #expect(error == JSONReadError(offset: 1_005, reason: "expected true or false, found 't'"))
                #expect(error.description == "invalid JSON at byte 1005: expected true or false, found 't'")
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
    }

    // MARK: Fixtures

    static let sampleRecord = #"""
        {"k":"tx","tx":42,"time":786054321.5,"author":"imp\u00e9rter \"ü\" 😀\n","insert":[{"e":"Note","id":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","a":{"title":"Hi","createdAt":786054000,"ratio":-1.25e-7,"pinned":false,"tags":["a","b"],"none":null},"r":{"folder":null,"revisions":[]}}],"update":[],"delete":[{"e":"Note","id":"X","tombstone":{}}]}
        """#

    fileprivate static let sampleValue = JSONValue.object([
        ("k", .string("tx")), ("tx", .number(42)), ("time", .number(786054321.5)), ("author", .string("impérter \"ü\" 😀\n")),
        ("insert", .array([.object([
            ("e", .string("Note")), ("id", .string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F")),
            ("a", .object([
                ("title", .string("Hi")), ("createdAt", .number(786054000)), ("ratio", .number(-1.25e-7)),
                ("pinned", .bool(false)), ("tags", .array([.string("a"), .string("b")])), ("none", .null),
            ])),
            ("r", .object([("folder", .null), ("revisions", .array([]))])),
        ])])),
        ("update", .array([])),
        ("delete", .array([.object([("e", .string("Note")), ("id", .string("X")), ("tombstone", .object([]))])])),
    ])
}

// MARK: - Helpers

/// Reads `json` with `body`, then checks that nothing follows.
private func read<T>(_ json: [UInt8], _ body: (inout JSONReader) throws -> T) throws -> T {
    try json.withUnsafeBytes { buffer in
        var reader = JSONReader(buffer)
        let value = try body(&reader)
        try reader.finish()
        return value
    }
}

private func read<T>(_ json: String, _ body: (inout JSONReader) throws -> T) throws -> T {
    try read(Array(json.utf8), body)
}

/// Expects reading `json` with `body` (then `finish()`) to throw a `JSONReadError` at `offset` whose reason contains
/// `reason`.
private func expectRejected(
    _ json: [UInt8], at offset: Int, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (inout JSONReader) throws -> Void
) {
    do {
        try read(json, body)
        Issue.record("read without an error: \(String(decoding: json.prefix(80), as: UTF8.self))", sourceLocation: sourceLocation)
    } catch let error as JSONReadError {
        #expect(error.offset == offset, "\(error)", sourceLocation: sourceLocation)
        #expect(error.reason.contains(reason), "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

private func expectRejected(
    _ json: String, at offset: Int, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (inout JSONReader) throws -> Void
) {
    expectRejected(Array(json.utf8), at: offset, reason, sourceLocation: sourceLocation, body)
}

private func encoded(_ build: (inout JSONWriter) -> Void) -> [UInt8] {
    var writer = JSONWriter(reservingCapacity: 64)
    build(&writer)
    return writer.bytes
}

/// Arrays in arrays, read by nested calls of `readArray` as a decoder would.
private func readNested(_ reader: inout JSONReader) throws {
    try reader.readArray { try readNested(&$0) }
}

/// Any JSON value, to read documents whose shape a test does not know.
private indirect enum JSONValue: Equatable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    static func read(from reader: inout JSONReader) throws -> JSONValue {
        switch try reader.peek() {
        case .object:
            var members: [(String, JSONValue)] = []
            try reader.readObject { reader, key in members.append((key.string, try read(from: &reader))) }
            return .object(members)
        case .array:
            var elements: [JSONValue] = []
            try reader.readArray { elements.append(try read(from: &$0)) }
            return .array(elements)
        case .string: return .string(try reader.readString())
        case .number: return .number(try reader.readDouble())
        case .bool: return .bool(try reader.readBool())
        case .null:
            guard reader.readNullIfPresent() else { return .string(try reader.readString()) }
            return .null
        }
    }

    func write(to writer: inout JSONWriter) {
        switch self {
        case .object(let members):
            writer.beginObject()
            for (key, value) in members {
                writer.key(key)
                value.write(to: &writer)
            }
            writer.endObject()
        case .array(let elements):
            writer.beginArray()
            for element in elements { element.write(to: &writer) }
            writer.endArray()
        case .string(let string): writer.string(string)
        case .number(let number): writer.double(number)
        case .bool(let bool): writer.bool(bool)
        case .null: writer.null()
        }
    }

    static func random(using random: inout SeededGenerator, depth: Int) -> JSONValue {
        let alphabet = Array("aé\"\\\n\u{0}😀 z\t/".unicodeScalars)
        func string() -> String {
            String(String.UnicodeScalarView((0..<Int(random.next() % 12)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }))
        }
        switch random.next() % (depth < 4 ? 7 : 5) {
        case 0: return .string(string())
        case 1: return .number(Double(Int64(bitPattern: random.next()) % 1_000_000) / 8)
        case 2: return .bool(random.next() % 2 == 0)
        case 3: return .null
        case 4: return .number(Double(bitPattern: random.next() & 0x7FEF_FFFF_FFFF_FFFF))
        case 5:
            var keys = Set<String>()
            let members = (0..<Int(random.next() % 5)).compactMap { index -> (String, JSONValue)? in
                let key = string() + String(index)
                guard keys.insert(key).inserted else { return nil }
                return (key, JSONValue.random(using: &random, depth: depth + 1))
            }
            return .object(members)
        default: return .array((0..<Int(random.next() % 5)).map { _ in JSONValue.random(using: &random, depth: depth + 1) })
        }
    }

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { Array($0.0.utf8) == Array($1.0.utf8) && $0.1 == $1.1 }
        case (.array(let a), .array(let b)): return a == b
        case (.string(let a), .string(let b)): return Array(a.utf8) == Array(b.utf8)
        case (.number(let a), .number(let b)): return a.bitPattern == b.bitPattern
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        default: return false
        }
    }
}
