// Case and diacritic folding is not in FoundationEssentials; this one file needs Foundation proper.
import Foundation

/// NoteKit's replacement for `localizedStandardContains`, which Foundation does not offer inside predicates on
/// Linux.
///
/// `#Predicate { $0.title.localizedStandardContains(query) }` compiles unchanged: NoteKit supplies the
/// expression the macro builds, and it matches the way users expect a search field to match: case-insensitive
/// and diacritic-insensitive ("creme" finds "Crème", "STRASSE" finds "Straße"). A store evaluates it on stored
/// strings without loading model objects; it cannot use an index, so it reads every candidate record.
public enum TextSearch {
    /// Whether `text` contains `query`, ignoring case and diacritics. An empty query matches everything.
    ///
    /// - Complexity: O(text length × query length) in the worst case.
    public static func contains(_ text: some StringProtocol, _ query: some StringProtocol) -> Bool {
        if query.isEmpty { return true }
        return text.range(of: query, options: [.caseInsensitive, .diacriticInsensitive]) != nil
    }

    /// A query made ready to search many texts: when it is ASCII, its bytes folded to lower case, so that an ASCII
    /// text is searched byte by byte (where ``contains(_:_:)`` and a byte search agree); any other text takes
    /// ``contains(_:_:)``.
    struct Needle {
        let query: String
        /// The query's bytes in lower case, when it is ASCII.
        let folded: [UInt8]?

        init(_ query: String) {
            self.query = query
            let bytes = Array(query.utf8)
            folded = bytes.allSatisfy { $0 < 0x80 } ? bytes.map(ByteSearch.lower) : nil
        }

        /// Whether the stored UTF-8 `text` contains the query ignoring case and diacritics; nil when only
        /// ``TextSearch/contains(_:_:)`` can tell (the query or the text is not ASCII).
        func isContained(in text: UnsafeRawBufferPointer) -> Bool? {
            guard let folded else { return nil }
            if folded.isEmpty { return true }
            return ByteSearch.contains(text, folded, foldingCase: true)
        }
    }

    /// `caseInsensitiveCompare(_:)` or `localizedCompare(_:)` of two strings, as Foundation computes them.
    static func compare(_ a: String, _ b: String, _ kind: FetchOperand.TextComparison) -> ComparisonResult {
        switch kind {
        case .caseInsensitive: a.caseInsensitiveCompare(b)
        case .localized: a.localizedCompare(b)
        }
    }
}

/// Searching stored UTF-8 bytes for a run of bytes.
enum ByteSearch {
    /// An ASCII letter in lower case; any other byte as it is.
    @inline(__always)
    static func lower(_ byte: UInt8) -> UInt8 { byte &- 0x41 < 26 ? byte | 0x20 : byte }

    /// Whether `text` contains `needle` (with `foldingCase`, comparing ASCII letters in lower case: `needle` must
    /// be lower case then). Returns nil when `foldingCase` and `text` holds a byte that is not ASCII, where folding
    /// bytes is not folding characters.
    static func contains(_ text: UnsafeRawBufferPointer, _ needle: [UInt8], foldingCase: Bool) -> Bool? {
        let n = needle.count
        guard n > 0 else { return true }
        guard text.count >= n else {
            if foldingCase && text.contains(where: { $0 >= 0x80 }) { return nil }
            return false
        }
        return needle.withUnsafeBufferPointer { needle -> Bool? in
            let first = needle[0]
            let firstUpper = foldingCase && first &- 0x61 < 26 ? first & ~0x20 : first
            let last = text.count - n
            var i = 0
            while i <= last {
                let byte = text[i]
                if foldingCase && byte >= 0x80 { return nil }
                if byte == first || byte == firstUpper {
                    var j = 1
                    while j < n {
                        let candidate = text[i + j]
                        if foldingCase && candidate >= 0x80 { return nil }
                        if (foldingCase ? lower(candidate) : candidate) != needle[j] { break }
                        j += 1
                    }
                    if j == n { return true }
                }
                i += 1
            }
            if foldingCase {
                // The bytes after the last place the needle could start may still be other than ASCII.
                for k in (last + 1)..<text.count where text[k] >= 0x80 { return nil }
            }
            return false
        }
    }
}

extension PredicateExpressions {
    /// The expression `#Predicate` builds for `localizedStandardContains(_:)` (see ``TextSearch``).
    public struct SearchContains<Base: PredicateExpression, Other: PredicateExpression>: PredicateExpression
    where Base.Output: StringProtocol, Other.Output: StringProtocol {
        /// A containment test is a `Bool`.
        public typealias Output = Bool
        /// The expression of the string searched in (the receiver of `localizedStandardContains`).
        public let base: Base
        /// The expression of the string searched for.
        public let other: Other

        /// An expression that tests whether `base` contains `other`, ignoring case and diacritics.
        public init(base: Base, other: Other) {
            self.base = base
            self.other = other
        }

        /// Whether the searched string contains the query, by ``TextSearch/contains(_:_:)``.
        ///
        /// - Throws: whatever evaluating `base` or `other` throws.
        /// - Complexity: O(text length × query length) in the worst case.
        public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
            TextSearch.contains(try base.evaluate(bindings), try other.evaluate(bindings))
        }
    }

    /// Builds ``SearchContains``; `#Predicate` calls it for `localizedStandardContains(_:)`.
    public static func build_localizedStandardContains<Base, Other>(_ base: Base, _ other: Other)
        -> SearchContains<Base, Other> {
        SearchContains(base: base, other: other)
    }
}

extension PredicateExpressions {
    /// The expression `#Predicate` builds for `caseInsensitiveCompare(_:)` (Foundation has it on Apple platforms
    /// only): a `ComparisonResult`, as Foundation's `caseInsensitiveCompare` gives it.
    public struct TextCaseInsensitiveCompare<Root: PredicateExpression, Other: PredicateExpression>: PredicateExpression
    where Root.Output: StringProtocol, Other.Output: StringProtocol {
        /// A comparison's result.
        public typealias Output = ComparisonResult
        /// The expression of the receiver.
        public let root: Root
        /// The expression of the string compared with.
        public let other: Other

        /// An expression comparing `root` with `other`, ignoring case.
        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        /// How the strings compare, ignoring case.
        ///
        /// - Throws: whatever evaluating `root` or `other` throws.
        public func evaluate(_ bindings: PredicateBindings) throws -> ComparisonResult {
            String(try root.evaluate(bindings)).caseInsensitiveCompare(String(try other.evaluate(bindings)))
        }
    }

    /// The expression `#Predicate` builds for `localizedCompare(_:)` (Foundation has it on Apple platforms only): a
    /// `ComparisonResult` in the current locale, as Foundation's `localizedCompare` gives it.
    public struct TextLocalizedCompare<Root: PredicateExpression, Other: PredicateExpression>: PredicateExpression
    where Root.Output: StringProtocol, Other.Output: StringProtocol {
        /// A comparison's result.
        public typealias Output = ComparisonResult
        /// The expression of the receiver.
        public let root: Root
        /// The expression of the string compared with.
        public let other: Other

        /// An expression comparing `root` with `other` in the current locale.
        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        /// How the strings compare in the current locale.
        ///
        /// - Throws: whatever evaluating `root` or `other` throws.
        public func evaluate(_ bindings: PredicateBindings) throws -> ComparisonResult {
            String(try root.evaluate(bindings)).localizedCompare(String(try other.evaluate(bindings)))
        }
    }

    /// Builds ``TextCaseInsensitiveCompare``; `#Predicate` calls it for `caseInsensitiveCompare(_:)`.
    public static func build_caseInsensitiveCompare<Root, Other>(_ root: Root, _ other: Other)
        -> TextCaseInsensitiveCompare<Root, Other> {
        TextCaseInsensitiveCompare(root: root, other: other)
    }

    /// Builds ``TextLocalizedCompare``; `#Predicate` calls it for `localizedCompare(_:)`.
    public static func build_localizedCompare<Root, Other>(_ root: Root, _ other: Other)
        -> TextLocalizedCompare<Root, Other> {
        TextLocalizedCompare(root: root, other: other)
    }
}

extension PredicateExpressions.TextCaseInsensitiveCompare: Sendable where Root: Sendable, Other: Sendable {}
extension PredicateExpressions.TextCaseInsensitiveCompare: Codable where Root: Codable, Other: Codable {}
extension PredicateExpressions.TextCaseInsensitiveCompare: StandardPredicateExpression
where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}
extension PredicateExpressions.TextLocalizedCompare: Sendable where Root: Sendable, Other: Sendable {}
extension PredicateExpressions.TextLocalizedCompare: Codable where Root: Codable, Other: Codable {}
extension PredicateExpressions.TextLocalizedCompare: StandardPredicateExpression
where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}

extension PredicateExpressions.SearchContains: Sendable where Base: Sendable, Other: Sendable {}
extension PredicateExpressions.SearchContains: Codable where Base: Codable, Other: Codable {}
extension PredicateExpressions.SearchContains: StandardPredicateExpression
where Base: StandardPredicateExpression, Other: StandardPredicateExpression {}

/// A total order on strings that agrees with Swift's `==` (canonical equivalence): the lexicographic order of their
/// NFC Unicode scalars.
///
/// Swift's own `<` is meant to be exactly that, but Swift 6.3.1 gets it wrong for some mixes of decomposed and
/// precomposed characters (`"e\u{301}"` is neither below nor above `"\u{E9}Z"`), which breaks binary search in an
/// index. ASCII strings, by far the most common, take a byte comparison.
enum StringOrder {
    static func compare(_ lhs: String, _ rhs: String) -> Int {
        var lhs = lhs, rhs = rhs
        if let order = asciiOrder(&lhs, &rhs) { return order }
        let left = lhs.precomposedStringWithCanonicalMapping.unicodeScalars
        let right = rhs.precomposedStringWithCanonicalMapping.unicodeScalars
        var a = left.makeIterator(), b = right.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?) where x != y: return x.value < y.value ? -1 : 1
            default: continue
            }
        }
    }

    /// The byte order when both strings are ASCII (where it is the scalar order), else nil.
    private static func asciiOrder(_ lhs: inout String, _ rhs: inout String) -> Int? {
        lhs.withUTF8 { a in
            rhs.withUTF8 { b -> Int? in
                for byte in a where byte >= 0x80 { return nil }
                for byte in b where byte >= 0x80 { return nil }
                let common = min(a.count, b.count)
                let order = common == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, common)
                if order != 0 { return order < 0 ? -1 : 1 }
                return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
            }
        }
    }
}
