// (issue 36) Fallback serving subscriptions: how a bridge serves the request
// types it carries to other machines without taking requests a local server
// would answer (PROTOCOL-NOTES.md "Requests across machines (issue 36)").
// A `subscribe` with `serve: true, fallback: true` (the `bridge` right
// needed) is kept in `fallbackIndex`, not `serveIndex`: a request is routed
// to it only when it reached no server of `serveIndex` and no serving
// group, so local servers always go first, and the per-event path never
// sees it. A requester that holds a fallback subscription itself (a bridge
// asking for another machine) is never routed to one: a request crosses at
// most one bridge each way, so two bridges on a bus cannot bounce it.
//
// Before editing: `addServing`/`removeServing` (Broker+RequestReply.swift)
// keep `Connection.fallbackServings` and the two indexes in step; the reply
// `code` a fallback server may send is checked in `serviceReply`.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Whether `connection` may make a fallback serving subscription: it needs
    /// the `bridge` right (as `origin` does). Answers `forbidden` when not.
    func mayServeAsFallback(_ connection: Connection, req: RawSpan?) -> Bool {
        let verdict = connection.policy.bridge
        if verdict.isAllowed { return true }
        deny(connection, .bridge, nil, verdict, req: req, note: " (a fallback serving subscription needs the bridge right)")
        return false
    }

    /// A request of `type` that reached no local server: at most one
    /// fallback server (the first in the index that can take it; a bus has
    /// one bridge per NATS system as a rule), never for a requester that is
    /// a fallback server itself. Flow control as for any server.
    func routeRequestToFallback(_ type: EventType, size: Int, requester: Connection,
                                servers: inout [Connection], blockers: inout [Connection]) {
        guard requester.fallbackServings.isEmpty else { return }
        for server in fallbackIndex.matches(type) {
            if server === requester { continue }
            guard server.isRoutable, mayServeMore(server) else { continue }
            switch requestFit(size: size, requester: requester, server: server) {
            case .fits:
                servers.append(server)
                blockers.removeAll()
                return
            case .holds: blockers.append(server)
            case .passedOver: break
            }
        }
    }
}
