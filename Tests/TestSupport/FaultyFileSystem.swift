import Foundation
import NoteKitFileStore
import Synchronization

/// A file system that delegates to the real one and fails the calls it is told to: the Nth write, fsync, rename
/// or directory sync, once or from then on; a short write; a full disk. It also counts and logs every call, so a
/// test can check, say, that fetching reads no blob file.
public final class FaultyFileSystem: StoreFileSystem {
    /// A kind of call.
    public enum Operation: String, CaseIterable, Sendable {
        case read, create, openForAppending, write, fsync, rename, remove, syncDirectory, makeDirectory,
             contentsOfDirectory, truncate, lock
    }

    /// How a call fails.
    public enum Failure: Sendable, Equatable {
        /// The call fails with this `errno` (EIO by default) and does nothing.
        case error(Int32)
        /// A write writes only its first `bytes` bytes, then fails with EIO.
        case shortWrite(bytes: Int)
    }

    /// When to fail: the `nth` call of `operation` (counted from when the rule was armed) whose path contains
    /// `pathContaining`, and, when `persistent`, every matching call after it.
    public struct Rule: Sendable {
        public var operation: Operation
        public var nth: Int
        public var persistent: Bool
        public var failure: Failure
        public var pathContaining: String?

        public init(_ operation: Operation, nth: Int = 1, persistent: Bool = false, failure: Failure = .error(EIO),
                    pathContaining: String? = nil) {
            self.operation = operation
            self.nth = nth
            self.persistent = persistent
            self.failure = failure
            self.pathContaining = pathContaining
        }
    }

    /// One call, as logged.
    public struct Call: Sendable, Equatable {
        public let operation: Operation
        public let path: String
        public let failed: Bool
    }

    private let base = POSIXFileSystem()
    private struct State {
        var rule: Rule?
        var seen = 0
        var calls: [Call] = []
        var failures = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// Arms `rule`, replacing any armed one.
    public func arm(_ rule: Rule) { state.withLock { $0.rule = rule; $0.seen = 0 } }
    /// Stops failing.
    public func disarm() { state.withLock { $0.rule = nil } }
    /// Every call so far.
    public var calls: [Call] { state.withLock { $0.calls } }
    /// How many calls were made to fail.
    public var failureCount: Int { state.withLock { $0.failures } }
    /// Forgets the logged calls.
    public func clearLog() { state.withLock { $0.calls.removeAll() } }

    /// Records a call and says whether (and how) it must fail.
    func check(_ operation: Operation, _ path: String) -> Failure? {
        state.withLock { state in
            var failure: Failure?
            if let rule = state.rule, rule.operation == operation,
               rule.pathContaining.map({ path.contains($0) }) ?? true {
                state.seen += 1
                if state.seen == rule.nth || (rule.persistent && state.seen > rule.nth) { failure = rule.failure }
            }
            if failure != nil { state.failures += 1 }
            state.calls.append(Call(operation: operation, path: path, failed: failure != nil))
            return failure
        }
    }

    private func fail(_ failure: Failure?, _ operation: Operation, _ path: String) throws {
        guard let failure else { return }
        switch failure {
        case .error(let code): throw StoreIOError(operation: operation.rawValue, path: path, code: code)
        case .shortWrite: throw StoreIOError(operation: operation.rawValue, path: path, code: EIO)
        }
    }

    public func read(_ path: String) throws -> [UInt8] {
        try fail(check(.read, path), .read, path)
        return try base.read(path)
    }

    public func create(_ path: String) throws -> any StoreFile {
        try fail(check(.create, path), .create, path)
        return FaultyFile(try base.create(path), path: path, owner: self)
    }

    public func openForAppending(_ path: String) throws -> any StoreFile {
        try fail(check(.openForAppending, path), .openForAppending, path)
        return FaultyFile(try base.openForAppending(path), path: path, owner: self)
    }

    public func rename(_ source: String, to destination: String) throws {
        try fail(check(.rename, source), .rename, source)
        try base.rename(source, to: destination)
    }

    public func remove(_ path: String) throws {
        try fail(check(.remove, path), .remove, path)
        try base.remove(path)
    }

    public func syncDirectory(_ path: String) throws {
        try fail(check(.syncDirectory, path), .syncDirectory, path)
        try base.syncDirectory(path)
    }

    public func makeDirectory(_ path: String) throws {
        try fail(check(.makeDirectory, path), .makeDirectory, path)
        try base.makeDirectory(path)
    }

    public func contentsOfDirectory(_ path: String) throws -> [String] {
        try fail(check(.contentsOfDirectory, path), .contentsOfDirectory, path)
        return try base.contentsOfDirectory(path)
    }

    public func exists(_ path: String) -> Bool { base.exists(path) }

    public func truncate(_ path: String, to length: Int) throws {
        try fail(check(.truncate, path), .truncate, path)
        try base.truncate(path, to: length)
    }

    public func tryLock(_ path: String) throws -> (any StoreLockHandle)? {
        try fail(check(.lock, path), .lock, path)
        return try base.tryLock(path)
    }
}

/// A file of a `FaultyFileSystem`: its writes and flushes go through the same rules.
final class FaultyFile: StoreFile {
    private let base: any StoreFile
    private let path: String
    private let owner: FaultyFileSystem

    init(_ base: any StoreFile, path: String, owner: FaultyFileSystem) {
        self.base = base
        self.path = path
        self.owner = owner
    }

    var size: Int { base.size }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        switch owner.check(.write, path) {
        case nil:
            try base.append(bytes)
        case .shortWrite(let count)?:
            try base.append(UnsafeRawBufferPointer(rebasing: bytes[0..<min(count, bytes.count)]))
            throw StoreIOError(operation: "write", path: path, code: EIO)
        case .error(let code)?:
            throw StoreIOError(operation: "write", path: path, code: code)
        }
    }

    func sync() throws {
        if case .error(let code)? = owner.check(.fsync, path) {
            throw StoreIOError(operation: "fsync", path: path, code: code)
        }
        try base.sync()
    }

    func close() throws { try base.close() }
}
