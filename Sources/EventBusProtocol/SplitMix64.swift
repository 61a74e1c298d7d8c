// The one seedable pseudo-random generator of the package: the NATS client's
// server shuffles and backoff jitter (replayable in tests with a seed) and
// every randomised test (the test targets' Support files name it
// `SeededGenerator`), so a failing random case reproduces from its seed.
// Pure Swift, no Foundation, so every target and test target can use it.
//
// Before editing: the sequence for a seed is part of the tests'
// reproducibility (a seed quoted in a failure must give the same case
// again); do not change the constants.

/// SplitMix64 (Steele, Lea and Flood 2014): small, fast and seeded.
///
/// `var rng = SplitMix64(seed: 7); Int.random(in: 0..<10, using: &rng)`.
@_spi(Package) public struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator's whole state: the seed plus 0x9E37_79B9_7F4A_7C15 per draw.
    @_spi(Package) public var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    @_spi(Package) public init(seed: UInt64) { state = seed }

    /// Seeded from the system generator.
    @_spi(Package) public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    /// The next 64 random bits.
    @_spi(Package) public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double in 0..<1.
    @_spi(Package) public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
