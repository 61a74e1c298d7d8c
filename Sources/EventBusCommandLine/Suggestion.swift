// "Did you mean" for a mistyped command or long option (stop 43's trial: a
// newcomer's `eventbus publsh` or `--retian` got only "unknown ..."): the
// closest known name by edit distance, counting a swap of two neighbours as
// one edit (optimal string alignment), as git and cargo suggest.
//
// Before editing: a suggestion must be likely, not merely possible: at most
// one edit for names of up to 4 characters, two for longer ones, and none
// when two names are equally close.

package enum Suggestion {
    /// The one name of `candidates` closest to `typed`, or nil when none is
    /// close enough or two are equally close.
    package static func closest(to typed: String, among candidates: [String]) -> String? {
        let limit = typed.count <= 4 ? 1 : 2
        var best: (name: String, distance: Int)? = nil
        var tied = false
        for candidate in candidates where candidate != typed {
            let distance = editDistance(Array(typed.utf8), Array(candidate.utf8))
            guard distance <= limit else { continue }
            if let current = best, distance == current.distance {
                tied = true
            } else if best == nil || distance < best!.distance {
                best = (candidate, distance)
                tied = false
            }
        }
        return tied ? nil : best?.name
    }

    /// The optimal-string-alignment distance: insertions, deletions,
    /// substitutions and swaps of two neighbouring bytes, each one edit.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    value = min(value, before[j - 2] + 1)
                }
                current[j] = value
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}
