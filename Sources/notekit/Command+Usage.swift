import NoteKitCommandLine

/// `notekit help` and `notekit --version`: what notekit says about itself, rather than about a store.
extension Command {
    /// What `notekit help` prints, and `notekit` alone or with an unknown command prints on standard error: every
    /// command of the table with its synopsis, then `help` and `--version`, then the exit codes.
    static var usage: String {
        let lines = all.flatMap(\.usageLines) + [
            usageLine("help [COMMAND]", "this text, or what COMMAND does (as notekit COMMAND --help)"),
            usageLine("--version [--json]", "notekit's version, the store format versions it reads, the notes schema"),
        ]
        return """
            usage: notekit <command> [arguments]

            commands:
            \(lines.joined(separator: "\n"))

            \(ExitStatus.table)
            """
    }

    /// `notekit help [COMMAND]`: the usage, or the help of the command named.
    ///
    /// - Throws: ``UsageError/unknownCommand(_:)`` for a name the table does not have,
    ///   ``UsageError/argumentCount(command:takes:got:)`` for more than one.
    static func help(_ words: [String]) throws(UsageError) {
        let arguments = try Arguments(words)
        guard let topic = arguments.positional.first else {
            print(usage)
            return
        }
        guard arguments.positional.count == 1 else {
            throw .argumentCount(command: "help", takes: "one command", got: arguments.positional.count)
        }
        guard let command = named(topic) else { throw .unknownCommand(topic) }
        print(command.help)
    }

    /// `notekit --version [--json]`.
    ///
    /// - Throws: ``UsageError/argumentCount(command:takes:got:)`` for any positional argument.
    static func version(_ words: [String]) throws(UsageError) {
        let arguments = try Arguments(words, flags: ["json"])
        guard arguments.positional.isEmpty else {
            throw .argumentCount(command: "--version", takes: "no arguments", got: nil)
        }
        if arguments.json { printJSON(NoteKitVersion.json) } else { print(NoteKitVersion.text) }
    }
}
