// (1.3) Asking (PROTOCOL.md "Request/reply"): `request(_:)` sends a typed
// request and returns its decoded reply; the broker's answer says which of
// the failures it is (`RequestAnswer`, shared with the CLI), each a typed
// `EventBusError` case.
//
// Before editing: the answer to a `request` comes whenever the reply is
// known, out of order with other requests (the session matches it by
// `req`). A cancelled caller stops waiting at once; the broker keeps the
// request until its deadline or its reply (it has no way to withdraw one),
// so its answer comes in time and is dropped: nothing is left waiting.
@_spi(Package) import EventBusProtocol
import Foundation

extension EventBus {
    /// (1.3) Asks the connections that serve `R.requestType` and returns the
    /// first reply, decoded (PROTOCOL.md "Request/reply").
    /// ```swift
    /// let thumbnail = try await bus.request(MakeThumbnail(path: "/tmp/a.png"))
    /// ```
    /// Cancelling the task stops the wait at once with `.cancelled` (the
    /// broker forgets the request at its deadline; a server may still
    /// handle it).
    /// - Parameters:
    ///   - timeout: how long the broker waits for a reply (default 25 s, the
    ///     D-Bus convention; at most the broker's `--max-request-timeout`).
    ///   - source: the `source` attribute (default: the client name).
    ///   - key: (1.3) for a service served by a queue group: the requests of
    ///     one key go to one member (as `publish(_:from:source:id:key:retain:)`'s).
    /// - Throws: `.noResponders` (nobody serves the type, or may, or can take
    ///   it: said at once), `.noReply` (every server it reached went away
    ///   without replying), `.timeout`, `.serviceError` (the server answered
    ///   with an error: its text), `.decodingFailed` (the reply is not an
    ///   `R.Reply`), `.invalidName`, `.encodingFailed`, `.protocolError`
    ///   (e.g. `forbidden`, `limit`), `.unavailable`, `.connectionLost`,
    ///   `.closed`, `.cancelled`.
    public func request<R: BusRequest>(_ request: R, timeout: Duration = .seconds(25), source: String? = nil, key: String? = nil) async throws(EventBusError) -> R.Reply {
        try await answer(to: request, timeout: timeout, source: source, key: key).reply
    }

    /// (1.3) As `request(_:timeout:source:key:)`, with who answered (the
    /// server's pid, uid, gid: check them before trusting the reply).
    public func answer<R: BusRequest>(to request: R, timeout: Duration = .seconds(25), source: String? = nil, key: String? = nil) async throws(EventBusError) -> Answer<R.Reply> {
        let type = try R.validatedRequestType().name
        let key = try Self.validate(key: key)
        let data = try encode(request, type: type)
        let server = try await ask(type: type, data: data, timeout: timeout, source: source, key: key)
        do {
            return Answer(reply: try core.configuration.decoder.decode(R.Reply.self, from: Data(server.data)), server: server)
        } catch {
            throw .decodingFailed(type: type, reason: "the reply: " + RawEvent.describe(error))
        }
    }

    /// (1.3) Asks with a request type given at run time and any `Encodable`
    /// payload; the reply raw (`ServerReply.data` is its JSON).
    /// - Throws: as `request(_:timeout:source:key:)`.
    public func request(type: String, data: some Encodable, timeout: Duration = .seconds(25), source: String? = nil, key: String? = nil) async throws(EventBusError) -> ServerReply {
        let type = try Self.validate(type: type)
        let key = try Self.validate(key: key)
        return try await ask(type: type, data: try encode(data, type: type), timeout: timeout, source: source, key: key)
    }

    private func ask(type: String, data: JSONText, timeout: Duration, source: String?, key: String?) async throws(EventBusError) -> ServerReply {
        let (seconds, attoseconds) = timeout.components
        let milliseconds = UInt64(max(0, seconds)) &* 1000 &+ UInt64(max(0, attoseconds)) / 1_000_000_000_000_000
        let frame = ClientRequest.request(type: type, source: source, key: key, timeout: max(1, milliseconds), data: data)
        let slot = ReplySlot<Reply>()
        let reply = try await slot.wait { completion in
            core.changeOffThread { state in
                guard !slot.isCancelled else { return Step() }
                return state.ask(frame, completion)
            }
        }
        switch RequestAnswer(reply) {
        case .answered(let server): return server
        case .serviceError(let message, _): throw .serviceError(type: type, message: message)
        case .noResponders: throw .noResponders(type: type)
        case .noReply(let message): throw .noReply(type: type, reason: message)
        case .timedOut: throw .timeout(type: type)
        case .refused: throw EventBusError(errorReply: reply)
        }
    }
}
