/// The words of a command line, read the way every subcommand reads them: positional arguments, `--flag`s and
/// `--option value`s, in any order.
struct Arguments {
    private(set) var positional: [String] = []
    private(set) var flags: Set<String> = []
    private(set) var options: [String: String] = [:]

    /// A command line the subcommand does not accept.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    /// Reads `words`, knowing which options take a value and which flags exist.
    init(_ words: [String], flags known: Set<String> = [], options valued: Set<String> = []) throws {
        var index = 0
        while index < words.count {
            let word = words[index]
            if word == "--help" || word == "-h" {
                flags.insert("help")
            } else if word.hasPrefix("--") {
                let name = String(word.dropFirst(2))
                if valued.contains(name) {
                    guard index + 1 < words.count else { throw UsageError(description: "\(word) needs a value") }
                    options[name] = words[index + 1]
                    index += 1
                } else if known.contains(name) {
                    flags.insert(name)
                } else {
                    throw UsageError(description: "unknown option \(word)")
                }
            } else {
                positional.append(word)
            }
            index += 1
        }
    }

    /// The one path the subcommand takes, or its default.
    func path(default fallback: String? = nil) throws -> String {
        guard positional.count <= 1 else {
            throw UsageError(description: "expected one store path, got \(positional.count) arguments")
        }
        if let path = positional.first ?? fallback { return path }
        throw UsageError(description: "expected a store path")
    }
}
