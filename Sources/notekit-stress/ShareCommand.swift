import Foundation
import NoteKitCommandLine
import NoteKitStressSupport

/// `notekit-stress share`: the share test's long mode (docs/reliability/share.md).
///
///     swift run -c release notekit-stress share --writers 3 --readers 3 --seconds 120 --seed 20261201
///
/// Exits 0 when the run passed, 1 when it failed (damage reported, an inconsistent or stale read, an acknowledged
/// save lost, a child that failed) or could not run, 2 on a usage error. The store is removed unless the run
/// failed or `--keep` is given.
func runShareTest(_ arguments: Arguments) -> Never {
    let seed = arguments.options["seed"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
    let writers = arguments.options["writers"].flatMap { Int($0) } ?? 3
    let readers = arguments.options["readers"].flatMap { Int($0) } ?? 3
    let seconds = arguments.options["seconds"].flatMap { Double($0) } ?? 120
    let lockTimeout = arguments.options["lock-timeout"].flatMap { Double($0) } ?? 3
    guard (1...255).contains(writers) else { fail("--writers must be 1…255", status: 2) }
    guard (0...64).contains(readers) else { fail("--readers must be 0…64", status: 2) }
    guard seconds > 0, lockTimeout >= 0 else {
        fail("--seconds must be positive, --lock-timeout not negative", status: 2)
    }
    let parent = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
    let directory = parent.appendingPathComponent("notekit-share-\(seed)-\(getpid())")
    guard let executable = Bundle.main.executableURL else { fail("cannot find my own executable", status: 1) }
    print("share test: seed \(seed), \(writers) writers, \(readers) readers, \(seconds) s, in \(directory.path) "
          + "(replay with --seed \(seed))")
    let summary: ShareStressDriver.Summary
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        summary = try ShareStressDriver.run(.init(executable: executable, directory: directory, seed: seed,
                                                  writers: writers, readers: readers, seconds: seconds,
                                                  lockTimeout: lockTimeout, progress: { print($0) }))
    } catch {
        fail("the share test could not run: \(error) (the directory is kept: \(directory.path))", status: 1)
    }
    print(summary)
    if summary.failures.isEmpty, !arguments.flags.contains("keep") {
        try? FileManager.default.removeItem(at: directory)
    } else {
        print("the store is kept at \(directory.path)")
    }
    exit(summary.failures.isEmpty ? 0 : 1)
}
