// The `conn` a client sees (`hello`, `clients`, the log's EVENTBUS_CONN):
// the connection's internal id (1, 2, 3... in the order they came, what the
// broker sorts and keys by) through a keyed permutation of the numbers
// below 2^48, so that two ids a uid sees tell nothing of how many
// connections others opened between them (docs/RELIABILITY.md "Attack round
// 2": the global counter showed others' churn). Unique per run, never 0,
// within 2^53 (exact in a JSON number everywhere).
//
// Before editing: a four-round Feistel network on two 24-bit halves whose
// round function is SipHash (`Hasher`, seeded per process) of a random key,
// the round and the half: a pseudo-random permutation (Luby-Rackoff) for
// whoever knows neither the key nor the process's hash seed. 0 is skipped by
// cycle-walking (the permutation applied again), which keeps it one-to-one.

extension Broker {
    /// The key of this process's permutation.
    private static let connectionIDKey: (UInt64, UInt64) = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))

    /// The `conn` clients see for the internal id `id` (below 2^48).
    package static func publicConnectionID(_ id: ConnectionID) -> UInt64 {
        var value = permute(id & 0xFFFF_FFFF_FFFF)
        while value == 0 { value = permute(value) }
        return value
    }

    private static func permute(_ x: UInt64) -> UInt64 {
        let mask: UInt64 = 0xFF_FFFF
        var left = x >> 24 & mask, right = x & mask
        for round in 0..<4 {
            var hasher = Hasher()
            hasher.combine(connectionIDKey.0)
            hasher.combine(connectionIDKey.1)
            hasher.combine(round)
            hasher.combine(right)
            let f = UInt64(UInt(bitPattern: hasher.finalize())) & mask
            (left, right) = (right, left ^ f)
        }
        return left << 24 | right
    }
}

extension Connection {
    /// The `conn` clients see (`Broker.publicConnectionID`).
    package var publicID: UInt64 { Broker.publicConnectionID(id) }
}
