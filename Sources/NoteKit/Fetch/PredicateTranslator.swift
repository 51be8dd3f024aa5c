#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Compiles a Foundation `Predicate` into a ``FetchFilter`` by walking its expression tree.
///
/// Every expression type of Foundation's `PredicateExpressions` (and NoteKit's own `localizedStandardContains`,
/// `caseInsensitiveCompare` and `localizedCompare`) conforms to ``StoreTranslatable``. A variable denotes an object
/// (the fetched one, one reached through to-one relationships, a target of a to-many relationship inside a
/// condition on it) or a value (an unwrapped optional, an element of a collection): key paths on an object map to
/// its persisted properties through the model's metadata, so a predicate on `\.createdAt` reaches the attribute an
/// index was declared on. A part that reads nothing of the objects (`searchText.isEmpty`, `limit > 2`) is computed
/// once, here.
///
/// What cannot be compiled throws ``Untranslatable``, saying exactly which part and why: a key path to a property
/// the store does not hold (computed or `@Transient`), an `#Expression` evaluated inside the predicate, a cast to
/// another type, a range or a regular expression that is not a constant. The context then narrows in the store by
/// whatever conjuncts did compile and evaluates the predicate on the objects left (see ``FetchPlan``).
struct PredicateTranslator {
    /// The entity fetched.
    let metadata: ModelMetadata
    /// What each variable of the predicate denotes.
    private(set) var bindings: [PredicateExpressions.VariableID: Binding] = [:]
    /// The scope the expression being translated is evaluated in (see ``FetchFilter``).
    private(set) var scope = 0

    struct Untranslatable: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    /// An object a variable or key path denotes: the object of scope `scope`, or one reached from it through the
    /// to-one relationships `hops` (`required` when a forced unwrap reached it).
    struct ObjectReference {
        var metadata: ModelMetadata
        var scope: Int
        var hops: [(slot: Int, required: Bool)] = []
    }

    /// What a variable denotes.
    enum Binding {
        case object(ObjectReference)
        /// A value computed in scope `scope`.
        case value(FetchOperand, scope: Int)
        /// A variable of a scope a condition on another object's relationship cannot reach.
        case hidden

        var scope: Int {
            switch self {
            case .object(let reference): reference.scope
            case .value(_, let scope): scope
            case .hidden: Int.max
            }
        }
    }

    /// What an expression compiles to.
    enum Translated {
        /// A value.
        case operand(FetchOperand)
        /// An object, or none (a to-one relationship without a target).
        case object(ObjectReference)
        /// The targets of the to-many relationship `slot` of an object, those matching `filter` when there is one
        /// (compiled in the scope one above the object's).
        case targets(ObjectReference, slot: Int, filter: FetchFilter?)
    }

    init(metadata: ModelMetadata, variable: PredicateExpressions.VariableID) {
        self.metadata = metadata
        bindings[variable] = .object(ObjectReference(metadata: metadata, scope: 0))
    }

    // MARK: Translating

    /// What `expression` compiles to: constants are folded first when translation fails.
    func translate(_ expression: any PredicateExpression) throws -> Translated {
        do {
            guard let translatable = expression as? any StoreTranslatable else {
                throw Untranslatable(reason: "\(Self.name(of: expression)) is not an expression the store knows")
            }
            return try translatable.translate(self)
        } catch let untranslatable as Untranslatable {
            // A part that reads no variable is computed once, whatever its form.
            if let constant = Self.constantValue(of: expression) {
                do { return .operand(.value(try Self.constant(any: constant))) } catch { throw untranslatable }
            }
            throw untranslatable
        }
    }

    /// The filter for a Boolean expression.
    func filter(_ expression: any PredicateExpression) throws -> FetchFilter {
        if let translatable = expression as? any FilterTranslatable {
            do {
                return try translatable.fetchFilter(self)
            } catch let untranslatable as Untranslatable {
                if let constant = Self.constantValue(of: expression) as? Bool { return .constant(constant) }
                throw untranslatable
            }
        }
        return try filter(from: translate(expression), of: expression)
    }

    /// A translated Boolean as a filter.
    func filter(from translated: Translated, of expression: any PredicateExpression) throws -> FetchFilter {
        switch try operand(from: translated, of: expression) {
        case .value(.bool(let value)): return .constant(value)
        case .condition(let filter): return filter
        case let operand: return .compare(operand, .equal, .value(.bool(true)))
        }
    }

    /// The operand for a value expression.
    func operand(_ expression: any PredicateExpression) throws -> FetchOperand {
        try operand(from: translate(expression), of: expression)
    }

    /// A translated expression as a value: an object stands for its identifier.
    func operand(from translated: Translated, of expression: any PredicateExpression) throws -> FetchOperand {
        switch translated {
        case .operand(let operand): return operand
        case .object(let reference): return identifier(of: reference)
        case let .targets(reference, slot, nil): return read(.toMany(slot), on: reference)
        case .targets:
            throw Untranslatable(reason: "the filtered targets of a relationship are compiled only for count, isEmpty, "
                                     + "contains and contains(where:)")
        }
    }

    // MARK: Scopes

    /// A translator for the body of a closure over the targets of relationship `slot` of `reference`: `variable`
    /// denotes each target, in the scope above the object's (a scope for each relationship followed to reach it,
    /// then one for the target).
    func inTargets(of reference: ObjectReference, slot: Int, variable: PredicateExpressions.VariableID) throws
        -> PredicateTranslator {
        var inner = self
        inner.scope = reference.scope + reference.hops.count + 1
        // Evaluated from the object's scope: what the scopes between it and this one hold is out of reach there.
        if reference.scope < scope {
            for (key, binding) in bindings where binding.scope > reference.scope { inner.bindings[key] = .hidden }
        }
        let destination = reference.metadata.relationships[slot].destinationMetadata
        inner.bindings[variable] = .object(ObjectReference(metadata: destination, scope: inner.scope))
        return inner
    }

    /// `operand`, compiled in this scope, as read from inside the object `reference` denotes (`depth` scopes above
    /// it, as in a condition on its targets).
    ///
    /// - Throws: ``Untranslatable`` when the operand reads a scope out of reach from there.
    func lift(_ operand: FetchOperand, into reference: ObjectReference, depth: Int) throws -> FetchOperand {
        if case .value = operand { return operand }
        let there = reference.scope + reference.hops.count + depth
        if there == scope { return operand }
        guard scope <= reference.scope else {
            throw Untranslatable(reason: "a condition on the targets of an object outside the enclosing condition "
                                     + "that reads that condition's element")
        }
        return .scope(scope, operand)
    }

    /// A translator for the body of a closure over the elements of a collection: `variable` denotes each element,
    /// in the scope above this one.
    func inElements(variable: PredicateExpressions.VariableID) -> PredicateTranslator {
        var inner = self
        inner.scope = scope + 1
        inner.bindings[variable] = .value(.element, scope: inner.scope)
        return inner
    }

    /// A translator where `variable` denotes `binding` (the unwrapped value of an optional chain).
    func binding(_ variable: PredicateExpressions.VariableID, to binding: Binding) -> PredicateTranslator {
        var inner = self
        inner.bindings[variable] = binding
        return inner
    }

    /// `operand`, read on the object `reference` denotes, from the scope being translated.
    func read(_ operand: FetchOperand, on reference: ObjectReference) -> FetchOperand {
        var result = operand
        for hop in reference.hops.reversed() { result = .related(hop.slot, result, required: hop.required) }
        return reference.scope == scope ? result : .scope(reference.scope, result)
    }

    /// A value computed in scope `bound`, read from the scope being translated.
    func read(_ operand: FetchOperand, boundIn bound: Int) -> FetchOperand {
        if bound == scope { return operand }
        if case .value = operand { return operand }
        return .scope(bound, operand)
    }

    /// The identifier of the object `reference` denotes (`.null` when a relationship on the way has no target).
    func identifier(of reference: ObjectReference) -> FetchOperand {
        guard let last = reference.hops.last else { return read(.identifier, on: reference) }
        var holder = reference
        holder.hops.removeLast()
        let id = read(.toOne(last.slot), on: holder)
        return last.required ? .unwrap(id) : id
    }

    /// The object reached from `reference` through to-one relationship `slot`.
    func hop(_ reference: ObjectReference, _ slot: Int) -> ObjectReference {
        var next = reference
        next.hops.append((slot, false))
        next.metadata = reference.metadata.relationships[slot].destinationMetadata
        return next
    }

    // MARK: Constants

    /// The value of an expression that reads no variable, or nil when it reads one (or fails): evaluated with no
    /// bindings, an expression that reads a variable throws at once.
    static func constantValue(of expression: any PredicateExpression) -> Any? {
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

    /// The readable name of an expression's type, without its generic arguments.
    static func name(of expression: any PredicateExpression) -> String {
        let full = "\(type(of: expression))"
        return String(full.prefix { $0 != "<" })
    }

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

    static func identifierKeyPath<M: PersistentModel>(_ type: M.Type) -> AnyKeyPath { \M.persistentModelID }

    /// The stored form of a constant captured by a predicate.
    static func constant<V>(_ value: V) throws -> StoredValue {
        if let object = value as? ModelObject { return .uuid(object._$id.primaryKey) }
        if let id = value as? PersistentIdentifier { return .uuid(id.primaryKey) }
        if let result = value as? ComparisonResult { return .int(Int64(result.rawValue)) }
        if let optional = value as? any OptionalMarker {
            guard let wrapped = optional.wrappedAny else { return .null }
            return try constant(any: wrapped)
        }
        if let objects = value as? [ModelObject] { return .array(objects.map { .uuid($0._$id.primaryKey) }) }
        if let ids = value as? [PersistentIdentifier] { return .array(ids.map { .uuid($0.primaryKey) }) }
        guard let codec = AttributeCodecFactory.make(V.self) else {
            throw Untranslatable(reason: "a constant of type \(V.self) has no stored form")
        }
        return try codec.encode(value)
    }

    /// The stored form of a constant known only as `Any`.
    static func constant(any value: Any) throws -> StoredValue {
        func open<V>(_ value: V) throws -> StoredValue { try constant(value) }
        return try _openExistential(value, do: open)
    }
}

/// An expression the store can compile.
protocol StoreTranslatable {
    func translate(_ translator: PredicateTranslator) throws -> PredicateTranslator.Translated
}

/// An expression that compiles to a Boolean filter directly.
protocol FilterTranslatable {
    func fetchFilter(_ translator: PredicateTranslator) throws -> FetchFilter
}
