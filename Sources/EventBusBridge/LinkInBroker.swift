// The link to NATS inside eventbusd (`--bridge`, issue 36), in two parts:
// the requests on the broker's own loop (`RequestPart`, attached with
// `BrokerServer.attach`), events and queue groups on a thread of their own
// (`BridgeThread`). Each part is the same `Bridge` and `BridgeLoop` as
// eventbus-bridge, with its half of the settings
// (`BridgeConfiguration.requestPart`/`eventPart`), its own socketpair to the
// broker as the bridge user and its own NATS connection; they share one
// bridge instance (the hello's id, so neither takes the other for a second
// bridge of the node) and one status file.
//
// Why two parts (docs/BENCHMARKS.md "Requests across machines"): a request
// is one small frame each way, and on a thread of its own the link woke
// twice per round trip on each machine besides the broker (8 wake-ups in all
// that NATS does not have); on the loop the request goes to NATS in the wake-up
// that read it, and a NATS reply wakes the broker's thread alone. Events are
// the opposite: a flood wants the second core, and the link on the loop made
// the whole broker slower (case 9, 136k -> 100k events/s), so they keep the
// thread.
//
// Before editing: `RequestPart.turn` runs on the broker's loop thread and
// never blocks (`BridgeLoop.turn(wait: false)`); `stop` runs after the
// broker's loop has returned. With both parts the thread writes the status
// file and takes the request counters (and whether that part's NATS link is
// up: `link` is "up" when both are) from the part on the loop through a
// Mutex once a second; with requests alone the loop part writes it.
import EventBusLog
@_spi(Package) import EventBusSystem
import Synchronization

package final class LinkInBroker {
    /// The request part, to attach to the broker's loop (nil without request patterns).
    package let requests: RequestPart?
    private let thread: BridgeThread?

    /// Starts both parts of `configuration` (the thread at once; the request
    /// part connects, and runs when the broker's loop turns it).
    /// - Parameters:
    ///   - endpoint: gives a new socketpair end whose other end the broker admits as the bridge user.
    ///   - requestEndpoint: the same for the request part, whose broker end the
    ///     loop knows as its attachment's (the hand-over); `endpoint` when nil.
    /// - Throws: `SystemError` when an eventfd or an epoll set cannot be made.
    package init(configuration: BridgeConfiguration, endpoint: BusEndpoint, requestEndpoint: BusEndpoint? = nil, logger: Logger,
                 statusPath: String?) throws(SystemError) {
        let instance = BridgeThread.randomInstance()
        let eventPart = configuration.eventPart
        let requests = try configuration.requestPart.map { part throws(SystemError) in
            // One warning about a NATS server without credentials, listing the whole link's patterns.
            try RequestPart(configuration: part, bridgeInstance: instance, endpoint: requestEndpoint ?? endpoint, logger: logger,
                            statusPath: eventPart == nil ? statusPath : nil, warnFor: eventPart == nil ? .some(configuration) : .some(nil))
        }
        self.requests = requests
        let counters = requests?.counters
        thread = try eventPart.map { part throws(SystemError) in
            try BridgeThread(configuration: part, bridgeInstance: instance, endpoint: endpoint, logger: logger, statusPath: statusPath,
                             warnFor: configuration) { status in
                guard let counters else { return }
                let (requests, linkUp) = counters.value.withLock { $0 }
                status.requests = requests
                status.linkUp = status.linkUp && linkUp
            }
        }
    }

    /// Stops both parts (each gives NATS up to two seconds for what it holds).
    package func stop() {
        thread?.stop()
        requests?.stop()
    }

    /// The request part's counters and whether its NATS link is up, handed
    /// to the thread once a second (the status's `link` is up when both are).
    final class SharedCounters: Sendable {
        let value = Mutex<(requests: RemoteRequests.Counters?, linkUp: Bool)>((nil, false))
    }

    /// The requests across machines, run by the broker's loop.
    package final class RequestPart {
        private let loop: BridgeLoop
        private var writer: StatusWriter
        /// Its request counters, as of its last second, for the thread's status file.
        let counters = SharedCounters()

        init(configuration: BridgeConfiguration, bridgeInstance: String, endpoint: BusEndpoint, logger: Logger, statusPath: String?,
             warnFor: BridgeConfiguration??) throws(SystemError) {
            let bridge = Bridge(configuration: configuration, bridgeInstance: bridgeInstance, logger: logger, warnFor: warnFor)
            loop = try BridgeLoop(bridge: bridge, endpoint: endpoint, stop: nil, logger: logger, connectInBackground: true)
            writer = StatusWriter(path: statusPath, logger: logger)
            loop.start()
        }

        /// Readable while the part has work (an epoll set; wait on it level-triggered).
        package var descriptor: FileDescriptor { loop.descriptor }
        /// When `turn` must run even with nothing readable (monotonic ns).
        package var nextDeadline: Int64 { loop.nextDeadline }

        /// Does what is ready without blocking: reads, writes, timers.
        /// `handedOver`: the broker wrote to this part's bus socket (read it
        /// without asking the part's epoll set; anything else ready keeps the
        /// set readable for the loop's next wait).
        /// - Returns: whether it wrote to the broker (the loop reads that in the same pass).
        package func turn(handedOver: Bool = false) -> Bool {
            _ = loop.turn(wait: false, busReadable: handedOver) { status in
                counters.value.withLock { $0 = (status.requests, status.linkUp) }
                _ = writer.write(status)
            }
            return loop.wroteToBus
        }

        func stop() {
            loop.stop()
            writer.remove()
        }
    }
}
