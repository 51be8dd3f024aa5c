import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a user's machine or a hostile store can put where the store keeps its files (issue 14): symbolic links
/// into and out of the store, FIFOs, sockets, devices, directories, unreadable files, entries the format does not
/// produce. The store reads and writes only its own regular files, deletes only names its format produces, refuses
/// the rest with a typed error naming the path and what is there, and never blocks on a special file
/// (docs/RELIABILITY.md, *The environment*).
@Suite("Environment: symbolic links, special files, permissions and stray entries")
struct EnvironmentTests {
    final class Attachment: PersistentModel {
        @Attribute var name = ""
        @Attribute(.externalStorage) var bytes = Data()

        required init() {}

        convenience init(_ name: String) {
            self.init()
            self.name = name
            bytes = Data(repeating: name.utf8.first ?? 0, count: 64) + Data(name.utf8)
        }
    }

    // MARK: Fixtures

    /// A closed store of three attachments "a", "b", "c" (each with a blob), one segment per save: segments 1 to 4
    /// (the schema's, then one per transaction).
    private func makeStore() throws -> URL {
        let url = TemporaryStores.newURL("environment")
        let container = try StoreFiles.open(url, [Attachment.self]) { $0.maximumSegmentSize = 1 }
        let context = ModelContext(container)
        for name in ["a", "b", "c"] {
            context.insert(Attachment(name))
            try context.save()
        }
        try StoreFiles.close(container)
        return url
    }

    /// The names of the attachments in the store at `url`, after reading every attachment's bytes.
    private func names(_ url: URL) throws -> [String] {
        let container = try StoreFiles.open(url, [Attachment.self]) { $0.mode = .readOnly }
        defer { try? StoreFiles.close(container) }
        let attachments = try ModelContext(container).fetch(FetchDescriptor<Attachment>())
        for attachment in attachments {
            #expect(attachment.bytes == Attachment(attachment.name).bytes, "\(attachment.name)'s blob reads back")
        }
        return attachments.map(\.name).sorted()
    }

    /// The paths of the blobs of the store at `url`.
    private func blobs(_ url: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("blobs").path)
            .filter { $0.hasSuffix(".blob") && isStoreName("blobs/" + $0) }.sorted().map { url.appendingPathComponent("blobs/" + $0) }
    }

    /// Whether `relative` is a name the store's format produces in `segments/` or `blobs/` (docs/FORMAT.md).
    private func isStoreName(_ relative: String) -> Bool {
        let hex = Set("0123456789abcdef")
        if relative.hasPrefix("segments/") && relative.hasSuffix(".seg") {
            let digits = relative.dropFirst(9).dropLast(4)
            return digits.count >= 6 && digits.allSatisfy(\.isASCII) && digits.allSatisfy(\.isNumber)
        }
        if relative.hasPrefix("blobs/") && relative.hasSuffix(".blob") {
            let name = relative.dropFirst(6).dropLast(5)
            return name.count == 64 && name.allSatisfy(hex.contains)
        }
        // A blob no object names any more, kept for readers for a while (docs/FORMAT.md, *External storage*).
        if relative.hasPrefix("blobs/retired-") {
            let parts = relative.dropFirst(14).split(separator: "-", omittingEmptySubsequences: false)
            return parts.count == 2 && !parts[0].isEmpty && parts[0].allSatisfy(\.isNumber)
                && parts[1].count == 64 && parts[1].allSatisfy(hex.contains)
        }
        return false
    }

    /// A new directory outside every store.
    private func outsideDirectory() throws -> URL {
        let url = TemporaryStores.newURL("outside")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Cuts the last record of the last segment of the store at `url` in half: a torn tail.
    ///
    /// - Returns: the segment, the offset of the torn record, and the torn bytes.
    private func tearLastRecord(_ url: URL) throws -> (segment: URL, offset: Int, torn: Data) {
        let segment = StoreFiles.segment(url, 4)
        let bytes = try Data(contentsOf: segment)
        let last = try StoreFiles.recordOffsets(segment).last!
        let cut = last + (bytes.count - last) / 2
        try bytes.prefix(cut).write(to: segment)
        return (segment, last, bytes[last..<cut])
    }

    /// Every entry under `url`, not following links: its kind, bytes (regular files), target (links) and
    /// modification time. Two equal listings mean nothing there was created, deleted, renamed or written.
    private func listing(_ url: URL) -> [String: String] {
        var result: [String: String] = [:]
        func visit(_ path: String, _ relative: String) {
            var status = stat()
            guard lstat(path, &status) == 0 else { return }
            #if canImport(Darwin)
            let modified = status.st_mtimespec
            #else
            let modified = status.st_mtim
            #endif
            let time = "\(modified.tv_sec).\(modified.tv_nsec)"
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                result[relative + "/"] = "directory \(time)"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                    visit(path + "/" + name, relative.isEmpty ? name : relative + "/" + name)
                }
            case S_IFLNK:
                result[relative] = "link to \((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")"
            case S_IFREG:
                let bytes = FileManager.default.contents(atPath: path) ?? Data()
                // Whoever takes the lock writes its pid into LOCK and blanks it again as it lets go (even an open
                // refused after that): LOCK's bytes are compared, not its time.
                result[relative] = "file \(bytes.count) bytes \(SHA256Digest.hexString(bytes))"
                    + (relative == "LOCK" ? "" : " \(time)")
            default:
                result[relative] = "special \(status.st_mode & S_IFMT) \(time)"
            }
        }
        visit(url.path, "")
        return result
    }

    /// The typed refusal `error` should be.
    private func isRefusal(_ error: (any Error)?, of path: URL, found: StoreFileKind,
                           expected: StoreFileKind = .regularFile) -> Bool {
        guard case .unexpectedFileType(let refused, let kind, let wanted)? = error as? FileStoreError else { return false }
        return refused == path.path && kind == found && wanted == expected
    }

    // MARK: Time bounds

    /// Runs `body` on a thread of its own and waits at most `seconds` for it. If it has not returned by then
    /// (blocked in open(2) on a FIFO, say), `unblock` runs so that the thread can finish, and the result is nil.
    private func bounded(_ seconds: Double, unblock: () -> Void,
                         _ body: @escaping @Sendable () throws -> Void) -> Result<Void, any Error>? {
        final class Outcome: @unchecked Sendable {
            var result: Result<Void, any Error>?
            let done = DispatchSemaphore(value: 0)
        }
        let outcome = Outcome()
        let thread = Thread {
            outcome.result = Result { try body() }
            outcome.done.signal()
        }
        thread.start()
        guard outcome.done.wait(timeout: .now() + seconds) == .success else {
            unblock()
            outcome.done.wait()
            return nil
        }
        return outcome.result
    }

    /// Opens `fifo` at both ends without blocking, then closes it: whoever waits in open(2) or read(2) on it
    /// goes on (and reads nothing).
    private static func unblock(_ fifo: URL) {
        let reader = open(fifo.path, O_RDONLY | O_NONBLOCK)
        let writer = open(fifo.path, O_WRONLY | O_NONBLOCK)
        usleep(100_000)
        if writer >= 0 { close(writer) }
        if reader >= 0 { close(reader) }
    }

    struct Run {
        let status: Int32
        let output: String
        let errors: String
        /// False when the command had to be unblocked or killed to end.
        let returnedInTime: Bool
    }

    /// Runs the built `notekit` executable with `arguments`, waiting at most `seconds` for it to end; then
    /// `unblock` runs, and the process is killed if it still does not end.
    private func notekit(_ arguments: [String], within seconds: Double = 10, unblock: () -> Void = {}) throws -> Run {
        let output = TemporaryStores.newURL("out"), errors = TemporaryStores.newURL("err")
        try Data().write(to: output)
        try Data().write(to: errors)
        let process = Process()
        process.executableURL = CommandLineTests.executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        let inTime = !process.isRunning
        if !inTime {
            unblock()
            let grace = Date().addingTimeInterval(3)
            while process.isRunning && Date() < grace { usleep(20_000) }
            if process.isRunning { process.terminate() }
        }
        process.waitUntilExit()
        return Run(status: process.terminationStatus,
                   output: (try? String(contentsOf: output, encoding: .utf8)) ?? "",
                   errors: (try? String(contentsOf: errors, encoding: .utf8)) ?? "", returnedInTime: inTime)
    }

    // MARK: Symbolic links

    @Test("Symlinked blobs/ and segments/ work, and a writable open and notekit compact leave every foreign file beside the store's as it was")
    func symlinkedDirectories() throws {
        let url = try makeStore()
        let disk = try outsideDirectory()
        for directory in ["blobs", "segments"] {
            let moved = disk.appendingPathComponent(directory)
            try FileManager.default.moveItem(at: url.appendingPathComponent(directory), to: moved)
            try FileManager.default.createSymbolicLink(at: url.appendingPathComponent(directory), withDestinationURL: moved)
            // What a user keeps in a directory of a bigger disk: nothing of it is a name the store's format produces.
            for name in ["notes.txt", ".hidden", "backup.tar", "abc.blob", "x.partial", ".x.partial",
                         "000001.seg.bak", "1.seg", String(repeating: "A", count: 64) + ".blob"] {
                try Data("\(directory)/\(name) is not NoteKit's\n".utf8).write(to: moved.appendingPathComponent(name))
            }
            try FileManager.default.createDirectory(at: moved.appendingPathComponent("photos"),
                                                    withIntermediateDirectories: false)
            try Data("a photo".utf8).write(to: moved.appendingPathComponent("photos/inner.jpg"))
            try FileManager.default.createSymbolicLink(atPath: moved.appendingPathComponent("hosts").path,
                                                       withDestinationPath: "/etc/hosts")
        }
        // Directories' own entries change as the store writes its files there; the foreign files must not.
        let foreign = { (listing: [String: String]) in
            listing.filter { !isStoreName($0.key) && !$0.key.hasSuffix("/") }
        }
        let before = foreign(listing(disk))
        #expect(before.count == 2 * 11)

        // A writable open that deletes an attachment (its blob is then no record's), and one more open, whose
        // cleanup retires that blob.
        let container = try StoreFiles.open(url, [Attachment.self]) { $0.maximumSegmentSize = 1 }
        let context = ModelContext(container)
        try context.delete(model: Attachment.self, where: #Predicate<Attachment> { $0.name == "a" })
        try context.save()
        try StoreFiles.close(container)
        try StoreFiles.close(try StoreFiles.open(url, [Attachment.self]))
        #expect(foreign(listing(disk)) == before, "after a writable open")
        #expect(try blobs(url).count == 2, "the blob no record names was retired")

        let run = try notekit(["compact", url.path])
        #expect(run.status == 0, "\(run.errors)")
        #expect(foreign(listing(disk)) == before, "after notekit compact")
        #expect(try names(url) == ["b", "c"])
        #expect(try StoreVerifier.verify(at: url).problems.allSatisfy { $0.kind == .strayEntry })
    }

    @Test("A dangling LOCK symlink: a writable open is refused and creates nothing where it points")
    func danglingLockSymlink() throws {
        let url = try makeStore()
        let outside = try outsideDirectory()
        let lock = url.appendingPathComponent("LOCK")
        try? FileManager.default.removeItem(at: lock)
        try FileManager.default.createSymbolicLink(atPath: lock.path,
                                                   withDestinationPath: outside.appendingPathComponent("created").path)
        let outsideBefore = listing(outside), storeBefore = listing(url)
        let error = Result { try StoreInspector.openForWriting(at: url) }.failure
        #expect(isRefusal(error, of: lock, found: .symbolicLink), "\(String(describing: error))")
        #expect(listing(outside) == outsideBefore, "nothing was created where the link points")
        #expect(listing(url) == storeBefore)
        #expect(try names(url) == ["a", "b", "c"], "a read-only open takes no lock")
    }

    @Test("A quarantine/ symlink: a writable open with a torn tail is refused and writes nothing where it points")
    func quarantineSymlink() throws {
        let url = try makeStore()
        _ = try tearLastRecord(url)
        let outside = try outsideDirectory()
        let quarantine = url.appendingPathComponent("quarantine")
        try FileManager.default.createSymbolicLink(at: quarantine, withDestinationURL: outside)
        let outsideBefore = listing(outside), storeBefore = listing(url)
        let error = Result { try StoreInspector.openForWriting(at: url) }.failure
        #expect(isRefusal(error, of: quarantine, found: .symbolicLink, expected: .directory), "\(String(describing: error))")
        #expect(listing(outside) == outsideBefore, "the torn tail went nowhere")
        #expect(listing(url) == storeBefore, "the refused open cut nothing")
    }

    @Test("A last segment symlinked to a file outside the store is never appended to")
    func symlinkedLastSegment() throws {
        let url = try makeStore()
        let outside = try outsideDirectory()
        let segment = StoreFiles.segment(url, 4), target = outside.appendingPathComponent("000004.seg")
        try FileManager.default.moveItem(at: segment, to: target)
        try FileManager.default.createSymbolicLink(at: segment, withDestinationURL: target)
        let outsideBefore = listing(outside)
        let error = Result {
            let container = try StoreFiles.open(url, [Attachment.self])
            ModelContext(container).insert(Attachment("d"))
            try ModelContext(container).save()
            try StoreFiles.close(container)
        }.failure
        #expect(isRefusal(error, of: segment, found: .symbolicLink), "\(String(describing: error))")
        #expect(isRefusal(Result { try StoreInspector.openReadOnly(at: url) }.failure, of: segment, found: .symbolicLink))
        #expect(listing(outside) == outsideBefore, "the outside file is as it was")
    }

    @Test("A link where a blob belongs: a save of the same bytes is refused, and nothing is written through it")
    func symlinkedBlob() throws {
        let url = try makeStore()
        let outside = try outsideDirectory()
        let name = SHA256Digest.hexString(Attachment("a").bytes)
        let blob = url.appendingPathComponent("blobs/\(name).blob"), target = outside.appendingPathComponent("a.blob")
        try FileManager.default.moveItem(at: blob, to: target)
        try FileManager.default.createSymbolicLink(at: blob, withDestinationURL: target)
        let outsideBefore = listing(outside)
        let container = try StoreFiles.open(url, [Attachment.self])
        let context = ModelContext(container)
        context.insert(Attachment("a"))
        let error = Result { try context.save() }.failure
        #expect(isRefusal(error, of: blob, found: .symbolicLink), "\(String(describing: error))")
        try StoreFiles.close(container)
        #expect(listing(outside) == outsideBefore)
        let problems = try StoreVerifier.verify(at: url).problems
        #expect(problems.map(\.kind) == [.unexpectedFileType] && problems.first?.file == blob.path, "\(problems)")
    }

    @Test("A segment that is /etc/passwd, linked or copied, is refused without printing a byte of it")
    func passwdSegment() throws {
        let passwd = try Data(contentsOf: URL(fileURLWithPath: "/etc/passwd"))
        let firstLine = String(decoding: passwd.prefix { $0 != 0x0A }, as: UTF8.self)
        let secrets = [firstLine, String(firstLine.prefix(6)), String(firstLine.prefix { $0 != ":" }) + ":"]
        for linked in [true, false] {
            let url = try makeStore()
            let segment = StoreFiles.segment(url, 2)
            try FileManager.default.removeItem(at: segment)
            if linked {
                try FileManager.default.createSymbolicLink(atPath: segment.path, withDestinationPath: "/etc/passwd")
            } else {
                try passwd.write(to: segment)
            }
            var messages: [String] = []
            for open in [{ _ = try StoreInspector.openReadOnly(at: url) }, { _ = try StoreInspector.openForWriting(at: url) }] {
                let error = Result { try open() }.failure
                #expect(error != nil)
                messages.append(String(describing: error))
                if linked { #expect(isRefusal(error, of: segment, found: .symbolicLink)) }
            }
            messages += try StoreVerifier.verify(at: url).problems.map(\.description)
            for command in ["verify", "stats", "dump"] {
                let run = try notekit([command, url.path])
                #expect(run.status != 0)
                messages += [run.output, run.errors]
            }
            for message in messages {
                for secret in secrets {
                    #expect(!message.contains(secret), "\(linked ? "linked" : "copied"): \(message)")
                }
            }
            if !linked {
                #expect(messages.contains { $0.contains("not a NoteKit segment") })
            }
        }
    }

    // MARK: Special files

    enum Place: String, CaseIterable, Sendable {
        case manifest, segment, blob
    }

    @Test("A FIFO where MANIFEST, a segment or a blob belongs: every open and command returns at once, naming it",
          arguments: Place.allCases)
    func fifo(place: Place) throws {
        let url = try makeStore()
        let fifo = switch place {
        case .manifest: url.appendingPathComponent("MANIFEST")
        case .segment: StoreFiles.segment(url, 2)
        case .blob: try blobs(url)[0]
        }
        try FileManager.default.removeItem(at: fifo)
        #expect(mkfifo(fifo.path, 0o644) == 0)
        let unblock = { Self.unblock(fifo) }
        let opens: [(String, @Sendable () throws -> Void)] = [
            ("read-only open", { _ = try StoreInspector.openReadOnly(at: url) }),
            ("writable open", { _ = try StoreInspector.openForWriting(at: url) }),
            ("verify", {
                let problems = try StoreVerifier.verify(at: url).problems
                guard problems.contains(where: { $0.kind == .unexpectedFileType && $0.file == fifo.path }) else {
                    throw FileStoreError.notAStoreFile(file: fifo.path, kind: .otherKind,
                                                       reason: "verify says \(problems)")
                }
            }),
        ]
        for (what, open) in opens {
            let result = bounded(5, unblock: unblock, open)
            #expect(result != nil, "\(what) blocked on the FIFO")
            guard let result else { continue }
            if what == "verify" || place == .blob {
                // verify checks its own report (above). Opening reads no blob: the FIFO is met (and refused) when
                // the attachment's bytes are read.
                #expect(result.failure == nil, "\(what): \(String(describing: result.failure))")
            } else {
                #expect(isRefusal(result.failure, of: fifo, found: .fifo), "\(what): \(String(describing: result.failure))")
            }
        }
        for command in ["verify", "stats", "dump", "compact"] {
            let run = try notekit([command, url.path], unblock: unblock)
            #expect(run.returnedInTime, "notekit \(command) blocked on the FIFO")
            if place != .blob || command == "verify" {
                #expect(run.status != 0 && run.errors.contains(fifo.path) && run.errors.contains("FIFO"),
                        "notekit \(command): \(run.errors)")
            } else {
                #expect(run.status == 0 || run.errors.contains("FIFO"), "notekit \(command): \(run.errors)")
            }
        }
    }

    enum Intruder: String, CaseIterable, Sendable {
        case symbolicLink, directory, socket, characterDevice

        var kind: StoreFileKind {
            switch self {
            case .symbolicLink: .symbolicLink
            case .directory: .directory
            case .socket: .socket
            case .characterDevice: .characterDevice
            }
        }
    }

    @Test("A symlink, directory, socket or device where MANIFEST or a segment belongs is refused before anything is read or written",
          arguments: [Place.manifest, .segment], Intruder.allCases)
    func intruder(place: Place, intruder: Intruder) throws {
        let url = try makeStore()
        let outside = try outsideDirectory()
        let path = place == .manifest ? url.appendingPathComponent("MANIFEST") : StoreFiles.segment(url, 2)
        let copy = outside.appendingPathComponent(path.lastPathComponent)
        try FileManager.default.moveItem(at: path, to: copy)
        switch intruder {
        case .symbolicLink:
            // A link to an intact copy of the very file: what it points at would be read happily if followed.
            try FileManager.default.createSymbolicLink(at: path, withDestinationURL: copy)
        case .directory:
            try FileManager.default.createDirectory(at: path, withIntermediateDirectories: false)
        case .socket:
            let socket = Self.bindSocket(at: path.path)
            #expect(socket, "a Unix socket bound at \(path.path)")
        case .characterDevice:
            // /dev/null's numbers (major 1, minor 3, as Linux encodes them); creating a device needs CAP_MKNOD,
            // which a container may not grant.
            guard mknod(path.path, S_IFCHR | 0o600, dev_t(1 << 8 | 3)) == 0 else {
                TestOutput.summary("Environment: mknod refused (errno \(errno)); "
                                   + "the character-device case is not run here")
                return
            }
        }
        let storeBefore = listing(url), outsideBefore = listing(outside)
        for open in [{ _ = try StoreInspector.openReadOnly(at: url) }, { _ = try StoreInspector.openForWriting(at: url) }] {
            let error = Result { try open() }.failure
            #expect(isRefusal(error, of: path, found: intruder.kind), "\(String(describing: error))")
        }
        #expect(try StoreVerifier.verify(at: url).problems.contains { $0.kind == .unexpectedFileType && $0.file == path.path })
        #expect(listing(url) == storeBefore, "the refused opens wrote nothing")
        #expect(listing(outside) == outsideBefore)
    }

    /// Binds a Unix-domain socket at `path`, leaving the socket file there.
    private static func bindSocket(at path: String) -> Bool {
        #if canImport(Glibc)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    // MARK: Quarantine

    @Test("A writable open refused while quarantining a torn tail leaves no quarantine file behind",
          arguments: [FaultyFileSystem.Rule(.write, failure: .error(ENOSPC), pathContaining: "quarantine/"),
                      FaultyFileSystem.Rule(.fsync, pathContaining: "quarantine/"),
                      FaultyFileSystem.Rule(.syncDirectory, pathContaining: "quarantine"),
                      FaultyFileSystem.Rule(.truncate, pathContaining: ".seg")])
    func refusedQuarantine(rule: FaultyFileSystem.Rule) throws {
        let url = try makeStore()
        let (segment, offset, torn) = try tearLastRecord(url)
        let quarantine = url.appendingPathComponent("quarantine")
        let faulty = FaultyFileSystem()
        faulty.arm(rule)
        #expect(throws: (any Error).self) { try StoreInspector.openForWriting(at: url, fileSystem: faulty) }
        #expect(faulty.failureCount == 1, "\(rule)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: quarantine.path)) ?? []
        #expect(left.isEmpty, "\(rule): \(left)")
        #expect(try Data(contentsOf: segment).count == offset + torn.count, "the segment was not cut")

        // The next open quarantines the tail once.
        faulty.disarm()
        let store = try StoreInspector.openForWriting(at: url, fileSystem: faulty)
        try store.close()
        let kept = try FileManager.default.contentsOfDirectory(atPath: quarantine.path)
        #expect(kept == ["000004.seg.at-\(offset).torn"])
        #expect(try Data(contentsOf: quarantine.appendingPathComponent(kept[0])) == torn)
        #expect(faulty.calls.allSatisfy { $0.path.hasPrefix(url.path) || $0.path == url.deletingLastPathComponent().path },
                "every call was inside the store")
    }

    @Test("A torn tail already quarantined (same bytes, same offset) is not copied again; other bytes get a file of their own")
    func quarantinedOnce() throws {
        let url = try makeStore()
        let (_, offset, torn) = try tearLastRecord(url)
        let name = "000004.seg.at-\(offset).torn"
        let same = try StoreFiles.copy(url), other = try StoreFiles.copy(url)
        let quarantined = try StoreInspector.openForWriting(at: url)
        try quarantined.close()
        #expect(quarantined.recovery.tornTail?.quarantinedAt == url.appendingPathComponent("quarantine/" + name).path)

        // A process that died between keeping the bytes aside and cutting the segment left this.
        for (copy, bytes) in [(same, torn), (other, Data("something else".utf8))] {
            try FileManager.default.createDirectory(at: copy.appendingPathComponent("quarantine"),
                                                    withIntermediateDirectories: false)
            try bytes.write(to: copy.appendingPathComponent("quarantine/" + name))
        }
        let again = try StoreInspector.openForWriting(at: same)
        try again.close()
        #expect(again.recovery.tornTail?.quarantinedAt == same.appendingPathComponent("quarantine/" + name).path)
        #expect(try FileManager.default.contentsOfDirectory(atPath: same.appendingPathComponent("quarantine").path) == [name])

        let distinct = try StoreInspector.openForWriting(at: other)
        try distinct.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: other.appendingPathComponent("quarantine").path)
        #expect(files.count == 2)
        #expect(try Data(contentsOf: other.appendingPathComponent("quarantine/" + name)) == Data("something else".utf8))
        let kept = try #require(distinct.recovery.tornTail?.quarantinedAt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == torn)
    }

    // MARK: Stray entries and permissions

    @Test("Stray entries in segments/ and blobs/ are left alone by a writable open and compaction, and verify names each")
    func strayEntries() throws {
        let url = try makeStore()
        let outside = try outsideDirectory()
        let target = outside.appendingPathComponent("kept")
        try Data("outside".utf8).write(to: target)
        let fileManager = FileManager.default
        let strays: [(String, String)] = [
            ("segments/old", "a directory"), ("blobs/thumbnails", "a directory"),
            ("segments/README.txt", "a regular file"), ("blobs/notes.partial", "a regular file"),
            ("segments/000099.seg", "a symbolic link"), ("blobs/" + String(repeating: "0", count: 64) + ".blob", "a directory"),
        ]
        try fileManager.createDirectory(at: url.appendingPathComponent("segments/old"), withIntermediateDirectories: false)
        try Data("a segment of 2019".utf8).write(to: url.appendingPathComponent("segments/old/000001.seg"))
        try fileManager.createDirectory(at: url.appendingPathComponent("blobs/thumbnails"), withIntermediateDirectories: false)
        try fileManager.createDirectory(at: url.appendingPathComponent(strays[5].0), withIntermediateDirectories: false)
        try Data("notes".utf8).write(to: url.appendingPathComponent("segments/README.txt"))
        try Data("notes".utf8).write(to: url.appendingPathComponent("blobs/notes.partial"))
        try fileManager.createSymbolicLink(at: url.appendingPathComponent("segments/000099.seg"), withDestinationURL: target)
        let outsideBefore = listing(outside)

        let container = try StoreFiles.open(url, [Attachment.self])
        let context = ModelContext(container)
        context.insert(Attachment("d"))
        try context.save()
        try StoreFiles.store(container).compact()
        try StoreFiles.close(container)
        for (stray, _) in strays {
            var status = stat()
            #expect(lstat(url.appendingPathComponent(stray).path, &status) == 0, "\(stray) is still there")
        }
        #expect(fileManager.fileExists(atPath: url.appendingPathComponent("segments/old/000001.seg").path))
        #expect(listing(outside) == outsideBefore)
        #expect(try names(url) == ["a", "b", "c", "d"])

        let problems = try StoreVerifier.verify(at: url).problems
        #expect(problems.count == strays.count, "\(problems)")
        for (stray, kind) in strays {
            let path = url.appendingPathComponent(stray).path
            #expect(problems.contains { $0.kind == .strayEntry && $0.file == path && $0.message.contains(kind) },
                    "\(stray): \(problems)")
        }
        let run = try notekit(["verify", url.path])
        #expect(run.status == 1 && run.errors.contains("strayEntry") && run.errors.contains("segments/old"))
    }

    @Test("verify reports an unreadable segment or blob as permission denied, not missing (EACCES injected: tests run as root)",
          arguments: [Place.segment, .blob])
    func permissionDenied(place: Place) throws {
        let url = try makeStore()
        let path = place == .segment ? StoreFiles.segment(url, 2) : try blobs(url)[1]
        let faulty = FaultyFileSystem()
        faulty.arm(.init(.read, persistent: true, failure: .error(EACCES), pathContaining: path.lastPathComponent))
        let problems = try StoreVerifier.verify(at: url, fileSystem: faulty).problems
        #expect(problems.map(\.kind) == [.permissionDenied], "\(problems)")
        #expect(problems.first?.file == path.path)
        #expect(problems.first?.message.contains("Permission denied") == true)
        if place == .segment {
            let error = Result { try StoreInspector.openReadOnly(at: url, fileSystem: faulty) }.failure
            let message = String(describing: error)
            #expect(message.contains(path.path) && message.contains("Permission denied"), "\(message)")
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
