import Foundation

/// How a tool that runs one subcommand and ends (`notekit-bench`, `notekit-stress`) meets its command line: a line
/// it refuses ends the process with status 2, a request for help with status 0, both with the tool's usage.
extension Arguments {
    /// `words` read as ``init(_:flags:options:endOfOptions:)`` reads them, or the end of the process: a
    /// ``UsageError`` prints `error: …` and `usage` on standard error and exits 2 (``UsageError/exit(usage:)``),
    /// `--help` prints `usage` on standard output and exits 0.
    ///
    /// - Parameter positional: whether the command takes positional arguments; when it does not, the first is
    ///   refused (``UsageError/unexpectedArgument(_:)``).
    package static func readOrExit(_ words: [String], flags: Set<String> = [], options: Set<String> = [],
                                   endOfOptions: Bool = false, positional: Bool = false,
                                   usage: String) -> Arguments {
        let arguments: Arguments
        do {
            arguments = try Arguments(words, flags: flags, options: options, endOfOptions: endOfOptions)
        } catch {
            error.exit(usage: usage)
        }
        if arguments.helpRequested {
            print(usage)
            Foundation.exit(0)
        }
        if !positional, let word = arguments.positional.first {
            UsageError.unexpectedArgument(word).exit(usage: usage)
        }
        return arguments
    }
}

extension UsageError {
    /// Prints `error: ` and this error, then `usage`, on standard error, and exits 2.
    package func exit(usage: String) -> Never {
        FileHandle.standardError.write(Data("error: \(self)\n\(usage)\n".utf8))
        Foundation.exit(2)
    }
}
