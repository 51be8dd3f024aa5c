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
/// The invariant that keeps this safe: an entry for an object exists only in the registry of the context the
/// object's `_$context` names. Every place that registers an object sets its `_$context` to that context first.
struct ObjectRegistry: Sequence {
    private struct Entry {
        unowned(unsafe) let object: ModelObject
    }

    private var entries: [PersistentIdentifier: Entry] = [:]

    subscript(id: PersistentIdentifier) -> ModelObject? {
        get { entries[id]?.object }
        set { entries[id] = newValue.map(Entry.init) }
    }

    /// Makes room for `count` more objects at once, when the registry is small next to them (a large fetch into a
    /// fresh context): growing entry by entry would rehash every entry at each doubling. A registry that already
    /// holds as many is left as it is, since the fetch may well return objects it has.
    mutating func reserve(adding count: Int) {
        guard count > 64, entries.count < count else { return }
        entries.reserveCapacity(entries.count + count)
    }

    /// Removes `object`'s entry, if it is the object registered under its identifier (an upsert may have given
    /// its identifier to another object).
    mutating func forget(_ object: ModelObject) {
        guard let entry = entries[object._$id], entry.object === object else { return }
        entries[object._$id] = nil
    }

    /// The identifiers of the objects registered: what the context loaded and still has, for tests that check what
    /// a fetch did not load.
    var keys: some Collection<PersistentIdentifier> { entries.keys }

    /// The objects, with their identifiers, in no particular order.
    func makeIterator() -> some IteratorProtocol<(key: PersistentIdentifier, value: ModelObject)> {
        entries.lazy.map { entry in (key: entry.key, value: entry.value.object) }.makeIterator()
    }
}
