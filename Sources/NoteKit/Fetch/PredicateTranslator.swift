#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Compiles a Foundation `Predicate` into a ``FetchFilter`` by walking its expression tree.
///
/// Each supported expression type conforms to ``FilterTranslatable`` (it yields a Boolean filter) or
/// ``OperandTranslatable`` (it yields a value). A key path maps to a persisted property through the model's
/// metadata, so a predicate on `\.createdAt` reaches the same attribute an index was declared on. Anything else
/// (arithmetic, conditionals, multi-step key paths, methods NoteKit does not know) raises ``Untranslatable``,
/// and the context falls back to evaluating the predicate on model objects.
struct PredicateTranslator {
    let metadata: ModelMetadata
    let variable: PredicateExpressions.VariableID

    struct Untranslatable: Error {
        let reason: String
    }

    /// The filter for a Boolean expression.
    ///
    /// A part that reads nothing of the object (`searchText.isEmpty`, `words.contains("x")`, `limit > 2`) is
    /// computed once, here, whatever its form, so the rest of the predicate can still run in the store.
    func filter(_ expression: any PredicateExpression) throws -> FetchFilter {
        do {
            if let translatable = expression as? any FilterTranslatable {
                return try translatable.fetchFilter(self)
            }
            if let value = expression as? any OperandTranslatable, Self.isBoolean(expression) {
                // A bare Boolean property (`$0.isPinned`) or constant.
                return .compare(try value.fetchOperand(self), .equal, .value(.bool(true)))
            }
        } catch let untranslatable as Untranslatable {
            if let constant = Self.constantValue(of: expression) as? Bool { return .constant(constant) }
            throw untranslatable
        }
        if let constant = Self.constantValue(of: expression) as? Bool { return .constant(constant) }
        throw Untranslatable(reason: "\(type(of: expression)) is not supported by the store")
    }

    /// The operand for a value expression; a part that reads nothing of the object is computed once, here.
    func operand(_ expression: any PredicateExpression) throws -> FetchOperand {
        do {
            if let translatable = expression as? any OperandTranslatable {
                return try translatable.fetchOperand(self)
            }
        } catch let untranslatable as Untranslatable {
            if let constant = Self.constantValue(of: expression) { return .value(try Self.constant(constant)) }
            throw untranslatable
        }
        if let constant = Self.constantValue(of: expression) { return .value(try Self.constant(constant)) }
        throw Untranslatable(reason: "\(type(of: expression)) is not supported by the store")
    }

    /// The value of an expression that reads no variable, or nil when it reads one (or fails): evaluated with no
    /// bindings, an expression that reads the object throws at once.
    private static func constantValue(of expression: any PredicateExpression) -> Any? {
        func evaluate<E: PredicateExpression>(_ expression: E) -> Any? {
            guard let value = try? expression.evaluate(PredicateBindings()) else { return nil }
            return value
        }
        return evaluate(expression)
    }

    /// Whether an operand is a non-optional Boolean attribute, for which `!(x == b)` is `x == !b`.
    func isNonOptionalBool(_ operand: FetchOperand) -> Bool {
        guard case .attribute(let slot) = operand else { return false }
        return metadata.attributes[slot].codec?.type == .bool
    }

    private static func isBoolean<E: PredicateExpression>(_ expression: E) -> Bool { E.Output.self == Bool.self }

    /// The operand a key path of `metadata`'s type reads: an attribute, a relationship, or the identifier.
    static func operand(for keyPath: AnyKeyPath, in metadata: ModelMetadata) -> FetchOperand? {
        switch metadata.property(for: keyPath) {
        case .attribute(let slot)?:
            return .attribute(slot)
        case .relationship(let slot)?:
            return metadata.relationships[slot].isToMany ? .toMany(slot) : .toOne(slot)
        case nil:
            return keyPath == identifierKeyPath(metadata.type) ? .identifier : nil
        }
    }

    private static func identifierKeyPath<M: PersistentModel>(_ type: M.Type) -> AnyKeyPath { \M.persistentModelID }

    /// The stored form of a constant captured by a predicate.
    static func constant<V>(_ value: V) throws -> StoredValue {
        if let object = value as? ModelObject { return .uuid(object._$id.primaryKey) }
        if let id = value as? PersistentIdentifier { return .uuid(id.primaryKey) }
        if let optional = value as? any OptionalMarker {
            guard let wrapped = optional.wrappedAny else { return .null }
            if let object = wrapped as? ModelObject { return .uuid(object._$id.primaryKey) }
            if let id = wrapped as? PersistentIdentifier { return .uuid(id.primaryKey) }
        }
        if let objects = value as? [ModelObject] { return .array(objects.map { .uuid($0._$id.primaryKey) }) }
        guard let codec = AttributeCodecFactory.make(V.self) else {
            throw Untranslatable(reason: "a constant of type \(V.self) has no stored form")
        }
        return try codec.encode(value)
    }
}

/// An expression that compiles to a Boolean filter.
protocol FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter
}

/// An expression that compiles to a value operand.
protocol OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand
}

// MARK: - Boolean expressions

extension PredicateExpressions.Conjunction: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch (try translator.filter(lhs), try translator.filter(rhs)) {
        case (.constant(false), _), (_, .constant(false)): .constant(false)
        case (.constant(true), let other), (let other, .constant(true)): other
        case let (left, right): .and([left, right])
        }
    }
}

extension PredicateExpressions.Disjunction: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch (try translator.filter(lhs), try translator.filter(rhs)) {
        case (.constant(true), _), (_, .constant(true)): .constant(true)
        case (.constant(false), let other), (let other, .constant(false)): other
        case let (left, right): .or([left, right])
        }
    }
}

extension PredicateExpressions.Negation: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        switch try translator.filter(wrapped) {
        case .constant(let value):
            return .constant(!value)
        case let .compare(operand, .equal, .value(.bool(value))) where translator.isNonOptionalBool(operand):
            // `!$0.isPinned` is `$0.isPinned == false`, which an index can answer.
            return .compare(operand, .equal, .value(.bool(!value)))
        case let inner:
            return .not(inner)
        }
    }
}

extension PredicateExpressions.Equal: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .compare(try translator.operand(lhs), .equal, try translator.operand(rhs))
    }
}

extension PredicateExpressions.NotEqual: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .compare(try translator.operand(lhs), .notEqual, try translator.operand(rhs))
    }
}

extension PredicateExpressions.Comparison: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        let comparison: FetchFilter.ComparisonOperator = switch op {
        case .lessThan: .less
        case .lessThanOrEqual: .lessOrEqual
        case .greaterThan: .greater
        case .greaterThanOrEqual: .greaterOrEqual
        @unknown default: throw PredicateTranslator.Untranslatable(reason: "comparison \(op) is not supported")
        }
        return .compare(try translator.operand(lhs), comparison, try translator.operand(rhs))
    }
}

extension PredicateExpressions.CollectionContainsCollection: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        guard Base.Output.self == String.self else {
            throw PredicateTranslator.Untranslatable(reason: "contains(_:) is compiled for strings only")
        }
        return .text(try translator.operand(base), .contains, try translator.operand(other))
    }
}

extension PredicateExpressions.SequenceStartsWith: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        guard Base.Output.self == String.self else {
            throw PredicateTranslator.Untranslatable(reason: "starts(with:) is compiled for strings only")
        }
        return .text(try translator.operand(base), .startsWith, try translator.operand(prefix))
    }
}

extension PredicateExpressions.SequenceContains: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        let collection = try translator.operand(sequence)
        let member = try translator.operand(element)
        if case .value(.array(let values)) = collection { return .isIn(member, values) }
        return .contains(collection, element: member)
    }
}

extension PredicateExpressions.SearchContains: FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter {
        .text(try translator.operand(base), .searchContains, try translator.operand(other))
    }
}

// MARK: - Values

extension PredicateExpressions.Value: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        .value(try PredicateTranslator.constant(value))
    }
}

extension PredicateExpressions.NilLiteral: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand { .value(.null) }
}

extension PredicateExpressions.Variable: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        guard key == translator.variable else {
            throw PredicateTranslator.Untranslatable(reason: "a nested variable is not supported by the store")
        }
        return .identifier
    }
}

extension PredicateExpressions.KeyPath: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        guard let variable = root as? any VariableReading, variable.variableKey == translator.variable else {
            throw PredicateTranslator.Untranslatable(reason: "only key paths on the fetched model are compiled")
        }
        guard let operand = PredicateTranslator.operand(for: keyPath, in: translator.metadata) else {
            throw PredicateTranslator.Untranslatable(
                reason: "\(keyPath) is not a persisted property of \(translator.metadata.entityName)")
        }
        return operand
    }
}

extension PredicateExpressions.OptionalFlatMap: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        // `$0.folder?.persistentModelID` is the to-one relationship's target identifier.
        let wrappedOperand = try translator.operand(wrapped)
        guard case .toOne = wrappedOperand, let keyPath = transform as? any KeyPathReading,
              keyPath.isIdentifierKeyPath(on: variable.key) else {
            throw PredicateTranslator.Untranslatable(reason: "optional chaining is compiled for persistentModelID only")
        }
        return wrappedOperand
    }
}

extension PredicateExpressions.NilCoalesce: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        .coalesce(try translator.operand(lhs), try translator.operand(rhs))
    }
}

extension PredicateExpressions.ForcedUnwrap: OperandTranslatable {
    func fetchOperand(_ translator: PredicateTranslator) throws -> FetchOperand {
        .unwrap(try translator.operand(inner))
    }
}

/// Reads a predicate variable's key through an existential.
protocol VariableReading {
    var variableKey: PredicateExpressions.VariableID { get }
}

extension PredicateExpressions.Variable: VariableReading {
    var variableKey: PredicateExpressions.VariableID { key }
}

/// Recognises `variable.persistentModelID` inside an optional chain.
protocol KeyPathReading {
    func isIdentifierKeyPath(on variable: PredicateExpressions.VariableID) -> Bool
}

extension PredicateExpressions.KeyPath: KeyPathReading {
    func isIdentifierKeyPath(on variable: PredicateExpressions.VariableID) -> Bool {
        guard let root = root as? any VariableReading, root.variableKey == variable else { return false }
        return isPersistentModelIDKeyPath(keyPath)
    }

    private func isPersistentModelIDKeyPath(_ keyPath: AnyKeyPath) -> Bool {
        guard let model = type(of: keyPath).rootType as? any PersistentModel.Type else { return false }
        func identifierKeyPath<M: PersistentModel>(_: M.Type) -> AnyKeyPath { \M.persistentModelID }
        return keyPath == identifierKeyPath(model)
    }
}
