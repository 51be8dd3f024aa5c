import Foundation

/// What a test prints beyond Swift Testing's own lines: by default nothing, so that `swift test` stays readable; with
/// `NOTEKIT_TEST_VERBOSE=1`, the summaries and seeds of the reliability suites (CONTRIBUTING.md, "Quiet output").
/// What a failure needs (the seed that replays it, where a store was kept) goes into the failure's own message.
public enum TestOutput {
    /// Whether `NOTEKIT_TEST_VERBOSE=1` is set.
    public static let isVerbose = ProcessInfo.processInfo.environment["NOTEKIT_TEST_VERBOSE"] == "1"

    /// Prints `line` on standard output when verbose; otherwise does not build it.
    public static func summary(_ line: @autoclosure () -> String) {
        if isVerbose { print(line()) }
    }
}
