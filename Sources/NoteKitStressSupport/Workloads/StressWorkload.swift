import Foundation
import NoteKit
import NoteKitNotes

/// The kill test's record of progress: step `number` of a ``StressWorkload`` inserts it in the same transaction as
/// the rest of its changes, and step `number + StressWorkload.window` deletes it. So the steps a store holds are
/// read off it, and a step lost between two that survived leaves a hole in the window.
public final class StressStep: PersistentModel {
    @Attribute(.unique) public var number = 0

    public required init() {}
}

/// A deterministic, endless sequence of saves on the notes domain: step `n` of seed `s` makes the same changes to
/// the same state every time, in any process, so the state after steps 1…n can be computed anywhere by replaying
/// them (on the in-memory store, say) and compared with what a store that was killed holds.
///
/// Each step is one save mixing inserts, attribute edits, deletes with cascades, relationship changes (refiling
/// notes, moving and deleting folders, reordering to-many lists) and external-storage drawings, sometimes many
/// objects at once or large text, so that kills land in small and large writes, blob writes, rotations and
/// compactions. What a step does depends on the state it starts from, read in a canonical order (by identifier).
///
/// ```swift
/// let workload = StressWorkload(seed: 42)
/// let context = ModelContext(container)
/// let tags = try workload.apply(step: 1, in: context)
/// try context.save()
/// ```
public struct StressWorkload: Sendable {
    /// The notes domain and ``StressStep``.
    public static var models: [any PersistentModel.Type] { NotesSchema.models + [StressStep.self] }

    /// How many ``StressStep`` rows stay: step `n` deletes the row of step `n - window`.
    public static let window = 48

    public let seed: UInt64
    /// The writer this workload belongs to when several processes write one store (``FileStoreConfiguration``
    /// `sharing: .perSave`), or nil for the only writer. A writer's steps touch only objects it created: their
    /// identifiers begin with the byte `writer`, and its ``StressStep`` markers are numbered
    /// `writer × markerStride + step`. So its steps make the same changes whatever the other writers do, and the
    /// slice of a shared store it owns can be compared with a replay of its steps alone.
    public let writer: Int?

    /// Writers' ``StressStep`` numbers are apart by this much.
    public static let markerStride = 1_000_000_000

    public init(seed: UInt64, writer: Int? = nil) {
        precondition(writer.map { (1...255).contains($0) } ?? true, "a writer is numbered 1…255")
        self.seed = seed
        self.writer = writer
    }

    /// The ``StressStep`` number that marks step `step` of `writer`.
    public static func marker(step: Int, writer: Int?) -> Int {
        writer.map { $0 * markerStride + step } ?? step
    }

    /// Whether an object with identifier `id` belongs to `writer` (every object does when `writer` is nil).
    public static func owns(_ writer: Int?, _ id: UUID) -> Bool {
        writer.map { id.uuid.0 == UInt8($0) } ?? true
    }

    /// What a step is, before it is applied: for the kill driver, which times its kills by it.
    public struct Plan: Sendable, Hashable {
        /// The step writes external-storage bytes.
        public var writesBlob = false
        /// The step saves many objects or long text: one large record.
        public var isLarge = false
        /// An explicit compaction follows the step's save.
        public var compactsAfter = false
        /// A history deletion (a `trim` record) follows the step's save.
        public var trimsHistoryAfter = false
    }

    /// Applies step `number`'s changes to `context` without saving; the caller saves them as one transaction.
    ///
    /// - Returns: what the step did, for tagging kills.
    /// - Throws: what fetching and deleting throw.
    @discardableResult
    public func apply(step number: Int, in context: ModelContext) throws -> Plan {
        var builder = StepBuilder(context: context, step: number, writer: writer,
                                  rng: SeededGenerator(seed: Self.mix(seed, number)))
        return try builder.run()
    }

    /// The steps whose ``StressStep`` rows `context` sees, in increasing order: of `writer` only, when given.
    public static func stepsPresent(in context: ModelContext, writer: Int? = nil) throws -> [Int] {
        let numbers = try context.fetch(FetchDescriptor<StressStep>()).map(\.number)
        guard let writer else { return numbers.sorted() }
        return numbers.filter { $0 / markerStride == writer }.map { $0 - writer * markerStride }.sorted()
    }

    /// The ``StressStep`` rows that must be present after steps 1…`last`: the last ``window`` of them.
    public static func expectedSteps(through last: Int) -> [Int] {
        last < 1 ? [] : Array(max(1, last - window + 1)...last)
    }

    /// A per-step seed: SplitMix64's finalizer over the seed and the step number.
    static func mix(_ seed: UInt64, _ step: Int) -> UInt64 {
        var z = seed ^ (UInt64(truncatingIfNeeded: step) &* 0xD1B5_4A32_D192_ED03)
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: - One step

/// Makes one step's changes. Every choice comes from `rng` and from the state read in identifier order, never from
/// the clock, `UUID()` or hash order.
private struct StepBuilder {
    let context: ModelContext
    let step: Int
    /// Only objects of this writer are read and changed (all when nil).
    let writer: Int?
    var rng: SeededGenerator
    var plan = StressWorkload.Plan()
    var operation = 0

    init(context: ModelContext, step: Int, writer: Int?, rng: SeededGenerator) {
        self.context = context
        self.step = step
        self.writer = writer
        self.rng = rng
    }

    /// A time that depends only on the step and the operation, with a fraction that must survive exactly.
    var now: Date { Date(timeIntervalSinceReferenceDate: 786_000_000 + Double(step) * 61.25 + Double(operation) * 0.125) }

    mutating func run() throws -> StressWorkload.Plan {
        let marker = StressStep()
        marker.number = StressWorkload.marker(step: step, writer: writer)
        context.insert(marker)
        if step > StressWorkload.window {
            let old = StressWorkload.marker(step: step - StressWorkload.window, writer: writer)
            for row in try context.fetch(FetchDescriptor<StressStep>()) where row.number == old {
                try context.delete(row)
            }
        }
        if rng.chance(0.04) {
            try bulk()
        } else {
            for _ in 0...Int.random(in: 0...2, using: &rng) {
                operation += 1
                try one()
            }
        }
        plan.compactsAfter = rng.chance(1.0 / 15)
        plan.trimsHistoryAfter = rng.chance(1.0 / 25)
        return plan
    }

    // MARK: Reading the state in a canonical order

    func all<T: PersistentModel>(_ type: T.Type, _ id: (T) -> UUID) throws -> [T] {
        try context.fetch(FetchDescriptor<T>()).filter { StressWorkload.owns(writer, id($0)) }
            .sorted { id($0).uuidString < id($1).uuidString }
    }

    /// How many notes this step's writer has.
    var noteCount: Int { get throws { try writer == nil ? context.fetchCount(FetchDescriptor<Note>()) : notes.count } }

    var notes: [Note] { get throws { try all(Note.self, \.id) } }
    var folders: [Folder] { get throws { try all(Folder.self, \.id) } }
    var drawings: [NoteDrawing] { get throws { try all(NoteDrawing.self, \.id) } }
    var revisions: [NoteRevision] { get throws { try all(NoteRevision.self, \.id) } }
    var attachments: [NoteAttachment] { get throws { try all(NoteAttachment.self, \.id) } }

    mutating func element<T>(of items: [T]) -> T? {
        items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &rng)]
    }

    // MARK: Operations

    /// One operation, weighted by what the state holds so that it stays around 40 notes and 8 folders.
    mutating func one() throws {
        let noteCount = try self.noteCount
        let folderCount = try writer == nil ? context.fetchCount(FetchDescriptor<Folder>()) : folders.count
        let weights: [(Int, Kind)] = [
            (noteCount < 25 ? 30 : noteCount < 50 ? 12 : 0, .insertNote),
            (20, .editNote),
            (noteCount > 60 ? 40 : noteCount > 10 ? 8 : 0, .deleteNote),
            (10, .refileNote),
            (folderCount < 5 ? 10 : folderCount < 15 ? 4 : 0, .insertFolder),
            (folderCount > 10 ? 10 : folderCount > 3 ? 3 : 0, .deleteFolder),
            (6, .moveFolder),
            (12, .drawing),
            (8, .revisions),
            (6, .attachments),
            (3, .orphans),
        ]
        var roll = Int.random(in: 0..<weights.reduce(0) { $0 + $1.0 }, using: &rng)
        for (weight, kind) in weights {
            if roll < weight { return try perform(kind) }
            roll -= weight
        }
    }

    enum Kind { case insertNote, editNote, deleteNote, refileNote, insertFolder, deleteFolder, moveFolder, drawing,
                     revisions, attachments, orphans }

    mutating func perform(_ kind: Kind) throws {
        switch kind {
        case .insertNote:
            try insertNote(in: element(of: folders + [nil]) ?? nil)
        case .editNote:
            guard let note = try element(of: notes) else { return }
            if rng.chance(0.7) { recordRevision(of: note) }
            if rng.chance(0.6) { note.title = text(short: true) }
            if rng.chance(0.6) { note.body = text(short: false) }
            if rng.chance(0.3) { note.eventDate = rng.chance(0.5) ? nil : now.addingTimeInterval(86_400.5) }
            note.updatedAt = now
        case .deleteNote:
            // Cascades to the drawing, revisions and attachments.
            guard let note = try element(of: notes) else { return }
            try context.delete(note)
        case .refileNote:
            guard let note = try element(of: notes) else { return }
            note.folder = try element(of: folders + [nil]) ?? nil
        case .insertFolder:
            let folder = Folder(name: text(short: true))
            folder.id = uuid()
            context.insert(folder)
            folder.parent = try element(of: folders.filter { $0 !== folder } + [nil]) ?? nil
        case .deleteFolder:
            // Its children move to its parent, its notes become unfiled (R4).
            guard let folder = try element(of: folders) else { return }
            try FolderHierarchy(context: context).delete(folder)
        case .moveFolder:
            guard let folder = try element(of: folders) else { return }
            if rng.chance(0.3) { folder.name = text(short: true) }
            let destination = try element(of: folders + [nil]) ?? nil
            do { try FolderHierarchy(context: context).move(folder, to: destination) } catch {
                // A move into its own subtree is refused and changes nothing (R5): a step like any other.
            }
        case .drawing:
            try changeDrawing()
        case .revisions:
            try changeRevisions()
        case .attachments:
            try changeAttachments()
        case .orphans:
            // Drawings and revisions detached from their note: deleted, so that they do not pile up.
            for drawing in try drawings where drawing.note == nil { try context.delete(drawing) }
            for revision in try revisions where revision.note == nil { try context.delete(revision) }
        }
    }

    mutating func insertNote(in folder: Folder?) throws {
        let note = Note()
        note.id = uuid()
        note.title = text(short: true)
        note.body = text(short: false)
        note.eventDate = rng.chance(0.3) ? now.addingTimeInterval(-3_600.25) : nil
        note.createdAt = now
        note.updatedAt = now
        context.insert(note)
        note.folder = folder
        if rng.chance(0.3) { attachDrawing(to: note) }
        for _ in 0..<Int.random(in: 0...2, using: &rng) { recordRevision(of: note) }
        if rng.chance(0.2) { attach(to: note) }
    }

    mutating func changeDrawing() throws {
        guard let note = try element(of: notes) else { return }
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<5:
            // New bytes: in place when the note has a drawing (an update of an external attribute), else a new one.
            if let drawing = note.drawing {
                drawing.data = drawingBytes()
                plan.writesBlob = true
            } else {
                attachDrawing(to: note)
            }
        case 5..<7:
            // A new drawing replaces the old one, which is deleted.
            if let old = note.drawing { try context.delete(old) }
            attachDrawing(to: note)
        case 7..<9:
            if let drawing = note.drawing { try context.delete(drawing) }
        default:
            // Detached: the drawing stays, pointing at no note.
            note.drawing = nil
        }
        note.updatedAt = now
    }

    mutating func changeRevisions() throws {
        guard let note = try element(of: notes) else { return }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            recordRevision(of: note)
        case 1:
            if let revision = element(of: note.revisions) { try context.delete(revision) }
        case 2:
            // Only the order changes: the store must keep the new order.
            note.revisions = Array(note.revisions.reversed())
        default:
            // Taken off the note: the revision stays, pointing at no note.
            if !note.revisions.isEmpty { note.revisions.remove(at: Int.random(in: 0..<note.revisions.count, using: &rng)) }
        }
        // Keeps a note's history short: the oldest revisions go.
        for revision in note.revisions.dropLast(6) { try context.delete(revision) }
    }

    mutating func changeAttachments() throws {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0:
            guard let note = try element(of: notes) else { return }
            attach(to: note)
        case 1:
            guard let attachment = try element(of: attachments) else { return }
            try context.delete(attachment)
        default:
            guard let attachment = try element(of: attachments) else { return }
            attachment.note = try element(of: notes)
            attachment.size += 1
        }
    }

    /// Many notes in one save, or many deleted at once (a folder with its notes, or notes here and there): one large
    /// record. Inserting only while there are fewer than 40 notes keeps the state from growing.
    mutating func bulk() throws {
        plan.isLarge = true
        if try noteCount < 40 {
            let folder = try element(of: folders)
            for index in 0..<Int.random(in: 10...30, using: &rng) {
                operation = index + 1
                try insertNote(in: folder)
            }
        } else if rng.chance(0.5), let folder = try element(of: folders.filter { !$0.notes.isEmpty }) {
            for note in folder.notes { try context.delete(note) }
            try FolderHierarchy(context: context).delete(folder)
        } else {
            for _ in 0..<Int.random(in: 10...20, using: &rng) {
                if let note = try element(of: notes) { try context.delete(note) }
            }
        }
    }

    // MARK: Pieces

    mutating func recordRevision(of note: Note) {
        let revision = NoteRevision()
        revision.id = uuid()
        revision.title = note.title
        revision.body = note.body
        revision.eventDate = note.eventDate
        revision.updatedAt = note.updatedAt
        revision.capturedAt = now
        note.revisions.append(revision)
    }

    mutating func attachDrawing(to note: Note) {
        let drawing = NoteDrawing()
        drawing.id = uuid()
        drawing.data = drawingBytes()
        note.drawing = drawing
        plan.writesBlob = true
    }

    mutating func attach(to note: Note) {
        let attachment = NoteAttachment()
        attachment.id = uuid()
        attachment.fileName = attachment.id.uuidString + ".bin"
        attachment.originalName = text(short: true)
        attachment.contentType = rng.pick(["image/png", "application/pdf", "text/plain; charset=utf-8"])
        attachment.size = Int64.random(in: 0...5_000_000, using: &rng)
        attachment.note = note
    }

    mutating func uuid() -> UUID {
        let a = rng.next(), b = rng.next()
        return withUnsafeBytes(of: (a, b)) { raw in
            // A writer's objects are told apart by their first byte.
            UUID(uuid: (writer.map { UInt8($0) } ?? raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                        raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }

    /// Drawing bytes: often small, sometimes up to 96 KiB; one time in five one of eight fixed contents, so that
    /// notes share blob files.
    mutating func drawingBytes() -> Data {
        if rng.chance(0.2) {
            let shared = UInt8.random(in: 0..<8, using: &rng)
            return Data((0..<(1_000 + Int(shared) * 3_000)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(shared)) })
        }
        let count = switch Int.random(in: 0..<10, using: &rng) {
        case 0..<4: Int.random(in: 0...256, using: &rng)
        case 4..<8: Int.random(in: 257...16_384, using: &rng)
        default: Int.random(in: 16_385...98_304, using: &rng)
        }
        var bytes = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = rng.next()
            for _ in 0..<8 where index < count {
                bytes[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        if count > 16_384 { plan.isLarge = true }
        return Data(bytes)
    }

    /// Text with characters JSON must escape and characters outside ASCII; a body is sometimes tens of kilobytes.
    mutating func text(short: Bool) -> String {
        let alphabet: [String] = ["a", "e", "n", "o", "s", "t", " ", " ", "é", "ß", "中", "😀", "\n", "\t", "\"",
                                  "\\", "/", "\u{7}", "<", "&", "\u{2028}"]
        let length = if short { Int.random(in: 0...24, using: &rng) } else {
            switch Int.random(in: 0..<20, using: &rng) {
            case 0..<14: Int.random(in: 0...200, using: &rng)
            case 14..<19: Int.random(in: 201...2_000, using: &rng)
            default: Int.random(in: 2_001...40_000, using: &rng)
            }
        }
        if length > 2_000 { plan.isLarge = true }
        var result = ""
        result.reserveCapacity(length)
        for _ in 0..<length { result += alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }
        return result
    }
}

// MARK: - The canonical state

extension StressWorkload {
    /// Everything `context` sees, one line per object, sorted: each object by its own `id` (its persistent
    /// identifier differs from store to store), relationships as the targets' `id`s in their order, drawings as
    /// their size and a hash of their bytes. Two stores hold the same state exactly when their dumps, made in the
    /// same process, are equal.
    ///
    /// Reading a drawing reads its blob file; a read that fails is listed as a line of its own.
    /// With `writer`, only that writer's objects and markers are listed.
    public static func canonicalDump(_ context: ModelContext, writer: Int? = nil) throws -> [String] {
        func mine<T: PersistentModel>(_ type: T.Type, _ id: (T) -> UUID) throws -> [T] {
            try context.fetch(FetchDescriptor<T>()).filter { owns(writer, id($0)) }
        }
        func ids(_ targets: [some PersistentModel], _ id: (any PersistentModel) -> String) -> String {
            "[" + targets.map(id).joined(separator: ",") + "]"
        }
        func id(_ model: (any PersistentModel)?) -> String {
            switch model {
            case nil: "-"
            case let note as Note: note.id.uuidString
            case let folder as Folder: folder.id.uuidString
            case let drawing as NoteDrawing: drawing.id.uuidString
            case let revision as NoteRevision: revision.id.uuidString
            case let attachment as NoteAttachment: attachment.id.uuidString
            case let step as StressStep: String(step.number)
            default: "?"
            }
        }
        func date(_ date: Date?) -> String { date.map { "\($0.timeIntervalSinceReferenceDate)" } ?? "-" }
        func text(_ string: String) -> String { String(reflecting: string) }

        var lines: [String] = []
        for folder in try mine(Folder.self, \.id) {
            lines.append("Folder \(folder.id) name=\(text(folder.name)) parent=\(id(folder.parent)) "
                         + "children=\(ids(folder.children, id)) notes=\(ids(folder.notes, id))")
        }
        for note in try mine(Note.self, \.id) {
            lines.append("Note \(note.id) title=\(text(note.title)) body=\(text(note.body)) "
                         + "event=\(date(note.eventDate)) created=\(date(note.createdAt)) "
                         + "updated=\(date(note.updatedAt)) folder=\(id(note.folder)) drawing=\(id(note.drawing)) "
                         + "revisions=\(ids(note.revisions, id)) attachments=\(ids(note.attachments, id))")
        }
        for drawing in try mine(NoteDrawing.self, \.id) {
            // Hasher's seed differs from process to process: dumps compare within one process only.
            var hasher = Hasher()
            drawing.data.withUnsafeBytes { hasher.combine(bytes: $0) }
            lines.append("NoteDrawing \(drawing.id) note=\(id(drawing.note)) "
                         + "data=\(drawing.data.count):\(hasher.finalize())")
        }
        for revision in try mine(NoteRevision.self, \.id) {
            lines.append("NoteRevision \(revision.id) title=\(text(revision.title)) body=\(text(revision.body)) "
                         + "event=\(date(revision.eventDate)) updated=\(date(revision.updatedAt)) "
                         + "captured=\(date(revision.capturedAt)) note=\(id(revision.note))")
        }
        for attachment in try mine(NoteAttachment.self, \.id) {
            lines.append("NoteAttachment \(attachment.id) file=\(text(attachment.fileName)) "
                         + "original=\(text(attachment.originalName)) type=\(text(attachment.contentType)) "
                         + "size=\(attachment.size) note=\(id(attachment.note))")
        }
        for step in try context.fetch(FetchDescriptor<StressStep>())
            where writer.map({ step.number / markerStride == $0 }) ?? true {
            lines.append("StressStep \(step.number)")
        }
        lines.sort()
        lines += context.readFailures.map { "read failure: \($0)" }
        return lines
    }
}
