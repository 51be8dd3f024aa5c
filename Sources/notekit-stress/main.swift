// notekit-stress: the kill test (docs/reliability/kill.md).
//
//     swift run -c release notekit-stress kill --kills 4000 --seed 20261129 --dir /tmp/kill   # about 9 minutes
//     swift run -c release notekit-stress kill --writers 2 --kills 1000 --seed 20261130 --dir /tmp/kill
//
// With `--writers N` (2 or more), N children write one store at once (`sharing: .perSave`) and one of them is
// killed at a time while the others go on (SharedKillDriver).
//
// `kill` runs the parent: it starts `notekit-stress child` on a store again and again, kills it with SIGKILL at
// random moments, and checks after each kill that every acknowledged save is there, whole, and nothing else.
// `child` is what it starts. Exit codes: 0 success, 1 a check failed, 2 usage error.
//
// `share` runs the share test (docs/reliability/share.md, ShareCommand.swift): writers killed at random and
// `reader` children running every read path, on one store at once.
import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore
import NoteKitMirror
import NoteKitStressSupport

let usage = """
    usage: notekit-stress kill [--kills N] [--seed N] [--dir DIR] [--seconds S] [--creation-kills N] [--keep]
                               [--writers N [--lock-timeout S]]
           notekit-stress child --store PATH --seed N --from STEP|resume [--steps N]
                                [--durability everySave|deferred]
                                [--writer K [--lock-timeout S] [--controlled] [--retry]]
           notekit-stress share [--writers N] [--readers M] [--seconds S] [--seed N] [--lock-timeout S] [--dir DIR]
                                [--keep]
           notekit-stress reader --store PATH --seed N
           notekit-stress migrate --store PATH [--sharing exclusive|perSave] [--lock-timeout S]
                                  [--pause S [--pause-in willMigrate|didMigrate]] [--fail willMigrate|didMigrate]
           notekit-stress compactor --store PATH --seconds S
           notekit-stress add --store PATH --title T [--delete T2] [--lock-timeout S] [--compact-after-bytes N]
           notekit-stress mirror-device --store PATH --server CONNECTION --zone ZONE --seed N [--ops N]
                                        [--sync-chance P] [--labels PREFIX] [--final]
           notekit-stress mirror-app --store PATH --server CONNECTION --zone ZONE
           notekit-stress backup-writer --store PATH [--steps N] [--pause-ms MS]

    kill    kills N children (default 1000) of a store made under DIR (default the temporary directory), stopping
            early after S seconds if given; N/10 of the kills (or --creation-kills) land while a child creates a new
            store. Prints the seed first and a summary last; keeps the store when a check fails (or with --keep).
            A random seed is chosen unless --seed is given. With --writers N (2…255), N children write one store
            at once, shared per save (saves wait up to --lock-timeout seconds, default 3, for the lock); one is
            killed at a time, the others are paused between saves for the checks and go on.
    child   opens the store at PATH, which must hold steps 1…STEP-1, and saves steps STEP, STEP+1, … (at most N,
            default unbounded), writing `save`, `ack`, `compact`, `compacted`, `trim` and `trimmed` lines. With
            --writer K it is writer K of several sharing the store per save, touching only its own objects; with
            --controlled it obeys `pause`/`resume` lines on standard input between saves. `--from resume` starts
            after the last step the store holds for it. With --retry, a save refused with `locked` after the busy
            wait is reported (`locked save STEP waited=S`) and tried again, and an open refused or reporting damage
            is reported and tried again.
    share   the share test: N writers (default 3) sharing the store per save, killed at random and restarted, and
            M readers (default 3) running every read path, for S seconds (default 120); prints the seed first and
            the figures last, and exits 1 when a read reported damage or saw an inconsistent or stale state, or an
            acknowledged save was lost.
    reader  reads the store at PATH by every read path, again and again, writing one `read` line per read, until its
            standard input ends.
    migrate opens the FieldNotes V1 store at PATH with seed 001's migration plan when it reads `go` on standard
            input, and reports how often it ran the plan's stage (MigrateChild). --pause makes each step of the
            stage (or the one given by --pause-in) wait S seconds first; --fail makes a step fail once, after its
            save.
    compactor  saves a few revisions and compacts the store at PATH (made by CompactionRace.create) again and
            again for S seconds, as `notekit compact` does, for readers racing it; prints `failure MESSAGE` lines
            and `compactions N locked M failures K` last.
    mirror-device  one device of the mirror's convergence test (MirrorDevice): N random changes to a FieldNotes
            store mirrored to ZONE (default 50), each saved, a sync after each with probability P (default 0.2),
            and with --final a last sync that must succeed; writes `ack`, `sync begin|end|failed` and `done` lines.
            Its labels are named PREFIX-alpha, PREFIX-beta or PREFIX-gamma (default prefix `label`): devices given
            one prefix at once collide on the unique name.
    mirror-app  seed 001's main app (MirrorApp): the FieldNotes store at PATH mirrored in the background until
            standard input ends; writes `ready` after its first sync and `stopped PENDING` last.
    backup-writer  the writer of the hot-backup test (BackupWorkload): creates the store at PATH and saves one
            step at a time (a note with a photo; some steps delete a note or replace a photo; small segments rotate;
            every seventh step compacts) until standard input ends or N steps are saved, pausing MS milliseconds
            before each, printing `ack STEP` and `compacted STEP` lines.
    add     opens the FieldNotes store at PATH in the default configuration (creating it when missing), inserts
            a note titled T, deletes the notes titled T2, saves once and exits (AddChild). With
            --compact-after-bytes N the save compacts the store automatically once its log holds N bytes, as an
            app extension's would.
    """

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(status)
}

let words = Array(CommandLine.arguments.dropFirst())

/// The subcommand's words read with the tools' one parser: an option it does not take, or any positional argument,
/// is a usage error (exit 2).
func readArguments(flags: Set<String> = [], options: Set<String>) -> Arguments {
    Arguments.readOrExit(Array(words.dropFirst()), flags: flags, options: options, usage: usage)
}

switch words.first {
case "child":
    let arguments = readArguments(flags: ["controlled", "retry"],
                                  options: ["store", "seed", "from", "steps", "durability", "writer", "lock-timeout"])
    let resume = arguments.options["from"] == "resume"
    let from = arguments.options["from"].flatMap { Int($0) }
    guard let store = arguments.options["store"],
          let seed = arguments.options["seed"].flatMap({ UInt64($0) }),
          resume || from.map({ $0 >= 1 }) == true else {
        fail("child needs --store, --seed and --from\n\(usage)", status: 2)
    }
    let steps = arguments.options["steps"].flatMap { Int($0) }
    let deferred = arguments.options["durability"] == "deferred"
    let writer = arguments.options["writer"].flatMap { Int($0) }
    if let writer, !(1...255).contains(writer) { fail("--writer must be 1…255", status: 2) }
    StressChild(url: URL(fileURLWithPath: store), seed: seed, deferred: deferred, writer: writer,
                lockTimeout: arguments.options["lock-timeout"].flatMap { Double($0) },
                controlled: arguments.flags.contains("controlled"), retry: arguments.flags.contains("retry"))
        .run(from: from, steps: steps)

case "reader":
    let arguments = readArguments(options: ["store", "seed"])
    guard let store = arguments.options["store"], let seed = arguments.options["seed"].flatMap({ UInt64($0) })
    else { fail("reader needs --store and --seed\n\(usage)", status: 2) }
    var reader = StressReader(url: URL(fileURLWithPath: store), seed: seed)
    reader.run()

case "share":
    runShareTest(readArguments(flags: ["keep"],
                               options: ["writers", "readers", "seconds", "seed", "lock-timeout", "dir"]))

case "migrate":
    let arguments = readArguments(options: ["store", "sharing", "lock-timeout", "pause", "pause-in", "fail"])
    guard let store = arguments.options["store"] else { fail("migrate needs --store\n\(usage)", status: 2) }
    let sharing: FileStoreConfiguration.Sharing? = switch arguments.options["sharing"] {
    case nil: nil
    case "exclusive": .exclusive
    case "perSave": .perSave
    case let other?: fail("--sharing must be exclusive or perSave, not \(other)", status: 2)
    }
    func step(_ option: String) -> FieldNotesMigrationPlan.Step? {
        guard let name = arguments.options[option] else { return nil }
        guard let step = FieldNotesMigrationPlan.Step(rawValue: name) else {
            fail("--\(option) must be willMigrate or didMigrate, not \(name)", status: 2)
        }
        return step
    }
    MigrateChild(url: URL(fileURLWithPath: store), sharing: sharing,
                 lockTimeout: arguments.options["lock-timeout"].flatMap { Double($0) },
                 behaviour: .init(pause: arguments.options["pause"].flatMap { Double($0) } ?? 0,
                                  pausing: step("pause-in").map { [$0] } ?? Set(FieldNotesMigrationPlan.Step.allCases),
                                  failing: step("fail"))).run()

case "compactor":
    let arguments = readArguments(options: ["store", "seconds"])
    guard let store = arguments.options["store"],
          let seconds = arguments.options["seconds"].flatMap({ Double($0) }) else {
        fail("compactor needs --store and --seconds\n\(usage)", status: 2)
    }
    Compactor.run(store: URL(fileURLWithPath: store), seconds: seconds)

case "mirror-device":
    let arguments = readArguments(flags: ["final"],
                                  options: ["store", "server", "zone", "seed", "ops", "sync-chance", "labels"])
    guard let store = arguments.options["store"], let server = arguments.options["server"],
          let zone = arguments.options["zone"], let seed = arguments.options["seed"].flatMap({ UInt64($0) })
    else {
        fail("mirror-device needs --store, --server, --zone and --seed\n\(usage)", status: 2)
    }
    MirrorDevice(url: URL(fileURLWithPath: store),
                 configuration: MirrorConfiguration(connectionString: server, zone: zone), seed: seed,
                 operations: arguments.options["ops"].flatMap { Int($0) } ?? 50,
                 syncChance: arguments.options["sync-chance"].flatMap { Double($0) } ?? 0.2,
                 labelPrefix: arguments.options["labels"] ?? "label",
                 final: arguments.flags.contains("final")).run()

case "mirror-app":
    let arguments = readArguments(options: ["store", "server", "zone"])
    guard let store = arguments.options["store"], let server = arguments.options["server"],
          let zone = arguments.options["zone"] else {
        fail("mirror-app needs --store, --server and --zone\n\(usage)", status: 2)
    }
    MirrorApp(url: URL(fileURLWithPath: store),
              configuration: MirrorConfiguration(connectionString: server, zone: zone)).run()

case "backup-writer":
    let arguments = readArguments(options: ["store", "steps", "pause-ms"])
    guard let store = arguments.options["store"] else { fail("backup-writer needs --store\n\(usage)", status: 2) }
    BackupWriter.run(store: URL(fileURLWithPath: store), steps: arguments.options["steps"].flatMap { Int($0) },
                     pauseMilliseconds: arguments.options["pause-ms"].flatMap { Int($0) } ?? 0)

case "add":
    let arguments = readArguments(options: ["store", "title", "delete", "lock-timeout", "compact-after-bytes"])
    guard let store = arguments.options["store"], let title = arguments.options["title"] else {
        fail("add needs --store and --title\n\(usage)", status: 2)
    }
    AddChild(url: URL(fileURLWithPath: store), title: title, deleting: arguments.options["delete"],
             lockTimeout: arguments.options["lock-timeout"].flatMap { Double($0) },
             compactAfterBytes: arguments.options["compact-after-bytes"].flatMap { Int($0) }).run()

case "kill":
    let arguments = readArguments(flags: ["keep"],
                                  options: ["kills", "seed", "dir", "seconds", "creation-kills", "writers", "lock-timeout"])
    let seed = arguments.options["seed"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
    let kills = arguments.options["kills"].flatMap { Int($0) } ?? 1_000
    let seconds = arguments.options["seconds"].flatMap { Double($0) }
    let creationKills = arguments.options["creation-kills"].flatMap { Int($0) }
    let parent = URL(fileURLWithPath: arguments.options["dir"] ?? FileManager.default.temporaryDirectory.path)
    let directory = parent.appendingPathComponent("notekit-kill-\(seed)-\(getpid())")
    guard let executable = Bundle.main.executableURL else { fail("cannot find my own executable", status: 1) }
    let writers = arguments.options["writers"].flatMap { Int($0) } ?? 1
    guard (1...255).contains(writers) else { fail("--writers must be 1…255", status: 2) }
    let lockTimeout = arguments.options["lock-timeout"].flatMap { Double($0) } ?? 3
    print("kill test: seed \(seed), \(kills) kills\(writers > 1 ? ", \(writers) writers" : ""), in \(directory.path)")
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let summary = if writers > 1 {
            try SharedKillDriver.run(.init(executable: executable, directory: directory, seed: seed, writers: writers,
                                           kills: kills, timeLimit: seconds, lockTimeout: lockTimeout,
                                           progress: { print($0) }))
        } else {
            try KillDriver.run(.init(executable: executable, directory: directory, seed: seed, kills: kills,
                                     timeLimit: seconds, creationKills: creationKills, progress: { print($0) }))
        }
        print(summary)
        if !arguments.flags.contains("keep") { try? FileManager.default.removeItem(at: directory) }
    } catch {
        fail("\(error)", status: 1)
    }

case let word? where Arguments.asksForHelp(word):
    print(usage)

default:
    fail(usage, status: 2)
}
