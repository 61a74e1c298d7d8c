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
@_spi(Package) import EventBusSystem

/// Work the broker's loop runs on its thread (`BrokerServer.attach`).
package struct LoopAttachment {
    /// Readable while `turn` has something to do.
    package let descriptor: FileDescriptor
    /// When `turn` must run even if `descriptor` is not readable (system monotonic ns).
    package let nextDeadline: () -> Int64
    /// Does what is ready; must not block.
    package let turn: () -> Void

    package init(descriptor: FileDescriptor, nextDeadline: @escaping () -> Int64, turn: @escaping () -> Void) {
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

    /// Turns the attachments that are ready or due.
    func turnAttachments() {
        guard !attachments.isEmpty else { return }
        let now = Clock.monotonicNanoseconds()
        for (i, attachment) in attachments.enumerated() where attachmentsReady[i] || now >= attachment.nextDeadline() {
            attachmentsReady[i] = false
            attachment.turn()
        }
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
