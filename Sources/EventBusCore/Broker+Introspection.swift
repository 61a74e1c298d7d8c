// Who holds what (PROTOCOL.md "Quotas (1.1)": `stats.me`; "Introspection
// (1.1)": the `clients` op): the caller's own uid's usage and limits, and one
// object per connection the caller may see (uid 0 sees all, every other uid
// its own).
//
// Before editing: these replies are built from the counts of
// UserAccounts.swift, never recomputed by walking queues or indexes, so a
// `stats` costs the same however much is held; `clients` is linear in the
// connections listed and lists at most `maxPatternsListed` patterns of each.
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Patterns listed per connection in `clients` (its `subscriptions` gives the count).
    static let maxPatternsListed = 32

    /// `,"me":{"uid":1000,"connections":2,"subscriptions":5,"subscription_bytes":1700,
    /// "inbound_bytes":0,"queued_bytes":0,"retained_bytes":0,"retained_events":0,
    /// "limits":{"connections":256,"subscriptions":16384,"inbound_bytes":16777216,
    /// "queued_bytes":67108864,"retained_bytes":8388608,"pending_requests":4096,
    /// "group_members":64}}`; a limit that does
    /// not apply (uid 0, the broker's uid, `unlimited`) is `null`.
    func appendMe(for connection: Connection, to out: inout [UInt8]) {
        let account = connection.account
        FrameEncoder.appendASCII(",\"me\":{\"uid\":", to: &out)
        FrameEncoder.appendInt(UInt64(account.uid), to: &out)
        FrameEncoder.appendField("connections", int: UInt64(account.members.count), to: &out)
        FrameEncoder.appendField("subscriptions", int: UInt64(account.subscriptions), to: &out)
        FrameEncoder.appendField("subscription_bytes", int: UInt64(max(0, account.subscriptionBytes)), to: &out)
        FrameEncoder.appendField("inbound_bytes", int: UInt64(max(0, account.inboundBytes)), to: &out)
        FrameEncoder.appendField("queued_bytes", int: UInt64(max(0, account.queuedBytes)), to: &out)
        FrameEncoder.appendField("retained_bytes", int: UInt64(max(0, account.retainedBytes)), to: &out)
        FrameEncoder.appendField("retained_events", int: UInt64(max(0, account.retainedEvents)), to: &out)
        FrameEncoder.appendField("pending_requests", int: UInt64(max(0, account.pendingRequests)), to: &out)  // (1.3)
        FrameEncoder.appendField("serving_requests", int: UInt64(max(0, account.servingRequests)), to: &out)
        let limits = account.limits
        FrameEncoder.appendASCII(",\"limits\":{\"connections\":", to: &out)
        Broker.appendLimit(limits.connections, to: &out)
        FrameEncoder.appendASCII(",\"subscriptions\":", to: &out)
        Broker.appendLimit(limits.subscriptions, to: &out)
        FrameEncoder.appendASCII(",\"inbound_bytes\":", to: &out)
        Broker.appendLimit(limits.inboundBytes, to: &out)
        FrameEncoder.appendASCII(",\"queued_bytes\":", to: &out)
        Broker.appendLimit(limits.outboundBytes, to: &out)
        FrameEncoder.appendASCII(",\"retained_bytes\":", to: &out)
        Broker.appendLimit(limits.retainedBytes, to: &out)
        FrameEncoder.appendASCII(",\"pending_requests\":", to: &out)
        Broker.appendLimit(account.isPrivileged ? nil : configuration.quotas.maxPendingRequestsPerUID, to: &out)
        FrameEncoder.appendASCII(",\"group_members\":", to: &out)  // (1.3) per group
        Broker.appendLimit(account.isPrivileged ? nil : configuration.quotas.maxGroupMembers, to: &out)
        FrameEncoder.appendASCII("}}", to: &out)
    }

    private static func appendLimit(_ value: Int?, to out: inout [UInt8]) {
        if let value { FrameEncoder.appendInt(UInt64(max(0, value)), to: &out) } else { FrameEncoder.appendASCII("null", to: &out) }
    }

    /// `clients`: `{"op":"ok","req":1,"clients":[{"conn":3,"client":"dashboard",
    /// "pid":811,"uid":1000,"gid":1000,"since":"2026-11-29T13:00:00.123Z",
    /// "patterns":["order.>"],"subscriptions":1,"queued_bytes":0,"inbound_bytes":0,
    /// "published":12,"delivered":40,"dropped":0,"overflow":"wait","echo":false,
    /// "holding":0,"held":false,"behind":false}]}`,
    /// in connection order; `client` is null without a name; at most
    /// `maxPatternsListed` patterns each (in name order; `subscriptions` counts all).
    func clients(req: RawSpan?, to caller: Connection) {
        let everyone = caller.credentials.uid == 0
        let visible: [Connection]
        if everyone {
            visible = connections.values.sorted { $0.id < $1.id }
        } else {
            visible = caller.account.members.sorted { $0.id < $1.id }
        }
        var time: [UInt8] = []
        var formatter = TimestampFormatter()
        replyOKIfAsked(to: caller, req: req) { out in
            FrameEncoder.appendASCII(",\"clients\":[", to: &out)
            for (i, connection) in visible.enumerated() {
                if i > 0 { out.append(0x2C) }
                FrameEncoder.appendASCII("{\"conn\":", to: &out)
                FrameEncoder.appendInt(connection.publicID, to: &out)
                if let name = connection.clientName {
                    FrameEncoder.appendField("client", string: name, to: &out)
                } else {
                    FrameEncoder.appendASCII(",\"client\":null", to: &out)
                }
                FrameEncoder.appendASCII(",\"pid\":", to: &out)
                FrameEncoder.appendInt(Int64(connection.credentials.pid), to: &out)
                FrameEncoder.appendField("uid", int: UInt64(connection.credentials.uid), to: &out)
                FrameEncoder.appendField("gid", int: UInt64(connection.credentials.gid), to: &out)
                formatter.format(nanosecondsSinceEpoch: connection.connectedAtWallNanoseconds, into: &time)
                FrameEncoder.appendASCII(",\"since\":\"", to: &out)
                out.append(contentsOf: time)
                out.append(0x22)
                FrameEncoder.appendASCII(",\"patterns\":[", to: &out)
                for (j, pattern) in connection.subscriptions.keys.prefix(Broker.maxPatternsListed).sorted(by: { $0.text < $1.text }).enumerated() {
                    if j > 0 { out.append(0x2C) }
                    JSONString.appendQuoted(pattern.text, to: &out)
                }
                out.append(0x5D)
                FrameEncoder.appendField("subscriptions", int: UInt64(connection.subscriptions.count), to: &out)
                FrameEncoder.appendField("queued_bytes", int: UInt64(connection.outbound.chargedBytes), to: &out)
                FrameEncoder.appendField("inbound_bytes", int: UInt64(connection.input.inboundCharged), to: &out)
                FrameEncoder.appendField("published", int: connection.publishedCount, to: &out)
                FrameEncoder.appendField("delivered", int: connection.deliveredCount, to: &out)
                FrameEncoder.appendField("dropped", int: connection.droppedCount, to: &out)
                FrameEncoder.appendField("overflow", string: connection.overflow.rawValue, to: &out)
                FrameEncoder.appendField("echo", bool: connection.echo, to: &out)
                // (1.2) "Flow control"
                FrameEncoder.appendField("holding", int: UInt64(connection.flow.holding.count), to: &out)
                FrameEncoder.appendField("held", bool: connection.flow.isHeld, to: &out)
                FrameEncoder.appendField("behind", bool: connection.flow.behind, to: &out)
                // (1.3) "Request/reply"
                FrameEncoder.appendASCII(",\"serve_patterns\":[", to: &out)
                for (j, pattern) in connection.servings.keys.prefix(Broker.maxPatternsListed).sorted(by: { $0.text < $1.text }).enumerated() {
                    if j > 0 { out.append(0x2C) }
                    JSONString.appendQuoted(pattern.text, to: &out)
                }
                out.append(0x5D)
                FrameEncoder.appendField("pending", int: UInt64(connection.pendingRequestCount), to: &out)
                FrameEncoder.appendField("serving", int: UInt64(connection.servingRequestCount), to: &out)
                appendGroups(of: connection, to: &out)  // (1.3) "Queue groups"
                out.append(0x7D)
            }
            out.append(0x5D)
        }
    }
}
