import Foundation
import NoteKitCommandLine

/// One command of `notekit`, as the table of commands (``Command/all``) lists it: its lines in the usage, its help,
/// the arguments it takes and the function that runs it. `notekit help`, `notekit help COMMAND`,
/// `notekit COMMAND --help` and the dispatch of a command line all read the table, so a command added there is
/// listed, helped and run, and no other list needs to change.
struct Command: Sendable {
    /// What one command line runs: a command's own action, or one subcommand's.
    struct Action: Sendable {
        /// The arguments after the command's words, as the usage shows them: `PATH [--json]`.
        let synopsis: String
        /// What the usage says it does, in a line.
        let summary: String
        /// The flags it takes (by name, without `--`); `--help` and `-h` are every command's.
        var flags: Set<String> = []
        /// The options it takes that have a value.
        var options: Set<String> = []
        /// Whether a report of damage ends with the salvage command for the store path it was given: true for every
        /// command that reads a store, except `salvage` itself.
        var suggestsSalvage = true
        /// Runs the command on its parsed arguments and returns the exit status (``ExitStatus``).
        let run: @Sendable (Arguments) throws -> Int32
    }

    /// One of a group's subcommands: `sync` of `mirror`.
    struct Subcommand: Sendable {
        let name: String
        let action: Action
    }

    /// What the command's name leads to.
    enum Actions: Sendable {
        /// The command runs one action: `notekit stats PATH`.
        case single(Action)
        /// The command is a group: the word after it names a subcommand (`notekit mirror sync PATH`), all of which
        /// share the group's help.
        case subcommands([Subcommand])
    }

    /// The word that names the command: `stats`, `mirror`.
    let name: String
    /// What `notekit help NAME` and `notekit NAME --help` print: its usage lines and what it does.
    let help: String
    let actions: Actions

    /// The command named `name`, if the table has it.
    static func named(_ name: String) -> Command? {
        all.first { $0.name == name }
    }

    /// The action `words` (the words after the command's name) ask for, and the words left for it; nil when they
    /// ask for the command's help without naming a subcommand (`notekit mirror --help`).
    ///
    /// - Throws: ``UsageError/missingSubcommand(command:choices:)`` when the command is a group and the first word
    ///   names none of its subcommands.
    func action(for words: [String]) throws(UsageError) -> (action: Action, arguments: [String])? {
        switch actions {
        case .single(let action):
            return (action, words)
        case .subcommands(let subcommands):
            if let word = words.first, let subcommand = subcommands.first(where: { $0.name == word }) {
                return (subcommand.action, Array(words.dropFirst()))
            }
            if words.contains(where: Arguments.asksForHelp) { return nil }
            throw .missingSubcommand(command: name, choices: subcommands.map(\.name))
        }
    }

    /// The command's lines in the usage: the command (and subcommand) with its synopsis, and its summary in the
    /// second column, or on the next line when the synopsis fills the first.
    var usageLines: [String] {
        switch actions {
        case .single(let action):
            [Self.usageLine(name + (action.synopsis.isEmpty ? "" : " " + action.synopsis), action.summary)]
        case .subcommands(let subcommands):
            subcommands.map { Self.usageLine("\(name) \($0.name) \($0.action.synopsis)", $0.action.summary) }
        }
    }

    /// Where the usage's second column starts, after the two spaces that indent every line.
    private static let summaryColumn = 29

    /// `synopsis` and `summary` as the usage lists them.
    static func usageLine(_ synopsis: String, _ summary: String) -> String {
        let indent = String(repeating: " ", count: 2)
        if synopsis.count < summaryColumn {
            return indent + synopsis.padding(toLength: summaryColumn, withPad: " ", startingAt: 0) + summary
        }
        return indent + synopsis + "\n" + indent + String(repeating: " ", count: summaryColumn) + summary
    }
}
