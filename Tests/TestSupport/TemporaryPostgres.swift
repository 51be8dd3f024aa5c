import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A PostgreSQL server of the test's own: `initdb` into a fresh temporary directory, then `postgres` listening on a
/// Unix socket in that directory only (no TCP port), started with `pg_ctl` from the machine's binaries. PostgreSQL
/// refuses to run as root, so under root the server runs as the `postgres` user (or `nobody`) through `runuser`.
///
/// ``stop()`` (or the end of the object) stops the server and removes the directory.
///
/// A test that never stops its server takes a database of its own on a server the process shares instead
/// (``database()``): a cluster is a thousand files, each a slow create and delete on the test machines' disk (about a
/// second of system time a server), where a database is a few hundred, and the server's start and stop are waits.
public final class TemporaryPostgres: @unchecked Sendable {
    /// Why the harness cannot run here, or nil when it can: the reason a test that needs a server is skipped.
    public static let unavailableReason: String? = {
        guard let binaries else {
            return "no PostgreSQL server binaries (initdb, pg_ctl, postgres): install Debian's postgresql package, " +
                "or set NOTEKIT_PG_BINDIR"
        }
        if getuid() == 0 && serverUser == nil {
            return "running as root, and neither a postgres nor a nobody user exists to run the server as"
        }
        return nil
    }()

    /// Whether a server can be started here.
    public static var isAvailable: Bool { unavailableReason == nil }

    /// Whether tests that need a server run even where none can start, and fail saying why: set by `.ci/run`
    /// (`NOTEKIT_REQUIRE_POSTGRES=1`), so that CI never passes by skipping them.
    public static var isRequired: Bool { ProcessInfo.processInfo.environment["NOTEKIT_REQUIRE_POSTGRES"] == "1" }

    /// Whether a test that needs a server runs: here, or wherever one is required.
    public static var runsServerTests: Bool { isAvailable || isRequired }

    /// The directory of `initdb`, `pg_ctl` and `postgres`: `NOTEKIT_PG_BINDIR`, then `pg_config --bindir`, then the
    /// newest `/usr/lib/postgresql/*/bin`.
    public static let binaries: URL? = {
        var candidates: [String] = []
        if let given = ProcessInfo.processInfo.environment["NOTEKIT_PG_BINDIR"] { candidates.append(given) }
        if let reported = try? run("/usr/bin/env", ["pg_config", "--bindir"]).trimmingCharacters(in: .whitespacesAndNewlines) {
            candidates.append(reported)
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.first { directory in
            ["initdb", "pg_ctl", "postgres"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: "\(directory)/\($0)")
            }
        }.map { URL(fileURLWithPath: $0) }
    }()

    /// The user the server runs as when the tests run as root.
    private static let serverUser: (name: String, uid: uid_t, gid: gid_t)? = {
        for name in ["postgres", "nobody"] {
            if let entry = getpwnam(name) { return (name, entry.pointee.pw_uid, entry.pointee.pw_gid) }
        }
        return nil
    }()

    /// The temporary directory: the cluster in `data/`, the server's log in `server.log`, the socket itself.
    public let directory: URL
    /// The port, which here only names the socket file (`.s.PGSQL.<port>`).
    public let port = 5432
    /// The database role the tests connect as (the cluster's superuser).
    public let user = "notekit"
    /// The database ``connectionString`` names: `postgres` on a server of the test's own, one made for the test on
    /// the shared server (``database()``).
    public let database: String
    /// A libpq connection string to ``database`` over the server's socket.
    public var connectionString: String { connectionString(database: database) }
    /// Whether this object started its server and stops it, rather than holding a database on the shared one.
    private let ownsServer: Bool
    private var isRunning = false
    private var isDropped = false

    /// A connection string to `database` on this server.
    public func connectionString(database: String) -> String {
        "host=\(directory.path) port=\(port) user=\(user) dbname=\(database) connect_timeout=5"
    }

    /// What went wrong starting or stopping the server, with the output of the command that failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Creates a cluster in a new temporary directory and starts its server.
    ///
    /// - Throws: ``Failure`` when the binaries are missing or `initdb` or `pg_ctl` fail (their output included).
    public init() throws {
        if let reason = Self.unavailableReason { throw Failure(description: reason) }
        Self.reapAbandoned
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent(
            "notekit-pg-" + UUID().uuidString.prefix(8).lowercased())
        database = "postgres"
        ownsServer = true
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        do {
            if getuid() == 0, let owner = Self.serverUser {
                guard chown(directory.path, owner.uid, owner.gid) == 0 else {
                    throw Failure(description: "chown \(directory.path) to \(owner.name): errno \(errno)")
                }
            }
            // Whose server this is, so that one left by a test process that was killed can be stopped later.
            try String(getpid()).write(to: directory.appendingPathComponent("owner.pid"), atomically: true,
                                       encoding: .utf8)
            try server("initdb", ["-D", dataDirectory, "-U", user, "--auth=trust", "-E", "UTF8", "--locale=C",
                                  "--no-sync", "--no-instructions"])
            try start()
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// A database of its own on `server`, which `createdb` made.
    private init(database: String, on server: TemporaryPostgres) {
        directory = server.directory
        self.database = database
        ownsServer = false
    }

    deinit { stop() }

    /// A new, empty database on the server this process shares, started by the first call and stopped when the
    /// process ends: for a test that never stops its server (``stopServer(immediately:)`` is refused). ``stop()``,
    /// or the end of the object, drops the database.
    ///
    /// - Throws: ``Failure`` when the server cannot start or `createdb` fails.
    public static func database() throws -> TemporaryPostgres {
        let server = try shared.get()
        let name = "test_" + UUID().uuidString.prefix(8).lowercased()
        try Self.server("createdb", ["-h", server.directory.path, "-p", String(server.port), "-U", server.user, name])
        return TemporaryPostgres(database: name, on: server)
    }

    /// The server ``database()`` makes databases on, started at its first call (or why it could not start).
    private static let shared = Result { () throws(Failure) -> TemporaryPostgres in
        let server: TemporaryPostgres
        do { server = try TemporaryPostgres() } catch { throw error as? Failure ?? Failure(description: "\(error)") }
        sharedServer.withLock { $0 = server }
        atexit { TemporaryPostgres.sharedServer.withLock { $0?.stop() } }
        return server
    }
    private static let sharedServer = Mutex<TemporaryPostgres?>(nil)

    /// Stops the servers of test processes that died without stopping them (killed, or stopped in a debugger),
    /// once a process: each directory records its owner's process identifier.
    private static let reapAbandoned: Void = {
        let temporary = URL(fileURLWithPath: "/tmp")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        for name in names where name.hasPrefix("notekit-pg-") {
            let directory = temporary.appendingPathComponent(name)
            if name.hasPrefix("notekit-pg-output-") {
                // A command's output, left by a process killed while the command ran.
                let owner = name.dropFirst("notekit-pg-output-".count).prefix { $0 != "-" }
                if let owner = pid_t(owner), isGone(owner) { try? FileManager.default.removeItem(at: directory) }
                continue
            }
            guard let text = try? String(contentsOf: directory.appendingPathComponent("owner.pid"), encoding: .utf8),
                  let owner = pid_t(text), isGone(owner) else { continue }
            let data = directory.appendingPathComponent("data").path
            if FileManager.default.fileExists(atPath: data + "/postmaster.pid") {
                _ = try? server("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
            }
            try? FileManager.default.removeItem(at: directory)
        }
    }()

    private var dataDirectory: String { directory.appendingPathComponent("data").path }

    /// Starts the server (again, after ``stopServer(immediately:)``), waiting until it accepts connections.
    public func start() throws {
        precondition(ownsServer, "a database on the shared server cannot start it: use a TemporaryPostgres() of its own")
        // No TCP at all: the socket in the directory is the only way in. fsync off: the tests do not lose power.
        let options = "-k \(directory.path) -c listen_addresses= -p \(port) -c fsync=off -c max_connections=200"
        let log = directory.appendingPathComponent("server.log")
        do {
            try server("pg_ctl", ["-D", dataDirectory, "-l", log.path, "-o", options, "-w", "-t", "60", "start"])
        } catch {
            let written = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw Failure(description: "\(error)\nserver.log: \(written)")
        }
        isRunning = true
    }

    /// Stops the server and keeps its data, for a test of a server that goes away and comes back:
    /// `immediately` kills it as a crash would (`pg_ctl -m immediate`).
    public func stopServer(immediately: Bool = false) throws {
        precondition(ownsServer, "a database on the shared server cannot stop it: use a TemporaryPostgres() of its own")
        try server("pg_ctl", ["-D", dataDirectory, "-m", immediately ? "immediate" : "fast", "-w", "-t", "60", "stop"])
        isRunning = false
    }

    /// Stops the server if it runs and removes the directory; for a database on the shared server, drops the
    /// database. Called by the end of the object too.
    public func stop() {
        guard ownsServer else {
            // Connections a test left open (a mirror's sync loop) are closed by the drop.
            if !isDropped {
                isDropped = true
                _ = try? Self.server("dropdb", ["--force", "-h", directory.path, "-p", String(port), "-U", user,
                                                database])
            }
            return
        }
        if isRunning { try? stopServer(immediately: true) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether the process `owner` has ended (and is not this one).
    private static func isGone(_ owner: pid_t) -> Bool { owner != getpid() && kill(owner, 0) == -1 && errno == ESRCH }

    /// Runs one of the server's binaries, as the server's user when the tests run as root.
    @discardableResult
    private func server(_ program: String, _ arguments: [String]) throws -> String {
        try Self.server(program, arguments)
    }

    @discardableResult
    private static func server(_ program: String, _ arguments: [String]) throws -> String {
        guard let binaries else { throw Failure(description: unavailableReason ?? "no binaries") }
        let path = binaries.appendingPathComponent(program).path
        if getuid() == 0, let owner = serverUser {
            return try run("/usr/sbin/runuser", ["-u", owner.name, "--", path] + arguments)
        }
        return try run(path, arguments)
    }

    /// Runs a program to its end and returns what it printed; a failure carries its output. `posix_spawn` with
    /// every descriptor above standard error closed, and the output in a file: `pg_ctl start` leaves the server
    /// running with what it inherited, so through Foundation's `Process` (whose pipes it would keep open) the
    /// start would never be seen to end.
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let outputPath = URL(fileURLWithPath: "/tmp")
            .appendingPathComponent("notekit-pg-output-\(getpid())-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        #if os(Linux)
        guard spawnCloseFrom(&actions, 3) == 0 else {
            throw Failure(description: "posix_spawn_file_actions_addclosefrom_np failed")
        }
        #endif
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "cannot start \(executable): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally with 0: the low seven bits are the terminating signal, the next eight the exit status.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) ended with status " +
                          "\(status): \(text)")
        }
        return text
    }
}

#if os(Linux)
/// glibc's (2.34 and later) `posix_spawn_file_actions_addclosefrom_np`, which the Glibc module does not export.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
#endif
