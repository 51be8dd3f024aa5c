import Foundation
import NoteKitTestSupport
import Testing
@testable import NoteKit

/// A model type the container's schema does not know is refused with a typed error when saved, never a crash.
@Suite("Saving: a model outside the container's schema is refused")
struct UnregisteredModelTests {
    @Test("Inserting an object of a type the container does not know: save throws, naming it",
          arguments: StoreKind.allCases)
    func unknownType(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        context.insert(Drawer(name: "stray"))
        #expect(throws: SaveError.self) { try context.save() }
        do { try context.save() } catch {
            #expect("\(error)".contains("Drawer"))
        }
    }

    /// Two types with one entity name: the container knows one of them.
    enum Other {
        final class Contact: PersistentModel {
            @Attribute var nickname = ""
            @Attribute var age = 0
            required init() {}
        }
    }

    @Test("Inserting an object of another type with a registered entity name: save throws, naming both",
          arguments: StoreKind.allCases)
    func sameEntityNameOtherType(kind: StoreKind) throws {
        let container = try kind.makeContainer([Contact.self])
        let context = ModelContext(container)
        context.insert(Other.Contact())
        #expect(throws: SaveError.self) { try context.save() }
    }
}
