// notekit: look inside any NoteKit store, prove it healthy, shrink it, rescue what a damaged one holds, and run the
// demo. Its exit codes are ExitStatus's (ExitStatus.swift), listed by `notekit help`.
import Foundation
import NoteKit
import NoteKitCommandLine
import NoteKitFileStore

/// Prints `message` to standard error as one `error:` line.
func fail(_ message: String) {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
}

/// Prints a JSON object on one line, keys sorted.
func printJSON(_ object: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    print(String(decoding: data, as: UTF8.self))
}

/// Runs one command line and returns its exit status (``ExitStatus``): `help` and `--version` here, every other
/// command from the table (``Command/all``).
func run(_ words: [String]) -> Int32 {
    guard let name = words.first else {
        FileHandle.standardError.write(Data((Command.usage + "\n").utf8))
        return ExitStatus.usage.rawValue
    }
    let rest = Array(words.dropFirst())
    if name == "help" || Arguments.asksForHelp(name) {
        return runBuiltIn(Command.help, rest)
    }
    if name == "--version" {
        return runBuiltIn(Command.version, rest)
    }
    guard let command = Command.named(name) else {
        fail("\(UsageError.unknownCommand(name))")
        FileHandle.standardError.write(Data((Command.usage + "\n").utf8))
        return ExitStatus.usage.rawValue
    }
    /// The store path the command was given, for the salvage hint that ends a report of damage.
    var storePath: String?
    do {
        // No action: a group asked for its help without a subcommand (`notekit mirror --help`).
        guard let (action, words) = try command.action(for: rest) else {
            print(command.help)
            return ExitStatus.ok.rawValue
        }
        let arguments = try Arguments(words, flags: action.flags, options: action.options)
        if arguments.helpRequested {
            print(command.help)
            return ExitStatus.ok.rawValue
        }
        if action.suggestsSalvage { storePath = arguments.positional.first }
        return try action.run(arguments)
    } catch let error as UsageError {
        fail("\(error) (see notekit help \(command.name))")
        return ExitStatus.usage.rawValue
    } catch {
        let status = ExitStatus(error)
        fail("\(error)")
        if status == .damage, let storePath {
            FileHandle.standardError.write(Data((StoreCommands.salvageHint(storePath) + "\n").utf8))
        }
        return status.rawValue
    }
}

/// Runs `help` or `--version` on `words`: a usage error names `notekit help`, the usage.
func runBuiltIn(_ body: ([String]) throws(UsageError) -> Void, _ words: [String]) -> Int32 {
    do {
        try body(words)
        return ExitStatus.ok.rawValue
    } catch {
        fail("\(error) (see notekit help)")
        return ExitStatus.usage.rawValue
    }
}

exit(run(Array(CommandLine.arguments.dropFirst())))
