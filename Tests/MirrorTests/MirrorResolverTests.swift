import Foundation
import NoteKit
import NoteKitStressSupport
import NoteKitTestSupport
import Synchronization
import Testing
@testable import NoteKitMirror

/// Issue 18, item 4: a per-entity resolver for what last-writer-wins would lose. Two devices edit one note's body
/// offline; with a resolver both texts survive, on every device, and the resolver runs once, on one device.
@Suite("Custom conflict resolvers", .enabled(if: TemporaryPostgres.runsServerTests,
                                             Comment(rawValue: TemporaryPostgres.unavailableReason ?? "")))
struct MirrorResolverTests {
    typealias Zone = StoreMirrorTests.Zone

    /// The conflicts a resolver was given.
    final class Calls: Sendable {
        let list = Mutex<[MirrorConflict]>([])
        func withLock<T>(_ body: (inout [MirrorConflict]) -> T) -> T { list.withLock { body(&$0) } }
    }

    /// Keeps both bodies, in a fixed order, and counts its calls.
    static func keepBoth(_ calls: Calls) -> MirrorConflictResolver {
        { conflict in
            calls.withLock { $0.append(conflict) }
            guard case .string(let mine) = conflict.local, case .string(let theirs) = conflict.server,
                  conflict.property == "body" else { return nil }
            return .string([mine, theirs].sorted().joined(separator: " | "))
        }
    }

    static func editBody(_ container: ModelContainer, _ id: UUID, _ body: String) throws {
        let note = try #require(try StoreMirrorTests.note(container, id))
        note.body = body
        try note.modelContext?.save()
    }

    static func shared(_ kind: StoreKind) throws -> (Zone, ModelContainer, StoreMirror, ModelContainer, StoreMirror, UUID) {
        let zone = try Zone(kind)
        let (a, mirrorA) = try zone.device()
        let (b, mirrorB) = try zone.device()
        let note = NoteRecord()
        note.title = "shared"
        let context = ModelContext(a)
        context.insert(note)
        try context.save()
        try mirrorA.sync()
        try mirrorB.sync()
        return (zone, a, mirrorA, b, mirrorB, note.id)
    }

    @Test("Concurrent edits of one attribute go to the resolver once, and every device gets what it returns",
          arguments: StoreKind.allCases)
    func concurrentEditsAreResolved(kind: StoreKind) throws {
        let (zone, a, mirrorA, b, mirrorB, id) = try Self.shared(kind)
        _ = zone
        let calls = Calls()
        mirrorA.resolveConflicts(of: NoteRecord.self, with: Self.keepBoth(calls))
        mirrorB.resolveConflicts(of: NoteRecord.self, with: Self.keepBoth(calls))
        try Self.editBody(a, id, "from A")
        Thread.sleep(forTimeInterval: 0.01)
        try Self.editBody(b, id, "from B")
        try mirrorA.sync()
        try mirrorB.sync()
        try mirrorA.sync()
        for store in [a, b] { #expect(try StoreMirrorTests.note(store, id)?.body == "from A | from B") }
        let seen = calls.withLock { $0 }
        #expect(seen.count == 1, "one device resolves a conflict: \(seen)")
        #expect(seen.first.map { ($0.local, $0.server, $0.localIsLater) } ?? (.null, .null, false)
            == (.string("from B"), .string("from A"), true))

        // An edit made after seeing the other device's is no conflict.
        try Self.editBody(a, id, "after seeing both")
        try mirrorA.sync()
        try mirrorB.sync()
        try Self.editBody(b, id, "later still")
        try mirrorB.sync()
        try mirrorA.sync()
        #expect(calls.withLock { $0.count } == 1)
        for store in [a, b] { #expect(try StoreMirrorTests.note(store, id)?.body == "later still") }
    }

    @Test("A local edit not sent yet when the other device's arrives is resolved too")
    func editPendingAtImportIsResolved() throws {
        let (zone, a, mirrorA, b, mirrorB, id) = try Self.shared(.file)
        _ = zone
        let calls = Calls()
        mirrorB.resolveConflicts(of: NoteRecord.self, with: Self.keepBoth(calls))
        try Self.editBody(a, id, "from A")
        try mirrorA.sync()
        // B's save lands between its sync's export and its import.
        mirrorB.afterExport.withLock { hook in
            hook = { try? Self.editBody(b, id, "from B") }
        }
        try mirrorB.sync()
        mirrorB.afterExport.withLock { $0 = nil }
        try mirrorA.sync()
        for store in [a, b] { #expect(try StoreMirrorTests.note(store, id)?.body == "from A | from B") }
        #expect(calls.withLock { $0.count } == 1)
    }

    @Test("Without a resolver, or when it returns nil or a value of another type, the later edit wins",
          arguments: [0, 1, 2])
    func lastWriterWinsOtherwise(variant: Int) throws {
        let (zone, a, mirrorA, b, mirrorB, id) = try Self.shared(.inMemory)
        _ = zone
        if variant == 1 { mirrorB.resolveConflicts(of: NoteRecord.self) { _ in nil } }
        if variant == 2 { mirrorB.resolveConflicts(of: NoteRecord.self) { _ in .int(7) } }
        try Self.editBody(a, id, "earlier, from A")
        Thread.sleep(forTimeInterval: 0.01)
        try Self.editBody(b, id, "later, from B")
        try mirrorA.sync()
        try mirrorB.sync()
        try mirrorA.sync()
        for store in [a, b] { #expect(try StoreMirrorTests.note(store, id)?.body == "later, from B") }
    }
}
