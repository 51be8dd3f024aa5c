import Foundation
import NoteKit
import NoteKitFileStore

/// Opening, closing, copying and inspecting file stores in tests.
public enum StoreFiles {
    /// A container on the file store at `url`.
    public static func open(_ url: URL, _ types: [any PersistentModel.Type],
                            configure: (inout FileStoreConfiguration) -> Void = { _ in }) throws -> ModelContainer {
        var configuration = FileStoreConfiguration(url: url)
        configure(&configuration)
        return try ModelContainer(for: Schema(types), configurations: [configuration])
    }

    /// The container's file store.
    public static func store(_ container: ModelContainer) -> FileStore { container.store as! FileStore }

    /// Closes the container's store: flushes, releases the lock.
    public static func close(_ container: ModelContainer) throws { try store(container).close() }

    /// Every file under `url` with its bytes, to prove that something wrote nothing.
    public static func contents(of url: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: url.path) else { return [:] }
        while let relative = walker.nextObject() as? String {
            let path = url.appendingPathComponent(relative).path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                result[relative] = FileManager.default.contents(atPath: path)
            }
        }
        return result
    }

    /// A copy of the store at `url` in a new place.
    public static func copy(_ url: URL) throws -> URL {
        let copy = TemporaryStores.newURL("copy")
        try FileManager.default.copyItem(at: url, to: copy)
        return copy
    }

    /// The path of segment `number` of the store at `url`.
    public static func segment(_ url: URL, _ number: Int = 1) -> URL {
        let digits = String(number)
        return url.appendingPathComponent("segments/" + String(repeating: "0", count: 6 - digits.count) + digits + ".seg")
    }

    /// The problems `StoreVerifier` finds in the store at `url` other than a torn tail and the warnings (which the
    /// next writable open recovers or repairs: a manifest's schema copy, a stale or damaged checkpoint).
    package static func unrecoverableProblems(at url: URL,
                                              fileSystem: any StoreFileSystem = POSIXFileSystem()) -> [String] {
        do {
            return try StoreVerifier.verify(at: url, fileSystem: fileSystem).damage.map(\.description)
        } catch {
            return ["verify could not read the store: \(error)"]
        }
    }

    /// The byte offsets at which the records of a segment start (after its magic line).
    public static func recordOffsets(_ segment: URL) throws -> [Int] {
        let bytes = try [UInt8](Data(contentsOf: segment))
        var offsets: [Int] = []
        var position = (bytes.firstIndex(of: 0x0A) ?? 0) + 1
        // A record never starts with a zero byte: zeros there are space reserved for appends (an open store's).
        while position + 18 <= bytes.count, bytes[position] != 0 {
            offsets.append(position)
            let length = Int(String(decoding: bytes[position..<(position + 8)], as: UTF8.self), radix: 16) ?? 0
            position += 18 + length + 1
        }
        return offsets
    }

    /// The bytes of `data` without the zeros at its end: a segment's records without the space an open store
    /// reserved after them.
    public static func withoutReservedSpace(_ data: some Collection<UInt8>) -> Int {
        var count = data.count
        for byte in data.reversed() {
            guard byte == 0 else { break }
            count -= 1
        }
        return count
    }
}
