// What a step of the broker asks the server to do: the connections that got
// bytes to write, and the effects to perform (reading paused or resumed,
// connections to close, notices to log). Every public `Broker` method that
// changes state returns one `BrokerStep`; the server applies it in one place
// (`BrokerServer.apply`), and Core tests assert on it directly. This is the
// client's `ClientState.Step` model (STYLE.md "Concurrency").
//
// Before editing: effects are collected while a step runs (`Broker.current`)
// and handed out by `Broker.finishStep`, which every public step method
// returns through; `output` lists each connection once per step.

/// When the server closes a connection the broker has given up on.
package enum CloseTiming: Equatable, Sendable {
    /// Close the socket now: the broker has forgotten the connection and
    /// released its queue (its subscriptions are gone).
    case now
    /// Stop reading it and write its queue; once the queue is written the
    /// broker returns `.close(id, .now)` from `didWrite`. (EOF without
    /// subscriptions, PROTOCOL.md "Semantics"; graceful shutdown.)
    case afterFlush
    /// Stop reading it, write what the socket takes now (a final error frame
    /// is queued last), then close it whether all was written or not: call
    /// `Broker.close`. (`overflow: disconnect`.)
    case afterWrite
}

/// One thing the server must do, in the order the broker decided it.
package enum BrokerEffect: Equatable, Sendable {
    /// Stop reading requests from it (its queue, its uid's queues or all
    /// queues are over their outbound limit, or its uid is over an inbound
    /// budget: PROTOCOL.md "Quotas (1.1)").
    case pauseReading(ConnectionID)
    /// Read it again (every reason to pause it has gone). Input it holds
    /// already (`Connection.hasBufferedInput`) is handled by the next
    /// `receive`, an empty chunk will do.
    case resumeReading(ConnectionID)
    /// Close it, now or once written (see `CloseTiming`).
    case close(ConnectionID, CloseTiming)
    /// Log this.
    case notice(BrokerNotice)
}

/// Something the server may log; produced only on state changes, never per event.
package enum BrokerNotice: Equatable, Sendable {
    /// A connection began losing events (its next `dropped` notice is pending).
    case startedDropping(ConnectionID, pid: Int32)
    /// A connection hit a limit (`limit` error sent).
    case limitReached(ConnectionID, pid: Int32, message: String)
    /// (1.2) A connection that held publishers or replayed at its pace took
    /// no byte for the stall timeout: it is behind (PROTOCOL.md "Flow control").
    case stalled(ConnectionID, pid: Int32)
    /// A connection is being closed under `overflow: disconnect`.
    case slowConsumerDisconnected(ConnectionID, pid: Int32)
    /// The policy denied a request (`forbidden` sent); `line` names the uid,
    /// pid, client and rule. Already rate-limited: at most one per uid and
    /// rule per minute (Broker+Policy.swift).
    case denied(ConnectionID, pid: Int32, uid: UInt32, line: String)
    /// A new policy is in force; `revokedSubscriptions` were removed.
    case policyReloaded(generation: UInt64, revokedSubscriptions: Int)
}

/// The result of one broker step. Example: a publisher on connection 7 whose
/// frames filled its own queue with replies, and a subscriber on 3 that got
/// the events: `BrokerStep(output: [3, 7], effects: [.pauseReading(7)])`.
package struct BrokerStep: Equatable, Sendable {
    /// Connections whose queue got new bytes, each once, in the order they
    /// got them: write them (after the current batch of input).
    package var output: [ConnectionID] = []
    /// Effects in the order they were decided; apply them in this order.
    package var effects: [BrokerEffect] = []

    package init(output: [ConnectionID] = [], effects: [BrokerEffect] = []) {
        self.output = output
        self.effects = effects
    }

    /// Whether there is nothing to do.
    package var isEmpty: Bool { output.isEmpty && effects.isEmpty }
}

extension Broker {
    /// Lists the connection in this step's output (once).
    @inline(__always)
    func markOutput(_ connection: Connection) {
        if connection.output.list(inStep: stepNumber) {
            current.output.append(connection.id)
        }
    }

    func notice(_ notice: BrokerNotice) {
        current.effects.append(.notice(notice))
    }

    /// Ends the running step: hands out what it collected.
    func finishStep() -> BrokerStep {
        let step = current
        current = BrokerStep()
        stepNumber &+= 1
        return step
    }
}
