/// A context's objects by identifier, without keeping them alive: an object keeps its context alive, so the
/// context must not keep the object, or neither would ever be freed. Objects with unsaved changes are kept by the
/// context's change lists.
///
/// The entries are unowned rather than weak: a weak reference gives an object a side table, which sends every
/// retain and release of it down the runtime's slow path (measured: W1's single-note save 0.10 → 0.17 ms, the
/// pinned top-20 fetch 5.7 → 7.9 µs). Instead an object leaves the registry of its context when it leaves the
/// context or is freed (``ModelObject``'s `_$context` observer and `deinit`), so an entry never outlives its
/// object.
///
/// The invariants that keep this safe: an entry for an object exists only in the registry of the context the
/// object's `_$context` names, and every place that registers an object sets its `_$context` to that context
/// first; an object is registered under the identifier its `_$id` holds, and its `_$id` changes only while it is
/// not registered (an upsert takes it out under the old identifier and registers it under the new one).
///
/// The objects hold their identifiers, so the table does not keep a second copy of each: a `[PersistentIdentifier:
/// ModelObject]` would take 32-byte buckets, a power of two of them between three eighths and three quarters full
/// (42 to 85 bytes an object; 67 for a fetch of a million). Here a slot is the object's reference and 32 bits of its
/// identifier's hash, 16 bytes, in a table at most four fifths full: 20 bytes an object when reserved for a fetch,
/// at most 40 when grown. A look-up compares hash bits and confirms a match by reading the object's `_$id`. Linear
/// probing; a removal shifts the following slots back (no tombstones). The same scheme as the store's
/// ``RowPositions``.
struct ObjectRegistry: Sequence {
    private struct Slot {
        /// nil: an empty slot.
        var object: Unmanaged<ModelObject>?
        var hashBits: UInt32
        static var empty: Slot { Slot(object: nil, hashBits: 0) }
    }

    private var slots: [Slot] = []
    /// The number of objects registered.
    private(set) var count = 0

    /// The object registered under `id`; setting one registers it in place of any other under `id`, setting nil
    /// takes out the one registered.
    ///
    /// - Complexity: O(1) on average: one hash of `id`, and one read of an object's identifier for each slot whose
    ///   hash bits match (nearly always only the object's own).
    subscript(id: PersistentIdentifier) -> ModelObject? {
        get {
            guard let slot = find(id) else { return nil }
            return slots[slot].object!.takeUnretainedValue()
        }
        set {
            let found = find(id)
            guard let newValue else {
                if let found { remove(at: found) }
                return
            }
            assert(newValue._$id == id, "an object is registered under the identifier it holds")
            if let found {
                slots[found].object = Unmanaged.passUnretained(newValue)
                return
            }
            if (count + 1) * 5 > slots.count * 4 { grow(toHold: Swift.max(count + 1, 2 * count)) }
            place(Slot(object: Unmanaged.passUnretained(newValue), hashBits: Self.hashBits(id)))
            count += 1
        }
    }

    /// Makes room for `count` more objects at once, when the registry is small next to them (a large fetch into a
    /// fresh context): growing slot by slot would move every entry at each doubling. A registry that already
    /// holds as many is left as it is, since the fetch may well return objects it has.
    mutating func reserve(adding count: Int) {
        guard count > 64, self.count < count else { return }
        grow(toHold: self.count + count)
    }

    /// Removes `object`'s entry, if it is the object registered under its identifier (an upsert may have given
    /// its identifier to another object).
    mutating func forget(_ object: ModelObject) {
        guard let found = find(object._$id), slots[found].object!.takeUnretainedValue() === object else { return }
        remove(at: found)
    }

    /// The identifiers of the objects registered: what the context loaded and still has, for tests that check what
    /// a fetch did not load.
    var keys: [PersistentIdentifier] { map(\.key) }

    /// The objects, with their identifiers, in no particular order.
    func makeIterator() -> some IteratorProtocol<(key: PersistentIdentifier, value: ModelObject)> {
        slots.lazy.compactMap { slot in
            slot.object.map { object in
                let object = object.takeUnretainedValue()
                return (key: object._$id, value: object)
            }
        }.makeIterator()
    }

    /// The bytes the table's slots take (for tests of what an object costs).
    var heldBytes: Int { slots.isEmpty ? 0 : 32 + MemoryLayout<Slot>.stride * slots.count }

    // MARK: Private

    /// The 32 bits of `id`'s hash a slot keeps (the process's seeded hash, as a dictionary's).
    private static func hashBits(_ id: PersistentIdentifier) -> UInt32 { UInt32(truncatingIfNeeded: id.hashValue) }

    /// The first probe of a slot with `hashBits` among `size` slots: the bits scaled to `0..<size`.
    private static func home(_ hashBits: UInt32, _ size: Int) -> Int {
        Int((UInt64(hashBits) &* UInt64(size)) >> 32)
    }

    /// The slot of the object registered under `id`.
    private func find(_ id: PersistentIdentifier) -> Int? {
        guard count > 0 else { return nil }
        let bits = Self.hashBits(id), size = slots.count
        var at = Self.home(bits, size)
        while let object = slots[at].object {
            if slots[at].hashBits == bits, object._withUnsafeGuaranteedRef({ $0._$id == id }) { return at }
            at += 1
            if at == size { at = 0 }
        }
        return nil
    }

    private mutating func place(_ slot: Slot) {
        let size = slots.count
        var at = Self.home(slot.hashBits, size)
        while slots[at].object != nil {
            at += 1
            if at == size { at = 0 }
        }
        slots[at] = slot
    }

    private mutating func remove(at found: Int) {
        let size = slots.count
        var hole = found
        var next = hole + 1 == size ? 0 : hole + 1
        // Shift back every slot after the hole that is not already at or past its home (its first probe).
        while slots[next].object != nil {
            let home = Self.home(slots[next].hashBits, size)
            // The slot may fill the hole when its home is not in (hole, next], cyclically.
            if hole <= next ? (home <= hole || home > next) : (home <= hole && home > next) {
                slots[hole] = slots[next]
                hole = next
            }
            next = next + 1 == size ? 0 : next + 1
        }
        slots[hole] = .empty
        count -= 1
    }

    /// Re-places every slot in the fewest slots, at least 16, that hold `needed` at four fifths full.
    private mutating func grow(toHold needed: Int) {
        let size = Swift.max(16, (needed * 5 + 3) / 4)
        guard size > slots.count else { return }
        let old = slots
        slots = [Slot](repeating: .empty, count: size)
        for slot in old where slot.object != nil { place(slot) }
    }
}
