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
    var attributeValues: ContiguousArray<Any> = []
    var relationshipValues: ContiguousArray<Any> = []
    var attributeDeclarations: [AttributeDeclaration] = []
    var relationshipDeclarations: [RelationshipDeclaration] = []
    /// Greater than zero while metadata is being recorded.
    var recordingDepth = 0
    /// Set while the engine materializes one object; consumed by that object's base `init()`.
    var materialization: Materialization?
    /// Set while a type's prototype is created to record its metadata; consumed by the prototype's base `init()`.
    var recording: Recording?
    /// What the prototype's base `init()` handed over.
    var recorded: Recorded?

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

/// What an ``Attribute`` wrapper declares, captured once per type while its metadata is recorded.
struct AttributeDeclaration {
    let valueType: Any.Type
    let codec: AnyAttributeCodec?
    let options: [Schema.Attribute.Option]
    let originalName: String?
}

/// What a ``Relationship`` wrapper declares, captured once per type while its metadata is recorded.
struct RelationshipDeclaration {
    let destination: any PersistentModel.Type
    let isToMany: Bool
    let deleteRule: Schema.Relationship.DeleteRule
    let minimumModelCount: Int?
    let maximumModelCount: Int?
    let originalName: String?
    let inverse: AnyKeyPath?
}
