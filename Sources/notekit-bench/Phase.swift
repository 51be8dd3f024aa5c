import Foundation
import NoteKitCommandLine

/// What the phases that print one JSON line share: reading the command line, running, reporting.
enum Phase {
    /// Reads `words` (after the subcommand) with the `options` a phase takes, runs `run` with what `parse` makes of
    /// them and prints the JSON line it returns.
    ///
    /// A bad command line prints the error and `usage` and exits the process with status 2.
    /// - Returns: 0, or 1 when `run` throws (the error on standard error).
    static func main<Options>(_ words: [String], options: Set<String>, usage: String,
                              parse: (Arguments) throws(UsageError) -> Options,
                              run: (Options) throws -> String) -> Int32 {
        let parsed: Options
        do throws(UsageError) {
            parsed = try parse(Arguments.readOrExit(words, options: options, usage: "usage: \(usage)"))
        } catch {
            error.exit(usage: "usage: \(usage)")
        }
        do {
            print(try run(parsed))
            return 0
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            return 1
        }
    }
}
