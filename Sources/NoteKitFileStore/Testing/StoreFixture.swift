import Foundation
import NoteKit

/// Migration testing: freeze a schema, write a store with it, commit the store as a fixture, and replay it against
/// today's models in a test. This is the tool SwiftData users ask for; NoteKit's own v1–v3 fixtures are made with it.
///
/// The recipe:
/// 1. Before changing a schema, copy today's model declarations into a `VersionedSchema` enum (the *frozen*
///    declarations) and never edit them again. Writing the fixture with today's models would record today's schema
///    and prove nothing.
/// 2. Write the fixture once with ``write(to:versionedSchema:populate:)`` and commit it with its `SHA256SUMS`.
/// 3. In a test, ``verify(_:)`` the checksums, then ``openCopy(of:schema:migrationPlan:configure:)`` and check what your users
///    would see. The committed fixture is never opened itself, so it never changes.
///
/// ```swift
/// let url = try StoreFixture.write(to: fixtures.appending(path: "v3"), versionedSchema: SchemaV3.self) { context in
///     context.insert(SchemaV3.Note(title: "Hello"))
/// }
/// // later, in a test:
/// #expect(try StoreFixture.verify(fixtureURL).isEmpty)
/// let (container, _) = try StoreFixture.openCopy(of: fixtureURL, schema: Schema([Note.self]))
/// ```
public enum StoreFixture {
    /// The checksum list beside a fixture's files, in `sha256sum` format (`sha256sum -c SHA256SUMS` checks it).
    public static let checksumFileName = "SHA256SUMS"

    /// Writes a new store at `url` with `versionedSchema`'s models, fills it with `populate`, closes it, and writes
    /// its checksum list.
    ///
    /// - Throws: ``FixtureError/exists(_:)`` when `url` exists (a committed fixture is never rewritten); what
    ///   `populate` or the store throws.
    @discardableResult
    public static func write(to url: URL, versionedSchema: any VersionedSchema.Type,
                             populate: (ModelContext) throws -> Void) throws -> URL {
        guard !FileManager.default.fileExists(atPath: url.path) else { throw FixtureError.exists(url.path) }
        let configuration = FileStoreConfiguration(url: url, automaticCompaction: nil)
        let container = try ModelContainer(for: Schema(versionedSchema: versionedSchema),
                                           configurations: [configuration])
        let context = ModelContext(container)
        try populate(context)
        if context.hasChanges { try context.save() }
        guard let store = container.store as? FileStore else { return url }
        try store.close()
        // The lock file is a run-time artefact, not part of the fixture.
        try? FileManager.default.removeItem(at: url.appendingPathComponent("LOCK"))
        try checksumList(of: url).write(to: url.appendingPathComponent(checksumFileName), atomically: true,
                                        encoding: .utf8)
        return url
    }

    /// Checks a fixture against its checksum list.
    ///
    /// - Returns: the problems: files whose bytes differ, files missing, files not listed. Empty when the fixture is
    ///   untouched.
    /// - Throws: ``FixtureError/noChecksums(_:)`` when there is no checksum list.
    public static func verify(_ url: URL) throws -> [String] {
        let listURL = url.appendingPathComponent(checksumFileName)
        guard let list = try? String(contentsOf: listURL, encoding: .utf8) else {
            throw FixtureError.noChecksums(url.path)
        }
        var expected: [String: String] = [:]
        for line in list.split(separator: "\n") where !line.isEmpty {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { return ["malformed line in \(checksumFileName): \(line)"] }
            expected[String(parts[1].drop { $0 == " " || $0 == "*" })] = String(parts[0])
        }
        let actual = try checksums(of: url)
        var problems: [String] = []
        for (path, hash) in expected.sorted(by: { $0.key < $1.key }) {
            guard let found = actual[path] else { problems.append("\(path) is missing"); continue }
            if found != hash { problems.append("\(path) has changed") }
        }
        for path in actual.keys.sorted() where expected[path] == nil { problems.append("\(path) is not listed") }
        return problems
    }

    /// Copies the fixture at `url` to a fresh temporary directory and opens the copy with `schema` (migrating it as
    /// an application's store would be migrated).
    ///
    /// - Returns: the container and the copy's location (delete it when done).
    /// - Throws: what opening the store throws (`MigrationError` for a refused migration).
    public static func openCopy(of url: URL, schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
                                configure: (inout FileStoreConfiguration) -> Void = { _ in })
        throws -> (container: ModelContainer, copy: URL) {
        let copy = FileManager.default.temporaryDirectory
            .appendingPathComponent("notekit-fixture-\(UUID().uuidString).notekit")
        try FileManager.default.copyItem(at: url, to: copy)
        try? FileManager.default.removeItem(at: copy.appendingPathComponent(checksumFileName))
        var configuration = FileStoreConfiguration(url: copy)
        configure(&configuration)
        do {
            let container = try ModelContainer(for: schema, migrationPlan: migrationPlan,
                                               configurations: [configuration])
            return (container, copy)
        } catch {
            try? FileManager.default.removeItem(at: copy)
            throw error
        }
    }

    /// The `sha256sum` list of every file under `url` (but the list itself), sorted by path.
    static func checksumList(of url: URL) throws -> String {
        try checksums(of: url).sorted { $0.key < $1.key }.map { "\($0.value)  \($0.key)\n" }.joined()
    }

    private static func checksums(of url: URL) throws -> [String: String] {
        var result: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: url.path) else { return [:] }
        while let relative = walker.nextObject() as? String {
            guard relative != checksumFileName else { continue }
            let path = url.appendingPathComponent(relative).path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            result[relative] = SHA256Digest.hexString(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        return result
    }
}

/// A fixture operation that cannot be done.
public enum FixtureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The fixture exists already; committed fixtures are never rewritten (make a new version instead).
    case exists(String)
    /// The fixture has no checksum list.
    case noChecksums(String)

    /// The fixture's path and what to do about it.
    public var description: String {
        switch self {
        case .exists(let path): "\(path) exists; a committed fixture is never rewritten: add a new version instead"
        case .noChecksums(let path): "\(path) has no \(StoreFixture.checksumFileName)"
        }
    }
}
