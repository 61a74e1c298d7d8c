// The values the client state machine hands out and keeps (ClientState.swift):
// the `Step` of bytes and effects each change returns, the requests waiting
// for their reply (`LibraryRequest`), the link state, the registrations of one pattern.
//
// Before editing: effects are performed by `BusCore.perform` with no lock
// held, in order; a new effect needs its case there (and in the tests'
// effect runner, ClientStateTests.perform).
@_spi(Package) import EventBusProtocol

/// Called once with the outcome of a request.
typealias Completion<T> = @Sendable (Result<T, EventBusError>) -> Void

/// A publish on its way to the broker.
struct OutgoingPublish: Sendable {
    var type: String
    /// One line of valid JSON.
    var data: JSONText
    var source: String?
    var id: String?
    /// (1.3) The queue-group key: events with one key go to one member of
    /// each group (validated, 1-255 bytes).
    var key: String? = nil
    /// (1.1) Keep it as the retained event of its type.
    var retain = false
    /// The local observer that triggered it: not notified (`publish(_:from:)`).
    var exclude: (AnyObject & Sendable)?
    var completion: Completion<PublishReceipt>
    /// Whether its caller stopped waiting (task cancelled): then it is not
    /// written, if it was not yet (`ReplySlot`).
    var isCancelled: @Sendable () -> Bool = { false }

    /// The request that carries it.
    var request: ClientRequest { .publish(type: type, source: source, id: id, key: key, retain: retain ? true : nil, data: data) }
}

/// What to do after a state change, outside the lock.
struct Step {
    /// Bytes to write to the connection (empty: nothing).
    var write: [UInt8] = []
    var effects: [Effect] = []
}

/// An effect of a state change.
enum Effect {
    /// Hand `event` to each sink.
    case deliver(RawEvent, [any EventSink])
    /// Hand a just-published event to local sinks, then complete the publish.
    case published(RawEvent, [any EventSink], delivered: Int, Completion<PublishReceipt>)
    /// Complete a `ping` or `stats` request with its reply.
    case reply(Completion<Reply>, Result<Reply, EventBusError>)
    /// Fail a publish.
    case failPublish(Completion<PublishReceipt>, EventBusError)
    /// End these sinks.
    case finish([any Registration], EventBusError?, discardQueued: Bool)
    /// Report to `notices()` streams.
    case notice(BusNotice)
    /// The first connection is up (or failed): resume `EventBus.connect`.
    case firstConnect(Completion<ConnectionInfo>, Result<ConnectionInfo, EventBusError>)
    /// Wake the reader thread so it recomputes its sleep (a publish started waiting).
    case wakeReader
    /// Close the connection: it can no longer be trusted to be in step.
    case dropConnection
    /// The bus closed for good (`error` nil after `close()`): resume `run()`.
    case closed(EventBusError?)
    /// (1.3) Hand a request to a serving registration (answered at once with
    /// an error when its queue is full).
    case serve(RequestSink, IncomingRequest)
    /// Call this (a group registration has left).
    case call(@Sendable () -> Void)
    /// (1.3) A change that writes, decided while handling a frame (the
    /// reader never writes): made later from the writer queue.
    case deferred(@Sendable (inout ClientState) -> Step)
    /// (1.1) Complete a `current(_:)` request.
    case completeCurrent(Completion<RawEvent?>, Result<RawEvent?, EventBusError>)
    /// (1.1) Attach a gap to the next event of these sinks.
    case markGap([any EventSink], BusGap)
}

/// The link to the broker.
enum Link: Equatable {
    /// No connection yet, or between attempts after a loss.
    case disconnected
    /// The handshake was written; `info` arrives with the `hello` reply.
    case connected(ConnectionInfo?)
    /// For good; `error` is nil after `close()`.
    case closed(EventBusError?)
}

/// The library's record of a request the session matches to its answer
/// (`BusSession`'s `Tag`); `hello`, subscribes and unsubscribes are the session's own.
enum LibraryRequest {
    /// (1.1) A subscribe with `last` for these registrations' initial value.
    case initial([UInt64])
    /// (1.1) A subscribe with `last` for `current(_:)`.
    case current(Completion<RawEvent?>)
    /// (1.1) The ping after a `current` subscribe (req): nothing retained if still waiting.
    case currentSentinel(Int64)
    /// (1.1) The unsubscribe after a `current` subscribe of a pattern not subscribed otherwise.
    case currentUndo
    case publish(OutgoingPublish)
    case ping(Completion<Reply>)
    case stats(Completion<Reply>)
    /// (1.3) A `request`: completed with its answer, `ok` or `error` (`RequestAnswer`).
    case ask(Completion<Reply>)
    /// (1.3) A `reply` to a request we served: its `ok` says whether it was accepted; nobody waits.
    case replied
}

/// The registrations on one pattern.
struct PatternEntry {
    let pattern: Pattern
    /// Registrations that receive its events.
    var sinks: [UInt64: any EventSink] = [:]
    /// (1.1) Registrations made with `initial: .last`, waiting for the
    /// answer to their subscribe with `last`: they join `sinks` then, just
    /// before their retained events, so nothing older reaches them after.
    var waitingInitial: [UInt64: any EventSink] = [:]

    var isEmpty: Bool { sinks.isEmpty && waitingInitial.isEmpty }
}
