// The ops that describe the connection and the broker (PROTOCOL.md
// "Requests": `hello`, `stats`): the `hello` reply's identity and features,
// and the `stats` counters.
//
// Before editing: a feature is listed in `hello` (`ProtocolConstants.features`)
// only once the broker implements all of it (PROTOCOL.md second edition).
@_spi(Package) import EventBusProtocol

extension Broker {
    /// `hello`: names the connection and sets its options, once.
    func hello(_ hello: HelloRequest, req: RawSpan?, from connection: Connection) {
        guard !connection.session.saidHello else {
            reply(to: connection, req: req, error: ProtocolError(.badRequest, "hello may be sent once per connection"))
            return
        }
        connection.session.noteHello()
        unpark(connection)  // parked under the options it had
        connection.session.take(echo: hello.echo, overflow: hello.overflow, client: hello.client)
        clearHalfFull(connection)  // (1.2) only `wait` may hold
        let configuration = self.configuration
        let instance = self.instance
        let retentionFeatures = self.retentionFeatures
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("server", string: configuration.serverName, to: &out)
            FrameEncoder.appendField("version", string: configuration.version, to: &out)
            FrameEncoder.appendField("protocol", int: UInt64(ProtocolConstants.version), to: &out)
            FrameEncoder.appendField("instance", string: instance, to: &out)
            FrameEncoder.appendField("conn", int: connection.publicID, to: &out)  // not the counter: PublicConnectionID.swift
            FrameEncoder.appendField("pid", int: UInt64(max(0, configuration.ownCredentials.pid)), to: &out)  // (1.2)
            FrameEncoder.appendASCII(",\"features\":[", to: &out)
            for (i, feature) in (ProtocolConstants.features + retentionFeatures).enumerated() {
                if i > 0 { out.append(0x2C) }
                JSONString.appendQuoted(feature, to: &out)
            }
            out.append(0x5D)
        }
    }

    /// `stats`: the broker-wide counters.
    func stats(req: RawSpan?, to connection: Connection) {
        let s = statistics
        let policyGeneration = self.policyGeneration
        let uptime = UInt64(max(0, now.monotonicNanoseconds - startMonotonic) / 1_000_000_000)
        let parked = UInt64(parking.members.count), parkedForUIDs = UInt64(parking.againstUIDs.count)
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("connections", int: UInt64(s.connections), to: &out)
            FrameEncoder.appendField("subscriptions", int: UInt64(s.subscriptions), to: &out)
            FrameEncoder.appendField("published", int: s.published, to: &out)
            FrameEncoder.appendField("delivered", int: s.delivered, to: &out)
            FrameEncoder.appendField("dropped", int: s.dropped, to: &out)
            FrameEncoder.appendField("queued_bytes", int: UInt64(max(0, s.queuedBytes)), to: &out)
            FrameEncoder.appendField("uptime_s", int: uptime, to: &out)
            FrameEncoder.appendField("instance", string: instance, to: &out)
            self.appendMe(for: connection, to: &out)
            FrameEncoder.appendField("policy_generation", int: policyGeneration, to: &out)
            appendRetentionStats(for: connection, to: &out)
            FrameEncoder.appendField("held", int: UInt64(s.held), to: &out)  // (1.2) "Flow control"
            FrameEncoder.appendField("holds", int: s.holds, to: &out)
            FrameEncoder.appendField("stalls", int: s.stalls, to: &out)
            FrameEncoder.appendField("requests", int: s.requests, to: &out)  // (1.3) "Request/reply"
            FrameEncoder.appendField("replies", int: s.replies, to: &out)
            FrameEncoder.appendField("no_responders", int: s.noResponders, to: &out)
            FrameEncoder.appendField("timeouts", int: s.timeouts, to: &out)
            // (parkfair) Full subscribers passed over: for every publisher, and for some publisher uids.
            FrameEncoder.appendField("parked", int: parked, to: &out)
            FrameEncoder.appendField("parked_for_uids", int: parkedForUIDs, to: &out)
        }
    }
}
