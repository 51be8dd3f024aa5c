import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitStressSupport
import NoteKitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 34, items 2 and 3: one rule decides what an open refuses for the kind of a store's fixed entries
/// (docs/FORMAT.md, *File types*); `verify` reports every case of it, and every tool says what is wrong in the
/// rule's words rather than with a bare errno.
@Suite("One rule for the store's entries: what an open refuses, verify reports, and every tool names")
struct StoreEntryRuleTests {
    /// A store's fixed entry replaced by something the store does not keep there.
    enum Hostile: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case quarantineLinkToDirectory = "quarantine/ a link to a directory"
        case quarantineFile = "quarantine a regular file"
        case segmentsFile = "segments a regular file"
        case segmentsLinkToFile = "segments a link to a file"
        case blobsFile = "blobs a regular file"
        case manifestLink = "MANIFEST a link to a copy of it"
        case lockFIFO = "LOCK a FIFO"
        var testDescription: String { rawValue }

        /// The entry it replaces.
        var entry: String {
            switch self {
            case .quarantineLinkToDirectory, .quarantineFile: "quarantine"
            case .segmentsFile, .segmentsLinkToFile: "segments"
            case .blobsFile: "blobs"
            case .manifestLink: "MANIFEST"
            case .lockFIFO: "LOCK"
            }
        }

        /// What a read-only open (and stats, dump) refuses too.
        var refusedByReaders: Bool { self != .quarantineLinkToDirectory && self != .quarantineFile && self != .lockFIFO }

        /// The words of the rule for it.
        var words: String {
            switch self {
            case .quarantineLinkToDirectory: "is a symbolic link, where the store keeps a directory"
            case .quarantineFile, .segmentsFile, .blobsFile: "is a regular file, where the store keeps a directory"
            case .segmentsLinkToFile: "is a symbolic link, where the store keeps a directory"
            case .manifestLink: "is a symbolic link, where the store keeps a regular file"
            case .lockFIFO: "is a FIFO (named pipe), where the store keeps a regular file"
            }
        }

        /// Makes it in the store at `url`, whose original entry is kept aside under `url`'s parent.
        func make(in url: URL) throws {
            let fm = FileManager.default
            let path = url.appendingPathComponent(entry).path
            let aside = url.deletingLastPathComponent().appendingPathComponent("aside-\(UUID().uuidString)").path
            if fm.fileExists(atPath: path) { try fm.moveItem(atPath: path, toPath: aside) }
            switch self {
            case .quarantineLinkToDirectory:
                try fm.createDirectory(atPath: aside + "-dir", withIntermediateDirectories: true)
                try fm.createSymbolicLink(atPath: path, withDestinationPath: aside + "-dir")
            case .quarantineFile, .segmentsFile, .blobsFile:
                #expect(fm.createFile(atPath: path, contents: Data("x".utf8)))
            case .segmentsLinkToFile:
                #expect(fm.createFile(atPath: aside + "-file", contents: Data("x".utf8)))
                try fm.createSymbolicLink(atPath: path, withDestinationPath: aside + "-file")
            case .manifestLink:
                try fm.createSymbolicLink(atPath: path, withDestinationPath: aside)
            case .lockFIFO:
                #expect(mkfifo(path, 0o600) == 0)
            }
        }
    }

    /// A closed store with a note and a blob.
    static func store() throws -> URL {
        let url = TemporaryStores.newURL("entries")
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [FileStoreConfiguration(url: url)])
        let context = ModelContext(container)
        let note = NoteRecord()
        note.title = "kept"
        note.photos.append(PhotoRecord(fileName: "a.jpg", data: Data(repeating: 7, count: 100)))
        context.insert(note)
        try context.save()
        try container.close()
        return url
    }

    @Test("Items 2 and 3: a writable open refuses the store with the rule's error, verify reports it as unexpectedFileType and calls the store unhealthy, and every tool prints the rule's words",
          arguments: Hostile.allCases)
    func refusedAndReported(hostile: Hostile) throws {
        let url = try Self.store()
        try hostile.make(in: url)
        let path = url.appendingPathComponent(hostile.entry).path

        #expect {
            _ = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                   configurations: [FileStoreConfiguration(url: url)])
        } throws: { error in
            guard case .unexpectedFileType(let refused, _, _) = error as? FileStoreError else { return false }
            return refused == path && "\(error)".contains(hostile.words)
        }
        let report = try StoreVerifier.verify(at: url)
        #expect(!report.ok)
        #expect(report.problems.contains { $0.file == path && $0.kind == .unexpectedFileType && $0.message.contains(hostile.words) },
                "\(report.problems)")

        let verify = try CommandLineTests.run(CommandLineTests.executable, ["verify", url.path])
        #expect(verify.status == 1 && verify.errors.contains(hostile.words), "\(verify)")
        var commands = [["compact", url.path]]
        if hostile.refusedByReaders { commands += [["stats", url.path], ["dump", url.path]] }
        for arguments in commands {
            let run = try CommandLineTests.run(CommandLineTests.executable, arguments)
            #expect(run.status != 0 && run.errors.contains(hostile.words), "\(arguments): \(run)")
            #expect(!run.errors.contains("errno"), "\(arguments): \(run)")
        }
        if !hostile.refusedByReaders {
            let stats = try CommandLineTests.run(CommandLineTests.executable, ["stats", url.path])
            #expect(stats.status == 0, "a read-only tool writes nothing there: \(stats)")
        }
    }

    @Test("A link to a directory is followed where the format supports it: a store whose segments/ and blobs/ live elsewhere is healthy")
    func linkedDirectoriesAreHealthy() throws {
        let url = try Self.store()
        let fm = FileManager.default
        for name in ["segments", "blobs"] {
            let moved = url.deletingLastPathComponent().appendingPathComponent("\(name)-\(UUID().uuidString)")
            try fm.moveItem(at: url.appendingPathComponent(name), to: moved)
            try fm.createSymbolicLink(at: url.appendingPathComponent(name), withDestinationURL: moved)
        }
        #expect(try StoreVerifier.verify(at: url).problems.isEmpty)
        let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                           configurations: [FileStoreConfiguration(url: url)])
        defer { try? container.close() }
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<NoteRecord>()) == 1)
    }
}
