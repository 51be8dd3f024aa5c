#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// How each expression `#Predicate` builds compiles for the store. The order follows Foundation's
// `PredicateExpressions`: Boolean logic, comparisons, values and variables, key paths, optionals, arithmetic,
// conditionals, collections, ranges, strings, casts.

private typealias Translator = PredicateTranslator
private typealias Untranslatable = PredicateTranslator.Untranslatable

// MARK: - Boolean logic

extension PredicateExpressions.Conjunction: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch (try translator.filter(lhs), try translator.filter(rhs)) {
        case (.constant(false), _), (_, .constant(false)): .constant(false)
        case (.constant(true), let other), (let other, .constant(true)): other
        case let (left, right): .and(left.conjuncts + right.conjuncts)
        }
    }
}

extension PredicateExpressions.Disjunction: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch (try translator.filter(lhs), try translator.filter(rhs)) {
        case (.constant(true), _), (_, .constant(true)): .constant(true)
        case (.constant(false), let other), (let other, .constant(false)): other
        case let (left, right): .or([left, right])
        }
    }
}

extension PredicateExpressions.Negation: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch try translator.filter(wrapped) {
        case .constant(let value):
            return .constant(!value)
        case let .compare(operand, .equal, .value(.bool(value))) where translator.isNonOptionalBool(operand):
            // `!$0.isPinned` is `$0.isPinned == false`, which an index can answer.
            return .compare(operand, .equal, .value(.bool(!value)))
        case let .compare(lhs, .equal, rhs):
            return .compare(lhs, .notEqual, rhs)
        case let .compare(lhs, .notEqual, rhs):
            return .compare(lhs, .equal, rhs)
        case let inner:
            return .not(inner)
        }
    }
}

extension FilterTranslatable {
    /// A Boolean expression used as a value.
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.condition(try fetchFilter(translator)))
    }
}

// MARK: - Comparisons

extension PredicateExpressions.Equal: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .compare(try translator.operand(lhs), .equal, try translator.operand(rhs))
    }
}

extension PredicateExpressions.NotEqual: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .compare(try translator.operand(lhs), .notEqual, try translator.operand(rhs))
    }
}

extension PredicateExpressions.Comparison: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        let comparison: FetchFilter.ComparisonOperator = switch op {
        case .lessThan: .less
        case .lessThanOrEqual: .lessOrEqual
        case .greaterThan: .greater
        case .greaterThanOrEqual: .greaterOrEqual
        @unknown default: throw Untranslatable(reason: "comparison \(op) is not one the store knows")
        }
        return .compare(try translator.operand(lhs), comparison, try translator.operand(rhs))
    }
}

// MARK: - Values and variables

extension PredicateExpressions.Value: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.value(try PredicateTranslator.constant(value)))
    }
}

extension PredicateExpressions.NilLiteral: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated { .operand(.value(.null)) }
}

extension PredicateExpressions.Variable: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        switch translator.bindings[key] {
        case .object(let reference)?: return .object(reference)
        case let .value(operand, bound)?: return .operand(translator.read(operand, boundIn: bound))
        case .hidden?:
            throw Untranslatable(reason: "a condition on the targets of an object outside the enclosing condition that "
                                     + "reads that condition's element")
        case nil: throw Untranslatable(reason: "a variable the predicate does not declare")
        }
    }
}

// MARK: - Key paths

extension PredicateExpressions.KeyPath: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        switch try translator.translate(root) {
        case .object(let reference):
            let metadata = reference.metadata
            switch metadata.property(for: keyPath) {
            case .attribute(let slot)?:
                return .operand(translator.read(.attribute(slot), on: reference))
            case .relationship(let slot)? where metadata.relationships[slot].isToMany:
                return .targets(reference, slot: slot, filter: nil)
            case .relationship(let slot)?:
                return .object(translator.hop(reference, slot))
            case nil where keyPath == PredicateTranslator.identifierKeyPath(metadata.type):
                return .operand(translator.identifier(of: reference))
            case nil:
                throw Untranslatable(reason: "a key path to a computed or @Transient property of "
                                         + "\(metadata.entityName) (\(keyPath)), known only to the object")
            }
        case let .targets(reference, slot, filter):
            switch CollectionKeyPath.kind(of: keyPath, on: Root.Output.self) {
            case .count?:
                let count: FetchOperand = filter.map { .countWhere(slot, $0) } ?? .relationshipCount(slot)
                return .operand(translator.read(count, on: reference))
            case .isEmpty?:
                let holds: FetchFilter = filter.map { .any(slot, $0) }
                    ?? .compare(.relationshipCount(slot), .greater, .value(.int(0)))
                return .operand(translator.read(.condition(.not(holds)), on: reference))
            default:
                throw Untranslatable(reason: "\(keyPath) of a to-many relationship: count and isEmpty are compiled")
            }
        case .operand(let operand):
            switch CollectionKeyPath.kind(of: keyPath, on: Root.Output.self) {
            case .count?:
                return .operand(.count(operand))
            case .isEmpty?:
                return .operand(.condition(.compare(.count(operand), .equal, .value(.int(0)))))
            case .first?:
                return .operand(.conditional(.compare(.count(operand), .equal, .value(.int(0))), .value(.null),
                                             .subscripted(operand, .value(.int(0)))))
            case .last?:
                return .operand(.conditional(.compare(.count(operand), .equal, .value(.int(0))), .value(.null),
                                             .subscripted(operand, .arithmetic(.count(operand), .subtract,
                                                                               .value(.int(1))))))
            case nil:
                throw Untranslatable(reason: "\(keyPath) of a stored value: count, isEmpty, first and last are compiled")
            }
        }
    }
}

/// The key paths of collections and strings a predicate may read: `count`, `isEmpty`, `first`, `last`.
enum CollectionKeyPath {
    enum Kind { case count, isEmpty, first, last }

    /// Which one `keyPath` is, on values of type `root`.
    static func kind(of keyPath: AnyKeyPath, on root: Any.Type) -> Kind? {
        (root as? any CollectionKeyPathReading.Type)?.collectionKeyPath(keyPath)
    }
}

/// A type whose `count`, `isEmpty`, `first` and `last` key paths are known by identity.
protocol CollectionKeyPathReading {
    static func collectionKeyPath(_ keyPath: AnyKeyPath) -> CollectionKeyPath.Kind?
}

extension Array: CollectionKeyPathReading {
    static func collectionKeyPath(_ keyPath: AnyKeyPath) -> CollectionKeyPath.Kind? {
        switch keyPath {
        case \Self.count: .count
        case \Self.isEmpty: .isEmpty
        case \Self.first: .first
        case \Self.last: .last
        default: nil
        }
    }
}

extension String: CollectionKeyPathReading {
    static func collectionKeyPath(_ keyPath: AnyKeyPath) -> CollectionKeyPath.Kind? {
        switch keyPath {
        case \Self.count, \Self.utf8.count: keyPath == \Self.count ? .count : nil
        case \Self.isEmpty: .isEmpty
        default: nil
        }
    }
}

extension Dictionary: CollectionKeyPathReading {
    static func collectionKeyPath(_ keyPath: AnyKeyPath) -> CollectionKeyPath.Kind? {
        switch keyPath {
        case \Self.count: .count
        case \Self.isEmpty: .isEmpty
        default: nil
        }
    }
}

extension Set: CollectionKeyPathReading {
    static func collectionKeyPath(_ keyPath: AnyKeyPath) -> CollectionKeyPath.Kind? {
        switch keyPath {
        case \Self.count: .count
        case \Self.isEmpty: .isEmpty
        default: nil
        }
    }
}

// MARK: - Optionals

extension PredicateExpressions.OptionalFlatMap: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        switch try translator.translate(wrapped) {
        case .object(let reference):
            // `$0.folder.flatMap { $0.name }` (what `$0.folder?.name` is): the transform reads the target.
            let inner = translator.binding(variable.key, to: .object(reference))
            let result = try inner.translate(transform)
            guard case .operand(let operand) = result else { return result }
            // Reading through the relationship already gives nil without a target; anything else is made so.
            let present = translator.identifier(of: reference)
            if reference.hops.last.map({ operand.isRead(through: $0.slot, prefix: reference, translator) }) == true {
                return .operand(operand)
            }
            return .operand(.conditional(.compare(present, .equal, .value(.null)), .value(.null), operand))
        case .operand(let value):
            let inner = translator.binding(variable.key, to: .value(value, scope: translator.scope))
            let operand = try inner.operand(transform)
            if operand == value { return .operand(value) }
            return .operand(.conditional(.compare(value, .equal, .value(.null)), .value(.null), operand))
        case .targets:
            throw Untranslatable(reason: "optional chaining on a to-many relationship")
        }
    }
}

extension FetchOperand {
    /// Whether the operand reads through the last hop of `reference` (so that it is nil when that relationship has
    /// no target).
    fileprivate func isRead(through slot: Int, prefix reference: PredicateTranslator.ObjectReference,
                            _ translator: PredicateTranslator) -> Bool {
        var holder = reference
        holder.hops.removeLast()
        let marker = FetchOperand.value(.string("\u{0}hop"))
        let expected = translator.read(.related(slot, marker, required: false), on: holder)
        return matchesShape(expected)
    }

    /// Whether the operand has the same structure as `pattern` down to the marker, whatever is below it.
    private func matchesShape(_ pattern: FetchOperand) -> Bool {
        switch (self, pattern) {
        case (_, .value(.string("\u{0}hop"))): return true
        case let (.related(a, x, ra), .related(b, y, rb)): return a == b && ra == rb && x.matchesShape(y)
        case let (.scope(a, x), .scope(b, y)): return a == b && x.matchesShape(y)
        default: return false
        }
    }
}

extension PredicateExpressions.NilCoalesce: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.coalesce(try translator.operand(lhs), try translator.operand(rhs)))
    }
}

extension PredicateExpressions.ForcedUnwrap: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        switch try translator.translate(inner) {
        case .object(var reference):
            // `$0.folder!.name`: reading through the relationship requires a target.
            if !reference.hops.isEmpty { reference.hops[reference.hops.count - 1].required = true }
            return .object(reference)
        case .operand(let operand):
            return .operand(.unwrap(operand))
        case .targets:
            throw Untranslatable(reason: "a forced unwrap of a to-many relationship")
        }
    }
}

// MARK: - Arithmetic and conditionals

extension PredicateExpressions.Arithmetic: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        let arithmetic: FetchOperand.ArithmeticOperator = switch op {
        case .add: .add
        case .subtract: .subtract
        case .multiply: .multiply
        @unknown default: throw Untranslatable(reason: "arithmetic operator \(op) is not one the store knows")
        }
        return .operand(.arithmetic(try translator.operand(lhs), arithmetic, try translator.operand(rhs)))
    }
}

extension PredicateExpressions.FloatDivision: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.arithmetic(try translator.operand(lhs), .divide, try translator.operand(rhs)))
    }
}

extension PredicateExpressions.IntDivision: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.arithmetic(try translator.operand(lhs), .quotient, try translator.operand(rhs)))
    }
}

extension PredicateExpressions.IntRemainder: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.arithmetic(try translator.operand(lhs), .remainder, try translator.operand(rhs)))
    }
}

extension PredicateExpressions.UnaryMinus: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.negated(try translator.operand(wrapped)))
    }
}

extension PredicateExpressions.Conditional: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.conditional(try translator.filter(test), try translator.operand(trueBranch),
                              try translator.operand(falseBranch)))
    }
}

// MARK: - Collections

extension PredicateExpressions.SequenceContains: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        let member = try translator.operand(element)
        switch try translator.translate(sequence) {
        case let .targets(reference, slot, nil):
            // `$0.tags.contains(tag)` by identifier, from the stored references alone.
            let found = try translator.lift(member, into: reference, depth: 0)
            return try translator.filter(from: .operand(translator.read(.condition(
                .contains(.toMany(slot), element: found)), on: reference)), of: self)
        case let .targets(reference, slot, filter?):
            let identity = FetchFilter.compare(.identifier, .equal, try translator.lift(member, into: reference, depth: 1))
            return try translator.filter(from: .operand(translator.read(.condition(.any(slot, .and([filter, identity]))),
                                                                        on: reference)), of: self)
        case .object:
            throw Untranslatable(reason: "contains(_:) on an object")
        case .operand(.value(.array(let values))):
            return .isIn(member, values)
        case .operand(let collection):
            return .contains(collection, element: member)
        }
    }
}

extension PredicateExpressions.SequenceContainsWhere: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch try translator.translate(sequence) {
        case let .targets(reference, slot, filter):
            let test = try translator.inTargets(of: reference, slot: slot, variable: variable.key).filter(self.test)
            let condition: FetchFilter = .any(slot, filter.map { .and($0.conjuncts + test.conjuncts) } ?? test)
            return try translator.filter(from: .operand(translator.read(.condition(condition), on: reference)),
                                         of: self)
        case .operand(let collection):
            return .anyElement(collection, try translator.inElements(variable: variable.key).filter(test))
        case .object:
            throw Untranslatable(reason: "contains(where:) on an object")
        }
    }
}

extension PredicateExpressions.SequenceAllSatisfy: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch try translator.translate(sequence) {
        case let .targets(reference, slot, filter):
            let test = try translator.inTargets(of: reference, slot: slot, variable: variable.key).filter(self.test)
            let condition: FetchFilter = .all(slot, filter.map { .or([.not($0), test]) } ?? test)
            return try translator.filter(from: .operand(translator.read(.condition(condition), on: reference)),
                                         of: self)
        case .operand(let collection):
            return .allElements(collection, try translator.inElements(variable: variable.key).filter(test))
        case .object:
            throw Untranslatable(reason: "allSatisfy on an object")
        }
    }
}

extension PredicateExpressions.Filter: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        switch try translator.translate(sequence) {
        case let .targets(reference, slot, existing):
            let test = try translator.inTargets(of: reference, slot: slot, variable: variable.key).filter(filter)
            return .targets(reference, slot: slot, filter: existing.map { .and($0.conjuncts + test.conjuncts) } ?? test)
        case .operand(let collection):
            return .operand(.filteredElements(collection, try translator.inElements(variable: variable.key).filter(filter)))
        case .object:
            throw Untranslatable(reason: "filter on an object")
        }
    }
}

extension PredicateExpressions.SequenceMinimum: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.minimum(try translator.operand(elements)))
    }
}

extension PredicateExpressions.SequenceMaximum: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.maximum(try translator.operand(elements)))
    }
}

extension PredicateExpressions.SequenceStartsWith: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .text(try translator.operand(base), .startsWith, try translator.operand(prefix))
    }
}

extension PredicateExpressions.CollectionContainsCollection: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .text(try translator.operand(base), .contains, try translator.operand(other))
    }
}

extension PredicateExpressions.CollectionIndexSubscript: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.subscripted(try translator.operand(wrapped), try translator.operand(index)))
    }
}

extension PredicateExpressions.CollectionRangeSubscript: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        let bounds = try RangeBounds.of(range, translator)
        guard let lower = bounds.lower, let upper = bounds.upper else {
            throw Untranslatable(reason: "a subscript by a range without both bounds")
        }
        return .operand(.slice(try translator.operand(wrapped), lower, upper, closed: bounds.closed))
    }
}

extension PredicateExpressions.DictionaryKeySubscript: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.subscripted(try translator.operand(wrapped), try translator.operand(key)))
    }
}

extension PredicateExpressions.DictionaryKeyDefaultValueSubscript: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.subscriptedWithDefault(try translator.operand(wrapped), key: try translator.operand(key),
                                         default: try translator.operand(`default`)))
    }
}

// MARK: - Ranges

extension PredicateExpressions.RangeExpressionContains: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        let bounds = try RangeBounds.of(range, translator)
        let value = try translator.operand(element)
        var parts: [FetchFilter] = []
        if let lower = bounds.lower { parts.append(.compare(value, .greaterOrEqual, lower)) }
        if let upper = bounds.upper { parts.append(.compare(value, bounds.closed ? .lessOrEqual : .less, upper)) }
        return parts.count == 1 ? parts[0] : .and(parts)
    }
}

extension PredicateExpressions.Range: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        throw Untranslatable(reason: "a range used as a value (ranges are compiled in contains and subscripts)")
    }
}

extension PredicateExpressions.ClosedRange: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        throw Untranslatable(reason: "a range used as a value (ranges are compiled in contains and subscripts)")
    }
}

/// The bounds of a range in a predicate: a `lower..<upper` or `lower...upper` expression, or a range captured as a
/// constant (one of the standard library's range types).
struct RangeBounds {
    var lower: FetchOperand?
    var upper: FetchOperand?
    var closed: Bool

    static func of(_ range: any PredicateExpression, _ translator: PredicateTranslator) throws -> RangeBounds {
        if let range = range as? any RangeExpressionBounds {
            return try range.bounds(translator)
        }
        if let constant = PredicateTranslator.constantValue(of: range) as? any StoredRange {
            return try constant.storedBounds()
        }
        throw Untranslatable(reason: "a range that is neither a..<b, a...b nor a constant range")
    }
}

/// A range expression whose bounds are expressions.
protocol RangeExpressionBounds {
    func bounds(_ translator: PredicateTranslator) throws -> RangeBounds
}

extension PredicateExpressions.Range: RangeExpressionBounds {
    func bounds(_ translator: PredicateTranslator) throws -> RangeBounds {
        RangeBounds(lower: try translator.operand(lower), upper: try translator.operand(upper), closed: false)
    }
}

extension PredicateExpressions.ClosedRange: RangeExpressionBounds {
    func bounds(_ translator: PredicateTranslator) throws -> RangeBounds {
        RangeBounds(lower: try translator.operand(lower), upper: try translator.operand(upper), closed: true)
    }
}

/// A range captured by a predicate, with its bounds in stored form.
protocol StoredRange {
    func storedBounds() throws -> RangeBounds
}

extension Range: StoredRange {
    func storedBounds() throws -> RangeBounds {
        RangeBounds(lower: .value(try PredicateTranslator.constant(lowerBound)),
                    upper: .value(try PredicateTranslator.constant(upperBound)), closed: false)
    }
}

extension ClosedRange: StoredRange {
    func storedBounds() throws -> RangeBounds {
        RangeBounds(lower: .value(try PredicateTranslator.constant(lowerBound)),
                    upper: .value(try PredicateTranslator.constant(upperBound)), closed: true)
    }
}

extension PartialRangeFrom: StoredRange {
    func storedBounds() throws -> RangeBounds {
        RangeBounds(lower: .value(try PredicateTranslator.constant(lowerBound)), upper: nil, closed: false)
    }
}

extension PartialRangeUpTo: StoredRange {
    func storedBounds() throws -> RangeBounds {
        RangeBounds(lower: nil, upper: .value(try PredicateTranslator.constant(upperBound)), closed: false)
    }
}

extension PartialRangeThrough: StoredRange {
    func storedBounds() throws -> RangeBounds {
        RangeBounds(lower: nil, upper: .value(try PredicateTranslator.constant(upperBound)), closed: true)
    }
}

// MARK: - Strings

extension PredicateExpressions.StringContainsRegex: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        guard let constant = PredicateTranslator.constantValue(of: regex) else {
            throw Untranslatable(reason: "a regular expression that is not a constant")
        }
        let pattern: String
        if let regex = constant as? PredicateExpressions.PredicateRegex {
            pattern = regex.stringRepresentation
        } else if let regex = constant as? any RegexComponent,
                  let literal = PredicateExpressions.PredicateRegex(regex)?.stringRepresentation {
            pattern = literal
        } else {
            throw Untranslatable(reason: "a regular expression without a literal pattern")
        }
        return .containsMatch(try translator.operand(subject), pattern: pattern)
    }
}

extension PredicateExpressions.SearchContains: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .text(try translator.operand(base), .searchContains, try translator.operand(other))
    }
}

extension PredicateExpressions.TextCaseInsensitiveCompare: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.textComparison(try translator.operand(root), try translator.operand(other), .caseInsensitive))
    }
}

extension PredicateExpressions.TextLocalizedCompare: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        .operand(.textComparison(try translator.operand(root), try translator.operand(other), .localized))
    }
}

// MARK: - Casts and nested expressions

extension PredicateExpressions.TypeCheck: FilterTranslatable, StoreTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        if Input.Output.self == Desired.self { return .constant(true) }
        if Input.Output.self == Desired?.self {
            return .compare(try translator.operand(input), .notEqual, .value(.null))
        }
        throw Untranslatable(reason: "a type check of \(Input.Output.self) as \(Desired.self)")
    }
}

extension PredicateExpressions.ConditionalCast: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        if Input.Output.self == Desired.self || Input.Output.self == Desired?.self { return try translator.translate(input) }
        throw Untranslatable(reason: "a cast of \(Input.Output.self) to \(Desired.self)")
    }
}

extension PredicateExpressions.ForceCast: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        if Input.Output.self == Desired.self { return try translator.translate(input) }
        if Input.Output.self == Desired?.self { return .operand(.unwrap(try translator.operand(input))) }
        throw Untranslatable(reason: "a cast of \(Input.Output.self) to \(Desired.self)")
    }
}

extension PredicateExpressions.ExpressionEvaluate: StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated {
        throw Untranslatable(reason: "an #Expression evaluated inside the predicate (its own variables are not "
                                 + "compiled; write its body in the predicate instead)")
    }
}
