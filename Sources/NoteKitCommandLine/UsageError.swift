/// A command line a tool does not accept: every NoteKit tool exits 2 with `error: ` and this sentence, which names
/// the word concerned.
package enum UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A word starting with `--` that the command does not take: `unknown option --jsn`.
    case unknownOption(String)
    /// A valued option with no word after it: `--to needs a value`.
    case missingValue(option: String)
    /// A first word that names no command: `unknown command frobnicate`.
    case unknownCommand(String)
    /// A group of subcommands given none of them: `mirror takes init, status, sync or fetch-blobs`.
    case missingSubcommand(command: String, choices: [String])
    /// An option the command needs, absent: `backup needs --to NEWPATH`.
    case missingOption(command: String, option: String, placeholder: String)
    /// An option's value of the wrong form: `--limit takes a whole number, not many`.
    case invalidValue(option: String, value: String, expected: String)
    /// Two flags that exclude each other, both given: `salvage takes --best-effort or --consistent-prefix, not both`.
    case conflictingFlags(command: String, first: String, second: String)
    /// No positional argument where one is needed: `expected a store path`.
    case missingArgument(String)
    /// More positional arguments than the one expected: `expected one store path, got 2 arguments`.
    case tooManyArguments(expected: String, got: Int)
    /// A positional argument where a command takes none: `unexpected argument 4000`.
    case unexpectedArgument(String)
    /// Positional arguments a command does not take as many of: `help takes one command, got 2`, or, without a
    /// count, `--version takes no arguments`.
    case argumentCount(command: String, takes: String, got: Int?)

    package var description: String {
        switch self {
        case .unknownOption(let word): "unknown option \(word)"
        case .missingValue(let option): "\(option) needs a value"
        case .unknownCommand(let word): "unknown command \(word)"
        case .missingSubcommand(let command, let choices): "\(command) takes \(Self.either(choices))"
        case .missingOption(let command, let option, let placeholder): "\(command) needs \(option) \(placeholder)"
        case .invalidValue(let option, let value, let expected): "\(option) takes \(expected), not \(value)"
        case .conflictingFlags(let command, let first, let second): "\(command) takes \(first) or \(second), not both"
        case .missingArgument(let what): "expected \(what)"
        case .tooManyArguments(let expected, let count): "expected \(expected), got \(count) arguments"
        case .unexpectedArgument(let word): "unexpected argument \(word)"
        case .argumentCount(let command, let takes, let count):
            "\(command) takes \(takes)" + (count.map { ", got \($0)" } ?? "")
        }
    }

    /// `a`, `a or b`, `a, b or c`.
    private static func either(_ choices: [String]) -> String {
        guard let last = choices.last, choices.count > 1 else { return choices.first ?? "" }
        return choices.dropLast().joined(separator: ", ") + " or " + last
    }
}
