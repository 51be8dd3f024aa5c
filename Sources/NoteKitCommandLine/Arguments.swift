/// The words of a command line after its command, read the same way by every NoteKit tool (`notekit`,
/// `notekit-bench`, `notekit-stress`): positional arguments, `--flag`s and `--option value`s, in any order.
///
/// A command declares the flags and valued options it takes; any other word that starts with `--` is refused, so a
/// mistyped option is a usage error rather than silently ignored:
///
/// ```swift
/// let arguments = try Arguments(["store.notekit", "--json"], flags: ["json"], options: ["entity"])
/// arguments.positional          // ["store.notekit"]
/// arguments.flags               // ["json"]
/// try Arguments(["--jsn"], flags: ["json"])   // throws UsageError.unknownOption("--jsn")
/// ```
///
/// `--help` and `-h` are read by every command: they set ``helpRequested`` and are never refused.
package struct Arguments: Sendable {
    /// The words that are neither options nor their values, in order.
    package private(set) var positional: [String] = []
    /// The flags given, by name without the leading `--`.
    package private(set) var flags: Set<String> = []
    /// The valued options given, by name without the leading `--`; an option given twice keeps its last value.
    package private(set) var options: [String: String] = [:]
    /// Whether `--help` or `-h` was among the words.
    package private(set) var helpRequested = false
    /// The words after a lone `--`, read as they are (a program and its arguments), when the command takes them
    /// (`endOfOptions`); nil when there was no `--`.
    package private(set) var afterEndOfOptions: [String]?

    /// Reads `words`, knowing which flags exist and which options take a value.
    ///
    /// - Parameters:
    ///   - flags: the names (without `--`) of the flags the command takes.
    ///   - options: the names (without `--`) of the options that take a value, the word after them.
    ///   - endOfOptions: whether a lone `--` ends the options, the words after it going to ``afterEndOfOptions``
    ///     unread; otherwise `--` is an unknown option like any other.
    /// - Throws: ``UsageError/unknownOption(_:)`` for a word starting with `--` that names neither a flag nor an
    ///   option; ``UsageError/missingValue(option:)`` for a valued option that ends the line.
    package init(_ words: [String], flags known: Set<String> = [], options valued: Set<String> = [],
                 endOfOptions: Bool = false) throws(UsageError) {
        var index = 0
        while index < words.count {
            let word = words[index]
            if Self.asksForHelp(word) {
                helpRequested = true
            } else if endOfOptions && word == "--" {
                afterEndOfOptions = Array(words[(index + 1)...])
                return
            } else if word.hasPrefix("--") {
                let name = String(word.dropFirst(2))
                if valued.contains(name) {
                    guard index + 1 < words.count else { throw .missingValue(option: word) }
                    options[name] = words[index + 1]
                    index += 1
                } else if known.contains(name) {
                    flags.insert(name)
                } else {
                    throw .unknownOption(word)
                }
            } else {
                positional.append(word)
            }
            index += 1
        }
    }

    /// Whether `word` asks for a command's help: `--help` or `-h`.
    package static func asksForHelp(_ word: String) -> Bool {
        word == "--help" || word == "-h"
    }

    /// The one positional argument the command takes, or `fallback` when there is none.
    ///
    /// - Parameter noun: what the argument is, for the error: `store path`.
    /// - Throws: ``UsageError/tooManyArguments(expected:got:)`` for more than one,
    ///   ``UsageError/missingArgument(_:)`` for none without a fallback.
    package func single(_ noun: String, default fallback: String? = nil) throws(UsageError) -> String {
        guard positional.count <= 1 else { throw .tooManyArguments(expected: "one \(noun)", got: positional.count) }
        if let value = positional.first ?? fallback { return value }
        throw .missingArgument("a \(noun)")
    }
}
