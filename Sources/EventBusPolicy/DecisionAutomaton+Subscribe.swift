// Which verdicts the types of a pattern can get (PROTOCOL.md "Access policy
// (1.1)": `subscribe` is forbidden only when every type the pattern can match
// is denied, filtered when only some are). Exact over the valid types: the
// search carries the byte length of the shortest type reaching each state, so
// a verdict only counts if some type of at most 255 bytes gets it.
//
// Before editing: the search walks the pattern and the automaton together, one
// layer per pattern segment (literal: one edge; `*`: every edge; `>`: the
// precomputed `reachPlus`); layers hold at most one entry per state, so the
// cost is bounded by the policy's automaton, never by anything the client
// sends beyond its pattern of at most 128 segments.
@_spi(Package) import EventBusProtocol

extension DecisionAutomaton {
    /// Cheapest valid type of `pattern` for each effect.
    /// - Returns: the allow and deny origins reachable by a type of at most
    ///   255 bytes (nil where none is).
    func outcomes(of pattern: Pattern) -> (allow: Int32?, deny: Int32?) {
        var layer: [Int32: Int32] = [0: 0]  // state → cheapest cost so far
        var result = Reach()
        var ended = false
        let segments = pattern.segments
        for (i, segment) in segments.enumerated() {
            if segment == ">" && i == segments.count - 1 {
                for (s, cost) in layer { result.offer(reachPlus[Int(s)], plus: cost) }
                ended = true
                break
            }
            var nextLayer: [Int32: Int32] = [:]
            func add(_ s: Int32, _ cost: Int32) {
                if let known = nextLayer[s], known <= cost { return }
                nextLayer[s] = cost
            }
            for (s, cost) in layer {
                if segment == "*" {
                    for (literal, child) in edges[Int(s)] { add(child, cost + Int32(literal.utf8.count) + 1) }
                    add(other[Int(s)], cost + otherCost[Int(s)])
                } else {
                    add(edges[Int(s)][segment] ?? other[Int(s)], cost + Int32(segment.utf8.count) + 1)
                }
            }
            layer = nextLayer
        }
        if !ended {
            for (s, cost) in layer { result.offer(end[Int(s)], cost: cost) }
        }
        // cost - 1 is the type's length in bytes (no dot before the first segment).
        let fits: Int32 = 256
        return (result.allow <= fits ? result.allowOrigin : nil, result.deny <= fits ? result.denyOrigin : nil)
    }
}
