#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NoteKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A read of a store that sees one committed state while other processes save, rotate and compact it, and takes no
/// lock (docs/FORMAT.md, *Reading while another process writes*). Every read path goes through it: an open, a
/// refresh, the verifier, the inspector, the schema read of a migration or of a tool, a salvage's read of its source.
///
/// The manifest names the segments of one committed state. A writer replaces it only by renaming a new one over it,
/// and deletes the segments it no longer lists only after that; segments are only appended to. So a reader reads
/// the manifest, reads what it lists, and looks at the manifest again: the same file (status) with the same bytes
/// means that every segment it read was the state it started from, and whatever it found there is the truth. (A
/// manifest that only lists more segments, another process's rotation, keeps every segment the read used: a
/// healthy read over it stands.) When the manifest changed otherwise, what it met (a listed segment gone, a segment cut short) may be another process's
/// compaction: it reads again, after 1 ms, waiting twice as long each time up to 50 ms. (LevelDB's readers pin a
/// version named by its `CURRENT` file; SQLite's WAL readers pin a snapshot with a read mark. A NoteKit reader
/// shares no memory with the writers, so it validates instead, as a seqlock reader does: read, then check that
/// nothing moved.)
///
/// Damage is reported only when two attempts in a row met the same damage over the same, unchanged manifest: one
/// look is never enough to call a store damaged. An I/O error other than a missing file (`EIO`, `EACCES`) over an
/// unchanged manifest is thrown at once: it is no race. When the store keeps changing for `timeout` seconds, the
/// read gives up with ``FileStoreError/storeKeptChanging(path:attempts:seconds:)``.
struct PinnedRead {
    let layout: StoreLayout
    let fileSystem: any StoreFileSystem
    /// How long to keep trying while the store changes under the reader, in seconds.
    var timeout = FileStoreConfiguration.defaultReadRetryTimeout
    var clocks = StoreClocks.system

    /// The manifest as the reader found it at the start of an attempt.
    struct Pin {
        /// The manifest file's status (nil: there was none), to tell later whether it was replaced.
        let status: StoreFileStatus?
        fileprivate let decoded: Result<Manifest, any Error>

        /// The manifest read.
        ///
        /// - Throws: ``FileStoreError`` when it is missing, damaged or of an unknown version.
        var manifest: Manifest { get throws { try decoded.get() } }
    }

    /// What the manifest looked like: its status and bytes, or why they could not be read; compared before and
    /// after an attempt.
    private struct Look: Equatable {
        var status: StoreFileStatus?
        var bytes: [UInt8]?
        var failure: AnyHashable?

        /// Whether this manifest only adds segments to `earlier`'s (rotation): every segment `earlier` listed is
        /// still there, so what a reader read through `earlier` is still a committed state.
        func onlyExtends(_ earlier: Look, layout: StoreLayout) -> Bool {
            guard let bytes, let earlierBytes = earlier.bytes,
                  let manifest = try? SegmentLog.decodeManifest(bytes, layout: layout),
                  let earlierManifest = try? SegmentLog.decodeManifest(earlierBytes, layout: layout) else { return false }
            return manifest.store == earlierManifest.store && manifest.segments.starts(with: earlierManifest.segments)
        }
    }

    /// Runs `body` until it reads with the manifest unchanged, and returns what it read (or throws what it threw)
    /// then, unless it was damage: that is confirmed by one more attempt first.
    ///
    /// - Parameters:
    ///   - damage: for a read that reports damage instead of throwing it (the verifier, a salvage), what it found,
    ///     or nil when the value is healthy. A thrown error is always damage, or an I/O error.
    ///   - body: the read, given the manifest pinned; it must change nothing outside itself, since it may run again.
    /// - Throws: ``FileStoreError/unexpectedFileType(path:found:expected:)`` before anything is read, for a fixed entry
    ///   of the store that is not what the store keeps there (``StoreLayout/checkEntries(writing:fileSystem:)``); what
    ///   `body` threw twice in a row over an unchanged manifest; an I/O error; or
    ///   ``FileStoreError/storeKeptChanging(path:attempts:seconds:)``.
    func run<Value>(damage: (Value) -> AnyHashable? = { _ in nil }, _ body: (Pin) throws -> Value) throws -> Value {
        // What no read goes through, whatever the manifest says (`segments` a file, a manifest that is a link).
        try layout.checkEntries(writing: false, fileSystem: fileSystem)
        let deadline = clocks.monotonic() + .milliseconds(Int((max(0, timeout) * 1000).rounded()))
        var pause: UInt32 = 1_000
        var attempts = 0
        // Damage met over an unchanged manifest, to be seen once more before it is believed.
        var suspect: (look: Look, damage: AnyHashable)?
        var lastChance = false
        while true {
            attempts += 1
            let (before, bytes) = look()
            let decoded = Result { try SegmentLog.decodeManifest(try bytes.get(), layout: layout) }
            let pin = Pin(status: before.status, decoded: decoded)
            let outcome = Result { try body(pin) }
            let after = look().look
            let unchanged = before == after
            if case .success(let value) = outcome, damage(value) == nil,
               unchanged || after.onlyExtends(before, layout: layout) {
                // Unchanged, or another process rotated: nothing this read used was removed.
                return value
            }
            var suspected = false
            if unchanged {
                let found: AnyHashable
                switch outcome {
                case .success(let value):
                    guard let reported = damage(value) else { return value }
                    found = reported
                case .failure(let error):
                    if Self.isFault(error) { throw error }
                    found = Self.identity(of: error)
                }
                if let suspect, suspect.look == before, suspect.damage == found { return try outcome.get() }
                suspect = (before, found)
                suspected = true
            } else {
                suspect = nil
            }
            if clocks.monotonic() >= deadline {
                // Damage first seen on the last attempt gets its second look; anything else is a store that kept
                // changing.
                guard suspected, !lastChance else {
                    throw FileStoreError.storeKeptChanging(path: layout.root, attempts: attempts, seconds: timeout)
                }
                lastChance = true
            }
            usleep(pause)
            pause = min(pause * 2, 50_000)
        }
    }

    /// The manifest's status and bytes, or the error reading them (its absence is one), which the body meets when
    /// it asks for the manifest: a reader that reports damage (the verifier) reports it.
    private func look() -> (look: Look, bytes: Result<[UInt8], any Error>) {
        do {
            guard let status = try fileSystem.status(layout.manifest),
                  let bytes = try SegmentLog.manifestBytes(layout: layout, fileSystem: fileSystem) else {
                return (Look(), .failure(FileStoreError.inconsistentSegments(
                    file: layout.manifest, kind: .manifestMissing, reason: "the manifest is missing")))
            }
            return (Look(status: status, bytes: bytes), .success(bytes))
        } catch {
            return (Look(failure: Self.identity(of: error)), .failure(error))
        }
    }

    /// Whether `error` is an I/O failure that no race explains (a missing file is one that a race does), or a
    /// nested read that already gave up.
    private static func isFault(_ error: any Error) -> Bool {
        switch error {
        case let error as StoreIOError: error.code != ENOENT
        case FileStoreError.storeKeptChanging: true
        default: false
        }
    }

    /// What identifies an error when it is compared with the one the next attempt meets.
    private static func identity(of error: any Error) -> AnyHashable {
        switch error {
        case let error as FileStoreError: AnyHashable(error)
        case let error as StoreIOError: AnyHashable(error)
        default: AnyHashable("\(String(reflecting: type(of: error))): \(String(reflecting: error))")
        }
    }
}
