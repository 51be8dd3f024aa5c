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
        public typealias Output = Bool
        public let base: Base
        public let other: Other

        public init(base: Base, other: Other) {
            self.base = base
            self.other = other
        }

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
