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
//
// Who pays (bridgerr): an attachment's turns are the loop's time too, and
// outside every uid's turn. The link's request part carries other uids'
// requests to NATS and their answers back: with another uid flooding
// requests nobody imports, its turns took 38 % of the broker's samples
// (perf, row bridge-rr), charged to nobody, and a third uid's publish rate
// fell below half of idle. So the loop counts the bytes each uid's service
// wrote to attached connections (`flushPending`'s payer) and charges the
// next turns' time (the server's clock) to those uids in proportion
// (`ReadyQueue.owed`, taken off at their next service): the flooder pays
// for the link's share of its requests as it pays for the events it
// publishes. Time no uid's bytes caused (NATS's own pings, a write made on
// EPOLLOUT) is nobody's.
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
        var turned = false
        let start = clock.monotonic()
        for (i, attachment) in attachments.enumerated() where attachmentsReady[i] || now >= attachment.nextDeadline() {
            attachmentsReady[i] = false
            turned = true
            if attachment.turn(handedOver) { wrote = true }
        }
        // A pass that turned none leaves the bytes written to it for the
        // turn that will read them (charged then, not dropped unpaid now).
        if turned { chargeAttachmentTime(clock.monotonic() - start) }
        return wrote
    }

    /// Who pays (bridgerr): `spent` ns of attachment turns are taken off the
    /// slices of the uids whose service wrote to attached connections since
    /// the last turn, in proportion to the bytes (a flood of requests the link
    /// carries over NATS is paid by the flooder, as the events it publishes
    /// are, issue 37). Time no uid's bytes caused (NATS's own traffic, a
    /// write made on EPOLLOUT) is nobody's.
    func chargeAttachmentTime(_ spent: Int64) {
        guard !attachmentFeeders.isEmpty else { return }
        let total = attachmentFeeders.values.reduce(0, +)
        if attachmentCharges.count > 1024 { attachmentCharges.removeAll() }
        for (uid, bytes) in attachmentFeeders where total > 0 {
            let share = spent * Int64(bytes) / Int64(total)
            attachmentCharges[uid, default: 0] += share
            if let queue = readyQueues[uid] { queue.owed = min(queue.owed + share, BrokerServer.soleSliceNanoseconds) }
        }
        attachmentFeeders.removeAll(keepingCapacity: true)
    }

    /// Nanoseconds (the server's clock) of attachment turns charged to `uid`
    /// so far; on the loop's thread.
    package func attachmentCharged(uid: UInt32) -> Int64 { attachmentCharges[uid] ?? 0 }

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
