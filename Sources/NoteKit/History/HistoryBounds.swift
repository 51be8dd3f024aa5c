#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The transaction numbers a history predicate can select, read from its expression so that a fetch examines only
/// those: `#Predicate { $0.token > lastToken }` reads one record of a long history, not all of them.
///
/// Sound, not complete: comparisons of `token` with a constant, `==`, and `&&` of them narrow the range; any other
/// expression leaves it whole. The predicate is still evaluated on every transaction in the range.
struct TransactionBounds: Equatable {
    var lower: UInt64 = 0
    var upper: UInt64 = .max

    static let all = TransactionBounds()
    static let none = TransactionBounds(lower: 1, upper: 0)

    var isEmpty: Bool { lower > upper }

    func intersection(_ other: TransactionBounds) -> TransactionBounds {
        TransactionBounds(lower: max(lower, other.lower), upper: min(upper, other.upper))
    }

    /// The range `predicate` can select.
    static func of<Transaction>(_ predicate: Predicate<Transaction>?) -> TransactionBounds {
        guard let predicate else { return .all }
        return (predicate.expression as? any TransactionBoundsReading)?.transactionBounds ?? .all
    }

    /// The positions in `records` (sorted by number) whose numbers are within the bounds.
    func positions(in records: [HistoryRecord]) -> Range<Int> {
        guard !isEmpty else { return 0..<0 }
        func firstPosition(atLeast number: UInt64) -> Int {
            var low = 0, high = records.count
            while low < high {
                let middle = (low + high) / 2
                if records[middle].number < number { low = middle + 1 } else { high = middle }
            }
            return low
        }
        let start = firstPosition(atLeast: lower)
        let end = upper == .max ? records.count : firstPosition(atLeast: upper + 1)
        return start..<max(start, end)
    }
}

/// An expression that says which transaction numbers it can be true for.
protocol TransactionBoundsReading {
    var transactionBounds: TransactionBounds { get }
}

/// The `$0.token` operand of a history predicate.
private typealias TokenOperand = PredicateExpressions.KeyPath<PredicateExpressions.Variable<DefaultHistoryTransaction>,
                                                              DefaultHistoryToken>
private typealias TokenConstant = PredicateExpressions.Value<DefaultHistoryToken>

extension PredicateExpressions.Conjunction: TransactionBoundsReading {
    var transactionBounds: TransactionBounds {
        let left = (lhs as? any TransactionBoundsReading)?.transactionBounds ?? .all
        let right = (rhs as? any TransactionBoundsReading)?.transactionBounds ?? .all
        return left.intersection(right)
    }
}

extension PredicateExpressions.Equal: TransactionBoundsReading {
    var transactionBounds: TransactionBounds {
        let constant: TokenConstant?
        if let token = lhs as? TokenOperand, token.keyPath == \DefaultHistoryTransaction.token {
            constant = rhs as? TokenConstant
        } else if let token = rhs as? TokenOperand, token.keyPath == \DefaultHistoryTransaction.token {
            constant = lhs as? TokenConstant
        } else {
            constant = nil
        }
        guard let number = constant?.value.transactionNumber else { return .all }
        return TransactionBounds(lower: number, upper: number)
    }
}

extension PredicateExpressions.Comparison: TransactionBoundsReading {
    var transactionBounds: TransactionBounds {
        // Read `token op constant`; `constant op token` is the mirrored comparison.
        var comparison = op
        let constant: TokenConstant?
        if let token = lhs as? TokenOperand, token.keyPath == \DefaultHistoryTransaction.token {
            constant = rhs as? TokenConstant
        } else if let token = rhs as? TokenOperand, token.keyPath == \DefaultHistoryTransaction.token {
            constant = lhs as? TokenConstant
            switch op {
            case .lessThan: comparison = .greaterThan
            case .lessThanOrEqual: comparison = .greaterThanOrEqual
            case .greaterThan: comparison = .lessThan
            case .greaterThanOrEqual: comparison = .lessThanOrEqual
            @unknown default: return .all
            }
        } else {
            constant = nil
        }
        guard let number = constant?.value.transactionNumber else { return .all }
        switch comparison {
        case .greaterThan: return number == .max ? .none : TransactionBounds(lower: number + 1)
        case .greaterThanOrEqual: return TransactionBounds(lower: number)
        case .lessThan: return number == 0 ? .none : TransactionBounds(upper: number - 1)
        case .lessThanOrEqual: return TransactionBounds(upper: number)
        @unknown default: return .all
        }
    }
}
