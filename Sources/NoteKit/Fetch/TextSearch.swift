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
