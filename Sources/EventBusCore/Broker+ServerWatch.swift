// (issue 36) The watch of the serving patterns: how a bridge that imports
// requests learns which request types its bus serves, so it takes requests
// from other machines only for those (PROTOCOL-NOTES.md "Requests across
// machines (issue 36)", "Which machine takes a request").
//
// `subscribe` with `servers: true` (the `bridge` right needed) watches a
// pattern P: its `ok` lists the serving patterns that overlap P now (plain
// serving subscriptions and serving queue groups, never fallback ones), and
// the next time that list changes the broker queues one
// `{"op":"servers","type":"P"}`. The watch is then disarmed until the
// watcher subscribes with `servers` again (which lists and re-arms it): so at
// most one notice per watch waits in a queue, however fast servers come and
// go, and the list is always read whole (no diff to lose).
//
// Before editing: `servingPatterns` counts what `addServing`/`removeServing`
// (non-fallback) and `joinGroup`/`leaveGroup` (serving groups) make and end;
// those four call `countServing` and nothing else changes it. The event and
// request paths never look at any of this.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Watches a connection may hold (a bridge holds one per import pattern).
    static let maxServerWatchesPerConnection = 64

    /// `subscribe` with `servers`: starts (or re-arms) the watch of `pattern`
    /// and answers with the serving patterns that overlap it now.
    func subscribeServers(_ request: SubscribeRequest, req: RawSpan?, from connection: Connection) {
        let pattern = request.pattern
        if connection.serverWatches[pattern] == nil {
            let verdict = connection.policy.bridge
            guard verdict.isAllowed else {
                deny(connection, .bridge, nil, verdict, req: req, note: " (a watch of the serving patterns needs the bridge right)")
                return
            }
            guard connection.serverWatches.count < Broker.maxServerWatchesPerConnection else {
                reply(to: connection, req: req, error: ProtocolError(.limit, "too many watches of the serving patterns on this connection (limit \(Broker.maxServerWatchesPerConnection))"))
                return
            }
            chargeSubscription(pattern, of: connection, sign: 1)
            serverWatchers[connection.id] = connection
        }
        connection.watchServers(pattern)
        let overlapping = servingPatterns.keys.filter { $0.overlaps(pattern) }.map(\.text).sorted()
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
            FrameEncoder.appendASCII(",\"servers\":[", to: &out)
            for (i, text) in overlapping.enumerated() {
                if i > 0 { out.append(0x2C) }
                JSONString.appendQuoted(text, to: &out)
            }
            out.append(0x5D)
        }
    }

    /// `unsubscribe` with `servers`. - Returns: whether the watch was there.
    func unsubscribeServers(_ pattern: Pattern, from connection: Connection) -> Bool {
        guard connection.unwatchServers(pattern) else { return false }
        chargeSubscription(pattern, of: connection, sign: -1)
        if connection.serverWatches.isEmpty { serverWatchers[connection.id] = nil }
        return true
    }

    /// Ends every watch of a connection (it closes, or lost the `bridge`
    /// right in a reload: then each armed watch is told first, so the
    /// watcher asks again and learns it may not).
    func forgetServerWatches(of connection: Connection, tell: Bool = false) {
        for (pattern, armed) in connection.serverWatches {
            if tell && armed && connection.isRoutable { notifyServers(pattern, to: connection) }
            _ = unsubscribeServers(pattern, from: connection)
        }
    }

    /// A serving subscription (or serving group membership) of `pattern`
    /// was made (`sign` 1) or ended (-1): when the pattern appears or goes,
    /// every armed watch it overlaps is told once.
    func countServing(_ pattern: Pattern, _ sign: Int) {
        let old = servingPatterns[pattern, default: 0]
        let new = old + sign
        servingPatterns[pattern] = new > 0 ? new : nil
        guard (old > 0) != (new > 0), !serverWatchers.isEmpty else { return }
        for watcher in serverWatchers.values where watcher.isRoutable {
            for (watched, armed) in watcher.serverWatches where armed && watched.overlaps(pattern) {
                watcher.disarmServerWatch(watched)
                notifyServers(watched, to: watcher)
            }
        }
    }

    /// Queues `{"op":"servers","type":"P"}` (as a reply: never dropped; at
    /// most one per watch waits, see the file comment).
    private func notifyServers(_ pattern: Pattern, to connection: Connection) {
        var out: [UInt8] = []
        FrameEncoder.appendASCII("{\"op\":\"servers\",\"type\":", to: &out)
        JSONString.appendQuoted(pattern.text, to: &out)
        out.append(0x7D)
        out.append(0x0A)
        enqueue(bytes: out, to: connection)
    }
}
