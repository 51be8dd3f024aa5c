import Foundation

/// What a device remembers of its mirroring between syncs (docs/MIRROR.md, *What a device keeps*): who it is, its
/// clock, how far its history was exported and the server's changes imported, and the clocks given to local
/// transactions not exported yet. Never a connection string or a password.
struct MirrorState: Codable, Hashable {
    /// The layout of this record.
    var format = 1
    /// The device's identity on the server, made when the store first mirrors.
    var device: UUID
    /// The zone and namespace the state belongs to; another is refused rather than mixed up.
    var zone: String
    var namespace: String
    /// The device's hybrid logical clock.
    var clock: HybridLogicalClock
    /// The last local transaction given a clock (or passed over: the mirror's own imports, migrations).
    var clockedThrough: UInt64 = 0
    /// The clocks of local transactions after ``exportedThrough``, by transaction number.
    var pendingClocks: [Pending] = []
    /// The last local transaction whose changes the server has.
    var exportedThrough: UInt64 = 0
    /// The server's `changes.seq` this device has imported through.
    var importedSequence: Int64 = 0
    /// When the last sync ended, and its error if it failed (a ``MirrorError``'s description: never a password).
    var lastSyncAt: Date?
    var lastError: String?

    struct Pending: Codable, Hashable {
        var transaction: UInt64
        var clock: UInt64
    }

    init(zone: String, namespace: String) {
        device = UUID()
        self.zone = zone
        self.namespace = namespace
        clock = HybridLogicalClock()
    }
}

/// Where a device's ``MirrorState`` lives: beside a file store's files (`MIRROR` in its directory, replaced
/// atomically; `MIRROR.lock` serializes two mirrors of one store), or in memory for a store that has no directory.
final class MirrorStateFile {
    private let directory: URL?
    private var memory: MirrorState?

    init(directory: URL?) { self.directory = directory }

    private var path: String? { directory?.appendingPathComponent("MIRROR").path }

    /// The state, or nil when the store has never mirrored.
    ///
    /// - Throws: ``MirrorError/stateUnreadable(path:reason:)`` for a file that is not a state NoteKit wrote.
    func load() throws(MirrorError) -> MirrorState? {
        guard let path else { return memory }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw .stateUnreadable(path: path, reason: String(cString: strerror(errno)))
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw .stateUnreadable(path: path, reason: "it is not a regular file (a link, a directory?)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .stateUnreadable(path: path, reason: "it cannot be read")
        }
        do {
            let state = try JSONDecoder().decode(MirrorState.self, from: data)
            guard state.format == 1 else {
                throw MirrorError.stateUnreadable(path: path, reason: "format \(state.format) is newer than this NoteKit's 1")
            }
            return state
        } catch let error as MirrorError {
            throw error
        } catch {
            throw .stateUnreadable(path: path, reason: "it is not a mirror state: \(error)")
        }
    }

    /// Replaces the state durably: a new file flushed, then renamed over the old one, then the directory flushed.
    ///
    /// - Throws: ``MirrorError/stateUnwritable(path:reason:)``.
    func save(_ state: MirrorState) throws(MirrorError) {
        guard let path, let directory else {
            memory = state
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do { data = try encoder.encode(state) } catch {
            throw .stateUnwritable(path: path, reason: "\(error)")
        }
        let temporary = path + ".tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .stateUnwritable(path: path, reason: String(cString: strerror(errno))) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let flushed = fsync(descriptor) == 0
        close(descriptor)
        guard written == data.count, flushed else {
            unlink(temporary)
            throw .stateUnwritable(path: path, reason: "writing \(temporary) failed")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .stateUnwritable(path: path, reason: reason)
        }
        let directoryDescriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    /// Runs `body` holding `MIRROR.lock` exclusively, so that two mirrors of one store take turns.
    ///
    /// - Throws: ``MirrorError/stateUnwritable(path:reason:)`` when the lock file cannot be opened; what `body`
    ///   throws.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        guard let directory else { return try body() }
        let lockPath = directory.appendingPathComponent("MIRROR.lock").path
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw MirrorError.stateUnwritable(path: lockPath, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw MirrorError.stateUnwritable(path: lockPath, reason: String(cString: strerror(errno)))
            }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}
