import Foundation
import NoteKitFileStore
import Synchronization

/// Which calls fail, and how: the rules a fault-injecting file system consults before each call, with a log of
/// every call. Shared by ``FaultyFileSystem`` (the real disk) and ``SimulatedDisk`` (a disk in memory).
package final class FaultRules: Sendable {
    /// A kind of call.
    package enum Operation: String, CaseIterable, Sendable {
        case read, create, openForAppending, write, fsync, rename, remove, syncDirectory, makeDirectory,
             contentsOfDirectory, truncate, lock, reserve
    }

    /// How a call fails.
    package enum Failure: Sendable, Equatable, CustomStringConvertible {
        /// The call fails with this `errno` (EIO by default) and does nothing.
        case error(Int32)
        /// A write writes only its first `bytes` bytes, then fails with EIO. (Other calls fail with EIO.)
        case shortWrite(bytes: Int)
        /// The call does its work, then reports this `errno` anyway: the caller cannot tell what happened.
        case errorAfterEffect(Int32)

        package var description: String {
            switch self {
            case .error(let code): "\(Self.name(code))"
            case .shortWrite(let bytes): "short write of \(bytes) bytes"
            case .errorAfterEffect(let code): "\(Self.name(code)) after the effect"
            }
        }

        private static func name(_ code: Int32) -> String {
            switch code {
            case EIO: "EIO"
            case ENOSPC: "ENOSPC"
            default: "errno \(code)"
            }
        }
    }

    /// When to fail: the `nth` call of `operation` (counted from when the rule was armed) whose path contains
    /// `pathContaining`, and, when `persistent`, every matching call after it.
    package struct Rule: Sendable, CustomStringConvertible {
        package var operation: Operation
        package var nth: Int
        package var persistent: Bool
        package var failure: Failure
        package var pathContaining: String?

        package init(_ operation: Operation, nth: Int = 1, persistent: Bool = false, failure: Failure = .error(EIO),
                    pathContaining: String? = nil) {
            self.operation = operation
            self.nth = nth
            self.persistent = persistent
            self.failure = failure
            self.pathContaining = pathContaining
        }

        package var description: String {
            "\(operation) #\(nth)\(persistent ? " and after" : ""): \(failure)"
        }
    }

    /// One call, as logged.
    package struct Call: Sendable, Equatable {
        package let operation: Operation
        package let path: String
        package let failed: Bool
    }

    private struct State {
        var rule: Rule?
        var seen = 0
        var calls: [Call] = []
        var failures = 0
        var logging = true
    }
    private let state = Mutex(State())

    package init() {}

    /// Arms `rule`, replacing any armed one.
    package func arm(_ rule: Rule) { state.withLock { $0.rule = rule; $0.seen = 0 } }
    /// Stops failing.
    package func disarm() { state.withLock { $0.rule = nil } }
    /// Every call so far.
    package var calls: [Call] { state.withLock { $0.calls } }
    /// How many calls were made to fail.
    package var failureCount: Int { state.withLock { $0.failures } }
    /// Forgets the logged calls.
    package func clearLog() { state.withLock { $0.calls.removeAll() } }
    /// Whether calls are logged (a long scenario that never reads the log can turn it off).
    package func setLogging(_ on: Bool) { state.withLock { $0.logging = on } }

    /// Records a call and says whether (and how) it must fail.
    package func check(_ operation: Operation, _ path: String) -> Failure? {
        state.withLock { state in
            var failure: Failure?
            if let rule = state.rule, rule.operation == operation,
               rule.pathContaining.map({ path.contains($0) }) ?? true {
                state.seen += 1
                if state.seen == rule.nth || (rule.persistent && state.seen > rule.nth) { failure = rule.failure }
            }
            if failure != nil { state.failures += 1 }
            if state.logging || failure != nil {
                state.calls.append(Call(operation: operation, path: path, failed: failure != nil))
            }
            return failure
        }
    }
}

/// A file system that delegates to the real one and fails the calls it is told to: the Nth write, fsync, rename
/// or directory sync, once or from then on; a short write; a full disk. It also counts and logs every call, so a
/// test can check, say, that fetching reads no blob file.
package final class FaultyFileSystem: StoreFileSystem {
    package typealias Operation = FaultRules.Operation
    package typealias Failure = FaultRules.Failure
    package typealias Rule = FaultRules.Rule
    package typealias Call = FaultRules.Call

    private let base = POSIXFileSystem()
    let rules = FaultRules()

    package init() {}

    /// Arms `rule`, replacing any armed one.
    package func arm(_ rule: Rule) { rules.arm(rule) }
    /// Stops failing.
    package func disarm() { rules.disarm() }
    /// Every call so far.
    package var calls: [Call] { rules.calls }
    /// How many calls were made to fail.
    package var failureCount: Int { rules.failureCount }
    /// Forgets the logged calls.
    package func clearLog() { rules.clearLog() }

    /// Runs `body` (the call's effect) as `failure` says: not at all, or before throwing anyway.
    private func perform<T>(_ operation: Operation, _ path: String, _ body: () throws -> T) throws -> T {
        switch rules.check(operation, path) {
        case nil:
            return try body()
        case .error(let code)?:
            throw StoreIOError(operation: operation.rawValue, path: path, code: code)
        case .shortWrite?:
            throw StoreIOError(operation: operation.rawValue, path: path, code: EIO)
        case .errorAfterEffect(let code)?:
            _ = try body()
            throw StoreIOError(operation: operation.rawValue, path: path, code: code)
        }
    }

    package func read(_ path: String) throws -> [UInt8] {
        try perform(.read, path) { try base.read(path) }
    }

    package func read(_ path: String, from offset: Int) throws -> [UInt8] {
        try perform(.read, path) { try base.read(path, from: offset) }
    }

    package func read(_ path: String, from offset: Int, count: Int) throws -> [UInt8] {
        try perform(.read, path) { try base.read(path, from: offset, count: count) }
    }

    /// One `stat`, as the real file system does it (not a read of the whole file, as the protocol's default).
    package func status(_ path: String) throws -> StoreFileStatus? { try base.status(path) }

    package func create(_ path: String) throws -> any StoreFile {
        try perform(.create, path) { FaultyFile(try base.create(path), path: path, rules: rules) }
    }

    package func openForAppending(_ path: String) throws -> any StoreFile {
        try perform(.openForAppending, path) { FaultyFile(try base.openForAppending(path), path: path, rules: rules) }
    }

    package func openForAppending(_ path: String, at end: Int) throws -> any StoreFile {
        try perform(.openForAppending, path) {
            FaultyFile(try base.openForAppending(path, at: end), path: path, rules: rules)
        }
    }

    package func rename(_ source: String, to destination: String) throws {
        try perform(.rename, source) { try base.rename(source, to: destination) }
    }

    package func remove(_ path: String) throws {
        try perform(.remove, path) { try base.remove(path) }
    }

    package func syncDirectory(_ path: String) throws {
        try perform(.syncDirectory, path) { try base.syncDirectory(path) }
    }

    package func makeDirectory(_ path: String) throws {
        try perform(.makeDirectory, path) { try base.makeDirectory(path) }
    }

    package func contentsOfDirectory(_ path: String) throws -> [String] {
        try perform(.contentsOfDirectory, path) { try base.contentsOfDirectory(path) }
    }

    package func exists(_ path: String) -> Bool { base.exists(path) }

    package func kind(of path: String) throws -> StoreFileKind? { try base.kind(of: path) }

    package func truncate(_ path: String, to length: Int) throws {
        try perform(.truncate, path) { try base.truncate(path, to: length) }
    }

    package func tryLock(_ path: String) throws -> (any StoreLockHandle)? {
        try perform(.lock, path) { try base.tryLock(path) }
    }
}

/// A file of a `FaultyFileSystem`: its writes and flushes go through the same rules.
final class FaultyFile: StoreFile {
    private let base: any StoreFile
    private let path: String
    private let rules: FaultRules

    init(_ base: any StoreFile, path: String, rules: FaultRules) {
        self.base = base
        self.path = path
        self.rules = rules
    }

    var size: Int { base.size }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        switch rules.check(.write, path) {
        case nil:
            try base.append(bytes)
        case .shortWrite(let count)?:
            try base.append(UnsafeRawBufferPointer(rebasing: bytes[0..<min(count, bytes.count)]))
            throw StoreIOError(operation: "write", path: path, code: EIO)
        case .error(let code)?:
            throw StoreIOError(operation: "write", path: path, code: code)
        case .errorAfterEffect(let code)?:
            try base.append(bytes)
            throw StoreIOError(operation: "write", path: path, code: code)
        }
    }

    func sync() throws {
        switch rules.check(.fsync, path) {
        case nil: try base.sync()
        case .error(let code)?: throw StoreIOError(operation: "fsync", path: path, code: code)
        case .shortWrite?: throw StoreIOError(operation: "fsync", path: path, code: EIO)
        case .errorAfterEffect(let code)?:
            try base.sync()
            throw StoreIOError(operation: "fsync", path: path, code: code)
        }
    }

    func reserve(upTo capacity: Int) throws {
        switch rules.check(.reserve, path) {
        case nil: try base.reserve(upTo: capacity)
        case .error(let code)?: throw StoreIOError(operation: "fallocate", path: path, code: code)
        case .shortWrite?: throw StoreIOError(operation: "fallocate", path: path, code: EIO)
        case .errorAfterEffect(let code)?:
            try base.reserve(upTo: capacity)
            throw StoreIOError(operation: "fallocate", path: path, code: code)
        }
    }

    func close() throws { try base.close() }
}
