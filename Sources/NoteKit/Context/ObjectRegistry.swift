/// A context's objects by identifier, held weakly: an object keeps its context alive, so the context must not keep
/// the object, or neither would ever be freed. Objects with unsaved changes are kept by the context's change lists.
///
/// Entries of freed objects are dropped from time to time, when the table has doubled since it last did.
struct ObjectRegistry: Sequence {
    private struct Entry {
        weak var object: ModelObject?
    }

    private var entries: [PersistentIdentifier: Entry] = [:]
    private var compactionThreshold = 1024

    subscript(id: PersistentIdentifier) -> ModelObject? {
        get { entries[id]?.object }
        set {
            guard let newValue else {
                entries[id] = nil
                return
            }
            entries[id] = Entry(object: newValue)
            if entries.count >= compactionThreshold {
                entries = entries.filter { $0.value.object != nil }
                compactionThreshold = Swift.max(1024, entries.count * 2)
            }
        }
    }

    /// The identifiers of the objects registered and not removed, including objects freed since the last time
    /// freed entries were dropped: what the context loaded, for tests that check what a fetch did not load.
    var keys: some Collection<PersistentIdentifier> { entries.keys }

    /// The live objects, with their identifiers, in no particular order.
    func makeIterator() -> some IteratorProtocol<(key: PersistentIdentifier, value: ModelObject)> {
        entries.lazy.compactMap { entry in entry.value.object.map { (key: entry.key, value: $0) } }.makeIterator()
    }
}
