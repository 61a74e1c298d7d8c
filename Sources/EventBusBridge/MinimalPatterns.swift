// Which of a list of patterns no other one covers (`>` alone instead of `>`
// and `order.*`): the bridge subscribes on NATS only those. The lists come
// from the configuration (a few patterns) and, for requests across machines,
// from the bus's watch of its serving patterns (RemoteRequests.swift), which
// any local user fills: up to its subscription quota (16,384 serving
// patterns per uid by default), every one of them listed again each time a
// serving pattern appears or goes.
//
// Before editing: the cost. Comparing every pattern with every other one
// (what this did before) was O(n^2) `covers` calls, each splitting two
// patterns: 2,000 serving patterns of one uid kept the link's thread busy
// for minutes per list, exports and imports of every user waiting behind it
// (docs/RELIABILITY.md "Hostile users, fifth round"). Now the patterns go
// into a trie of their segments once, and each looks for another that
// covers it by walking only the branches that can (its own segment, `*`,
// `>`): O(segments) per pattern for any list a real bus has. A list built to
// make those walks branch (patterns of `*` and one name mixed at every
// depth) could still make them long, so the walks share a budget of steps
// proportional to the list; past it the duplicates are removed and nothing
// else (overlapping subscriptions are correct on NATS: an import's copies
// are de-duplicated on arrival, a request's queue group takes it once).
@_spi(Package) import EventBusProtocol

extension BridgeCore {
    /// The patterns of `patterns` that no other one covers (duplicates
    /// removed, order kept): `>` alone instead of `>` and `order.*`. Work
    /// O(total segments) but for lists made to defeat it (see the file
    /// comment), which keep every pattern but the duplicates.
    package static func minimalPatterns(_ patterns: [Pattern]) -> [Pattern] {
        var seen = Set<String>()
        let unique = patterns.filter { seen.insert($0.text).inserted }
        guard unique.count > 1 else { return unique }
        let trie = SegmentTrie(unique)
        var budget = CoverSearch.budget(forPatterns: unique.count)
        var result: [Pattern] = []
        for (index, pattern) in unique.enumerated() {
            let search = CoverSearch(segments: trie.segments[index])
            switch search.coveredByAnother(from: trie.root, budget: &budget) {
            case .covered: continue
            case .notCovered: result.append(pattern)
            case .outOfBudget: return unique
            }
        }
        return result
    }
}

/// The patterns' segments as a trie; a node ends a pattern or not.
private final class TrieNode {
    var children: [Substring: TrieNode] = [:]
    var endsPattern = false
}

private struct SegmentTrie {
    let root = TrieNode()
    /// Each pattern's segments, in the order given.
    let segments: [[Substring]]

    init(_ patterns: [Pattern]) {
        segments = patterns.map(\.segments)
        for list in segments {
            var node = root
            for segment in list {
                if let child = node.children[segment] {
                    node = child
                } else {
                    let child = TrieNode()
                    node.children[segment] = child
                    node = child
                }
            }
            node.endsPattern = true
        }
    }
}

/// The search for a pattern of the trie other than `segments` that covers
/// it (BridgeCore.covers: `>` covers one segment or more of anything, `*`
/// one segment but `>`, a name itself).
private struct CoverSearch {
    enum Outcome { case covered, notCovered, outOfBudget }

    let segments: [Substring]

    /// Steps all the searches of one list may take together.
    static func budget(forPatterns count: Int) -> Int { 64 * count + 4096 }

    /// From `node` at segment `depth`; `same` while the path taken so far is
    /// the pattern's own segments.
    func coveredByAnother(from node: TrieNode, depth: Int = 0, same: Bool = true, budget: inout Int) -> Outcome {
        budget -= 1
        if budget < 0 { return .outOfBudget }
        guard depth < segments.count else { return node.endsPattern && !same ? .covered : .notCovered }
        let segment = segments[depth]
        if let rest = node.children[">"], rest.endsPattern {
            // `>` here covers whatever is left (one segment at least); it is
            // the pattern itself only when that is its own last `>`.
            if !(same && segment == ">" && depth == segments.count - 1) { return .covered }
        }
        if segment == ">" { return .notCovered }
        if let star = node.children["*"] {
            let outcome = coveredByAnother(from: star, depth: depth + 1, same: same && segment == "*", budget: &budget)
            if outcome != .notCovered { return outcome }
        }
        if segment != "*", let exact = node.children[segment] {
            return coveredByAnother(from: exact, depth: depth + 1, same: same, budget: &budget)
        }
        return .notCovered
    }
}
