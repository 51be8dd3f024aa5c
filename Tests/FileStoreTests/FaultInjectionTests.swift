import Foundation
import NoteKit
import NoteKitNotes
import NoteKitFileStore
import NoteKitTestSupport
import Testing

/// Issue 9, item 2: every I/O call the file store makes fails in turn, and the store stays consistent.
///
/// For each scenario of ``StoreScenario``, each kind of call and each way to fail, the scenario runs once per N = 1,
/// 2, … with the Nth matching call failing (once, or from then on until the fault clears), until a run makes fewer
/// than N such calls. After each fault the run checks that the call threw a typed error, that the files pass
/// `StoreVerifier` (a torn tail allowed), that the context that failed kept its changes and saves them once the
/// fault clears (or, when the store stopped writing, that a reopened store has every acknowledged save and either
/// all or nothing of the failed one), that a failed flush of the active segment stopped writes, and that after a
/// power loss right then every acknowledged save is still there.
///
/// The disk is a ``SimulatedDisk``: in memory, so thousands of runs take seconds, and it knows what a power loss
/// would keep (including Linux's habit of dropping the pages of a failed `fsync`). `swift test` runs every kind,
/// operation and failure, bounded in N (``nth(after:kind:)``); `NOTEKIT_LONG_TESTS=1` (``LongTests``), or
/// `NOTEKIT_FAULTS_EVERY_N=1`, runs every N; `NOTEKIT_FAULTS_FULL=1` adds failure variants (see
/// ``FaultKind/failures``).
@Suite("Fault injection: each I/O call fails in turn; saves throw, the store stays consistent")
struct FaultInjectionTests {
    static let full = ProcessInfo.processInfo.environment["NOTEKIT_FAULTS_FULL"] == "1"
    static let everyN = LongTests.isOn("NOTEKIT_FAULTS_EVERY_N")

    /// The N to fail after `nth`: the next one with every N; bounded, the next one up to 3 (a store's first calls of
    /// each kind: creation, the first save), then every 20th, each of the five kinds of fault from another offset
    /// four apart, so that between them the kinds fail every fourth N of the writes, and the others share the rest.
    static func nth(after nth: Int, kind: FaultKind) -> Int {
        guard !everyN, nth >= 3 else { return nth + 1 }
        let offset = 4 * FaultKind.allCases.firstIndex(of: kind)!
        return nth + 1 + (20 - (nth + 1 + offset) % 20) % 20
    }

    /// A way for calls to fail.
    enum FaultKind: String, CaseIterable, Sendable, CustomStringConvertible {
        case eioOnce, eioPersistent, enospc, errorAfterEffect, shortWrites

        var description: String { rawValue }

        /// The operations this kind applies to: reads only fail plainly; short writes are writes.
        var operations: [FaultRules.Operation] {
            switch self {
            case .eioOnce, .eioPersistent: FaultRules.Operation.allCases
            case .enospc: [.create, .write, .fsync, .rename, .syncDirectory, .makeDirectory, .truncate, .lock, .reserve]
            case .errorAfterEffect: [.create, .write, .fsync, .rename, .remove, .syncDirectory, .makeDirectory, .truncate,
                                     .reserve]
            case .shortWrites: [.write]
            }
        }

        /// The failures of this kind. `NOTEKIT_FAULTS_FULL=1` adds a full disk that clears at once, errors after
        /// the effect that persist, and more lengths of short writes.
        var failures: [(FaultRules.Failure, persistent: Bool)] {
            let full = FaultInjectionTests.full
            switch self {
            case .eioOnce: return [(.error(EIO), false)]
            case .eioPersistent: return [(.error(EIO), true)]
            case .enospc: return [(.error(ENOSPC), true)] + (full ? [(.error(ENOSPC), false)] : [])
            case .errorAfterEffect: return [(.errorAfterEffect(EIO), false)] + (full ? [(.errorAfterEffect(EIO), true)] : [])
            case .shortWrites:
                return (full ? [0, 1, 2, 9, 17, 18, 19, 50, 100, 1_000] : [0, 1, 17, 18, 100]).map { (.shortWrite(bytes: $0), false) }
            }
        }
    }

    @Test("Every Nth call of every kind fails: the failing call throws a typed error and nothing acknowledged is lost",
          arguments: ["notes", "lightweight migration", "migration plan", "two writers"], FaultKind.allCases)
    func everyCallFails(scenarioName: String, kind: FaultKind) throws {
        let scenario = try #require(StoreScenario.all[scenarioName])
        let reference = try FaultRun.reference(scenario)
        var tally = Tally()
        for operation in kind.operations {
            for (failure, persistent) in kind.failures {
                var nth = 1
                while nth < 10_000 {
                    let rule = FaultRules.Rule(operation, nth: nth, persistent: persistent, failure: failure)
                    let run = FaultRun(scenario: scenario, reference: reference, rule: rule)
                    run.run()
                    tally.add(run, rule: rule)
                    if run.injected == 0 { break }
                    // N goes on past the calls a run without faults makes: a run that recovers makes more.
                    nth = Self.nth(after: nth, kind: kind)
                }
            }
        }
        TestOutput.summary("faults: \(scenarioName), \(kind): \(tally)")
        // Every problem, for a look at a failing matrix beyond the first few the expectation shows.
        if let path = ProcessInfo.processInfo.environment["NOTEKIT_FAULTS_PROBLEMS"], !tally.problems.isEmpty,
           let handle = FileHandle(forWritingAtPath: path)
            ?? (FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil) {
            handle.seekToEndOfFile()
            handle.write(Data((tally.problems.joined(separator: "\n") + "\n").utf8))
            try? handle.close()
        }
        #expect(tally.faults > 0)
        let problems = tally.problems.count
        #expect(problems == 0,
                Comment(rawValue: "the first problems:\n" + tally.problems.prefix(12).joined(separator: "\n")))
    }

    @Test("The two-writer scenario, without faults, takes the paths it names: a rotation, a compaction the other reloads after, a torn tail cut off")
    func twoWritersScenarioPaths() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        var containers: [Int: ModelContainer] = [:]
        var segments: [String: [Int]] = [:]
        for step in try #require(StoreScenario.all["two writers"]).steps {
            switch step.action {
            case .open(let open): containers[step.writer] = try open.make(url, disk)
            case .save(_, let change):
                let context = ModelContext(try #require(containers[step.writer]))
                try change(context)
                try context.save()
            case .store(_, let call):
                let container = try #require(containers[step.writer])
                try call(StoreFiles.store(container), ModelContext(container))
            case .offline(_, let change): try change(disk, url)
            case .close:
                let container = containers.removeValue(forKey: step.writer)
                try StoreFiles.close(try #require(container))
            case .by: Issue.record("nested writers")
            }
            if let container = containers[step.writer] {
                segments[step.name] = StoreFiles.store(container).statistics.segments
            }
        }
        let names = try #require(StoreScenario.all["two writers"]).steps.map(\.name)
        func segmentsAfter(_ prefix: String) throws -> [Int] {
            let name = names.first { $0.contains(prefix) }
            return try #require(name.flatMap { segments[$0] })
        }
        #expect(try segmentsAfter("rotates").count == segmentsAfter("the segment fills").count + 1, "\(segments)")
        #expect(try segmentsAfter("compact").count == 1)
        #expect(try segmentsAfter("reload").first == segmentsAfter("compact").first,
                "the other writer took the compacted log over")
        #expect(disk.files(under: url.path).keys.contains { $0.hasPrefix("quarantine/") && $0.hasSuffix(".torn") })
        #expect(try StoreVerifier.verify(at: url, fileSystem: disk).ok)
    }

    @Test("A failed flush is never retried as success: the record is cut off, writes stop until reopened, a power loss loses nothing acknowledged")
    func failedFlushStopsWrites() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        context.insert(Note.titled("acknowledged"))
        try context.save()
        context.insert(Note.titled("unsure"))
        disk.faults.arm(.init(.fsync, pathContaining: ".seg"))
        #expect(throws: StoreIOError.self) { try context.save() }
        disk.faults.disarm()
        #expect(context.hasChanges)
        #expect(throws: FileStoreError.self) { try context.save() }
        #expect(throws: FileStoreError.self) { try StoreFiles.store(container).compact() }
        try? StoreFiles.close(container)

        // The bytes of the failed flush never reach the disk: a reopened store must not build on them.
        let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let reader = ModelContext(reopened)
        #expect(try reader.fetch(FetchDescriptor<Note>()).map(\.title) == ["acknowledged"])
        reader.insert(Note.titled("later"))
        try reader.save()
        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let afterPowerLoss = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed }
        #expect(try ModelContext(afterPowerLoss).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
                    .map(\.title) == ["acknowledged", "later"])
    }

    @Test("A blob whose directory flush failed is written and flushed again, never assumed durable")
    func failedBlobDirectoryFlush() throws {
        let disk = SimulatedDisk()
        let url = TemporaryStores.newURL()
        let container = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
        let context = ModelContext(container)
        let note = NoteEditor(context: context).createNote(.init(title: "drawn"))
        try context.save()
        try NoteEditor(context: context).setDrawing(Data(repeating: 7, count: 64), on: note)
        disk.faults.arm(.init(.syncDirectory, pathContaining: "/blobs"))
        #expect(throws: (any Error).self) { try context.save() }
        disk.faults.disarm()
        // Saved again, here or in a reopened store, the drawing survives a power loss.
        do { try context.save() } catch {
            #expect(error is FileStoreError)
            try? StoreFiles.close(container)
            let reopened = try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = disk }
            let retry = ModelContext(reopened)
            let drawn = try #require(try retry.fetch(FetchDescriptor<Note>()).first)
            try NoteEditor(context: retry).setDrawing(Data(repeating: 7, count: 64), on: drawn)
            try retry.save()
        }
        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed).isEmpty)
        let afterPowerLoss = ModelContext(try StoreFiles.open(url, NotesSchema.models) { $0.fileSystem = crashed })
        #expect(try afterPowerLoss.fetch(FetchDescriptor<NoteDrawing>()).map(\.data) == [Data(repeating: 7, count: 64)])
        #expect(afterPowerLoss.readFailures.isEmpty)
    }

    @Test("The same faults on the real file system: a failed save throws, is retried, and the store verifies")
    func realFileSystem() throws {
        // A sample of the matrix through POSIXFileSystem, so that the simulation is not the only witness.
        var injected = 0
        for operation: FaultRules.Operation in [.write, .fsync, .create, .rename, .syncDirectory] {
            for nth in 1...3 {
                let url = TemporaryStores.newURL()
                defer { try? FileManager.default.removeItem(at: url) }
                let fileSystem = FaultyFileSystem()
                let container = try StoreFiles.open(url, NotesSchema.models) {
                    StoreScenario.notesConfiguration(&$0)
                    $0.fileSystem = fileSystem
                }
                var context = ModelContext(container)
                let editor = NoteEditor(context: context)
                editor.createNote(.init(title: "kept"))
                try context.save()
                fileSystem.arm(.init(operation, nth: nth))
                let note = NoteEditor(context: context).createNote(.init(title: "tried"))
                try NoteEditor(context: context).setDrawing(Data(repeating: UInt8(nth), count: 100), on: note)
                var reopened: ModelContainer?
                do { try context.save() } catch {
                    injected += 1
                    #expect(error is StoreIOError || error is FileStoreError, "\(error)")
                    fileSystem.disarm()
                    #expect(StoreFiles.unrecoverableProblems(at: url, fileSystem: POSIXFileSystem()).isEmpty)
                    do { try context.save() } catch FileStoreError.writesStopped {
                        try? StoreFiles.close(container)
                        reopened = try StoreFiles.open(url, NotesSchema.models)
                        context = ModelContext(reopened!)
                        if try context.fetchCount(FetchDescriptor<Note>()) == 1 {
                            let note = NoteEditor(context: context).createNote(.init(title: "tried"))
                            try NoteEditor(context: context).setDrawing(Data(repeating: UInt8(nth), count: 100), on: note)
                            try context.save()
                        }
                    }
                }
                fileSystem.disarm()
                #expect(try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])).map(\.title)
                        == ["kept", "tried"], "\(operation) #\(nth)")
                try StoreFiles.close(reopened ?? container)
                #expect(try StoreVerifier.verify(at: url).ok, "\(operation) #\(nth)")
            }
        }
        #expect(injected >= 6)
    }

    @Test("The same faults on the real file system: a compaction that fails at any step leaves the store whole")
    func realFileSystemCompaction() throws {
        let original = TemporaryStores.newURL()
        do {
            let container = try StoreFiles.open(original, NotesSchema.models) { $0.automaticCompaction = nil }
            let context = ModelContext(container)
            let editor = NoteEditor(context: context)
            for index in 0..<10 {
                let note = editor.createNote(.init(title: "n\(index)"))
                try editor.setDrawing(Data(repeating: UInt8(index), count: 100), on: note)
                try context.save()
            }
            try StoreFiles.close(container)
        }
        let expected = try Self.withoutTransactionNumbers(Self.rows(StoreFiles.open(original, NotesSchema.models) { $0.mode = .readOnly }))
        // Fail each step of compaction in turn: every file created, write, flush, rename and directory flush.
        var failedSteps = 0
        for operation: FaultRules.Operation in [.create, .write, .fsync, .rename, .syncDirectory, .remove] {
            for nth in 1...4 {
                let copy = try StoreFiles.copy(original)
                defer { try? FileManager.default.removeItem(at: copy) }
                let fileSystem = FaultyFileSystem()
                let container = try StoreFiles.open(copy, NotesSchema.models) {
                    $0.fileSystem = fileSystem
                    $0.automaticCompaction = nil
                }
                fileSystem.arm(.init(operation, nth: nth))
                let store = StoreFiles.store(container)
                do { try store.compact() } catch { failedSteps += 1 }
                fileSystem.disarm()
                try? store.close()
                // Whatever happened, the store reopens whole, with the same objects.
                let reopened = try StoreFiles.open(copy, NotesSchema.models)
                #expect(Self.withoutTransactionNumbers(try Self.rows(reopened)) == expected, "\(operation) #\(nth)")
                let context = ModelContext(reopened)
                #expect(try context.fetch(FetchDescriptor<NoteDrawing>()).allSatisfy { !$0.data.isEmpty })
                #expect(context.readFailures.isEmpty)
                try StoreFiles.close(reopened)
            }
        }
        #expect(failedSteps > 6, "the faults hit compaction's steps")
    }

    private static func rows(_ container: ModelContainer) throws -> [ModelSnapshot] {
        try container.schema.entities.flatMap { try container.store.fetch(StoreFetchRequest(entity: $0.name)).rows }
    }

    private static func withoutTransactionNumbers(_ rows: [ModelSnapshot]) -> [ModelSnapshot] {
        rows.map { var row = $0; row.transactionNumber = 0; return row }
    }
}

/// Figures of a test case.
struct Tally: CustomStringConvertible {
    var runs = 0
    var faults = 0
    /// The (operation, N) points where a fault was injected, and the largest N per operation.
    var points = Set<String>()
    var deepest: [FaultRules.Operation: Int] = [:]
    var stopped = 0
    var problems: [String] = []

    mutating func add(_ run: FaultRun, rule: FaultRules.Rule) {
        runs += 1
        faults += run.injected
        if run.injected > 0 {
            points.insert("\(rule.operation) #\(rule.nth)")
            deepest[rule.operation] = max(deepest[rule.operation] ?? 0, rule.nth)
        }
        stopped += run.stopped
        problems += run.problems.map { "[\(run.scenario.name); \(rule)] \($0)" }
    }

    var description: String {
        "\(runs) runs; \(faults) faults injected; \(points.count) (operation, N) points; "
            + "\(stopped) stores stopped writing; \(problems.count) problems; N up to "
            + FaultRules.Operation.allCases.compactMap { operation in deepest[operation].map { "\(operation) \($0)" } }
                .joined(separator: ", ")
    }
}

/// One run of a scenario on a fresh simulated disk, with one rule armed from the scenario's faulted part on.
final class FaultRun {
    let scenario: StoreScenario
    /// The fingerprint after each step in a run without faults.
    let reference: [String]
    let rule: FaultRules.Rule?
    let disk = SimulatedDisk()
    let url = TemporaryStores.newURL()
    private(set) var problems: [String] = []
    private(set) var stopped = 0
    /// Each writer's open store and how it was opened (one writer unless the scenario's steps name others).
    private var containers: [Int: ModelContainer] = [:]
    private var opens: [Int: StoreScenario.Open] = [:]
    /// The writer of the step being run, whose store `container` and `open` are.
    private var writer = 0
    private var container: ModelContainer? {
        get { containers[writer] }
        set { containers[writer] = newValue }
    }
    private var open: StoreScenario.Open? {
        get { opens[writer] }
        set { opens[writer] = newValue }
    }

    init(scenario: StoreScenario, reference: [String], rule: FaultRules.Rule?) {
        self.scenario = scenario
        self.reference = reference
        self.rule = rule
    }

    var injected: Int { disk.faults.failureCount }

    /// The fingerprints of a run without faults, after each step.
    static func reference(_ scenario: StoreScenario) throws -> [String] {
        let run = FaultRun(scenario: scenario, reference: [], rule: nil)
        var fingerprints: [String] = []
        for step in scenario.steps {
            run.writer = step.writer
            try run.perform(step, context: nil)
            fingerprints.append(try run.fingerprint() ?? fingerprints.last ?? "")
        }
        return fingerprints
    }

    /// Runs every step; a step that fails is checked and recovered from, then the run goes on.
    func run() {
        disk.faults.setLogging(false)
        for (index, step) in scenario.steps.enumerated() {
            if index == scenario.faultsFrom, let rule { disk.faults.arm(rule) }
            writer = step.writer
            let before = injected
            var context: ModelContext?
            if case .save(_, let change) = step.action, let container {
                let fresh = ModelContext(container)
                context = fresh
                do { try change(fresh) } catch {
                    // Changing objects can read a blob; a failed read fails the change, which is made again.
                    recover(index, step, error: error, faultHere: injected > before, context: nil)
                    continue
                }
            }
            do {
                try perform(step, context: context)
                if injected > before {
                    // The fault hit a call whose failure the store absorbs (automatic compaction, cleanup).
                    disk.faults.disarm()
                    check(index, step, "after an absorbed fault")
                }
            } catch {
                recover(index, step, error: error, faultHere: injected > before, context: context)
            }
        }
        disk.faults.disarm()
        finalCheck()
    }

    /// Does what a step says, with the current writer's store.
    func perform(_ step: StoreScenario.Step, context: ModelContext?) throws {
        switch step.action {
        case .open(let open):
            self.open = open
            container = try open.make(url, disk)
        case .save(_, let change):
            let context = try context ?? {
                let fresh = ModelContext(try require(container))
                try change(fresh)
                return fresh
            }()
            try context.save()
        case .store(_, let call):
            let container = try require(container)
            try call(StoreFiles.store(container), ModelContext(container))
        case .close:
            defer { container = nil }
            if let container { try StoreFiles.close(container) }
        case .offline(_, let change):
            try change(disk, url)
        case .by:
            preconditionFailure("an action is never a writer's step")
        }
    }

    private func require(_ container: ModelContainer?) throws -> ModelContainer {
        guard let container else { throw ScenarioError.noStore }
        return container
    }

    /// The open store's fingerprint, read through a new context; nil when no store is open.
    func fingerprint() throws -> String? {
        guard let container, let open else { return nil }
        return try open.fingerprint(ModelContext(container))
    }

    private func problem(_ index: Int, _ step: StoreScenario.Step, _ message: String) {
        problems.append("step \(index) (\(step.name)): \(message)")
    }

    /// Whether the first failed call was a flush of the segment being appended to, with writes not flushed yet
    /// (not, say, the flush a writer sharing the store makes of what it catches up with, which loses nothing).
    private func failedFlushOfActiveSegment() -> Bool {
        guard let failed = disk.faults.calls.first(where: \.failed), failed.operation == .fsync,
              disk.failedFlushes.first?.hadUnflushedWrites == true,
              let manifest = disk.contents(url.path + "/MANIFEST"),
              let active = manifestSegments(manifest).last else { return false }
        return failed.path == StoreFiles.segment(url, active).path
    }

    /// What happens after a step threw: the error is typed, the files verify, the fault clears, and the step is
    /// completed: the failed context saves again, or a reopened store gets the step again if its effect is lost.
    private func recover(_ index: Int, _ step: StoreScenario.Step, error: any Error, faultHere: Bool,
                         context: ModelContext?) {
        let flushFailed = failedFlushOfActiveSegment()
        disk.faults.disarm()
        if !(error is StoreIOError || error is FileStoreError || error is MigrationError) {
            problem(index, step, "an untyped error: \(type(of: error)) \(error)")
        }
        if injected == 0 { problem(index, step, "failed with no fault injected: \(error)") }
        if disk.exists(url.path + "/MANIFEST") {
            for found in StoreFiles.unrecoverableProblems(at: url, fileSystem: disk) { problem(index, step, "verify: \(found)") }
        }
        do {
            switch step.action {
            case .by:
                preconditionFailure("an action is never a writer's step")
            case .open:
                try perform(step, context: nil)
            case .close:
                container = nil
            case .offline:
                problem(index, step, "an offline change failed: \(error)")
            case .save(_, let change):
                if let context {
                    if !context.hasChanges { problem(index, step, "the failed save dropped the context's changes") }
                    do {
                        try context.save()
                        if flushFailed && faultHere { problem(index, step, "a failed flush was retried as success") }
                    } catch FileStoreError.writesStopped {
                        try reopenAfterStop(index, step) { context in
                            try change(context)
                            try context.save()
                        }
                    }
                } else {
                    try perform(step, context: nil)
                }
            case .store(_, let call):
                do {
                    try perform(step, context: nil)
                    if flushFailed && faultHere { problem(index, step, "a failed flush was retried as success") }
                } catch FileStoreError.writesStopped {
                    try reopenAfterStop(index, step) { context in
                        try call(StoreFiles.store(context.container), context)
                    }
                }
            }
        } catch {
            problem(index, step, "the step failed again once the fault cleared: \(error)")
            return
        }
        check(index, step, "after \(error)")
    }

    /// The store stopped writing: close it, reopen, and do the step again unless its effect made it to the disk.
    private func reopenAfterStop(_ index: Int, _ step: StoreScenario.Step,
                                 again: (ModelContext) throws -> Void) throws {
        stopped += 1
        if let container { try? StoreFiles.close(container) }
        container = nil
        container = try open?.make(url, disk)
        let found = try fingerprint()
        let before = index > 0 ? reference[index - 1] : ""
        if found == before {
            try again(ModelContext(try require(container)))
        } else if found != reference[index] {
            problem(index, step, "reopened after the store stopped, neither the state before nor after the step:\n"
                    + (found ?? "no store"))
        }
    }

    /// The state is the step's, the files verify, and a power loss now keeps it.
    private func check(_ index: Int, _ step: StoreScenario.Step, _ when: String) {
        do {
            if let found = try fingerprint(), found != reference[index] {
                problem(index, step, "\(when): the state differs from a run without faults:\n\(found)\nexpected:\n"
                        + reference[index])
            }
            for found in StoreFiles.unrecoverableProblems(at: url, fileSystem: disk) { problem(index, step, "\(when): verify: \(found)") }
            try checkPowerLoss(expected: reference[index], index, step, when)
        } catch {
            problem(index, step, "\(when): \(error)")
        }
    }

    /// A power loss now loses nothing acknowledged: the durable files verify and reopen to `expected`.
    private func checkPowerLoss(expected: String, _ index: Int, _ step: StoreScenario.Step, _ when: String) throws {
        guard let open else { return }
        let crashed = SimulatedDisk(image: disk.crashImage(.powerLoss))
        guard crashed.exists(url.path + "/MANIFEST") else {
            if index > scenario.faultsFrom || scenario.faultsFrom > 0 {
                problem(index, step, "\(when): after a power loss the store is gone")
            }
            return
        }
        for found in StoreFiles.unrecoverableProblems(at: url, fileSystem: crashed) {
            problem(index, step, "\(when): after a power loss, verify: \(found)")
        }
        let container = try open.make(url, crashed)
        defer { try? StoreFiles.close(container) }
        let found = try open.fingerprint(ModelContext(container))
        if found != expected {
            problem(index, step, "\(when): after a power loss the state is not the acknowledged one:\n\(found)\nexpected:\n"
                    + expected)
        }
    }

    /// At the end: the store reopens to the final state, verifies, has no leftovers, and survives a power loss.
    private func finalCheck() {
        let last = scenario.steps.count - 1
        guard let open else { return }
        do {
            for container in containers.values { try? StoreFiles.close(container) }
            containers = [:]
            let container = try open.make(url, disk)
            defer { try? StoreFiles.close(container) }
            let context = ModelContext(container)
            let found = try open.fingerprint(context)
            if found != reference[last] {
                problem(last, scenario.steps[last], "at the end the state differs:\n\(found)\nexpected:\n\(reference[last])")
            }
            let extra = leftovers(in: disk.files(under: url.path), referencedBlobs: referencedBlobs(context))
            if !extra.isEmpty { problem(last, scenario.steps[last], "leftovers after reopening: \(extra)") }
            if try !StoreVerifier.verify(at: url, fileSystem: disk).ok {
                problem(last, scenario.steps[last], "at the end verify finds \(try StoreVerifier.verify(at: url, fileSystem: disk))")
            }
            try checkPowerLoss(expected: reference[last], last, scenario.steps[last], "at the end")
        } catch {
            problem(last, scenario.steps[last], "at the end: \(error)")
        }
    }
}
