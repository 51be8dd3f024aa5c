import Foundation
import NoteKitFileStore
import Synchronization

/// A disk in memory that knows what a crash would keep: for every file the bytes the process sees and the bytes
/// flushed to the medium, for every directory the entries the process sees and the entries flushed.
///
/// Every change (a directory or file created, bytes written, a flush, a rename, a removal, a directory flushed, a
/// cut) is one step of a journal. ``images(since:)`` replays the journal from a ``Mark`` and gives the directory as
/// it would be after a crash at each step, in each ``CrashKind``, the way ALICE explores crash states. A crashed
/// image makes a new `SimulatedDisk`, so the store can be reopened on it (and crashed again: after a process crash
/// what was not flushed is still not durable); or it can be written to a real directory with
/// ``materialize(_:under:to:)`` and opened with `POSIXFileSystem`.
///
/// It also fails calls as ``FaultRules`` say. A failed `fsync` behaves as Linux's does since 4.13: the bytes
/// written since the last flush stay readable but will never reach the medium (their pages are marked clean), and a
/// later `fsync` succeeds without writing them. So a store that retried a failed flush and trusted it would lose
/// data at the next power loss, and a test can see it. A failed directory flush changes nothing: its entries stay
/// pending and a later flush of the directory makes them durable.
package final class SimulatedDisk: StoreFileSystem {
    /// What survives a crash.
    package enum CrashKind: String, CaseIterable, Sendable, CustomStringConvertible {
        /// The process died; the kernel kept everything: what each completed call did is visible, and what was
        /// not flushed yet is still not durable (the next process may build on it, then the power may fail).
        case processCrash
        /// The process died in the middle of a write: half of that write's bytes landed. (Steps that are not
        /// writes give no image of this kind.)
        case tornWrite
        /// The machine lost power: file bytes as of their last successful flush, directory entries as of their
        /// directory's last successful flush; a directory whose own entry was not flushed is gone with its content.
        case powerLoss
        /// Power loss on a file system that commits directory entries ahead of file data (ext4 `data=writeback`):
        /// every entry as the process left it, but file bytes only as flushed.
        case metadataFirst

        package var description: String { rawValue }
    }

    package typealias Operation = FaultRules.Operation
    package typealias Failure = FaultRules.Failure
    package typealias Rule = FaultRules.Rule

    /// The fault rules every call consults.
    package let faults = FaultRules()

    private let state: Mutex<LiveState>

    /// An empty disk on which `existingDirectories` (and their parents) exist and are durable: the directories a
    /// store is created in, which the store did not create and need not flush.
    package init(existingDirectories: [String] = [TemporaryStores.root.path]) {
        var image = Image()
        for directory in existingDirectories {
            var parent = Image.rootID
            for component in Image.components(directory) {
                if case .directory(let id)? = image.directories[parent]!.visible[component] {
                    parent = id
                    continue
                }
                let id = image.newID()
                image.directories[id] = DirectoryNode()
                image.directories[parent]!.visible[component] = .directory(id)
                image.directories[parent]!.durable[component] = .directory(id)
                parent = id
            }
        }
        state = Mutex(LiveState(image: image))
    }

    /// A disk holding `image` (a crashed disk, restarted).
    package init(image: Image) {
        state = Mutex(LiveState(image: image))
    }

    // MARK: The journal

    /// A point in the journal to replay from: the image at that point and the number of steps before it.
    package struct Mark: Sendable {
        package let image: Image
        package let step: Int
    }

    /// Where the journal is now.
    package func mark() -> Mark {
        state.withLock { Mark(image: $0.image, step: $0.journal.count) }
    }

    /// The number of steps since `mark`.
    package func steps(since mark: Mark) -> Int { state.withLock { $0.journal.count - mark.step } }

    /// The steps since `mark`, described, for messages.
    package func journal(since mark: Mark) -> [String] {
        state.withLock { $0.journal[mark.step...].map(\.description) }
    }

    /// A crash image: after `step` steps since the mark, of `kind`.
    package struct CrashImage: Sendable {
        package let step: Int
        package let kind: CrashKind
        /// The step the crash interrupted (or "end").
        package let interrupted: String
        package let image: Image
    }

    /// Every crash image since `mark`: for k = 0 … steps (k steps done), each kind; `tornWrite` only where step k
    /// is a write. Distinct images only: kinds that give the same directory at a step are listed once.
    package func images(since mark: Mark, kinds: [CrashKind] = CrashKind.allCases) -> [CrashImage] {
        let steps = state.withLock { Array($0.journal[mark.step...]) }
        var image = mark.image
        var result: [CrashImage] = []
        for k in 0...steps.count {
            var seen: [Image] = []
            let next = k < steps.count ? steps[k] : nil
            for kind in kinds {
                let crashed: Image
                if kind == .tornWrite {
                    guard case .write(let file, let offset, let bytes)? = next, bytes.count > 1 else { continue }
                    var torn = image
                    torn.apply(.write(file: file, offset: offset, bytes: Array(bytes.prefix(bytes.count / 2))))
                    crashed = torn
                } else {
                    crashed = image.crashed(kind)
                }
                if seen.contains(crashed) { continue }
                seen.append(crashed)
                result.append(CrashImage(step: k, kind: kind, interrupted: next?.description ?? "end", image: crashed))
            }
            if let next { image.apply(next) }
        }
        return result
    }

    /// The image of a crash now, of `kind` (a torn write is a process crash: no write is in progress).
    package func crashImage(_ kind: CrashKind) -> Image {
        state.withLock { $0.image.crashed(kind) }
    }

    /// Writes the files under `root` of `image` to the real directory `destination`.
    package static func materialize(_ image: Image, under root: String, to destination: URL) throws {
        guard let id = image.resolve(root), case .directory(let directory) = id else { return }
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        for (name, entry) in image.directories[directory]!.visible {
            let target = destination.appendingPathComponent(name)
            switch entry {
            case .file(let file):
                try Data(image.files[file]!.visible).write(to: target)
            case .directory:
                try materialize(image, under: root + "/" + name, to: target)
            }
        }
    }

    // MARK: Looking and tampering, outside the store

    /// The visible bytes of the file at `path`, or nil.
    package func contents(_ path: String) -> [UInt8]? {
        state.withLock { state in
            guard case .file(let id)? = state.image.resolve(path) else { return nil }
            return state.image.files[id]!.visible
        }
    }

    /// Every file under `directory`, relative path to bytes (visible state).
    package func files(under directory: String) -> [String: [UInt8]] {
        state.withLock { state in
            var result: [String: [UInt8]] = [:]
            func walk(_ id: Int, _ prefix: String) {
                for (name, entry) in state.image.directories[id]!.visible {
                    switch entry {
                    case .file(let file): result[prefix + name] = state.image.files[file]!.visible
                    case .directory(let sub): walk(sub, prefix + name + "/")
                    }
                }
            }
            if case .directory(let id)? = state.image.resolve(directory) { walk(id, "") }
            return result
        }
    }

    /// Writes `bytes` at the end of the file at `path` (creating it) and makes it durable, as another program
    /// would; no fault rule applies.
    package func appendDurably(_ path: String, _ bytes: [UInt8]) throws {
        try state.withLock { state in
            let (parent, name) = try state.image.parentAndName(path, operation: "append")
            let id: Int
            switch state.image.directories[parent]!.visible[name] {
            case .file(let existing)?:
                id = existing
            case .directory?:
                throw StoreIOError(operation: "append", path: path, code: EISDIR)
            case nil:
                id = state.image.newID()
                state.record(.create(parent: parent, name: name, file: id))
            }
            state.record(.write(file: id, offset: state.image.files[id]!.visible.count, bytes: bytes))
            state.record(.fsync(file: id, succeeded: true))
            state.record(.syncDirectory(parent))
        }
    }

    // MARK: StoreFileSystem

    /// Runs `body` as the armed rule says for this call: not at all, or before throwing anyway.
    private func perform<T>(_ operation: Operation, _ path: String, _ body: (inout LiveState) throws -> T) throws -> T {
        let failure = faults.check(operation, path)
        return try state.withLock { state in
            switch failure {
            case nil:
                return try body(&state)
            case .error(let code)?:
                throw StoreIOError(operation: operation.rawValue, path: path, code: code)
            case .shortWrite?:
                throw StoreIOError(operation: operation.rawValue, path: path, code: EIO)
            case .errorAfterEffect(let code)?:
                _ = try body(&state)
                throw StoreIOError(operation: operation.rawValue, path: path, code: code)
            }
        }
    }

    package func read(_ path: String) throws -> [UInt8] {
        try perform(.read, path) { state in
            switch state.image.resolve(path) {
            case .file(let id)?: return state.image.files[id]!.visible
            case .directory?: throw StoreIOError(operation: "read", path: path, code: EISDIR)
            case nil: throw StoreIOError(operation: "open", path: path, code: ENOENT)
            }
        }
    }

    package func status(_ path: String) throws -> StoreFileStatus? {
        state.withLock { state in
            guard case .file(let id)? = state.image.resolve(path) else { return nil }
            let file = state.image.files[id]!
            return StoreFileStatus(size: file.visible.count, identity: [Int64(id), Int64(file.changes)])
        }
    }

    package func create(_ path: String) throws -> any StoreFile {
        try perform(.create, path) { state in
            let (parent, name) = try state.image.parentAndName(path, operation: "create")
            guard state.image.directories[parent]!.visible[name] == nil else {
                throw StoreIOError(operation: "create", path: path, code: EEXIST)
            }
            let id = state.image.newID()
            state.record(.create(parent: parent, name: name, file: id))
            return SimulatedFile(disk: self, file: id, path: path, size: 0)
        }
    }

    package func openForAppending(_ path: String) throws -> any StoreFile { try openForWriting(path, at: nil) }

    package func openForAppending(_ path: String, at end: Int) throws -> any StoreFile {
        try openForWriting(path, at: end)
    }

    /// The file at `path` open for writing at `end`, or at its end when `end` is nil.
    private func openForWriting(_ path: String, at end: Int?) throws -> SimulatedFile {
        try perform(.openForAppending, path) { state in
            guard case .file(let id)? = state.image.resolve(path) else {
                throw StoreIOError(operation: "open", path: path, code: ENOENT)
            }
            let length = state.image.files[id]!.visible.count
            guard let end else { return SimulatedFile(disk: self, file: id, path: path, size: length) }
            guard end >= 0, end <= length else {
                throw StoreIOError(operation: "open at \(end)", path: path, code: EINVAL)
            }
            return SimulatedFile(disk: self, file: id, path: path, size: end)
        }
    }

    package func rename(_ source: String, to destination: String) throws {
        try perform(.rename, source) { state in
            let (from, fromName) = try state.image.parentAndName(source, operation: "rename")
            let (to, toName) = try state.image.parentAndName(destination, operation: "rename")
            guard state.image.directories[from]!.visible[fromName] != nil else {
                throw StoreIOError(operation: "rename", path: "\(source) -> \(destination)", code: ENOENT)
            }
            state.record(.rename(from: from, fromName: fromName, to: to, toName: toName))
        }
    }

    package func remove(_ path: String) throws {
        try perform(.remove, path) { state in
            let (parent, name) = try state.image.parentAndName(path, operation: "unlink")
            guard case .file? = state.image.directories[parent]!.visible[name] else {
                throw StoreIOError(operation: "unlink", path: path, code: ENOENT)
            }
            state.record(.remove(parent: parent, name: name))
        }
    }

    package func syncDirectory(_ path: String) throws {
        try perform(.syncDirectory, path) { state in
            guard case .directory(let id)? = state.image.resolve(path) else {
                throw StoreIOError(operation: "open directory", path: path, code: ENOENT)
            }
            state.record(.syncDirectory(id))
        }
    }

    package func makeDirectory(_ path: String) throws {
        try perform(.makeDirectory, path) { state in
            var parent = Image.rootID
            for component in Image.components(path) {
                switch state.image.directories[parent]!.visible[component] {
                case .directory(let id)?:
                    parent = id
                case .file?:
                    throw StoreIOError(operation: "mkdir", path: path, code: EEXIST)
                case nil:
                    let id = state.image.newID()
                    state.record(.makeDirectory(parent: parent, name: component, directory: id))
                    parent = id
                }
            }
        }
    }

    package func contentsOfDirectory(_ path: String) throws -> [String] {
        try perform(.contentsOfDirectory, path) { state in
            guard case .directory(let id)? = state.image.resolve(path) else {
                throw StoreIOError(operation: "opendir", path: path, code: ENOENT)
            }
            return state.image.directories[id]!.visible.keys.sorted()
        }
    }

    package func exists(_ path: String) -> Bool {
        state.withLock { $0.image.resolve(path) != nil }
    }

    /// A simulated disk holds regular files and directories only.
    package func kind(of path: String) throws -> StoreFileKind? {
        state.withLock { state in
            switch state.image.resolve(path) {
            case .file?: .regularFile
            case .directory?: .directory
            case nil: nil
            }
        }
    }

    /// Cuts the file and flushes it, as `POSIXFileSystem.truncate` does: two steps, so a crash can fall between.
    package func truncate(_ path: String, to length: Int) throws {
        try perform(.truncate, path) { state in
            guard case .file(let id)? = state.image.resolve(path) else {
                throw StoreIOError(operation: "open", path: path, code: ENOENT)
            }
            state.record(.truncate(file: id, length: length))
            state.record(.fsync(file: id, succeeded: true))
        }
    }

    package func tryLock(_ path: String) throws -> (any StoreLockHandle)? {
        try perform(.lock, path) { state in
            if state.image.resolve(path) == nil {
                let (parent, name) = try state.image.parentAndName(path, operation: "open")
                state.record(.create(parent: parent, name: name, file: state.image.newID()))
            }
            guard !state.locks.contains(path) else { return nil }
            state.locks.insert(path)
            return SimulatedLock(disk: self, path: path)
        }
    }

    // MARK: Files and locks

    fileprivate func append(_ bytes: UnsafeRawBufferPointer, to file: Int, at offset: Int, path: String) throws -> Int {
        let failure = faults.check(.write, path)
        return try state.withLock { state in
            var count = bytes.count
            switch failure {
            case nil, .errorAfterEffect?: break
            case .error?: count = 0
            case .shortWrite(let written)?: count = min(written, bytes.count)
            }
            if count > 0 { state.record(.write(file: file, offset: offset, bytes: Array(bytes.prefix(count)))) }
            switch failure {
            case nil: return count
            case .error(let code)?, .errorAfterEffect(let code)?:
                // The caller learns nothing of what was written; the size it keeps is its own.
                throw SimulatedWriteError(written: count, error: StoreIOError(operation: "write", path: path, code: code))
            case .shortWrite?:
                throw SimulatedWriteError(written: count, error: StoreIOError(operation: "write", path: path, code: EIO))
            }
        }
    }

    /// A flush that failed (or reported failure after its effect).
    package struct FailedFlush: Sendable, Equatable {
        package let path: String
        /// Whether the file held writes not flushed yet: whether the failure could lose data.
        package let hadUnflushedWrites: Bool
    }

    /// Every flush of a file that failed, in order.
    package var failedFlushes: [FailedFlush] { state.withLock { $0.failedFlushes } }

    fileprivate func sync(_ file: Int, path: String) throws {
        let failure = faults.check(.fsync, path)
        try state.withLock { state in
            if failure != nil {
                state.failedFlushes.append(FailedFlush(path: path, hadUnflushedWrites: !state.image.files[file]!.pending.isEmpty))
            }
            switch failure {
            case nil:
                state.record(.fsync(file: file, succeeded: true))
            case .error(let code)?:
                state.record(.fsync(file: file, succeeded: false))
                throw StoreIOError(operation: "fsync", path: path, code: code)
            case .shortWrite?:
                state.record(.fsync(file: file, succeeded: false))
                throw StoreIOError(operation: "fsync", path: path, code: EIO)
            case .errorAfterEffect(let code)?:
                state.record(.fsync(file: file, succeeded: true))
                throw StoreIOError(operation: "fsync", path: path, code: code)
            }
        }
    }

    /// `posix_fallocate`: the file grows to `capacity` with zeros (visible at once; on the medium once flushed,
    /// like any change of length). A failure changes nothing, or, after the effect, reports an error anyway.
    fileprivate func reserve(_ file: Int, upTo capacity: Int, path: String) throws {
        let failure = faults.check(.reserve, path)
        try state.withLock { state in
            switch failure {
            case nil, .errorAfterEffect?:
                if state.image.files[file]!.visible.count < capacity {
                    state.record(.reserve(file: file, length: capacity))
                }
            case .error?, .shortWrite?:
                break
            }
            switch failure {
            case nil: return
            case .error(let code)?, .errorAfterEffect(let code)?:
                throw StoreIOError(operation: "fallocate", path: path, code: code)
            case .shortWrite?:
                throw StoreIOError(operation: "fallocate", path: path, code: EIO)
            }
        }
    }

    fileprivate func unlock(_ path: String) { state.withLock { _ = $0.locks.remove(path) } }

    // MARK: The model

    private struct LiveState {
        var image: Image
        var journal: [Step] = []
        var locks: Set<String> = []
        var failedFlushes: [FailedFlush] = []

        mutating func record(_ step: Step) {
            image.apply(step)
            journal.append(step)
        }
    }

    /// What a directory entry names.
    package enum Entry: Hashable, Sendable {
        case file(Int)
        case directory(Int)
    }

    /// A file: the bytes the process sees, the bytes on the medium, and the writes not flushed yet.
    package struct FileNode: Hashable, Sendable {
        var visible: [UInt8] = []
        var durable: [UInt8] = []
        var pending: [PendingWrite] = []
        var changes = 0
    }

    struct PendingWrite: Hashable, Sendable {
        var offset: Int
        var bytes: [UInt8]
    }

    /// A directory: the entries the process sees and the entries on the medium.
    package struct DirectoryNode: Hashable, Sendable {
        var visible: [String: Entry] = [:]
        var durable: [String: Entry] = [:]
    }

    /// One change to the disk.
    enum Step: Sendable, CustomStringConvertible {
        case makeDirectory(parent: Int, name: String, directory: Int)
        case create(parent: Int, name: String, file: Int)
        case write(file: Int, offset: Int, bytes: [UInt8])
        case fsync(file: Int, succeeded: Bool)
        case rename(from: Int, fromName: String, to: Int, toName: String)
        case remove(parent: Int, name: String)
        case syncDirectory(Int)
        case truncate(file: Int, length: Int)
        case reserve(file: Int, length: Int)

        var description: String {
            switch self {
            case let .makeDirectory(_, name, _): "mkdir \(name)"
            case let .create(_, name, file): "create \(name) (#\(file))"
            case let .write(file, offset, bytes): "write #\(file) at \(offset), \(bytes.count) bytes"
            case let .fsync(file, succeeded): "fsync #\(file)\(succeeded ? "" : " (failed)")"
            case let .rename(_, fromName, _, toName): "rename \(fromName) to \(toName)"
            case let .remove(_, name): "remove \(name)"
            case let .syncDirectory(directory): "fsync directory #\(directory)"
            case let .truncate(file, length): "truncate #\(file) to \(length)"
            case let .reserve(file, length): "fallocate #\(file) to \(length)"
            }
        }
    }

    /// The whole disk: files and directories by number; directory 0 is `/`.
    package struct Image: Hashable, Sendable {
        static let rootID = 0
        var files: [Int: FileNode] = [:]
        var directories: [Int: DirectoryNode] = [Image.rootID: DirectoryNode()]
        var nextID = 1

        mutating func newID() -> Int {
            defer { nextID += 1 }
            return nextID
        }

        /// The components of `path` between its slashes, empty ones left out, found in its UTF-8 bytes: every
        /// simulated call resolves a path, and `String.split` walks `Character`s, which a debug build runs slowly
        /// (it was an eighth of the fault matrix's time).
        static func components(_ path: String) -> [String] {
            var path = path
            return path.withUTF8 { bytes in
                var components: [String] = []
                var start = 0
                for end in 0...bytes.count where end == bytes.count || bytes[end] == UInt8(ascii: "/") {
                    if end > start {
                        components.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
                    }
                    start = end + 1
                }
                return components
            }
        }

        func resolve(_ path: String) -> Entry? {
            var entry = Entry.directory(Self.rootID)
            for component in Self.components(path) {
                guard case .directory(let id) = entry, let next = directories[id]!.visible[component] else {
                    return nil
                }
                entry = next
            }
            return entry
        }

        func parentAndName(_ path: String, operation: String) throws -> (Int, String) {
            var components = Self.components(path)
            guard let name = components.popLast() else { throw StoreIOError(operation: operation, path: path, code: EINVAL) }
            guard case .directory(let parent)? = resolve("/" + components.joined(separator: "/")) else {
                throw StoreIOError(operation: operation, path: path, code: ENOENT)
            }
            return (parent, name)
        }

        mutating func apply(_ step: Step) {
            switch step {
            case let .makeDirectory(parent, name, directory):
                directories[directory] = DirectoryNode()
                directories[parent]!.visible[name] = .directory(directory)
                nextID = max(nextID, directory + 1)
            case let .create(parent, name, file):
                files[file] = FileNode()
                directories[parent]!.visible[name] = .file(file)
                nextID = max(nextID, file + 1)
            case let .write(file, offset, bytes):
                files[file]!.visible.write(bytes, at: offset)
                files[file]!.pending.append(PendingWrite(offset: offset, bytes: bytes))
                files[file]!.changes += 1
            case let .fsync(file, succeeded):
                // A failed flush loses the pending writes for good (their pages are clean now); the size the
                // process sees stays.
                if succeeded {
                    for write in files[file]!.pending { files[file]!.durable.write(write.bytes, at: write.offset) }
                }
                files[file]!.pending = []
                let size = files[file]!.visible.count
                if files[file]!.durable.count < size {
                    if succeeded { files[file]!.durable += [UInt8](repeating: 0, count: size - files[file]!.durable.count) }
                } else if succeeded {
                    files[file]!.durable.removeSubrange(size...)
                }
            case let .rename(from, fromName, to, toName):
                let entry = directories[from]!.visible.removeValue(forKey: fromName)
                directories[to]!.visible[toName] = entry
            case let .remove(parent, name):
                directories[parent]!.visible[name] = nil
            case let .syncDirectory(directory):
                directories[directory]!.durable = directories[directory]!.visible
            case let .truncate(file, length):
                if files[file]!.visible.count > length { files[file]!.visible.removeSubrange(length...) }
                else { files[file]!.visible += [UInt8](repeating: 0, count: length - files[file]!.visible.count) }
                files[file]!.pending = files[file]!.pending.compactMap { write in
                    guard write.offset < length else { return nil }
                    return PendingWrite(offset: write.offset, bytes: Array(write.bytes.prefix(length - write.offset)))
                }
                files[file]!.changes += 1
            case let .reserve(file, length):
                // Zeros the process sees at once; the medium gets the new length with the next flush.
                if files[file]!.visible.count < length {
                    files[file]!.visible += [UInt8](repeating: 0, count: length - files[file]!.visible.count)
                }
                files[file]!.changes += 1
            }
        }

        /// The disk after a crash of `kind`: after a process crash the same disk (the kernel goes on, with what it
        /// has not flushed yet); after a power loss what survived, all of it durable.
        func crashed(_ kind: CrashKind) -> Image {
            if kind == .processCrash || kind == .tornWrite { return self }
            var result = Image()
            result.nextID = nextID
            func copy(_ id: Int) {
                let node = directories[id]!
                let entries = kind == .powerLoss ? node.durable : node.visible
                result.directories[id] = DirectoryNode(visible: entries, durable: entries)
                for entry in entries.values {
                    switch entry {
                    case .file(let file):
                        let bytes = files[file]!.durable
                        result.files[file] = FileNode(visible: bytes, durable: bytes)
                    case .directory(let sub):
                        copy(sub)
                    }
                }
            }
            copy(Self.rootID)
            return result
        }
    }
}

/// A write that failed after `written` bytes reached the file.
struct SimulatedWriteError: Error {
    let written: Int
    let error: StoreIOError
}

/// An open file of a ``SimulatedDisk``: writes at the size it knows, as `POSIXFile` does with `pwrite`.
final class SimulatedFile: StoreFile {
    private let disk: SimulatedDisk
    private let file: Int
    private let path: String
    private var closed = false
    private(set) var size: Int

    init(disk: SimulatedDisk, file: Int, path: String, size: Int) {
        self.disk = disk
        self.file = file
        self.path = path
        self.size = size
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard !closed else { throw StoreIOError(operation: "write", path: path, code: EBADF) }
        do {
            size += try disk.append(bytes, to: file, at: size, path: path)
        } catch let failed as SimulatedWriteError {
            // POSIXFile counts only what a successful write call wrote; a failed one leaves its size alone.
            throw failed.error
        }
    }

    func sync() throws {
        guard !closed else { throw StoreIOError(operation: "fsync", path: path, code: EBADF) }
        try disk.sync(file, path: path)
    }

    func reserve(upTo capacity: Int) throws {
        guard !closed else { throw StoreIOError(operation: "fallocate", path: path, code: EBADF) }
        try disk.reserve(file, upTo: capacity, path: path)
    }

    func close() throws { closed = true }
}

/// A lock held on a ``SimulatedDisk``.
final class SimulatedLock: StoreLockHandle {
    private let disk: SimulatedDisk
    private let path: String
    private let held = Mutex(true)

    init(disk: SimulatedDisk, path: String) {
        self.disk = disk
        self.path = path
    }

    func unlock() {
        guard held.withLock({ let was = $0; $0 = false; return was }) else { return }
        disk.unlock(path)
    }

    deinit { unlock() }
}

extension Array where Element == UInt8 {
    /// Writes `bytes` at `offset`, extending with zeros past the end.
    fileprivate mutating func write(_ bytes: [UInt8], at offset: Int) {
        if count < offset { append(contentsOf: [UInt8](repeating: 0, count: offset - count)) }
        let overlap = Swift.min(bytes.count, count - offset)
        if overlap > 0 { replaceSubrange(offset..<(offset + overlap), with: bytes.prefix(overlap)) }
        if overlap < bytes.count { append(contentsOf: bytes[overlap...]) }
    }
}
