#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Signals a forced unwrap of null while evaluating; the caller knows which row.
struct UnwrappedNil: Error {}

/// A value a filter could not compute on a row (an integer overflow, a division by zero, a position out of range):
/// Swift would trap, the store reports it (``FetchError/predicateFailed(entity:reason:)``, naming the row).
struct EvaluationFailure: Error {
    let reason: String
}

/// How a filter reaches rows other than the one it is evaluated on: the rows its relationships point at.
package struct RowLookup {
    /// The row of an identifier, or nil when the store has none.
    let row: (PersistentIdentifier) throws -> ModelSnapshot?

    package init(_ row: @escaping (PersistentIdentifier) throws -> ModelSnapshot?) { self.row = row }

    /// A lookup that finds nothing: for a filter that reads no other row.
    package static var none: RowLookup { RowLookup { _ in nil } }
}

/// The scopes an evaluation is in (see ``FetchFilter``): the fetched row first, then one per target or element a
/// condition on a collection is looking at.
struct EvaluationFrames {
    enum Frame {
        case row(ModelSnapshot)
        case element(StoredValue)
    }

    var frames: [Frame]
    /// The index of the innermost frame.
    var top = 0
    let lookup: RowLookup

    init(_ row: ModelSnapshot, lookup: RowLookup) {
        frames = [.row(row)]
        frames.reserveCapacity(4)
        self.lookup = lookup
    }

    /// The row in the innermost frame.
    @inline(__always)
    func row() throws -> ModelSnapshot {
        guard case .row(let row) = frames[top] else {
            throw EvaluationFailure(reason: "a property was read where an element is in scope")
        }
        return row
    }

    /// The element in the innermost frame.
    func element() throws -> StoredValue {
        guard case .element(let value) = frames[top] else {
            throw EvaluationFailure(reason: "an element was read where a row is in scope")
        }
        return value
    }

    /// Makes `frame` the innermost one, above the current.
    @inline(__always)
    mutating func push(_ frame: Frame) {
        top += 1
        if top < frames.count { frames[top] = frame } else { frames.append(frame) }
    }

    @inline(__always)
    mutating func pop() { top -= 1 }

    /// Replaces the innermost frame (the next target or element of the same condition).
    @inline(__always)
    mutating func replace(_ frame: Frame) { frames[top] = frame }
}

/// A filter made ready to run over many rows: its constants folded into matchers once (a search needle, a regular
/// expression), its tree turned into closures.
package struct PreparedFilter {
    fileprivate let test: (inout EvaluationFrames) throws -> Bool

    /// Prepares `filter` for evaluation.
    ///
    /// - Throws: `EvaluationFailure` for a regular expression that does not compile.
    init(_ filter: FetchFilter) throws {
        test = try Preparation.filter(filter)
    }

    /// Whether `row` matches, reading other rows through `lookup`.
    ///
    /// - Throws: ``UnwrappedNil`` when a forced unwrap meets null, `EvaluationFailure` when a value cannot be
    ///   computed, and what `lookup` throws.
    func matches(_ row: ModelSnapshot, lookup: RowLookup = .none) throws -> Bool {
        var frames = EvaluationFrames(row, lookup: lookup)
        return try test(&frames)
    }
}

/// An operand made ready to evaluate over many rows (a sort key).
struct PreparedOperand {
    fileprivate let value: (inout EvaluationFrames) throws -> StoredValue

    init(_ operand: FetchOperand) throws { value = try Preparation.operand(operand) }

    func evaluate(_ row: ModelSnapshot, lookup: RowLookup = .none) throws -> StoredValue {
        var frames = EvaluationFrames(row, lookup: lookup)
        return try value(&frames)
    }
}

extension FetchFilter {
    /// Whether `row` satisfies the filter, reading the rows its relationships reach through `lookup`. For one row;
    /// over many, prepare the filter once (``PreparedFilter``).
    ///
    /// - Throws: ``UnwrappedNil`` when a forced unwrap meets null; `EvaluationFailure`.
    func matches(_ row: ModelSnapshot, lookup: RowLookup = .none) throws -> Bool {
        try PreparedFilter(self).matches(row, lookup: lookup)
    }
}

extension FetchOperand {
    /// The operand's value on `row`. For one row; over many, prepare it once (``PreparedOperand``).
    func evaluate(_ row: ModelSnapshot, lookup: RowLookup = .none) throws -> StoredValue {
        try PreparedOperand(self).evaluate(row, lookup: lookup)
    }
}

/// Turns filters and operands into closures.
private enum Preparation {
    typealias Test = (inout EvaluationFrames) throws -> Bool
    typealias Value = (inout EvaluationFrames) throws -> StoredValue

    static func filter(_ filter: FetchFilter) throws -> Test {
        switch filter {
        case .constant(let value):
            return { _ in value }
        case .and(let parts):
            let tests = try parts.map(Self.filter)
            if tests.count == 2 {
                let (a, b) = (tests[0], tests[1])
                return { try a(&$0) && b(&$0) }
            }
            return { frames in
                for test in tests where try !test(&frames) { return false }
                return true
            }
        case .or(let parts):
            let tests = try parts.map(Self.filter)
            return { frames in
                for test in tests where try test(&frames) { return true }
                return false
            }
        case .not(let inner):
            let test = try Self.filter(inner)
            return { try !test(&$0) }
        case let .compare(lhs, op, rhs):
            return try compare(lhs, op, rhs)
        case let .text(lhs, op, rhs):
            return try text(lhs, op, rhs)
        case let .isIn(operand, values):
            let value = try Self.operand(operand)
            return { frames in
                let found = try value(&frames)
                return values.contains { FetchFilter.compare(found, .equal, $0) }
            }
        case let .contains(collection, element):
            let items = try Self.operand(collection), member = try Self.operand(element)
            return { frames in
                let value = try member(&frames)
                switch try items(&frames) {
                case .array(let items): return items.contains { FetchFilter.compare($0, .equal, value) }
                case .string(let text):
                    if case .string(let other) = value { return FetchFilter.containsCharacters(text, other) }
                    return false
                default: return false
                }
            }
        case let .any(slot, inner):
            let test = try Self.filter(inner)
            return { frames in try forEachTarget(slot, &frames) { try test(&$0) } ?? false }
        case let .all(slot, inner):
            let test = try Self.filter(inner)
            return { frames in try !(forEachTarget(slot, &frames) { try !test(&$0) } ?? false) }
        case let .anyElement(collection, inner):
            let items = try Self.operand(collection), test = try Self.filter(inner)
            return { frames in try forEachElement(try items(&frames), &frames) { try test(&$0) } }
        case let .allElements(collection, inner):
            let items = try Self.operand(collection), test = try Self.filter(inner)
            return { frames in try !forEachElement(try items(&frames), &frames) { try !test(&$0) } }
        case let .containsMatch(operand, pattern):
            let value = try Self.operand(operand)
            let regex = try CompiledRegex(pattern)
            return { frames in
                guard case .string(let text) = try value(&frames) else { return false }
                return regex.isContained(in: text)
            }
        }
    }

    /// Runs `body` in a new frame for each target of to-many relationship `slot` of the row in scope, until it
    /// returns true; true then, false when none did, nil for a row with no targets.
    private static func forEachTarget(_ slot: Int, _ frames: inout EvaluationFrames,
                                      _ body: (inout EvaluationFrames) throws -> Bool) throws -> Bool? {
        let targets = try frames.row().relationships[slot].identifiers
        guard !targets.isEmpty else { return nil }
        frames.push(.element(.null))
        defer { frames.pop() }
        for id in targets {
            // A target another process deleted meanwhile is not there to match.
            guard let row = try frames.lookup.row(id) else { continue }
            frames.replace(.row(row))
            if try body(&frames) { return true }
        }
        return false
    }

    /// Runs `body` in a new frame for each element of `collection` until it returns true; whether one did.
    private static func forEachElement(_ collection: StoredValue, _ frames: inout EvaluationFrames,
                                       _ body: (inout EvaluationFrames) throws -> Bool) throws -> Bool {
        let elements: [StoredValue]
        switch collection {
        case .array(let items): elements = items
        case .dictionary(let items): elements = Array(items.values)
        case .string(let text): elements = text.map { .string(String($0)) }
        default: return false
        }
        frames.push(.element(.null))
        defer { frames.pop() }
        for element in elements {
            frames.replace(.element(element))
            if try body(&frames) { return true }
        }
        return false
    }

    private static func compare(_ lhs: FetchOperand, _ op: FetchFilter.ComparisonOperator,
                                _ rhs: FetchOperand) throws -> Test {
        // A string attribute against a string constant: compared on the stored bytes when both are ASCII (most
        // are), without making a string.
        if case .attribute(let slot) = lhs, case .value(.string(let constant)) = rhs,
           op == .equal || op == .notEqual, let ascii = ASCIIText(constant) {
            let equal = op == .equal
            return { frames in
                let row = try frames.row()
                if case .some(.some(let same)) = row.attributes.withStringBytes(at: slot, { ascii.equals($0) }) {
                    return same == equal
                }
                return FetchFilter.compare(row.attributes[slot], op, .string(constant))
            }
        }
        let left = try operand(lhs), right = try operand(rhs)
        return { frames in FetchFilter.compare(try left(&frames), op, try right(&frames)) }
    }

    private static func text(_ lhs: FetchOperand, _ op: FetchFilter.TextOperator, _ rhs: FetchOperand) throws -> Test {
        // A search for a constant in a string attribute: the needle is folded once, and ASCII text is searched
        // byte by byte.
        if case .attribute(let slot) = lhs, case .value(.string(let query)) = rhs {
            switch op {
            case .searchContains:
                let needle = TextSearch.Needle(query)
                return { frames in
                    let row = try frames.row()
                    if case .some(.some(let found)) = row.attributes.withStringBytes(at: slot, { needle.isContained(in: $0) }) {
                        return found
                    }
                    guard case .string(let text) = row.attributes[slot] else { return false }
                    return TextSearch.contains(text, query)
                }
            case .contains:
                let ascii = ASCIIText(query)
                return { frames in
                    let row = try frames.row()
                    if let ascii,
                       case .some(.some(let found)) = row.attributes.withStringBytes(at: slot, { ascii.isContained(in: $0) }) {
                        return found
                    }
                    guard case .string(let text) = row.attributes[slot] else { return false }
                    return FetchFilter.containsCharacters(text, query)
                }
            case .startsWith:
                break
            }
        }
        let left = try operand(lhs), right = try operand(rhs)
        return { frames in
            switch (try left(&frames), try right(&frames)) {
            case let (.string(text), .string(other)):
                switch op {
                case .contains: return FetchFilter.containsCharacters(text, other)
                case .startsWith: return text.starts(with: other)
                case .searchContains: return TextSearch.contains(text, other)
                }
            case let (.array(items), .array(other)):
                let equal = { (a: StoredValue, b: StoredValue) in FetchFilter.compare(a, .equal, b) }
                switch op {
                case .startsWith: return items.starts(with: other, by: equal)
                case .contains:
                    return other.isEmpty || items.indices.contains { start in
                        items[start...].starts(with: other, by: equal)
                    }
                case .searchContains: return false
                }
            default:
                return false
            }
        }
    }

    static func operand(_ operand: FetchOperand) throws -> Value {
        switch operand {
        case .attribute(let slot):
            return { try $0.row().attributes[slot] }
        case .toOne(let slot):
            return { frames in
                if case .toOne(let id?) = try frames.row().relationships[slot] { return .uuid(id.primaryKey) }
                return .null
            }
        case .toMany(let slot):
            return { .array(try $0.row().relationships[slot].identifiers.map { .uuid($0.primaryKey) }) }
        case .relationshipCount(let slot):
            return { .int(Int64(try $0.row().relationships[slot].count)) }
        case .identifier:
            return { .uuid(try $0.row().id.primaryKey) }
        case .value(let value):
            return { _ in value }
        case let .coalesce(first, second):
            let a = try Self.operand(first), b = try Self.operand(second)
            return { frames in
                let value = try a(&frames)
                return value.isNull ? try b(&frames) : value
            }
        case .unwrap(let inner):
            let value = try Self.operand(inner)
            return { frames in
                let found = try value(&frames)
                if found.isNull { throw UnwrappedNil() }
                return found
            }
        case .count(let inner):
            return try count(inner)
        case let .related(slot, inner, required):
            return try related(slot, inner, required: required)
        case let .scope(index, inner):
            return try scoped(index, inner)
        case .element:
            return { try $0.element() }
        case let .countWhere(slot, inner):
            return try countWhere(slot, inner)
        case let .filteredElements(collection, inner):
            return try filteredElements(collection, inner)
        case let .arithmetic(lhs, op, rhs):
            let a = try Self.operand(lhs), b = try Self.operand(rhs)
            return { frames in try Arithmetic.apply(try a(&frames), op, try b(&frames)) }
        case .negated(let inner):
            let value = try Self.operand(inner)
            return { frames in try Arithmetic.negate(try value(&frames)) }
        case let .conditional(test, whenTrue, whenFalse):
            let condition = try Self.filter(test)
            let a = try Self.operand(whenTrue), b = try Self.operand(whenFalse)
            return { frames in try condition(&frames) ? try a(&frames) : try b(&frames) }
        case .condition(let inner):
            let test = try Self.filter(inner)
            return { .bool(try test(&$0)) }
        case let .subscripted(collection, key):
            let items = try Self.operand(collection), index = try Self.operand(key)
            return { frames in try Subscript.element(of: try items(&frames), at: try index(&frames)) }
        case let .subscriptedWithDefault(collection, key, fallback):
            return try subscripted(collection, key, default: fallback)
        case let .slice(collection, lower, upper, closed):
            let items = try Self.operand(collection), from = try Self.operand(lower), to = try Self.operand(upper)
            return { frames in
                try Subscript.slice(of: try items(&frames), from: try from(&frames), to: try to(&frames), closed: closed)
            }
        case .minimum(let inner):
            return try extremum(inner, greatest: false)
        case .maximum(let inner):
            return try extremum(inner, greatest: true)
        case let .textComparison(lhs, rhs, kind):
            return try textComparison(lhs, rhs, kind)
        }
    }

    // MARK: Operands over collections, relationships and scopes

    /// The number of elements of an array, dictionary or data value, or of characters of a string; null otherwise.
    private static func count(_ inner: FetchOperand) throws -> Value {
        let value = try Self.operand(inner)
        return { frames in
            switch try value(&frames) {
            case .array(let items): return .int(Int64(items.count))
            case .string(let text): return .int(Int64(text.count))
            case .dictionary(let items): return .int(Int64(items.count))
            case .data(let data): return .int(Int64(data.count))
            default: return .null
            }
        }
    }

    /// `inner` evaluated on the object the row's to-one relationship `slot` points at; null (or, when `required`,
    /// an unwrapped nil) without one.
    private static func related(_ slot: Int, _ inner: FetchOperand, required: Bool) throws -> Value {
        let value = try Self.operand(inner)
        return { frames in
            let row = try frames.row()
            guard case .toOne(let id?) = row.relationships[slot], let target = try frames.lookup.row(id) else {
                if required { throw UnwrappedNil() }
                return .null
            }
            frames.replace(.row(target))
            defer { frames.replace(.row(row)) }
            return try value(&frames)
        }
    }

    /// `inner` evaluated with frame `index` on top: a closure's variable from an enclosing scope.
    private static func scoped(_ index: Int, _ inner: FetchOperand) throws -> Value {
        let value = try Self.operand(inner)
        return { frames in
            guard index < frames.top else { return try value(&frames) }
            // Frames above `index` stay as they are for the code that continues there afterwards.
            let saved = Array(frames.frames[(index + 1)...frames.top]), top = frames.top
            frames.top = index
            defer {
                frames.frames.replaceSubrange((index + 1)...top, with: saved)
                frames.top = top
            }
            return try value(&frames)
        }
    }

    /// How many targets of the row's relationship `slot` pass `inner`.
    private static func countWhere(_ slot: Int, _ inner: FetchFilter) throws -> Value {
        let test = try Self.filter(inner)
        return { frames in
            var count: Int64 = 0
            _ = try forEachTarget(slot, &frames) { frames in
                if try test(&frames) { count += 1 }
                return false
            }
            return .int(count)
        }
    }

    /// The elements of the array `collection` that pass `inner`.
    private static func filteredElements(_ collection: FetchOperand, _ inner: FetchFilter) throws -> Value {
        let items = try Self.operand(collection), test = try Self.filter(inner)
        return { frames in
            let value = try items(&frames)
            guard case .array(let elements) = value else { return value.isNull ? .null : .array([]) }
            var kept: [StoredValue] = []
            frames.push(.element(.null))
            defer { frames.pop() }
            for element in elements {
                frames.replace(.element(element))
                if try test(&frames) { kept.append(element) }
            }
            return .array(kept)
        }
    }

    /// A dictionary's value for `key`, or `fallback` when it has none (or is not a dictionary).
    private static func subscripted(_ collection: FetchOperand, _ key: FetchOperand,
                                    default fallback: FetchOperand) throws -> Value {
        let items = try Self.operand(collection), index = try Self.operand(key)
        let otherwise = try Self.operand(fallback)
        return { frames in
            guard case .dictionary(let values) = try items(&frames), case .string(let name) = try index(&frames)
            else { return try otherwise(&frames) }
            return try values[name] ?? otherwise(&frames)
        }
    }

    /// An array's least element, or with `greatest` its greatest; null for an empty array or another value.
    private static func extremum(_ inner: FetchOperand, greatest: Bool) throws -> Value {
        let value = try Self.operand(inner)
        if greatest {
            return { frames in
                guard case .array(let items) = try value(&frames) else { return .null }
                return items.max { StoredValue.compare($0, $1) < 0 } ?? .null
            }
        }
        return { frames in
            guard case .array(let items) = try value(&frames) else { return .null }
            return items.min { StoredValue.compare($0, $1) < 0 } ?? .null
        }
    }

    /// How two strings compare by `kind` (``TextSearch/compare(_:_:_:)``), as an integer; null unless both are
    /// strings.
    private static func textComparison(_ lhs: FetchOperand, _ rhs: FetchOperand,
                                       _ kind: FetchOperand.TextComparison) throws -> Value {
        let a = try Self.operand(lhs), b = try Self.operand(rhs)
        return { frames in
            guard case .string(let x) = try a(&frames), case .string(let y) = try b(&frames) else { return .null }
            return .int(Int64(TextSearch.compare(x, y, kind).rawValue))
        }
    }
}

extension FetchOperand {
    /// The constant an operand is, if it is one.
    var constantValue: StoredValue? {
        if case .value(let value) = self { return value }
        return nil
    }
}

extension FetchFilter {
    /// `String.contains(_:)` as a predicate evaluates it: a run of whole characters (Foundation's `contains` on
    /// strings compares Unicode scalars instead, and would find "e" in "é"). An empty string is contained in any.
    static func containsCharacters<C: Collection>(_ text: C, _ other: C) -> Bool where C.Element: Equatable {
        text.contains(other)
    }

    /// Swift's semantics for `==`, `!=`, `<`… on stored values. Ordering comparisons with null are false (Swift
    /// cannot even express them without an unwrap); NaN equals nothing.
    static func compare(_ lhs: StoredValue, _ op: ComparisonOperator, _ rhs: StoredValue) -> Bool {
        if case .double(let x) = lhs, x.isNaN { return op == .notEqual }
        if case .double(let y) = rhs, y.isNaN { return op == .notEqual }
        switch op {
        case .equal: return StoredValue.compare(lhs, rhs) == 0
        case .notEqual: return StoredValue.compare(lhs, rhs) != 0
        default:
            if lhs.isNull || rhs.isNull { return false }
            let order = StoredValue.compare(lhs, rhs)
            switch op {
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            default: return order >= 0
            }
        }
    }

    /// The conjuncts of a filter (itself when it is not an `and`), flattened.
    var conjuncts: [FetchFilter] {
        if case .and(let parts) = self { return parts.flatMap(\.conjuncts) }
        return [self]
    }
}

/// An ASCII string's bytes, compared with stored UTF-8 without making a string.
struct ASCIIText {
    let bytes: [UInt8]

    /// Nil when `text` is not ASCII, or holds a carriage return (`"\r\n"` is one character, so a byte search would
    /// not be a character search).
    init?(_ text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.allSatisfy({ $0 < 0x80 && $0 != 0x0D }) else { return nil }
        bytes = utf8
    }

    /// Whether `stored` is this text; nil when that takes more than comparing bytes (`stored` is not ASCII).
    func equals(_ stored: UnsafeRawBufferPointer) -> Bool? {
        if stored.count == bytes.count && bytes.withUnsafeBytes({ stored.elementsEqual($0) }) { return true }
        // Different bytes are different text only when the stored text is ASCII too (else it may be a different
        // normalization of the same characters, which `==` finds equal).
        return stored.contains { $0 >= 0x80 } ? nil : false
    }

    /// Whether `stored` contains this text as a run of characters; nil when `stored` is not plain ASCII.
    func isContained(in stored: UnsafeRawBufferPointer) -> Bool? {
        guard !stored.contains(where: { $0 >= 0x80 || $0 == 0x0D }) else { return nil }
        return ByteSearch.contains(stored, bytes, foldingCase: false)
    }
}

/// A regular expression compiled once for a fetch. `Regex` is not `Sendable`; this one lives for one evaluation.
private final class CompiledRegex {
    let regex: Regex<AnyRegexOutput>

    init(_ pattern: String) throws {
        do { regex = try Regex(pattern) } catch {
            throw EvaluationFailure(reason: "the regular expression \(pattern) does not compile: \(error)")
        }
    }

    func isContained(in text: String) -> Bool { text.contains(regex) }
}

/// Arithmetic on stored numbers, with Swift's semantics but errors where Swift traps.
enum Arithmetic {
    static func apply(_ lhs: StoredValue, _ op: FetchOperand.ArithmeticOperator, _ rhs: StoredValue) throws
        -> StoredValue {
        switch (lhs, rhs) {
        case (.null, _), (_, .null):
            return .null
        case let (.int(a), .int(b)):
            return .int(try integer(a, op, b))
        case let (.uint(a), .uint(b)):
            return .uint(try integer(a, op, b))
        case let (.int(a), .uint(b)):
            guard let b = Int64(exactly: b) else { throw EvaluationFailure(reason: "\(b) does not fit an Int") }
            return .int(try integer(a, op, b))
        case let (.uint(a), .int(b)):
            guard let a = Int64(exactly: a) else { throw EvaluationFailure(reason: "\(a) does not fit an Int") }
            return .int(try integer(a, op, b))
        case let (.decimal(a), .decimal(b)):
            switch op {
            case .add: return .decimal(a + b)
            case .subtract: return .decimal(a - b)
            case .multiply: return .decimal(a * b)
            case .divide, .quotient: return .decimal(a / b)
            case .remainder: throw EvaluationFailure(reason: "% is not defined on Decimal")
            }
        default:
            guard let a = lhs.doubleValue, let b = rhs.doubleValue else {
                throw EvaluationFailure(reason: "\(op.rawValue) of \(lhs.kindName) and \(rhs.kindName)")
            }
            switch op {
            case .add: return .double(a + b)
            case .subtract: return .double(a - b)
            case .multiply: return .double(a * b)
            case .divide, .quotient: return .double(a / b)
            case .remainder: return .double(a.truncatingRemainder(dividingBy: b))
            }
        }
    }

    private static func integer<I: FixedWidthInteger>(_ a: I, _ op: FetchOperand.ArithmeticOperator, _ b: I) throws -> I {
        let result: (partialValue: I, overflow: Bool)
        switch op {
        case .add: result = a.addingReportingOverflow(b)
        case .subtract: result = a.subtractingReportingOverflow(b)
        case .multiply: result = a.multipliedReportingOverflow(by: b)
        case .divide, .quotient:
            guard b != 0 else { throw EvaluationFailure(reason: "division by zero") }
            result = a.dividedReportingOverflow(by: b)
        case .remainder:
            guard b != 0 else { throw EvaluationFailure(reason: "remainder of a division by zero") }
            result = a.remainderReportingOverflow(dividingBy: b)
        }
        guard !result.overflow else { throw EvaluationFailure(reason: "integer overflow in \(op.rawValue)") }
        return result.partialValue
    }

    static func negate(_ value: StoredValue) throws -> StoredValue {
        switch value {
        case .null: return .null
        case .int(let a):
            guard a != .min else { throw EvaluationFailure(reason: "integer overflow in negation") }
            return .int(-a)
        case .double(let a): return .double(-a)
        case .decimal(let a): return .decimal(-a)
        case .uint(let a) where a == 0: return .uint(0)
        default: throw EvaluationFailure(reason: "negation of \(value.kindName)")
        }
    }
}

/// Subscripts of stored arrays and dictionaries.
enum Subscript {
    static func element(of collection: StoredValue, at key: StoredValue) throws -> StoredValue {
        switch (collection, key) {
        case (.null, _): return .null
        case let (.array(items), _):
            guard let index = key.integerValue else { throw EvaluationFailure(reason: "an array index that is not an integer") }
            guard items.indices.contains(index) else {
                throw EvaluationFailure(reason: "index \(index) out of range of an array of \(items.count)")
            }
            return items[index]
        case let (.dictionary(values), .string(name)): return values[name] ?? .null
        default: throw EvaluationFailure(reason: "a subscript of \(collection.kindName) by \(key.kindName)")
        }
    }

    static func slice(of collection: StoredValue, from lower: StoredValue, to upper: StoredValue, closed: Bool) throws
        -> StoredValue {
        guard case .array(let items) = collection else { return collection.isNull ? .null : .array([]) }
        guard let start = lower.integerValue, let end = upper.integerValue.map({ closed ? $0 + 1 : $0 }),
              start <= end, start >= 0, end <= items.count else {
            throw EvaluationFailure(reason: "range out of bounds of an array of \(items.count)")
        }
        return .array(Array(items[start..<end]))
    }
}

extension StoredValue {
    /// The value as an `Int` position, when it is an integer.
    var integerValue: Int? {
        switch self {
        case .int(let v): Int(exactly: v)
        case .uint(let v): Int(exactly: v)
        default: nil
        }
    }
}
