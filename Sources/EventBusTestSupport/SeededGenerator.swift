// The seeded random number generator every randomised test uses, so that a
// failing random case reproduces from its seed.
//
// Before editing: the sequence for a seed is part of the tests' reproducibility
// (a seed quoted in a failure must give the same case again); do not change the
// constants. Pure Swift, no Foundation, so the Protocol/Core/Policy test targets
// can use it (each names it through a `typealias` in its Support file).

/// SplitMix64 (Steele, Lea and Flood 2014): small, fast and seeded.
///
/// `var rng = SeededGenerator(seed: 7); Int.random(in: 0..<10, using: &rng)`.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    /// The generator's whole state: the seed plus 0x9E37_79B9_7F4A_7C15 per draw.
    public var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
