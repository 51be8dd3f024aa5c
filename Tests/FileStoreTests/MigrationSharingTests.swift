import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

/// Seed 001's plan under every sharing mode (docs/MIGRATIONS.md, *Several processes*): a custom stage whose steps
/// save runs exactly once, however many processes (or containers of one process) open the store together; the
/// others wait and open the migrated store; a stage that fails leaves the store at its old version.
@Suite("Migration plans under sharing")
struct MigrationSharingTests {
    typealias Plan = FieldNotesMigrationPlan
    typealias V1 = FieldNotesSchemaV1

    static let sharingModes: [FileStoreConfiguration.Sharing] = [.exclusive, .perSave]

    /// A V1 store of three notes, two with a `place:` tag, one with a photo; with `untrimmed`, a title for
    /// `willMigrate` to trim (else the step finds nothing to change and saves nothing).
    static func v1Store(untrimmed: Bool = true) throws -> URL {
        let url = TemporaryStores.newURL("fieldnotes")
        let container = try ModelContainer(for: Schema(versionedSchema: V1.self),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        let notebook = V1.NotebookRecord()
        notebook.name = "Hikes"
        context.insert(notebook)
        let trail = V1.NoteRecord(title: untrimmed ? "  Trailhead " : "Trailhead", tags: ["place:Mount Tam", "hike"])
        trail.notebook = notebook
        let photo = V1.PhotoRecord()
        photo.fileName = "summit.jpg"
        photo.data = Data(repeating: 7, count: 4096)
        photo.note = trail
        context.insert(trail)
        context.insert(V1.NoteRecord(title: "Lunch", tags: ["place:Ferry Building"]))
        context.insert(V1.NoteRecord(title: "Ideas", tags: ["work"]))
        try context.save()
        try StoreFiles.close(container)
        return url
    }

    static func configuration(_ url: URL, sharing: FileStoreConfiguration.Sharing?,
                              lockTimeout: Double? = nil) -> FileStoreConfiguration {
        var configuration = FileStoreConfiguration(url: url, mode: .readWrite(createIfMissing: false),
                                                   lockTimeout: lockTimeout)
        if let sharing { configuration.sharing = sharing }
        return configuration
    }

    static func openWithPlan(_ url: URL, sharing: FileStoreConfiguration.Sharing?,
                             lockTimeout: Double? = nil) throws -> ModelContainer {
        try ModelContainer(for: Schema(versionedSchema: FieldNotesSchemaV2.self), migrationPlan: Plan.self,
                           configurations: [configuration(url, sharing: sharing, lockTimeout: lockTimeout)])
    }

    /// The stored schema's version.
    static func storedVersion(_ url: URL) throws -> Schema.Version? {
        try StoreInspector.schemaHistory(at: url).last?.version
    }

    /// Checks that the store at `url` holds V1's data migrated by the stage, once: by opening it again with the
    /// plan, which must run nothing.
    static func expectMigrated(_ url: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stepsBefore = Plan.steps(ranOn: url)
        #expect(try storedVersion(url) == Schema.Version(2, 0, 0), sourceLocation: sourceLocation)
        let container = try openWithPlan(url, sharing: nil)
        defer { try? StoreFiles.close(container) }
        #expect(Plan.steps(ranOn: url) == stepsBefore, "a migrated store runs no stage", sourceLocation: sourceLocation)
        let notes = try ModelContext(container).fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title)]))
        #expect(notes.map(\.title) == ["Ideas", "Lunch", "Trailhead"], sourceLocation: sourceLocation)
        #expect(notes.map(\.placeName) == [nil, "Ferry Building", "Mount Tam"], sourceLocation: sourceLocation)
        #expect(notes.map(\.tags) == [["work"], [], ["hike"]], sourceLocation: sourceLocation)
        #expect(notes.last?.notebook?.name == "Hikes", sourceLocation: sourceLocation)
        #expect(notes.last?.photos.map(\.data) == [Data(repeating: 7, count: 4096)], sourceLocation: sourceLocation)
        #expect(try StoreVerifier.verify(at: url).ok, sourceLocation: sourceLocation)
    }

    // MARK: One process

    @Test("A custom stage whose steps save runs once on a store opened exclusively or shared per save",
          arguments: sharingModes)
    func savingStageInOneProcess(sharing: FileStoreConfiguration.Sharing) throws {
        let url = try Self.v1Store()
        let container = try Self.openWithPlan(url, sharing: sharing)
        #expect(Plan.steps(ranOn: url) == [.willMigrate, .didMigrate])
        #expect(container.schema.version == Schema.Version(2, 0, 0))
        // The container opened by the plan takes saves in its mode.
        let context = ModelContext(container)
        let note = NoteRecord()
        note.title = "After"
        context.insert(note)
        try context.save()
        try context.delete(note)
        try context.save()
        try StoreFiles.close(container)
        try Self.expectMigrated(url)
    }

    @Test("A stage that fails leaves the store at V1, its bytes unchanged, and the next open runs it again",
          arguments: sharingModes, Plan.Step.allCases)
    func failedStageRunsAgain(sharing: FileStoreConfiguration.Sharing, failing: Plan.Step) throws {
        // Titles already trimmed: willMigrate changes nothing, so any byte written would be the stage's.
        let url = try Self.v1Store(untrimmed: false)
        let before = fileHashes(url)
        Plan.setBehaviour(.init(failing: failing), for: url)
        let error = #expect(throws: MigrationError.self) { _ = try Self.openWithPlan(url, sharing: sharing) }
        #expect(error == .stageFailed(from: Schema.Version(1, 0, 0), to: Schema.Version(2, 0, 0),
                                      reason: "\(Plan.InjectedFailure(step: failing))"))
        #expect(fileHashes(url) == before, "the store is as it was")
        #expect(try Self.storedVersion(url) == Schema.Version(1, 0, 0))

        let container = try Self.openWithPlan(url, sharing: sharing)
        let ran: [Plan.Step] = failing == .willMigrate ? [.willMigrate] : [.willMigrate, .didMigrate]
        #expect(Plan.steps(ranOn: url) == ran + [.willMigrate, .didMigrate], "the next open ran the stage again")
        try StoreFiles.close(container)
        try Self.expectMigrated(url)
    }

    @Test("What willMigrate saved stays, at V1, when didMigrate fails; running the stage again does no harm",
          arguments: sharingModes)
    func willMigrateSavesSurviveAFailedDidMigrate(sharing: FileStoreConfiguration.Sharing) throws {
        let url = try Self.v1Store(untrimmed: true)
        Plan.setBehaviour(.init(failing: .didMigrate), for: url)
        #expect(throws: MigrationError.self) { _ = try Self.openWithPlan(url, sharing: sharing) }
        #expect(try StoreInspector.schemaHistory(at: url).map(\.version) == [Schema.Version(1, 0, 0)])
        #expect(try StoreVerifier.verify(at: url).ok)
        let container = try Self.openWithPlan(url, sharing: sharing)
        try StoreFiles.close(container)
        try Self.expectMigrated(url)
    }

    @Test("Two containers of one process opening a store shared per save at once run its stage once")
    func twoContainersOfOneProcess() async throws {
        let url = try Self.v1Store()
        // Each step pauses, so that the second open surely finds the first migrating and waits for it.
        Plan.setBehaviour(.init(pause: 0.3), for: url)
        let path = url.path
        async let first = Task.detached { try Self.openWithPlan(URL(fileURLWithPath: path), sharing: .perSave) }.value
        async let second = Task.detached { try Self.openWithPlan(URL(fileURLWithPath: path), sharing: .perSave) }.value
        let containers = try await [first, second]
        #expect(Plan.steps(ranOn: url) == [.willMigrate, .didMigrate])
        for container in containers {
            #expect(container.schema.version == Schema.Version(2, 0, 0))
            #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteRecord>()) == 3)
            try StoreFiles.close(container)
        }
        try Self.expectMigrated(url)
    }

    @Test("Two containers of one process opening an exclusive store at once: one migrates, the other is refused at once")
    func twoExclusiveContainersOfOneProcess() async throws {
        let url = try Self.v1Store()
        Plan.setBehaviour(.init(pause: 0.3), for: url)
        let path = url.path
        /// The open's outcome and when it ended.
        @Sendable func open() -> (Result<ModelContainer, any Error>, ContinuousClock.Instant) {
            let result = Result { try Self.openWithPlan(URL(fileURLWithPath: path), sharing: .exclusive, lockTimeout: 20) }
            return (result, .now)
        }
        async let first = Task.detached { open() }.value
        async let second = Task.detached { open() }.value
        let ends = await [first, second]
        let opened = ends.compactMap { try? $0.0.get() }
        #expect(opened.count == 1)
        let refusals = ends.compactMap { end -> (FileStoreError, ContinuousClock.Instant)? in
            guard case .failure(let error as FileStoreError) = end.0 else { return nil }
            return (error, end.1)
        }
        // The second waits while the first migrates (its session holds the lock for the plan only), then stops
        // waiting as soon as the first's store is open and keeps the lock (not after its 20 s lock timeout).
        #expect(refusals.map(\.0) == [.lockedInThisProcess(path: url.path)])
        if let refused = refusals.first?.1, let migrated = ends.first(where: { (try? $0.0.get()) != nil })?.1 {
            #expect(refused - migrated < .seconds(5), "refused \(refused - migrated) after the other open")
        }
        #expect(Plan.steps(ranOn: url) == [.willMigrate, .didMigrate])
        for container in opened { try StoreFiles.close(container) }
        try Self.expectMigrated(url)
    }

    @Test("A migration refuses at once, naming this process, when another open of this process keeps the store")
    func refusedAtOnceWhenKeptInThisProcess() throws {
        let url = try Self.v1Store()
        let holder = try ModelContainer(for: Schema(versionedSchema: V1.self),
                                        configurations: [FileStoreConfiguration(url: url, sharing: .exclusive)])
        let started = ContinuousClock.now
        #expect(throws: FileStoreError.lockedInThisProcess(path: url.path)) {
            _ = try Self.openWithPlan(url, sharing: .exclusive, lockTimeout: 2)
        }
        let waited = ContinuousClock.now - started
        #expect(waited < .seconds(1), "waited \(waited) for a lock only closing the other open releases")
        #expect(Plan.steps(ranOn: url).isEmpty)
        try StoreFiles.close(holder)
        let container = try Self.openWithPlan(url, sharing: .exclusive)
        try StoreFiles.close(container)
        try Self.expectMigrated(url)
    }

    // MARK: Several processes

    @Test("seed 001's V1 → V2 plan with a saving custom stage, opened by two processes at once in the default mode, runs once")
    func twoProcessesInTheDefaultMode() throws {
        try Self.twoProcessesRunTheStageOnce(sharing: nil)
    }

    @Test("Seed 001's plan opened by two processes at once runs once in each sharing mode", arguments: sharingModes)
    func twoProcessesInEachMode(sharing: FileStoreConfiguration.Sharing) throws {
        try Self.twoProcessesRunTheStageOnce(sharing: sharing)
    }

    @Test("A process whose stage fails leaves the store at V1; the next process runs the stage and succeeds",
          arguments: sharingModes)
    func failedProcessThenNext(sharing: FileStoreConfiguration.Sharing) throws {
        let url = try Self.v1Store()
        let failed = try MigrateProcess(url, sharing: sharing, extra: ["--fail", "didMigrate"])
        try failed.start()
        let failure = failed.finish()
        #expect(failure.status == 1, "\(failure.lines)")
        #expect(failure.steps == [.willMigrate: 1, .didMigrate: 1])
        #expect(try Self.storedVersion(url) == Schema.Version(1, 0, 0))
        let next = try MigrateProcess(url, sharing: sharing)
        try next.start()
        let success = next.finish()
        #expect(success.status == 0, "\(success.lines)")
        #expect(success.steps == [.willMigrate: 1, .didMigrate: 1])
        #expect(success.opened == "version=2.0.0 notes=3 placed=2")
        try Self.expectMigrated(url)
    }

    @Test("A process killed in didMigrate leaves the store at V1, whole; the next process runs the stage",
          arguments: sharingModes)
    func killedInDidMigrate(sharing: FileStoreConfiguration.Sharing) throws {
        let url = try Self.v1Store()
        let victim = try MigrateProcess(url, sharing: sharing, extra: ["--pause", "30", "--pause-in", "didMigrate"])
        try victim.start()
        // Killed in its pause, after willMigrate saved and with didMigrate's store open.
        try victim.waitFor("step didMigrate")
        victim.kill()
        #expect(try StoreInspector.schemaHistory(at: url).map(\.version) == [Schema.Version(1, 0, 0)])
        #expect(try StoreVerifier.verify(at: url).ok)
        let next = try MigrateProcess(url, sharing: sharing)
        try next.start()
        let success = next.finish()
        #expect(success.status == 0, "\(success.lines)")
        #expect(success.steps == [.willMigrate: 1, .didMigrate: 1])
        try Self.expectMigrated(url)
    }

    /// Starts two `notekit-stress migrate` children on one V1 store, lets them go at the same moment, and checks
    /// that the stage ran once in all and that each ended with the migrated store open.
    static func twoProcessesRunTheStageOnce(sharing: FileStoreConfiguration.Sharing?,
                                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let url = try v1Store()
        // Each step pauses, so that the other process surely tries the store while the stage runs.
        let children = try (0..<2).map { _ in try MigrateProcess(url, sharing: sharing, extra: ["--pause", "0.3"]) }
        for child in children { try child.waitUntilReady() }
        for child in children { child.go() }
        let results = children.map { $0.finish() }
        for result in results {
            #expect(result.status == 0, "\(result.lines)", sourceLocation: sourceLocation)
            #expect(result.opened == "version=2.0.0 notes=3 placed=2", "\(result.lines)", sourceLocation: sourceLocation)
        }
        for step in Plan.Step.allCases {
            #expect(results.map { $0.steps[step] ?? 0 }.reduce(0, +) == 1,
                    "\(step) ran once in all: \(results.map(\.lines))", sourceLocation: sourceLocation)
        }
        try expectMigrated(url, sourceLocation: sourceLocation)
    }
}

/// A `notekit-stress migrate` child (MigrateChild): started, told to go, its lines collected until it exits.
final class MigrateProcess {
    struct Result {
        var status: Int32
        var lines: [String]

        /// How many times the child ran each step, from its `steps` line.
        var steps: [FieldNotesMigrationPlan.Step: Int] {
            guard let line = lines.last(where: { $0.hasPrefix("steps ") }) else { return [:] }
            var steps: [FieldNotesMigrationPlan.Step: Int] = [:]
            for field in line.split(separator: " ").dropFirst() {
                let parts = field.split(separator: "=")
                if parts.count == 2, let step = FieldNotesMigrationPlan.Step(rawValue: String(parts[0])),
                   let count = Int(parts[1]), count > 0 {
                    steps[step] = count
                }
            }
            return steps
        }

        /// What its `opened` line says, without the word.
        var opened: String? {
            lines.first { $0.hasPrefix("opened ") }.map { String($0.dropFirst("opened ".count)) }
        }
    }

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var pending: [UInt8] = []
    private var lines: [String] = []

    init(_ url: URL, sharing: FileStoreConfiguration.Sharing?, extra: [String] = []) throws {
        process.executableURL = ProcessStressTests.KillTests.executable
        var arguments = ["migrate", "--store", url.path] + extra
        switch sharing {
        case .exclusive?: arguments += ["--sharing", "exclusive"]
        case .perSave?: arguments += ["--sharing", "perSave"]
        case nil: break
        }
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
    }

    /// Waits for the child's `ready` line.
    func waitUntilReady() throws {
        try waitFor("ready")
    }

    /// Waits until the child has written `line`.
    func waitFor(_ line: String) throws {
        while !lines.contains(line) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else {
                throw ChildFailure(description: "the child ended before it wrote \"\(line)\": \(lines)")
            }
            collect(chunk)
        }
    }

    /// Kills the child with SIGKILL and waits for it.
    func kill() {
        if process.isRunning { _ = Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    func go() {
        input.fileHandleForWriting.write(Data("go\n".utf8))
    }

    /// Waits until ready, then tells the child to go.
    func start() throws {
        try waitUntilReady()
        go()
    }

    /// Reads the child's output to its end and waits for it to exit.
    func finish() -> Result {
        collect(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        if !pending.isEmpty { lines.append(String(decoding: pending, as: UTF8.self)) }
        return Result(status: process.terminationStatus, lines: lines)
    }

    private func collect(_ data: Data) {
        pending += data
        while let end = pending.firstIndex(of: 0x0A) {
            lines.append(String(decoding: pending[..<end], as: UTF8.self))
            pending.removeSubrange(...end)
        }
    }

    struct ChildFailure: Error, CustomStringConvertible {
        var description: String
    }
}
