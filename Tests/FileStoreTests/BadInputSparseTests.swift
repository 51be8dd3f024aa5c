import Foundation
import NoteKit
import NoteKitNotes
import NoteKitTestSupport
import Testing

@testable import NoteKitFileStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Sparse files and bounded reads (issue 14): a file extended by a hole uses no disk but claims any length; reads
/// are bounded by what the format allows, never by a file's length.
extension BadInputTests {
    @Test("A segment or a blob extended by an 8 GiB hole is refused or read with bounded memory by every command, under a 4 GiB address-space limit")
    func sparseFiles() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            BadInputTests.limitAddressSpace()
            let problems = try BadInputTests.runSparseFiles()
            BadInputTests.report(problems)
        }
        BadInputTests.recordProblems(reportedIn: result)
    }

    /// The peak resident memory of this process, in bytes: `VmHWM` of /proc/self/status, the high-water mark of
    /// this process's own address space. (`getrusage`'s `ru_maxrss` is not: Linux carries the spawning process's
    /// peak over `execve`, so an exit test's child spawned by a large test process starts with its parent's peak.)
    static func peakResidentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else {
            // No /proc (Darwin): `ru_maxrss`, which Darwin counts in bytes and Linux in kilobytes.
            var usage = rusage()
            #if canImport(Darwin)
            _ = getrusage(RUSAGE_SELF, &usage)
            return usage.ru_maxrss
            #else
            _ = getrusage(RUSAGE_SELF.rawValue, &usage)
            return usage.ru_maxrss * 1024
            #endif
        }
        return kilobytes * 1024
    }

    /// Extends each segment and the blob by a hole of 8 GiB in turn, and runs every command on the store; returns
    /// the problems.
    static func runSparseFiles() throws -> [String] {
        let store = try SmallStore.shared.get()
        let blob = try #require(store.files.keys.first { $0.hasPrefix("blobs/") })
        var problems: [String] = []
        let hole = 8 << 30
        for target in store.segments + [blob] {
            let directory = CaseDirectory()
            try directory.hold(store.files)
            let url = directory.url
            let path = url.appendingPathComponent(target).path
            guard truncate(path, off_t(store.files[target]!.count + hole)) == 0 else {
                return ["could not extend \(target): errno \(errno)"]
            }
            let name = "\(target) + 8 GiB hole"
            func typed(_ what: String, _ body: () throws -> Void) {
                do { try body() } catch is FileStoreError {} catch is StoredValueError {} catch {
                    problems.append("\(name): \(what) threw \(type(of: error)): \(error)")
                }
            }
            let isSegment = target != blob
            for mode in [FileStoreConfiguration.Mode.readOnly, .readWrite(createIfMissing: false)] {
                typed("opening \(mode)") {
                    var configuration = FileStoreConfiguration(url: url, mode: mode, automaticCompaction: nil)
                    configuration.fileSystem = UnflushedFileSystem()
                    let opened = try FileStore(configuration: configuration, schema: store.schema)
                    if isSegment { problems.append("\(name): opened \(mode); zeros past reserved space are damage") }
                    // Reading the drawing's bytes checks the blob's size against the record's, without reading more.
                    for row in try opened.fetch(StoreFetchRequest(entity: "NoteDrawing")).rows {
                        for case .external(let data) in row.attributes {
                            do {
                                _ = try data.load()
                                if !isSegment { problems.append("\(name): the blob's bytes were read as the value") }
                            } catch is StoredValueError {}
                        }
                    }
                    try opened.close()
                }
            }
            typed("stats") {
                let statistics = try StoreInspector.statistics(at: url)
                if statistics.blobBytes != store.files[blob]!.count + (isSegment ? 0 : hole) {
                    problems.append("\(name): stats gives \(statistics.blobBytes) blob bytes")
                }
            }
            let verified = try StoreVerifier.verify(at: url)
            if verified.ok { problems.append("\(name): verify calls the store healthy") }
            typed("salvage") {
                let destination = TemporaryStores.newURL("sparse-salvaged")
                defer { try? FileManager.default.removeItem(at: destination) }
                _ = try FileStore.salvage(from: url, to: destination)
            }
            _ = try? FileManager.default.removeItem(atPath: path)
        }
        let peak = peakResidentBytes()
        if peak > 400 << 20 { problems.append("the commands reached \(peak >> 20) MiB resident") }
        TestOutput.summary("BadInput: \(store.segments.count + 1) sparse files, peak \(peak >> 20) MiB resident")
        return problems
    }

    @Test("Zeros after the last record are reserved space up to 64 MiB; past that they are damage, named with its offset")
    func reservedSpaceCap() async throws {
        await #expect(processExitsWith: .success) {
            BadInputTests.limitAddressSpace()
            let store = try SmallStore.shared.get()
            let segment = store.segments.last!
            let end = store.files[segment]!.count
            let cap = 64 << 20
            for (zeros, expected) in [(cap, Expectation.opens(transaction: store.lastTransactionNumber)),
                                      (cap + 1, .refused(file: segment, offsets: (end + cap)..<(end + cap + 1)))] {
                var files = store.files
                files[segment]! += [UInt8](repeating: 0, count: zeros)
                store.check(files, expected, "\(zeros) zeros after the last record")
            }
        }
    }

    @Test("stats takes blob sizes from the file system's metadata and reads no blob")
    func statsReadsNoBlob() async throws {
        await #expect(processExitsWith: .success) {
            BadInputTests.limitAddressSpace()
            let store = try SmallStore.shared.get()
            let directory = CaseDirectory()
            try directory.hold(store.files)
            let fileSystem = FaultyFileSystem()
            let statistics = try StoreInspector.statistics(at: directory.url, fileSystem: fileSystem)
            #expect(statistics.blobs == 1 && statistics.blobBytes == 300)
            let blobReads = fileSystem.calls.filter { $0.operation == .read && $0.path.contains("/blobs/") }
            #expect(blobReads.isEmpty, "\(blobReads.map(\.path))")
        }
    }
}
