// `PublishReceipt`: the broker's answer to a publish.

/// The broker's answer to a publish (PROTOCOL.md "Requests": `ok` of `publish`).
public struct PublishReceipt: Equatable, Sendable {
    /// The event's broker-wide sequence number.
    public var seq: UInt64
    /// How many other connections it was queued to.
    public var delivered: Int
    /// How many local observers and streams of this process it was handed to.
    public var deliveredLocally: Int

    /// The fields of a `publish` reply plus the local count.
    public init(seq: UInt64, delivered: Int, deliveredLocally: Int) {
        self.seq = seq
        self.delivered = delivered
        self.deliveredLocally = deliveredLocally
    }
}
