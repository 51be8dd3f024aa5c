// A libFuzzer target for the readers of store files: the JSON reader, the record frame scanner, the manifest
// reader, the record decoder (in the notes domain's schema) and a whole replay of a segment.
//
// Built by Fuzz/run.sh into one module with NoteKitFileStore's sources, so that it reaches their internals. Every
// input must end in a typed error or a result: a crash, a trap, an error of another type, a hang or an allocation
// past libFuzzer's limits is a finding.
//
// An input is read four ways:
// - whole, as JSON, as a segment file's bytes (magic line, then frames) and as a MANIFEST file;
// - line by line, each line a record payload, decoded alone in the notes schema;
// - the lines framed with valid checksums after a segment record, and replayed as a one-segment store (strictly and
//   point in time) and verified by StoreVerifier: checksums never stand between the fuzzer and the decoder;
// - whole as a CHECKPOINT file, and as the header record of one (framed with a valid checksum, in whole pages),
//   read by the checkpoint reader: what it refuses, it refuses with a CheckpointDamage.

import FoundationEssentials
import NoteKit
import NoteKitNotes

/// The notes domain's schema, built once.
private let notesSchema: Schema = {
    do { return try Schema(versionedSchema: NotesSchema.self) } catch {
        fatalError("the notes schema does not build: \(error)")
    }
}()

private let store = UUID(uuidString: "B3459C04-7D57-4028-90BC-2A4B40C54467")!
private let root = "/fuzz.notekit"

/// A store directory in memory: enough of a file system for reading a store.
private final class MemoryFileSystem: StoreFileSystem, @unchecked Sendable {
    var files: [String: [UInt8]] = [:]

    func read(_ path: String) throws -> [UInt8] {
        guard let bytes = files[path] else { throw StoreIOError(operation: "open", path: path, code: 2) }
        return bytes
    }

    func exists(_ path: String) -> Bool { files[path] != nil }
    func kind(of path: String) throws -> StoreFileKind? {
        if files[path] != nil { return .regularFile }
        let prefix = path.hasSuffix("/") ? path : path + "/"
        return files.keys.contains { $0.hasPrefix(prefix) } ? .directory : nil
    }
    func create(_ path: String) throws -> any StoreFile { throw refused("create", path) }
    func openForAppending(_ path: String) throws -> any StoreFile { throw refused("open", path) }
    func openForAppending(_ path: String, at end: Int) throws -> any StoreFile { throw refused("open", path) }
    func rename(_ source: String, to destination: String) throws { throw refused("rename", source) }
    func remove(_ path: String) throws { throw refused("unlink", path) }
    func syncDirectory(_ path: String) throws { throw refused("fsync", path) }
    func makeDirectory(_ path: String) throws { throw refused("mkdir", path) }
    func contentsOfDirectory(_ path: String) throws -> [String] { [] }
    func truncate(_ path: String, to length: Int) throws { throw refused("truncate", path) }
    func tryLock(_ path: String) throws -> (any StoreLockHandle)? { throw refused("flock", path) }

    /// Reading a store writes nothing: a write here is a finding.
    private func refused(_ operation: String, _ path: String) -> StoreIOError {
        fatalError("a read wrote: \(operation) \(path)")
    }
}

/// Fails the run when an error is not one the store's API promises.
private func expectTyped(_ error: any Error, _ what: String) {
    guard error is FileStoreError else { fatalError("\(what) threw an untyped error: \(type(of: error)): \(error)") }
}

private func fuzzJSON(_ input: UnsafeRawBufferPointer) {
    var reader = JSONReader(input, baseOffset: 7)
    do {
        try reader.skipValue()
        try reader.finish()
    } catch is JSONReadError {
    } catch { fatalError("JSONReader threw \(error)") }
    // The typed readers, each on a fresh reader: they share the grammar but convert differently.
    let reads: [(inout JSONReader) throws -> Void] = [
        { _ = try $0.readDouble() }, { _ = try $0.readInt64() }, { _ = try $0.readUInt64() },
        { _ = try $0.readString() }, { _ = try $0.readUUID() }, { _ = try $0.readBool() },
        { _ = try $0.peek() },
    ]
    for read in reads {
        var typed = JSONReader(input)
        do { try read(&typed) } catch is JSONReadError {} catch { fatalError("JSONReader threw \(error)") }
    }
}

private func fuzzFrames(_ input: UnsafeRawBufferPointer) {
    // The bounded walk verify and salvage use: it reads the file in pieces, resuming after each damaged stretch.
    let files = MemoryFileSystem()
    let path = root + "/segments/000001.seg"
    files.files[path] = Array(input)
    do {
        try SegmentScan.walk(path, number: 1, fileSystem: files, blobs: nil) { record in
            precondition(record.offset + record.payload.count < record.next && record.next <= input.count,
                         "a frame outside the input")
            // The kind is read from the JSON whatever the order of its members; an error is a typed one.
            do { _ = try record.peek } catch { expectTyped(error, "peek") }
        } undecodable: { offset, length, _ in
            precondition(offset > 0 && length > 0 && offset + length <= input.count, "a record outside the input")
        } damaged: { damage in
            precondition(damage.offset > 0 && damage.length > 0 && damage.offset + damage.length <= input.count,
                         "damage outside the input")
        }
    } catch {
        expectTyped(error, "SegmentScan.walk")
    }
}

private func fuzzManifest(_ input: UnsafeRawBufferPointer) {
    let files = MemoryFileSystem()
    files.files[root + "/MANIFEST"] = Array(input)
    do { _ = try SegmentLog.readManifest(layout: StoreLayout(root: root), fileSystem: files) } catch {
        expectTyped(error, "readManifest")
    }
}

/// The input's lines, without their newlines.
private func lines(_ input: UnsafeRawBufferPointer) -> [Range<Int>] {
    var result: [Range<Int>] = []
    var start = 0
    for index in 0..<input.count where input[index] == 0x0A {
        result.append(start..<index)
        start = index + 1
    }
    if start < input.count { result.append(start..<input.count) }
    return result
}

private func fuzzRecords(_ input: UnsafeRawBufferPointer, _ lines: [Range<Int>]) {
    let decoder = RecordDecoderV1(blobs: nil)
    for line in lines {
        let payload = UnsafeRawBufferPointer(rebasing: input[line])
        for schema in [notesSchema, nil] {
            do { _ = try decoder.decode(payload, offset: line.lowerBound, file: "segment", schema: schema) } catch {
                expectTyped(error, "decode")
            }
        }
    }
}

/// One payload, framed as the writer frames it.
private func frame(_ payload: UnsafeRawBufferPointer) -> [UInt8] {
    var writer = RecordFrame.writer(reservingCapacity: payload.count)
    writer.raw(payload)
    return RecordFrame.seal(writer)
}

private func fuzzReplay(_ input: UnsafeRawBufferPointer, _ lines: [Range<Int>]) {
    let layout = StoreLayout(root: root)
    var segment = MagicLine.bytes(.segment)
    segment += RecordEncoder().segment(SegmentHeader(store: store, number: 1, created: Date(timeIntervalSinceReferenceDate: 0)))
    for line in lines { segment += frame(UnsafeRawBufferPointer(rebasing: input[line])) }
    let files = MemoryFileSystem()
    files.files[layout.segment(1)] = segment
    let manifest = Manifest(store: store, segments: [1], nextSegment: 2, created: Date(timeIntervalSinceReferenceDate: 0))
    files.files[layout.manifest] = MagicLine.bytes(.manifest) + RecordEncoder().manifest(manifest)
    for policy in [LogReplay.Policy.strict, .pointInTime] {
        do {
            let replay = try LogReplay.replay(manifest, layout: layout, fileSystem: files, blobs: nil, policy: policy)
            _ = replay.rows
        } catch { expectTyped(error, "replay") }
    }
    do { _ = try StoreVerifier.verify(at: URL(fileURLWithPath: root), fileSystem: files) } catch {
        expectTyped(error, "verify")
    }
}

private func fuzzCheckpoint(_ input: UnsafeRawBufferPointer) {
    let layout = StoreLayout(root: root)
    let files = MemoryFileSystem()
    var framed = Checkpoint.magic + frame(input)
    framed += [UInt8](repeating: 0, count: (4096 - framed.count % 4096) % 4096 + 4096)
    for bytes in [Array(input), framed] {
        files.files[layout.checkpoint] = bytes
        do { _ = try CheckpointReader.readHeader(layout.checkpoint, fileSystem: files) } catch is CheckpointDamage {
        } catch { expectTyped(error, "the checkpoint's header") }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let input = UnsafeRawBufferPointer(start: data, count: size)
    fuzzJSON(input)
    fuzzFrames(input)
    fuzzManifest(input)
    let lines = lines(input)
    fuzzRecords(input, lines)
    fuzzReplay(input, lines)
    fuzzCheckpoint(input)
    return 0
}
