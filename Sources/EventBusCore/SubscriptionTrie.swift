// The wildcard half of the subscription index: a segment trie with path
// compression (nats-server's sublist, as a radix tree). Each node stands for
// a run of one or more pattern segments (`edge`, `*` allowed) below its
// parent; a chain without branches is one node, so a long unique pattern
// costs one node, and tearing down thousands of them frees thousands of
// objects, not hundreds of thousands. A node holds the connections whose
// pattern ends there (`subscribers`) or continues with a final `>`
// (`tailSubscribers`).
//
// Before editing: an edge is a slice of the pattern text that made the node
// (`Segments`: 32 bytes however many segments, pointing into the pattern's
// storage, which the subscription holds anyway, so a pattern is stored once).
// A child is found by the first segment of its edge (`star`
// when that is `*`); two edges below one node never start alike. Nodes know
// their parent, so pruning walks up from a leaf; an inner node is split when
// a new pattern leaves its edge part-way, and never merged again (it goes
// when it is empty, like any node). `SubscriptionIndex` and (1.3) `GroupIndex` (QueueGroups.swift) use it.
@_spi(Package) import EventBusProtocol

/// A run of `.`-separated segments, held as one slice of a pattern's text.
struct Segments: Sequence, Equatable {
    /// The segments joined by `.`, e.g. `order.*`; empty for none.
    let text: Substring
    let count: Int

    init(_ text: Substring, count: Int) {
        self.text = text
        self.count = count
    }

    /// The segments of `text` (1 or more).
    init(_ text: Substring) {
        self.text = text
        var n = text.isEmpty ? 0 : 1
        for b in text.utf8 where b == 0x2E { n += 1 }
        self.count = n
    }

    static let empty = Segments(Substring(), count: 0)

    /// The segments of the type named `name`, each a slice of it, as
    /// `PatternTrieNode.match` takes them: `"order.created"` is `["order", "created"]`.
    static func array(of name: String) -> [Substring] {
        var segments: [Substring] = []
        var start = name.startIndex
        for index in name.utf8.indices where name.utf8[index] == 0x2E {
            segments.append(name[start..<index])
            start = name.utf8.index(after: index)
        }
        segments.append(name[start...])
        return segments
    }

    var isEmpty: Bool { count == 0 }

    var first: Substring? { count == 0 ? nil : text.prefix { $0 != "." } }

    /// The first `k` segments (`k` ≤ `count`).
    func prefix(_ k: Int) -> Segments {
        guard k < count else { return self }
        guard k > 0 else { return .empty }
        var seen = 0
        var end = text.startIndex
        for i in text.utf8.indices where text.utf8[i] == 0x2E {
            seen += 1
            if seen == k { end = i; break }
        }
        return Segments(text[text.startIndex..<end], count: k)
    }

    /// All but the first `k` segments (`k` ≤ `count`).
    func dropFirst(_ k: Int) -> Segments {
        guard k > 0 else { return self }
        guard k < count else { return .empty }
        var seen = 0
        for i in text.utf8.indices where text.utf8[i] == 0x2E {
            seen += 1
            if seen == k { return Segments(text[text.utf8.index(after: i)...], count: count - k) }
        }
        return .empty
    }

    struct Iterator: IteratorProtocol {
        let text: Substring
        var position: Substring.Index
        var done: Bool

        mutating func next() -> Substring? {
            guard !done else { return nil }
            let start = position
            var i = position
            let utf8 = text.utf8
            while i < utf8.endIndex && utf8[i] != 0x2E { i = utf8.index(after: i) }
            if i == utf8.endIndex { done = true } else { position = utf8.index(after: i) }
            return text[start..<i]
        }
    }

    func makeIterator() -> Iterator { Iterator(text: text, position: text.startIndex, done: count == 0) }

    static func == (a: Segments, b: Segments) -> Bool { a.count == b.count && a.text == b.text }
}

/// The subscription index's trie: its members are connections.
typealias TrieNode = PatternTrieNode<Connection>

/// A node of the wildcard trie; its members are the connections of the
/// subscription index, or (1.3) the queue groups of `GroupIndex`.
final class PatternTrieNode<Member: AnyObject> {
    /// The node above; nil for the root. Uncounted (Uncounted.swift): the
    /// parent owns this node through its `children`.
    var parentRef: Uncounted<PatternTrieNode>?
    /// `parentRef` as a reference.
    var parent: PatternTrieNode? {
        get { parentRef?.object }
        set { parentRef = newValue.map { Uncounted($0) } }
    }
    /// The segments from the parent to this node, e.g. `order.*`; empty
    /// only for the root.
    var edge: Segments
    /// Children by the first segment of their edge (never `*`).
    var children: [Substring: PatternTrieNode] = [:]
    /// The child whose edge starts with `*`.
    var star: PatternTrieNode?
    /// Subscribers whose pattern ends here.
    var subscribers: [Member] = []
    /// Subscribers whose pattern has `>` after this node's segments.
    var tailSubscribers: [Member] = []

    init(parent: PatternTrieNode?, edge: Segments) {
        self.parentRef = parent.map { Uncounted($0) }
        self.edge = edge
    }

    var isEmpty: Bool { children.isEmpty && star == nil && subscribers.isEmpty && tailSubscribers.isEmpty }

    /// The child whose edge starts with `segment`.
    @inline(__always)
    func child(startingWith segment: Substring) -> PatternTrieNode? {
        segment == "*" ? star : children[segment]
    }

    /// Puts `node` below this one, under the first segment of its edge.
    func attach(_ node: PatternTrieNode) {
        node.parent = self
        let first = node.edge.first!
        if first == "*" { star = node } else { children[first] = node }
    }

    /// Forgets an empty child.
    func removeChild(_ node: PatternTrieNode) {
        if node === star {
            star = nil
        } else if children.count == 1 {
            children = [:]  // no hashing for the common single child
        } else {
            children[node.edge.first!] = nil
        }
    }

    /// The node for exactly `segments` (none of them `>`), made if missing:
    /// walks down, splitting an edge that `segments` leave part-way.
    static func node(for segments: Segments, from root: PatternTrieNode) -> PatternTrieNode {
        var node = root
        var rest = segments
        while let first = rest.first {
            guard let child = node.child(startingWith: first) else {
                let leaf = PatternTrieNode(parent: node, edge: rest)
                node.attach(leaf)
                return leaf
            }
            // Length of the common prefix of the child's edge and `rest` (>= 1).
            var common = 0
            var a = child.edge.makeIterator(), b = rest.makeIterator()
            while let x = a.next(), let y = b.next(), x == y { common += 1 }
            let edge = child.edge
            if common < edge.count {
                // Split: a new node for the shared part, the old child below it.
                let middle = PatternTrieNode(parent: node, edge: edge.prefix(common))
                node.attach(middle)
                child.edge = edge.dropFirst(common)
                middle.attach(child)
                node = middle
            } else {
                node = child
            }
            rest = rest.dropFirst(common)
        }
        return node
    }

    /// Removes `node` if it is empty, and then each ancestor that became
    /// empty; the root stays.
    static func prune(from node: PatternTrieNode) {
        var node = node
        while node.isEmpty, let parent = node.parent {
            parent.removeChild(node)
            node = parent
        }
    }

    /// Calls `body` for every subscriber of a pattern that matches the type
    /// whose segments are `segments`, `at` of them already consumed to reach
    /// this node. A connection may come more than once (several patterns).
    func match(_ segments: [Substring], at consumed: Int, _ body: (Member) -> Void) {
        guard consumed < segments.count else {
            for connection in subscribers { body(connection) }
            return
        }
        for connection in tailSubscribers { body(connection) }
        if let child = children[segments[consumed]] { child.matchEdge(segments, at: consumed, body) }
        if let star { star.matchEdge(segments, at: consumed, body) }
    }

    /// Continues `match` into this node when its edge fits the type from
    /// `consumed` on (its first segment is known to match).
    private func matchEdge(_ segments: [Substring], at consumed: Int, _ body: (Member) -> Void) {
        let count = edge.count
        guard segments.count - consumed >= count else { return }
        var i = 0
        for segment in edge {
            // The first segment is known to match.
            if i > 0 && segment != "*" && segment != segments[consumed + i] { return }
            i += 1
        }
        match(segments, at: consumed + count, body)
    }
}

