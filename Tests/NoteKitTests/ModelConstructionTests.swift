import Foundation
import NoteKit
import NoteKitTestSupport
import Synchronization
import Testing

// How a model object gets its initial values (ModelConstruction.swift): each wrapper hands its value to the base
// init through a per-thread stack, already in stored form; the engine's loads skip the defaults.

/// A model whose first construction may happen while another object is being loaded from a store.
final class LateHelper: PersistentModel {
    @Attribute var label = "helper"
    @Attribute var weight = 3
    required init() {}
}

/// Builds a ``LateHelper`` in a transient default, only once ``buildsHelper`` is set.
final class LateHelperHost: PersistentModel {
    static let buildsHelper = Atomic<Bool>(false)
    @Attribute var name = "host"
    @Transient var helper: LateHelper? = LateHelperHost.buildsHelper.load(ordering: .relaxed) ? LateHelper() : nil
    required init() {}
}

/// A model whose defaults construct another model between its own attributes.
final class NestingOuter: PersistentModel {
    @Attribute var name = "outer"
    @Relationship var inner: NestingInner? = NestingInner(label: "made by the default")
    @Attribute var count = 7
    @Attribute var tags = ["a", "b"]
    required init() {}
}

final class NestingInner: PersistentModel {
    @Attribute var label = "inner"
    @Attribute var score: Double? = 1.5
    @Relationship(inverse: \NestingOuter.inner) var outers: [NestingOuter] = []
    required init() {}
    convenience init(label: String) {
        self.init()
        self.label = label
    }
}

/// A `Codable` value whose encoding always throws.
struct UnencodableValue: Codable, Equatable {
    struct Refused: Error {}
    init() {}
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws { throw Refused() }
}

final class UnencodableHolder: PersistentModel {
    @Attribute var name = ""
    @Attribute var value = UnencodableValue()
    required init() {}
}

@Suite("Construction: a model object starts with its declared initial values")
struct ModelConstructionTests {
    @Test("Construction: a model first built while another object is loaded still records its real defaults",
          arguments: StoreKind.allCases)
    func metadataRecordedDuringLoad(kind: StoreKind) async {
        // A fresh process, so that LateHelper's metadata is built for the first time during the load.
        await #expect(processExitsWith: .success) { [store = kind.rawValue as String] in
            do {
                guard let kind = StoreKind(rawValue: store) else { exit(2) }
                let container = try kind.makeContainer([LateHelperHost.self])
                let writer = ModelContext(container)
                writer.insert(LateHelperHost())
                try writer.save()
                LateHelperHost.buildsHelper.store(true, ordering: .relaxed)
                let loaded = try ModelContext(container).fetch(FetchDescriptor<LateHelperHost>())
                guard loaded.count == 1, loaded[0].name == "host" else { exit(3) }
                guard loaded[0].helper?.label == "helper", loaded[0].helper?.weight == 3 else { exit(4) }
                let entity = try Schema([LateHelper.self]).entity(named: "LateHelper")
                guard entity?.attribute(named: "label")?.defaultValue == .string("helper"),
                      entity?.attribute(named: "weight")?.defaultValue == .int(3) else { exit(5) }
                let fresh = LateHelper()
                exit(fresh.label == "helper" && fresh.weight == 3 ? 0 : 6)
            } catch {
                exit(7)
            }
        }
    }

    @Test("Construction: a model built by another's default keeps its values, and the outer one keeps its own",
          arguments: StoreKind.allCases)
    func nestedConstruction(kind: StoreKind) throws {
        let outer = NestingOuter()
        #expect(outer.name == "outer" && outer.count == 7 && outer.tags == ["a", "b"])
        let inner = try #require(outer.inner)
        #expect(inner.label == "made by the default" && inner.score == 1.5)

        let container = try kind.makeContainer([NestingOuter.self])
        let context = ModelContext(container)
        context.insert(outer)
        #expect(inner.modelContext === context, "the inner object is inserted with the outer one")
        try context.save()

        let reader = ModelContext(container)
        let loaded = try #require(try reader.fetch(FetchDescriptor<NestingOuter>()).first)
        #expect(loaded !== outer && loaded.persistentModelID == outer.persistentModelID)
        #expect(loaded.name == "outer" && loaded.count == 7 && loaded.tags == ["a", "b"])
        let loadedInner = try #require(loaded.inner)
        #expect(loadedInner.persistentModelID == inner.persistentModelID && loadedInner.label == "made by the default")
        #expect(try reader.fetch(FetchDescriptor<NestingInner>()).count == 1,
                "loading an object does not evaluate its defaults, so no second inner object exists")
        let registered: NestingOuter? = reader.registeredModel(for: loaded.persistentModelID)
        #expect(registered === loaded, "one instance per identifier")
    }

    @Test("Construction: an initial value whose encoding throws stops the process, naming the property")
    func unencodableInitialValue() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = UnencodableHolder()
        }
        let output = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(output.contains("UnencodableHolder.value: the initial value cannot be encoded"), "\(output)")
    }
}
