// `BusGap`: what a reconnect could not recover (the broker's `gap` frame).

/// (1.1) What a reconnect could not recover (PROTOCOL.md "Retained events
/// and history": the `gap` frame).
public struct BusGap: Hashable, Sendable {
    /// The last seq this process had seen, in the broker run it was seen in
    /// (0 when the broker restarted: the seqs of the old run mean nothing in the new).
    public var sinceSeq: UInt64
    /// The first seq the broker could still replay; events between may be lost.
    public var firstSeq: UInt64
    /// Whether the broker restarted (a new `instance`) while this process was away.
    public var brokerRestarted: Bool

    public init(sinceSeq: UInt64, firstSeq: UInt64, brokerRestarted: Bool) {
        self.sinceSeq = sinceSeq
        self.firstSeq = firstSeq
        self.brokerRestarted = brokerRestarted
    }
}
