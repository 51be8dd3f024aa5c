#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Choosing an access path and running a fetch over one entity's rows.
///
/// An index answers a fetch when the filter's conjuncts give equalities on its leading attributes, optionally a
/// range on the next one, or when the requested order is the index's own order after those equalities. The best
/// index is the one that constrains the most attributes; ties go to one that also delivers the order. Every
/// candidate a scan reaches is still checked against the whole filter, so an index only ever narrows the work.
extension EntityTable {
    struct AccessPath {
        let index: Int
        let lower: IndexBound?
        let upper: IndexBound?
        let equalityPrefix: Int
        let hasRange: Bool
        /// Whether scanning the index yields the requested sort order (descending when `reverse`).
        let deliversOrder: Bool
        let reverse: Bool
    }

    /// The best index for `filter` and `sort`, or nil for a full scan.
    func accessPath(filter: FetchFilter?, sort: [FetchSortKey]) -> AccessPath? {
        var equalities: [Int: StoredValue] = [:]
        var lowers: [Int: (StoredValue, Bool)] = [:]
        var uppers: [Int: (StoredValue, Bool)] = [:]
        for conjunct in filter?.conjuncts ?? [] {
            guard case let .compare(lhs, op, rhs) = conjunct else { continue }
            let slot: Int, value: StoredValue, op2: FetchFilter.ComparisonOperator
            switch (lhs, rhs) {
            case let (.attribute(s), .value(v)): (slot, value, op2) = (s, v, op)
            case let (.value(v), .attribute(s)): (slot, value, op2) = (s, v, op.mirrored)
            default: continue
            }
            switch op2 {
            case .equal: equalities[slot] = value
            case .greater: lowers[slot] = tighter(lowers[slot], (value, false), lower: true)
            case .greaterOrEqual: lowers[slot] = tighter(lowers[slot], (value, true), lower: true)
            case .less: uppers[slot] = tighter(uppers[slot], (value, false), lower: false)
            case .lessOrEqual: uppers[slot] = tighter(uppers[slot], (value, true), lower: false)
            case .notEqual: continue
            }
        }
        let sortSlots: [Int]? = sort.allSatisfy({ if case .attribute = $0.operand { true } else { false } })
            ? sort.map { if case .attribute(let s) = $0.operand { s } else { -1 } } : nil
        let sortDirections = Set(sort.map(\.ascending))

        var best: (score: Int, path: AccessPath)?
        for (number, slots) in indexSlots.enumerated() {
            var prefix = 0
            while prefix < slots.count, equalities[slots[prefix]] != nil { prefix += 1 }
            let next = prefix < slots.count ? slots[prefix] : nil
            let lowerRange = next.flatMap { lowers[$0] }
            let upperRange = next.flatMap { uppers[$0] }
            let hasRange = lowerRange != nil || upperRange != nil
            var deliversOrder = false
            if let sortSlots, !sortSlots.isEmpty, sortDirections.count == 1 {
                let rest = Array(slots[prefix...])
                // Only an exact match: extra index attributes would order ties differently from a sort.
                deliversOrder = rest == sortSlots
            }
            guard prefix > 0 || hasRange || deliversOrder else { continue }
            let score = prefix * 4 + (hasRange ? 2 : 0) + (deliversOrder ? 1 : 0)
            if let current = best, current.score >= score { continue }
            let equalValues = slots.prefix(prefix).map { equalities[$0]! }
            let lower = lowerRange.map { IndexBound(values: equalValues + [$0.0], isInclusive: $0.1) }
                ?? (prefix > 0 ? IndexBound(values: equalValues, isInclusive: true) : nil)
            let upper = upperRange.map { IndexBound(values: equalValues + [$0.0], isInclusive: $0.1) }
                ?? (prefix > 0 ? IndexBound(values: equalValues, isInclusive: true) : nil)
            best = (score, AccessPath(index: number, lower: lower, upper: upper, equalityPrefix: prefix,
                                      hasRange: hasRange, deliversOrder: deliversOrder,
                                      reverse: deliversOrder && sortDirections.first == false))
        }
        return best?.path
    }

    /// Whether `filter` is nothing but what `path` answers: equalities on its index's first attributes and a range
    /// on the next, with constants. Every row the path reaches then matches.
    func indexConsumes(_ filter: FetchFilter, _ path: AccessPath) -> Bool {
        let slots = indexSlots[path.index]
        let next = path.equalityPrefix < slots.count ? slots[path.equalityPrefix] : nil
        return filter.conjuncts.allSatisfy { conjunct in
            guard case let .compare(lhs, op, rhs) = conjunct else { return false }
            let slot: Int, mirrored: FetchFilter.ComparisonOperator
            switch (lhs, rhs) {
            case (.attribute(let s), .value): (slot, mirrored) = (s, op)
            case (.value, .attribute(let s)): (slot, mirrored) = (s, op.mirrored)
            default: return false
            }
            if mirrored == .equal { return slots.prefix(path.equalityPrefix).contains(slot) }
            return slot == next && path.hasRange && mirrored != .notEqual
        }
    }

    /// Visits the entries of the index `path` scans, in its order (key, then identifier), until `body` returns
    /// false: the base's entries less those of rows changed or deleted since, merged with the in-memory index's. No
    /// row is read.
    func forEachIndexEntry(_ path: AccessPath, _ body: (IndexEntry) throws -> Bool) throws {
        var cursor = indexes[path.index].cursor(from: path.lower, to: path.upper, reverse: path.reverse)
        func before(_ a: IndexEntry, _ b: IndexEntry) -> Bool {
            let order = IndexTree.order(a, b)
            return path.reverse ? order > 0 : order < 0
        }
        var stopped = false
        var failure: (any Error)?
        if let base {
            do {
                try base.scanIndex(path.index, from: path.lower, to: path.upper, reverse: path.reverse) { entry, number in
                    do {
                        while !stopped, let next = cursor.entry, before(next, entry) {
                            stopped = try !body(next)
                            cursor.advance()
                        }
                        if !stopped && !isOverridden(number) { stopped = try !body(entry) }
                    } catch {
                        failure = error
                        return false
                    }
                    return !stopped
                }
            } catch {
                throw RowBaseFailure(entity: entity.name, error: error)
            }
            if let failure { throw failure }
        }
        while !stopped, let next = cursor.entry {
            stopped = try !body(next)
            cursor.advance()
        }
    }

    private func tighter(_ current: (StoredValue, Bool)?, _ candidate: (StoredValue, Bool), lower: Bool)
        -> (StoredValue, Bool) {
        guard let current else { return candidate }
        let order = StoredValue.compare(candidate.0, current.0)
        if order == 0 { return (current.0, current.1 && candidate.1) }
        return (order > 0) == lower ? candidate : current
    }

    /// Runs `request` over this entity's rows; `lookup` reads the rows of other entities a filter or sort reaches
    /// through relationships.
    func fetch(_ request: StoreFetchRequest, lookup: RowLookup = .none) throws -> StoreFetchResult {
        var plan = FetchPlan(entity: entity.name)
        let filter = try request.filter.map(PreparedFilter.init)
        let path = accessPath(filter: request.filter, sort: request.sort)
        let limit = request.limit.map { request.offset + $0 }
        if let path {
            plan.index = indexSlots[path.index].map { entity.attributes[$0].name }
            plan.indexEqualityPrefix = path.equalityPrefix
            plan.indexRange = path.hasRange
            plan.sortedByIndex = path.deliversOrder
        }
        var matched: [ModelSnapshot] = []
        var examined = 0
        var loaded: [Bool]?
        if base != nil {
            let (decoding, completeWindow) = decodingOverBase(request, path: path, limit: limit)
            (matched, examined) = try matchOverBase(request, filter: filter, lookup: lookup, path: path, limit: limit,
                                                    decoding: decoding)
            if completeWindow {
                let end = min(matched.count, limit ?? matched.count)
                try completeRows(&matched, in: min(request.offset, end)..<end)
            } else {
                loaded = decoding
            }
        } else if let path {
            (matched, examined) = try matchInMemory(request, filter: filter, lookup: lookup, path: path, limit: limit)
        } else {
            (matched, examined) = try matchInMemory(request, filter: filter, lookup: lookup, limit: limit)
        }
        plan.rowsExamined = examined
        return Self.result(of: request, matched: matched, plan: plan, limit: limit, loaded: loaded)
    }

    /// Which attributes a fetch over a base decodes of its rows (nil: every one), and whether the rows of the
    /// answer's window are to be read whole after the scan.
    ///
    /// Only a base decodes rows, so only a fetch over one can leave attributes out. A count or identifiers decode
    /// what the filter and sort read; rows asked for whole under a limit and sorted after the scan too, and the few
    /// that make the answer are read whole after (a top k decodes no match whole but its k).
    private func decodingOverBase(_ request: StoreFetchRequest, path: AccessPath?, limit: Int?)
        -> (decoding: [Bool]?, completeWindow: Bool) {
        let attributeCount = entity.attributes.count
        var decoding = request.resultType == .rows
            ? request.decodedAttributes(attributeCount: attributeCount) : nil
        var completeWindow = false
        if decoding == nil, request.attributes == nil, decodesInPart {
            switch request.resultType {
            case .count, .identifiers: decoding = request.matchedAttributes(attributeCount: attributeCount)
            case .rows where limit != nil && !(path?.deliversOrder ?? request.sort.isEmpty):
                // A scan in the answer's order stops at the limit, reading no more rows than it returns: only
                // one that must sort every match gains by decoding them in part.
                decoding = request.matchedAttributes(attributeCount: attributeCount)
                completeWindow = decoding != nil
            case .rows: break
            }
        }
        return (decoding, completeWindow)
    }

    /// Whether `row` is one `request` asks for: not excluded, and matching `filter`.
    @inline(__always)
    private func accepts(_ row: ModelSnapshot, _ request: StoreFetchRequest, filter: PreparedFilter?,
                         lookup: RowLookup) throws -> Bool {
        if !request.excluding.isEmpty && request.excluding.contains(row.id) { return false }
        if let filter, try !Self.matches(filter, row, lookup: lookup, entity: entity.name) { return false }
        return true
    }

    /// The rows in memory that `request` matches, by an index scan along `path`, in the answer's order (before its
    /// offset and limit), and how many rows were examined.
    private func matchInMemory(_ request: StoreFetchRequest, filter: PreparedFilter?, lookup: RowLookup,
                               path: AccessPath, limit: Int?) throws -> (matched: [ModelSnapshot], examined: Int) {
        var matched: [ModelSnapshot] = []
        var examined = 0
        // Stop early only when the index order is the answer's order and no count is wanted.
        let canStop = path.deliversOrder && limit != nil && request.resultType != .count
        var failure: Error?
        indexes[path.index].scan(from: path.lower, to: path.upper, reverse: path.reverse) { entry in
            // Without a base, a position is an index into `rows`.
            guard let position = memoryPosition(entry.id), let row = rows[position] else { return true }
            examined += 1
            do {
                if try accepts(row, request, filter: filter, lookup: lookup) { matched.append(row) }
            } catch {
                failure = error
                return false
            }
            return !(canStop && matched.count >= limit!)
        }
        if let failure { throw failure }
        if !path.deliversOrder {
            if request.sort.isEmpty { matched.sort { memoryPosition($0.id)! < memoryPosition($1.id)! } }
            else { try Self.sortRows(&matched, by: request.sort, entity: entity.name, lookup: lookup, limit: limit) }
        }
        return (matched, examined)
    }

    /// The rows in memory that `request` matches, by a scan of every row, in the answer's order (before its offset
    /// and limit), and how many rows were examined.
    private func matchInMemory(_ request: StoreFetchRequest, filter: PreparedFilter?, lookup: RowLookup,
                               limit: Int?) throws -> (matched: [ModelSnapshot], examined: Int) {
        var matched: [ModelSnapshot] = []
        var examined = 0
        let canStop = request.sort.isEmpty && limit != nil && request.resultType != .count
        for row in rows {
            guard let row else { continue }
            examined += 1
            if try accepts(row, request, filter: filter, lookup: lookup) { matched.append(row) }
            if canStop && matched.count >= limit! { break }
        }
        if !request.sort.isEmpty {
            try Self.sortRows(&matched, by: request.sort, entity: entity.name, lookup: lookup, limit: limit)
        }
        return (matched, examined)
    }

    /// The answer to `request` from the rows it matched, in order: its window (offset and limit), as its result
    /// type asks.
    private static func result(of request: StoreFetchRequest, matched: [ModelSnapshot], plan: FetchPlan, limit: Int?,
                               loaded: [Bool]?) -> StoreFetchResult {
        var result = StoreFetchResult(plan: plan)
        result.count = max(0, min(matched.count - request.offset, request.limit ?? .max))
        let window = request.offset < matched.count
            ? matched[request.offset..<min(matched.count, limit ?? matched.count)] : []
        result.loadedAttributes = loaded.map { marks in marks.indices.filter { marks[$0] } }
        switch request.resultType {
        case .rows: result.rows = Array(window)
        case .identifiers: result.identifiers = window.map(\.id)
        case .count: break
        }
        result.plan.rowsReturned = request.resultType == .count ? result.count : window.count
        return result
    }

    /// Whether a fetch that needs only what its filter and sort read decodes only that of the base's rows: when the
    /// entity has more rows than the base keeps decoded (``RowBase/keptRows``). A smaller one is read whole, and
    /// stays decoded for the next query.
    private var decodesInPart: Bool {
        guard let base else { return false }
        return base.count > base.keptRows
    }

    /// Replaces the rows of `matched` in `window` that a scan read in part from the base with the whole rows.
    /// Rows in memory are whole already.
    private func completeRows(_ matched: inout [ModelSnapshot], in window: Range<Int>) throws {
        guard !window.isEmpty else { return }
        let partial = window.filter { memoryPosition(matched[$0].id) == nil }
        guard !partial.isEmpty else { return }
        let whole = try readBase(partial.map { matched[$0].id })
        for (position, located) in zip(partial, whole) {
            guard let located else {
                throw RowBaseFailure(entity: entity.name, error: RowBaseMismatch(
                    description: "\(matched[position].id), read in part, is not found again"))
            }
            matched[position] = located.row
        }
    }

    /// Runs `request` over the rows of `candidates` (a relationship plan's, ``RowStorage/relationshipCandidates(_:)``):
    /// its other conjuncts are checked on those rows only. A count that nothing else constrains is the number of
    /// candidates, without reading a row.
    func fetch(_ request: StoreFetchRequest, candidates: RowStorage.RelationshipCandidates, lookup: RowLookup) throws
        -> StoreFetchResult {
        var plan = FetchPlan(entity: entity.name)
        plan.relationshipPlan = candidates.description
        var result = StoreFetchResult(plan: plan)
        if request.resultType == .count && candidates.remaining.isEmpty && request.excluding.isEmpty {
            result.count = max(0, min(candidates.ids.count - request.offset, request.limit ?? .max))
            result.plan.rowsExamined = candidates.examined
            result.plan.rowsReturned = result.count
            return result
        }
        let remaining = try candidates.remaining.isEmpty ? nil
            : PreparedFilter(candidates.remaining.count == 1 ? candidates.remaining[0] : .and(candidates.remaining))
        let limit = request.limit.map { request.offset + $0 }
        if let limit, request.resultType != .count,
           let (ordered, walked) = try orderedCandidates(request, candidates.ids, remaining: remaining, lookup: lookup,
                                                         limit: limit) {
            result.plan.relationshipPlan! += "; read in the order of index \(ordered.index), \(walked) entries walked"
            result.plan.sortedByIndex = true
            result.plan.rowsExamined = candidates.examined + ordered.read
            return Self.window(ordered.rows, of: request, limit: limit, into: result)
        }
        // The candidates' rows, in insertion order (a base row's number, then the rows inserted since).
        var located: [Located] = []
        var unread: [PersistentIdentifier] = []
        for id in candidates.ids where request.excluding.isEmpty || !request.excluding.contains(id) {
            switch known(id) {
            case .some(let found?): located.append(found)
            case .some(nil): continue
            case nil: unread.append(id)
            }
        }
        // Whole rows, as memory keeps them: a relationship's candidates are few, and what was read stays decoded for
        // the next query (the same folder's notes, again).
        located += try readBase(unread).compactMap { $0 }
        located.sort { $0.position < $1.position }
        var matched: [ModelSnapshot] = []
        for candidate in located {
            if let remaining, try !Self.matches(remaining, candidate.row, lookup: lookup, entity: entity.name) { continue }
            matched.append(candidate.row)
        }
        if !request.sort.isEmpty {
            try Self.sortRows(&matched, by: request.sort, entity: entity.name, lookup: lookup, limit: limit)
        }
        result.plan.rowsExamined = candidates.examined + located.count
        return Self.window(matched, of: request, limit: limit, into: result)
    }

    /// `result` with the window of `matched` (every match, in the answer's order) that `request` asks for.
    private static func window(_ matched: [ModelSnapshot], of request: StoreFetchRequest, limit: Int?,
                               into result: StoreFetchResult) -> StoreFetchResult {
        var result = result
        result.count = max(0, min(matched.count - request.offset, request.limit ?? .max))
        let window = request.offset < matched.count
            ? matched[request.offset..<min(matched.count, limit ?? matched.count)] : []
        switch request.resultType {
        case .rows: result.rows = Array(window)
        case .identifiers: result.identifiers = window.map(\.id)
        case .count: break
        }
        result.plan.rowsReturned = request.resultType == .count ? result.count : window.count
        return result
    }

    /// The first `limit` rows of `candidates` that match `remaining`, in `request`'s order, read by walking an index
    /// that gives that order: the walk reads no row but the candidates it reaches, so a top k of a folder's notes
    /// reads about k rows rather than every note of the folder. The base's part of the index is walked by row
    /// number (``RowBase/indexRowNumbers(_:from:to:reverse:_:)``), the rows in memory by the index in memory, and
    /// the two merged.
    ///
    /// Nil, for the caller to read every candidate, when the table has no base, no index gives the order, or the
    /// walk passes 64 entries a candidate before the window fills (the candidates lie far apart in the index's
    /// order, and reading them is cheaper).
    ///
    /// - Returns: the rows, the index's attributes (for `explain`), how many rows were read, and entries walked.
    private func orderedCandidates(_ request: StoreFetchRequest, _ candidates: Set<PersistentIdentifier>,
                                   remaining: PreparedFilter?, lookup: RowLookup, limit: Int) throws
        -> ((rows: [ModelSnapshot], index: String, read: Int), Int)? {
        guard let base, limit > 0, !candidates.isEmpty,
              let path = accessPath(filter: nil, sort: request.sort), path.deliversOrder else { return nil }
        let slots = indexSlots[path.index]
        // The candidates in memory by identifier, those in the base by row number.
        var inMemory = Set<PersistentIdentifier>(), baseKeys: [UUID] = []
        for id in candidates where request.excluding.isEmpty || !request.excluding.contains(id) {
            if memoryPosition(id) != nil {
                inMemory.insert(id)
            } else if deletedIDs[id] == nil {
                baseKeys.append(id.primaryKey)
            }
        }
        let numbers = Set(try reading { try base.rowNumbers(of: baseKeys) }.compactMap { $0 })
        let budget = max(1024, candidates.count * 64)
        var rows: [ModelSnapshot] = [], read = 0, walked = 0, exhausted = false
        var cursor = indexes[path.index].cursor(from: nil, to: nil, reverse: path.reverse)
        func precedes(_ a: IndexEntry, _ b: IndexEntry) -> Bool {
            let order = IndexTree.order(a, b)
            return path.reverse ? order > 0 : order < 0
        }
        /// Adds `row` when it matches; whether the window still wants more.
        func take(_ row: ModelSnapshot) throws -> Bool {
            read += 1
            if let remaining, try !Self.matches(remaining, row, lookup: lookup, entity: entity.name) { return true }
            rows.append(row)
            return rows.count < limit
        }
        /// Takes the candidates in memory that come before `entry` (all that are left, when nil).
        func takeMemory(before entry: IndexEntry?) throws -> Bool {
            while let next = cursor.entry, entry.map({ precedes(next, $0) }) ?? true {
                cursor.advance()
                guard inMemory.contains(next.id), let position = memoryPosition(next.id) else { continue }
                if try !take(memoryRow(position)) { return false }
            }
            return true
        }
        var previous: IndexEntry?, wantsMore = true, failure: (any Error)?
        try reading {
            try base.indexRowNumbers(path.index, from: nil, to: nil, reverse: path.reverse) { number in
                walked += 1
                if walked > budget {
                    exhausted = true
                    return false
                }
                guard numbers.contains(number), !isOverridden(number) else { return true }
                // What the rows read or the filter throw is the fetch's, not the index walk's.
                do {
                    let row = try baseRows([number])[0]
                    let entry = IndexEntry(key: slots.map { row.attributes[$0] }, id: row.id)
                    if let previous, !precedes(previous, entry) {
                        throw RowBaseFailure(entity: entity.name, error: RowBaseMismatch(
                            description: "index \(path.index) gives row \(number) out of its order"))
                    }
                    previous = entry
                    wantsMore = try takeMemory(before: entry)
                    if wantsMore { wantsMore = try take(row) }
                } catch {
                    failure = error
                    return false
                }
                return wantsMore
            }
        }
        if let failure { throw failure }
        if exhausted { return nil }
        if wantsMore { _ = try takeMemory(before: nil) }
        return ((rows, slots.map { entity.attributes[$0].name }.joined(separator: ", "), read), walked)
    }

    /// The rows of a fetch over a base that match its filter, in the answer's order (before its offset and limit),
    /// and how many rows were examined: as the scans of rows in memory in ``fetch(_:)``, over the base's rows and
    /// the changes laid over them. Kept apart so that the fetches without a base stay as they were.
    ///
    /// - Parameter decoding: the attributes to decode of the base's rows (nil: every one).
    @inline(never)
    func matchOverBase(_ request: StoreFetchRequest, filter: PreparedFilter?, lookup: RowLookup, path: AccessPath?,
                       limit: Int?, decoding: [Bool]?) throws -> (matched: [ModelSnapshot], examined: Int) {
        var matched: [ModelSnapshot] = []
        var examined = 0
        /// Whether the row matched (and was appended).
        func consider(_ row: ModelSnapshot) throws -> Bool {
            examined += 1
            if !request.excluding.isEmpty && request.excluding.contains(row.id) { return false }
            if let filter, try !Self.matches(filter, row, lookup: lookup, entity: entity.name) { return false }
            matched.append(row)
            return true
        }
        // As below: stop early only when the scan's order is the answer's and no count is wanted.
        let inOrder = path?.deliversOrder ?? request.sort.isEmpty
        let canStop = inOrder && limit != nil && request.resultType != .count
        var matchedPositions: [Int] = []
        if canStop { matchedPositions.reserveCapacity(limit!) }
        // A scan that can stop reads what it still needs, then twice as much each time a batch falls short
        // (a filter rejecting most rows), up to `batchSize`.
        var batches = 0
        func batch() -> Int {
            batches += 1
            guard canStop else { return Self.batchSize }
            return batches == 1 ? limit! : max(limit! - matched.count, 8 << min(batches, 5))
        }
        func visit(_ row: ModelSnapshot, _ position: Int) throws -> Bool {
            if try consider(row) { matchedPositions.append(position) }
            return !(canStop && matched.count >= limit!)
        }
        if let path {
            try scanOverBase(path, decoding: decoding, batch: batch, visit)
        } else {
            try forEachRow(batch: batch, decoding: decoding, visit)
        }
        if path != nil && !inOrder && request.sort.isEmpty {
            // Insertion order: a base row's number, then the inserted rows'.
            let order = matchedPositions.indices.sorted { matchedPositions[$0] < matchedPositions[$1] }
            matched = order.map { matched[$0] }
        } else if !inOrder {
            try Self.sortRows(&matched, by: request.sort, entity: entity.name, lookup: lookup, limit: limit)
        }
        return (matched, examined)
    }

    /// Visits the rows an index scan over the base and the rows in memory reaches, in the index's order (key, then
    /// identifier), each with its position, until `body` returns false: the base's entries (less those of rows
    /// changed or deleted since) merged with the in-memory index's. Rows are handed to `body` in batches of
    /// `batch()` (asked before each batch, at most ``batchSize``), the base's rows of a batch read in one
    /// ``RowBase/rows(_:)`` call. With `decoding`, the base hands over its rows decoding those attributes as it
    /// scans (``RowBase/scanIndex(_:from:to:reverse:decoding:_:)``), so none is read twice.
    func scanOverBase(_ path: AccessPath, decoding: [Bool]? = nil, batch: () -> Int,
                      _ body: (ModelSnapshot, Int) throws -> Bool) throws {
        guard let base else { return }
        /// A row reached: in memory (with its position), or a base row number still to read.
        enum Reached {
            case memory(ModelSnapshot, Int)
            case base(Int)
        }
        var threshold = max(1, min(Self.batchSize, batch()))
        var pending: [Reached] = []
        pending.reserveCapacity(threshold)
        var stopped = false
        func flush() throws {
            let numbers = pending.compactMap { if case .base(let number) = $0 { number } else { nil } }
            let read = try baseRows(numbers)
            var next = 0
            for reached in pending where !stopped {
                switch reached {
                case let .memory(row, position): stopped = try !body(row, position)
                case let .base(number):
                    stopped = try !body(read[next], number)
                    next += 1
                }
            }
            pending.removeAll(keepingCapacity: true)
            if !stopped { threshold = max(1, min(Self.batchSize, batch())) }
        }
        func push(_ reached: Reached) throws {
            pending.append(reached)
            if pending.count >= threshold { try flush() }
        }
        func memory(_ entry: IndexEntry) -> Reached {
            // The in-memory index holds entries of rows in memory only.
            let position = memoryPosition(entry.id)!
            return .memory(memoryRow(position), position)
        }
        var cursor = indexes[path.index].cursor(from: path.lower, to: path.upper, reverse: path.reverse)
        /// Whether an in-memory entry comes before a base entry in the scan's direction.
        func before(_ a: IndexEntry, _ b: IndexEntry) -> Bool {
            let order = IndexTree.order(a, b)
            return path.reverse ? order > 0 : order < 0
        }
        var failure: (any Error)?
        /// Reaches a base entry: the in-memory entries before it, then its row (read or to read) unless changed since.
        @inline(__always)
        func reach(_ entry: IndexEntry, _ number: Int, _ row: ModelSnapshot?) -> Bool {
            do {
                while !stopped, let next = cursor.entry, before(next, entry) {
                    try push(memory(next))
                    cursor.advance()
                }
                if !stopped && !isOverridden(number) {
                    if let row { try push(.memory(row, number)) } else { try push(.base(number)) }
                }
            } catch {
                failure = error
                return false
            }
            return !stopped
        }
        do {
            if let decoding {
                // The base hands over the rows it read: they come as rows in memory do, and are not read again.
                try base.scanIndex(path.index, from: path.lower, to: path.upper, reverse: path.reverse,
                                   decoding: decoding) { entry, number, row in reach(entry, number, row) }
            } else {
                try base.scanIndex(path.index, from: path.lower, to: path.upper, reverse: path.reverse) { entry, number in
                    reach(entry, number, nil)
                }
            }
        } catch {
            throw RowBaseFailure(entity: entity.name, error: error)
        }
        if let failure { throw failure }
        while !stopped, let next = cursor.entry {
            try push(memory(next))
            cursor.advance()
        }
        if !stopped { try flush() }
    }

    /// Whether `row` matches `filter`, with evaluation errors reported as ``FetchError`` naming the row.
    @inline(__always)
    static func matches(_ filter: PreparedFilter, _ row: ModelSnapshot, lookup: RowLookup, entity: String) throws
        -> Bool {
        do {
            return try filter.matches(row, lookup: lookup)
        } catch is UnwrappedNil {
            throw FetchError.unwrappedNil(entity: entity, model: row.id)
        } catch let failure as EvaluationFailure {
            throw FetchError.predicateFailed(entity: entity, reason: "at \(row.id): \(failure.reason)")
        }
    }

    /// Sorts rows by the keys, then by identifier so equal keys come back in a deterministic order, the same one
    /// an index scan gives. With `limit`, only the first `limit` rows need to come out sorted: those are kept and the
    /// others dropped (a bounded heap, O(n log limit)), for a window that never sorts every match.
    static func sortRows(_ rows: inout [ModelSnapshot], by keys: [FetchSortKey], entity: String,
                         lookup: RowLookup = .none, limit: Int? = nil) throws {
        let operands = try keys.map { try PreparedOperand($0.operand) }
        var keyed: [(values: [StoredValue], row: ModelSnapshot)] = []
        keyed.reserveCapacity(rows.count)
        for row in rows {
            do { keyed.append((try operands.map { try $0.evaluate(row, lookup: lookup) }, row)) } catch is UnwrappedNil {
                throw FetchError.unwrappedNil(entity: entity, model: row.id)
            } catch let failure as EvaluationFailure {
                throw FetchError.predicateFailed(entity: entity, reason: "at \(row.id): \(failure.reason)")
            }
        }
        let ascending = keys.map(\.ascending), lastAscending = keys.last!.ascending
        func precedes(_ a: (values: [StoredValue], row: ModelSnapshot), _ b: (values: [StoredValue], row: ModelSnapshot))
            -> Bool {
            for position in ascending.indices {
                let order = StoredValue.compare(a.values[position], b.values[position])
                if order != 0 { return ascending[position] ? order < 0 : order > 0 }
            }
            // Ties follow the identifier, in the direction of the last key, as a descending index scan does.
            return lastAscending ? a.row.id < b.row.id : b.row.id < a.row.id
        }
        if let limit, limit < keyed.count / 2 {
            rows = TopK.select(keyed, count: limit, by: precedes).map(\.row)
            return
        }
        keyed.sort(by: precedes)
        rows = keyed.map(\.row)
    }
}

/// The first `count` elements of a sequence in an order, without sorting it all: a bounded max-heap of the best
/// seen so far, then a sort of those (O(n log count)).
enum TopK {
    static func select<Element>(_ elements: some Sequence<Element>, count: Int,
                                by precedes: (Element, Element) -> Bool) -> [Element] {
        guard count > 0 else { return [] }
        // A max-heap by `precedes`: the root is the worst of those kept.
        var heap: [Element] = []
        heap.reserveCapacity(count + 1)
        func siftUp(_ index: Int) {
            var child = index
            while child > 0 {
                let parent = (child - 1) / 2
                guard precedes(heap[parent], heap[child]) else { return }
                heap.swapAt(parent, child)
                child = parent
            }
        }
        func siftDown(_ index: Int) {
            var parent = index
            while true {
                let left = 2 * parent + 1, right = left + 1
                var largest = parent
                if left < heap.count && precedes(heap[largest], heap[left]) { largest = left }
                if right < heap.count && precedes(heap[largest], heap[right]) { largest = right }
                if largest == parent { return }
                heap.swapAt(parent, largest)
                parent = largest
            }
        }
        for element in elements {
            if heap.count < count {
                heap.append(element)
                siftUp(heap.count - 1)
            } else if precedes(element, heap[0]) {
                heap[0] = element
                siftDown(0)
            }
        }
        return heap.sorted(by: precedes)
    }
}

extension FetchFilter.ComparisonOperator {
    /// The operator with its operands swapped (`5 < x` is `x > 5`).
    var mirrored: Self {
        switch self {
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        default: self
        }
    }
}
