import Foundation

/// How hard the reliability suites work (CONTRIBUTING.md, "The long suites"). `swift test` runs each bounded: every
/// rule is still exercised (each kind of fault, each kind of crash step, each category of bad input, each moment a
/// kill aims at), on fewer repetitions, so that the whole suite takes minutes on two cores. `NOTEKIT_LONG_TESTS=1`,
/// which `.ci/run` sets, runs each at full strength. A suite's own variable (`NOTEKIT_KILL_KILLS`, …) overrides both.
public enum LongTests {
    /// Whether `NOTEKIT_LONG_TESTS=1` is set.
    public static let isEnabled = ProcessInfo.processInfo.environment["NOTEKIT_LONG_TESTS"] == "1"

    /// The value of the environment variable `variable` when it is set and reads as a `Value`; otherwise `long` with
    /// `NOTEKIT_LONG_TESTS=1` and `bounded` without.
    public static func value<Value: LosslessStringConvertible>(_ variable: String, bounded: Value, long: Value) -> Value {
        ProcessInfo.processInfo.environment[variable].flatMap(Value.init) ?? (isEnabled ? long : bounded)
    }

    /// Whether the environment variable `variable` is `1`, or, when it is not set, whether `NOTEKIT_LONG_TESTS=1` is.
    public static func isOn(_ variable: String) -> Bool {
        ProcessInfo.processInfo.environment[variable].map { $0 == "1" } ?? isEnabled
    }
}

extension LongTests {
    /// The offsets of a file that a test damaging it "at every offset" tries: each one of `range` with
    /// `NOTEKIT_LONG_TESTS=1` (or `variable` set to 1); bounded, those where the file's structure changes and a
    /// sample between them: every offset before the first record (the magic line); in each record (`records`, each
    /// framed as `llllllll cccccccc payload\n`) its first byte, the payload's middle, its last byte and its end;
    /// in the first two records, the last two and every fourth between, also the last digit of its length, the first
    /// and last digit of its checksum, the spaces after them, the first two bytes of its payload and its last two;
    /// the range's ends; and every `stride`th offset. A cut or a flip anywhere inside a payload meets the same check
    /// (the frame's length or its checksum), which the middle and the sample exercise; every record's frame is read
    /// by the same code, which the records given every position exercise.
    public static func offsets(_ range: ClosedRange<Int>, records: [Range<Int>], variable: String? = nil,
                               stride: Int = 127) -> [Int] {
        if variable.map(isOn) ?? isEnabled { return Array(range) }
        var chosen: Set<Int> = [range.lowerBound, range.upperBound]
        chosen.formUnion(Swift.stride(from: range.lowerBound, through: range.upperBound, by: stride))
        chosen.formUnion(range.lowerBound..<(records.first?.lowerBound ?? range.lowerBound))
        for (index, record) in records.enumerated() {
            let start = record.lowerBound, end = record.upperBound
            chosen.formUnion([start, (start + end) / 2, end - 1, end])
            if index < 2 || index >= records.count - 2 || index % 4 == 0 {
                chosen.formUnion([7, 8, 9, 16, 17, 18, 19].map { start + $0 }.filter { $0 < end })
                chosen.insert(end - 2)
            }
        }
        return chosen.filter(range.contains).sorted()
    }
}
