/// SplitMix64: a small, fast generator whose whole state is its seed, so a randomized test that prints its seed
/// can be replayed exactly (on the same toolchain: `Int.random(in:using:)` belongs to the standard library).
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// One element of a non-empty array.
    public mutating func pick<T>(_ items: [T]) -> T { items.randomElement(using: &self)! }
}
