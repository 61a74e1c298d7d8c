// (issue 36) The watch of the serving patterns: how a bridge that imports
// requests learns which request types its bus serves, so it takes requests
// from other machines only for those (PROTOCOL-NOTES.md "Requests across
// machines (issue 36)", "Which machine takes a request"); and the same watch
// of one event group's members, so a bridge that imports a queue group takes
// its events from other machines only while a member is here (PROTOCOL-NOTES.md
// "Queue groups across machines (issue 36)", "Which machine takes a group event").
//
// `subscribe` with `servers: true` (the `bridge` right needed) watches a
// pattern P: its `ok` lists the serving patterns that overlap P now (plain
// serving subscriptions and serving queue groups, never fallback ones), and
// the next time that list changes the broker queues one
// `{"op":"servers","type":"P"}`. The watch is then disarmed until the
// watcher subscribes with `servers` again (which lists and re-arms it): so at
// most one notice per watch waits in a queue, however fast servers come and
// go, and the list is always read whole (no diff to lose). With `group: G`
// (`group-servers` in `hello`) the list is the patterns of G's members
// (event groups of that name, any uid, never fallback members) that overlap
// P, and the notice carries `"group":"G"`. (attacker6) With `"uid":N` as
// well, only uid N's group G counts (a bridge's `NAME:PATTERN@USER`), and
// the `ok` and the notice carry `"uid":N`.
//
// Before editing: `servingPatterns` counts what `addServing`/`removeServing`
// (non-fallback) and `joinGroup`/`leaveGroup` (serving groups) make and end;
// those four call `countServing` and nothing else changes it;
// `memberPatterns` is `joinGroup`/`leaveGroup`'s (event groups, not
// fallback) through `countMembers`. The event and request paths never look
// at any of this.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// (issue 36) One watch of a connection: of the serving patterns
/// overlapping `pattern` (`group` nil), or of the patterns of group `group`'s
/// members overlapping it.
struct ServerWatch: Hashable {
    var pattern: Pattern
    var group: String?
    /// (attacker6) Of uid `uid`'s group `group` only (nil: every uid's).
    var uid: UInt32? = nil

    /// The groups whose members it watches (nil: a watch of the servers).
    var target: GroupTarget? { group.map { GroupTarget(name: $0, uid: uid) } }
}

extension Broker {
    /// Watches a connection may hold (a bridge holds one per import pattern).
    static let maxServerWatchesPerConnection = 64

    /// `subscribe` with `servers`: starts (or re-arms) the watch of `pattern`
    /// (of group `request.group`'s members when it names one) and answers
    /// with the patterns that overlap it now.
    func subscribeServers(_ request: SubscribeRequest, req: RawSpan?, from connection: Connection) {
        let pattern = request.pattern
        let watch = ServerWatch(pattern: pattern, group: request.group, uid: request.groupUID)
        if connection.serverWatches[watch] == nil {
            let verdict = connection.policy.bridge
            guard verdict.isAllowed else {
                deny(connection, .bridge, nil, verdict, req: req, note: request.group == nil ? " (a watch of the serving patterns needs the bridge right)"
                     : " (a watch of a group's members needs the bridge right)")
                return
            }
            guard connection.serverWatches.count < Broker.maxServerWatchesPerConnection else {
                reply(to: connection, req: req, error: ProtocolError(.limit, "too many watches of the serving patterns or groups' members on this connection (limit \(Broker.maxServerWatchesPerConnection))"))
                return
            }
            chargeSubscription(pattern, of: connection, sign: 1, extraBytes: request.group?.utf8.count ?? 0)
            serverWatchers[connection.id] = connection
        }
        connection.watchServers(watch)
        let present = watch.target.map { memberPatterns[$0] ?? [:] } ?? servingPatterns
        let overlapping = present.keys.filter { $0.overlaps(pattern) }.map(\.text).sorted()
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
            if let group = request.group { FrameEncoder.appendField("group", string: group, to: &out) }
            if let uid = watch.uid { FrameEncoder.appendField("uid", int: UInt64(uid), to: &out) }
            FrameEncoder.appendASCII(",\"servers\":[", to: &out)
            for (i, text) in overlapping.enumerated() {
                if i > 0 { out.append(0x2C) }
                JSONString.appendQuoted(text, to: &out)
            }
            out.append(0x5D)
        }
    }

    /// `unsubscribe` with `servers`. - Returns: whether the watch was there.
    func unsubscribeServers(_ watch: ServerWatch, from connection: Connection) -> Bool {
        guard connection.unwatchServers(watch) else { return false }
        chargeSubscription(watch.pattern, of: connection, sign: -1, extraBytes: watch.group?.utf8.count ?? 0)
        if connection.serverWatches.isEmpty { serverWatchers[connection.id] = nil }
        return true
    }

    /// Ends every watch of a connection (it closes, or lost the `bridge`
    /// right in a reload: then each armed watch is told first, so the
    /// watcher asks again and learns it may not).
    func forgetServerWatches(of connection: Connection, tell: Bool = false) {
        for (watch, armed) in connection.serverWatches {
            if tell && armed && connection.isRoutable { notifyServers(watch, to: connection) }
            _ = unsubscribeServers(watch, from: connection)
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
        tellWatchers(of: pattern, group: nil)
    }

    /// A member of event group `key` joined (`sign` 1) or left (-1): when
    /// its pattern gets its first member of that name (or, for the watches
    /// of one uid's group, of that name and uid) or loses its last, every
    /// armed watch of the group it overlaps is told once.
    func countMembers(_ key: GroupKey, _ sign: Int) {
        countMembers(GroupTarget(name: key.name, uid: nil), key.pattern, sign)
        countMembers(GroupTarget(name: key.name, uid: key.uid), key.pattern, sign)
    }

    private func countMembers(_ target: GroupTarget, _ pattern: Pattern, _ sign: Int) {
        let old = memberPatterns[target]?[pattern] ?? 0
        let new = old + sign
        if new > 0 {
            memberPatterns[target, default: [:]][pattern] = new
        } else {
            memberPatterns[target]?[pattern] = nil
            if memberPatterns[target]?.isEmpty == true { memberPatterns[target] = nil }
        }
        guard (old > 0) != (new > 0), !serverWatchers.isEmpty else { return }
        tellWatchers(of: pattern, group: target)
    }

    private func tellWatchers(of pattern: Pattern, group: GroupTarget?) {
        for watcher in serverWatchers.values where watcher.isRoutable {
            for (watch, armed) in watcher.serverWatches where armed && watch.target == group && watch.pattern.overlaps(pattern) {
                watcher.disarmServerWatch(watch)
                notifyServers(watch, to: watcher)
            }
        }
    }

    /// Queues `{"op":"servers","type":"P"}` (`,"group":"G"` for a group's
    /// watch; as a reply: never dropped; at most one per watch waits, see
    /// the file comment).
    private func notifyServers(_ watch: ServerWatch, to connection: Connection) {
        var out: [UInt8] = []
        FrameEncoder.appendASCII("{\"op\":\"servers\",\"type\":", to: &out)
        JSONString.appendQuoted(watch.pattern.text, to: &out)
        if let group = watch.group { FrameEncoder.appendField("group", string: group, to: &out) }
        if let uid = watch.uid { FrameEncoder.appendField("uid", int: UInt64(uid), to: &out) }
        out.append(0x7D)
        out.append(0x0A)
        enqueue(bytes: out, to: connection)
    }
}
