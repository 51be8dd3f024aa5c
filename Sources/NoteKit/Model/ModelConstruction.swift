#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How a model object learns the initial values its property wrappers were given, without reflection.
///
/// Swift runs a class's property initializers in declaration order before the base class's `init()`. Each
/// ``Attribute`` and ``Relationship`` wrapper pushes its initial value onto this per-thread stack and keeps the
/// stack position it got (its *stamp*). When ``ModelObject``'s `init()` runs last, it pops exactly as many values as
/// its type declares, and records where its frame started: a wrapper's slot is then `stamp - frameStart`, an O(1)
/// computation with no lookup. A model constructed inside another's property initializer pushes and pops entirely
/// above its parent's values, so frames never interleave.
///
/// Two other modes reuse the same path:
/// - *recording*: building a type's metadata; wrappers also push their declarations (options, delete rules…).
/// - *materializing*: the engine creating an object for a stored row; wrappers skip evaluating their default
///   values (their `wrappedValue` is an autoclosure) and the base `init()` takes the row instead.
final class ConstructionStack {
    /// Each attribute wrapper's initial value in its stored form, encoded by the wrapper, which knows its type
    /// statically (so no value is boxed as `Any` and cast back). `.null` while materializing, and for a type NoteKit
    /// cannot store (the schema refuses it).
    let attributeValues = ValueStack<StoredValue>()
    /// Each relationship wrapper's initial targets.
    let relationshipValues = ValueStack<[ModelObject]>()
    /// While metadata is recorded: the wrappers' initial values as given, in step with `attributeDeclarations`.
    var attributeInitials: [Any] = []
    var attributeDeclarations: [AttributeDeclaration] = []
    var relationshipDeclarations: [RelationshipDeclaration] = []
    /// Initial values whose encoding threw, by stamp, until the object they belong to reports them.
    var encodingFailures: [(stamp: Int, error: any Error)] = []
    /// Greater than zero while metadata is being recorded.
    var recordingDepth = 0
    /// Set while the engine materializes one object; consumed by that object's base `init()`.
    var materialization: Materialization?
    /// Set while a type's prototype is created to record its metadata; consumed by the prototype's base `init()`.
    var recording: Recording?
    /// What the prototype's base `init()` handed over.
    var recorded: Recorded?
    /// Codecs by attribute value type, made once per thread: a wrapper finds its own without a lock or a cast.
    private var codecs: [ObjectIdentifier: CodecEntry] = [:]
    /// Metadata by model type, as ``ModelMetadata/of(_:)`` gives it, without its lock and conformance check.
    private var metadataByType: [ObjectIdentifier: ModelMetadata] = [:]

    private struct CodecEntry {
        let codec: AnyAttributeCodec?
    }

    struct Recording {
        let type: ObjectIdentifier
        let attributeMark: Int
        let relationshipMark: Int
    }

    struct Recorded {
        let attributeValues: [Any]
        let attributeDeclarations: [AttributeDeclaration]
        let relationshipDeclarations: [RelationshipDeclaration]
        let attributeFrame: Int
        let relationshipFrame: Int
    }

    struct Materialization {
        let type: ObjectIdentifier
        let attributeFrame: Int
        let relationshipFrame: Int
    }

    /// The codec for attribute values of type `Value`, or nil when NoteKit cannot store that type.
    ///
    /// Codecs are pure conversions chosen by the value type alone, so the one cached here converts exactly as the
    /// attribute's own (``AttributeMetadata/codec``) does; recording gives the metadata this very instance.
    func codec<Value>(for type: Value.Type) -> AttributeCodec<Value>? {
        let key = ObjectIdentifier(type)
        if let entry = codecs[key] {
            // The entry was made for this very type just below. (No `Optional.map`: its closure would need the
            // metadata of `AttributeCodec<Value>?`, looked up on every call.)
            guard let codec = entry.codec else { return nil }
            return unsafeDowncast(codec, to: AttributeCodec<Value>.self)
        }
        let made = AttributeCodecFactory.make(type)
        codecs[key] = CodecEntry(codec: made)
        return made
    }

    /// The metadata of `type`, a subclass of ``ModelObject``, built on first use.
    func metadata(of type: ModelObject.Type) -> ModelMetadata {
        let key = ObjectIdentifier(type)
        if let known = metadataByType[key] { return known }
        guard let modelType = type as? any PersistentModel.Type else {
            preconditionFailure("\(type) inherits ModelObject but does not conform to PersistentModelProtocol; "
                                + "declare it as `final class \(type): PersistentModel`")
        }
        let metadata = ModelMetadata.of(modelType)
        metadataByType[key] = metadata
        return metadata
    }

    /// The first initial value at or above `stamp` whose encoding threw, and forgets those failures.
    func takeEncodingFailure(from stamp: Int) -> (stamp: Int, error: any Error)? {
        guard let index = encodingFailures.firstIndex(where: { $0.stamp >= stamp }) else { return nil }
        let failure = encodingFailures[index]
        encodingFailures.removeSubrange(index...)
        return failure
    }

    var isMaterializing: Bool { materialization != nil }

    /// The calling thread's stack. Model construction is synchronous, so a thread-local is exact.
    static var current: ConstructionStack {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<ConstructionStack>.fromOpaque(pointer).takeUnretainedValue()
        }
        let stack = ConstructionStack()
        pthread_setspecific(key, Unmanaged.passRetained(stack).toOpaque())
        return stack
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<ConstructionStack>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<ConstructionStack>.fromOpaque(pointer).release() }
            #endif
        }
        return key
    }()
}

/// A stack of values whose top elements can be moved out as an array, without copying or retaining them.
///
/// A class (one per thread, in ``ConstructionStack``), so that pushing never checks the uniqueness of a buffer.
final class ValueStack<Element> {
    private var base: UnsafeMutablePointer<Element>
    private var capacity: Int
    private(set) var count = 0

    init() {
        capacity = 64
        base = .allocate(capacity: capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    func append(_ element: Element) {
        if count == capacity {
            let grown = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
            grown.moveInitialize(from: base, count: count)
            base.deallocate()
            base = grown
            capacity *= 2
        }
        (base + count).initialize(to: element)
        count += 1
    }

    /// The element at `index`, which must be below ``count``.
    subscript(index: Int) -> Element {
        precondition(index >= 0 && index < count, "ValueStack index out of range")
        return base[index]
    }

    /// Removes the top `k` elements.
    func removeLast(_ k: Int) {
        precondition(k >= 0 && k <= count, "ValueStack has fewer than \(k) elements")
        (base + (count - k)).deinitialize(count: k)
        count -= k
    }

    /// Removes the top `k` elements and returns them in order, moved rather than copied.
    func popLast(_ k: Int) -> [Element] {
        precondition(k >= 0 && k <= count, "ValueStack has fewer than \(k) elements")
        guard k > 0 else { return [] }
        let start = count - k
        count = start
        return Array(unsafeUninitializedCapacity: k) { buffer, initialized in
            buffer.baseAddress!.moveInitialize(from: base + start, count: k)
            initialized = k
        }
    }
}

/// What an ``Attribute`` wrapper declares, captured once per type while its metadata is recorded.
struct AttributeDeclaration {
    /// `Attribute<Value>`: how the type's metadata tells this wrapper's stored property from others without a
    /// dynamic cast.
    let wrapperType: Any.Type
    let valueType: Any.Type
    let codec: AnyAttributeCodec?
    let options: [Schema.Attribute.Option]
    let originalName: String?
}

/// What a ``Relationship`` wrapper declares, captured once per type while its metadata is recorded.
struct RelationshipDeclaration {
    /// `Relationship<Value>`, as ``AttributeDeclaration/wrapperType``.
    let wrapperType: Any.Type
    let destination: any PersistentModel.Type
    let isToMany: Bool
    let deleteRule: Schema.Relationship.DeleteRule
    let minimumModelCount: Int?
    let maximumModelCount: Int?
    let originalName: String?
    let inverse: AnyKeyPath?
}
