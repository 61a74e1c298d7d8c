// Other work run on the broker's own loop thread: the NATS link's requests
// inside eventbusd (`--bridge` with request patterns; issue 36, docs/BRIDGE.md
// "Running it"). An attachment is an epoll set of its own (or any descriptor
// that is readable while it has work) plus a deadline; the loop waits on the
// descriptor beside its connections and calls `turn` when it is readable or
// the deadline has come. So a request the loop hands the link over their
// socketpair is sent to NATS in the same wake-up, and a NATS reply wakes this
// thread alone: no second thread to wake on either side of the round trip.
//
// Before editing: `turn` runs on the loop thread between epoll batches and
// must not block (a `BridgeLoop.turn(wait: false)` does not); it talks to the
// broker only through sockets and the handoff queue, never its state. The
// descriptor is registered level-triggered, so work `turn` leaves behind is
// seen on the next wait. Deadlines are on the system monotonic clock
// (`Clock.monotonicNanoseconds`), the attachment's own, not `ServerClock`
// (which tests move by hand): a test's hand clock moves the broker's timers,
// not an attachment's. Attach before `run`.
//
// The hand-over (issue 36, third pass): an attachment that is a client of
// this broker holds one end of a socketpair whose other end was handed with
// `attached` (`ConnectionHandoff.connect`). When the loop has written to such
// a connection, its next pass turns the attachments without an epoll wait
// (which would only have said that the attachment's descriptor became
// readable), at most every other pass, so the rest of epoll's news waits one
// pass at most; when a turn says it wrote to the broker, the loop reads those
// connections in the same pass (`markReady`: in their uid's turn, as any
// input) instead of learning it from the next wait. A request across
// machines crosses the broker with one epoll wait fewer each way; the wait
// that sleeps is unchanged. A broker without attachments pays one Bool test
// per pass.
@_spi(Package) import EventBusSystem

/// Work the broker's loop runs on its thread (`BrokerServer.attach`).
package struct LoopAttachment {
    /// Readable while `turn` has something to do.
    package let descriptor: FileDescriptor
    /// When `turn` must run even if `descriptor` is not readable (system monotonic ns).
    package let nextDeadline: () -> Int64
    /// Does what is ready; must not block. Its argument is true when the
    /// loop has written to its connection since it last turned (the
    /// hand-over: that connection has input, whether or not anything else
    /// is ready). Returns whether it wrote to the broker (to a connection
    /// handed with `attached`: read in the same pass).
    package let turn: (_ handedOver: Bool) -> Bool

    package init(descriptor: FileDescriptor, nextDeadline: @escaping () -> Int64, turn: @escaping (_ handedOver: Bool) -> Bool) {
        self.descriptor = descriptor
        self.nextDeadline = nextDeadline
        self.turn = turn
    }
}

extension BrokerServer {
    /// Attachment `i`'s epoll token (below the handoff's, above any connection id).
    static func attachmentToken(_ i: Int) -> UInt64 { .max - 2_000_000 - UInt64(i) }

    /// Runs `attachment` on this loop from `run` on (call before `run`).
    package func attach(_ attachment: LoopAttachment) {
        attachments.append(attachment)
        attachmentsReady.append(false)
    }

    /// Registers every attachment's descriptor (from `run`).
    func registerAttachments() throws(SystemError) {
        for (i, attachment) in attachments.enumerated() {
            try epoll.add(attachment.descriptor, events: .readable, token: BrokerServer.attachmentToken(i))
        }
    }

    /// Marks the attachment of `token` ready; false when `token` is not one.
    func markAttachmentReady(token: UInt64) -> Bool {
        let index = BrokerServer.attachmentToken(0) &- token
        guard index < UInt64(attachments.count) else { return false }
        attachmentsReady[Int(index)] = true
        return true
    }

    /// Turns the attachments that are ready or due (`handedOver`: this pass
    /// skipped its wait for them). - Returns: whether one wrote to the broker.
    func turnAttachments(handedOver: Bool) -> Bool {
        guard !attachments.isEmpty else { return false }
        let now = Clock.monotonicNanoseconds()
        var wrote = false
        for (i, attachment) in attachments.enumerated() where attachmentsReady[i] || now >= attachment.nextDeadline() {
            attachmentsReady[i] = false
            if attachment.turn(handedOver) { wrote = true }
        }
        return wrote
    }

    /// Whether this pass skips its epoll wait: the loop wrote to an
    /// attachment's connection since the last wait, and the last pass did
    /// not skip. Then every attachment is turned (a turn with nothing to do
    /// costs its own non-blocking look).
    func handOverToAttachments() -> Bool {
        let handOver = attachedPeerWritten && !skippedWait
        attachedPeerWritten = false
        skippedWait = handOver
        if handOver {
            for i in attachmentsReady.indices { attachmentsReady[i] = true }
        }
        return handOver
    }

    /// An attachment wrote to the broker: its connections are read in this pass.
    func markAttachedPeersReady() {
        for record in attachedPeers { markReady(record) }
    }

    /// Milliseconds until the earliest attachment deadline (-1: none; nil without attachments).
    func attachmentTimeout() -> Int32? {
        guard !attachments.isEmpty else { return nil }
        var deadline: Int64 = .max
        for attachment in attachments { deadline = min(deadline, attachment.nextDeadline()) }
        if deadline == .max { return -1 }
        let now = Clock.monotonicNanoseconds()
        return Int32(clamping: max(0, (deadline - now + 999_999) / 1_000_000))
    }
}
