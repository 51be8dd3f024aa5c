import NoteKitCommandLine

/// What notekit's commands read from their arguments, each said once, so that every command words the same mistake
/// the same way.
extension Arguments {
    /// The one store path the command takes, or `fallback`.
    ///
    /// - Throws: ``UsageError/tooManyArguments(expected:got:)`` or ``UsageError/missingArgument(_:)``.
    func path(default fallback: String? = nil) throws(UsageError) -> String {
        try single("store path", default: fallback)
    }

    /// Whether `--json` was given.
    var json: Bool { flags.contains("json") }

    /// The value of `--to`, which `command` needs.
    ///
    /// - Throws: ``UsageError/missingOption(command:option:placeholder:)`` when it is absent.
    func destination(of command: String) throws(UsageError) -> String {
        guard let destination = options["to"] else {
            throw .missingOption(command: command, option: "--to", placeholder: "NEWPATH")
        }
        return destination
    }

    /// The value of the option `name` as a whole number, nil when the option was not given.
    ///
    /// - Throws: ``UsageError/invalidValue(option:value:expected:)`` for anything but a whole number.
    func wholeNumber(_ name: String) throws(UsageError) -> Int? {
        guard let text = options[name] else { return nil }
        guard let value = Int(text), value >= 0 else {
            throw .invalidValue(option: "--\(name)", value: text, expected: "a whole number")
        }
        return value
    }
}
