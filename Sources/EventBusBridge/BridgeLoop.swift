// The bridge's one thread: an epoll loop over the bus socket, the NATS
// socket and the signalfd. A read on one socket is framed, handed to its
// session (`LocalBus` for the bus, the `ClientDriver`'s state machine for
// NATS), the reports and effects to `Bridge`, which queues on the other
// side; the loop then writes both outboxes before it waits again. So a
// batch goes from one socket to the other with no thread switch, no lock
// and no wake-up; (issue 36) an event frame of the broker's plain shape is
// exported within the read itself, its message written straight into the
// NATS outbox from the read's bytes (`feed`, `ExportFrame`). The loop also
// reconnects the bus (50 ms doubling to 5 s,
// jittered, forever; NATS reconnects inside its driver), writes the status
// once a second through its caller, and on SIGTERM/SIGINT stops.
//
// Flow control (PROTOCOL.md "Flow control (1.2)"), both ways, by not reading:
// - exports: while the NATS link is up and its outbox holds half its bound
//   (`--buffer-events`/`--buffer-bytes`), the bus socket is not read. The
//   broker then holds the local publishers (the bridge said `overflow:
//   wait`; it holds other uids' publishers only with `allow hold`), instead
//   of the outbox dropping exports. Reading resumes below a quarter. While
//   the link is down the bus is read on and exports are held up to the bound,
//   then dropped and reported (a NATS outage outlasts the broker's stall timeout).
// - imports: while more than `importPauseBytes` of imports wait for the bus
//   socket (the broker holds the bridge for a slow local subscriber), the
//   NATS socket is not read; below `importResumeBytes` it is read again. So
//   an import is never dropped for want of room: beyond the bridge's bytes,
//   the kernel's and then nats-server's buffers carry the burst, and past
//   those NATS's own slow-consumer rule applies (it closes the connection;
//   the bridge reconnects).
//
// Three ways to run it (docs/BRIDGE.md "Running it"): eventbus-bridge runs it on
// its main thread, reaching the bus by its socket path and stopped by its
// signals (`BusEndpoint.path`, `StopSource.signals`); eventbusd with
// `--bridge` runs its events and groups on a thread of its own
// (BridgeThread.swift), reaching its own broker through a socketpair the
// broker admits with the bridge user's credentials (`BusEndpoint.connector`),
// stopped by an eventfd; and its requests on the broker's own loop
// (LinkInBroker.swift): no stop source, the broker's epoll waits on this
// loop's epoll set (`descriptor`) and calls `turn(wait: false)`.
//
// Before editing: only this file touches descriptors; `LocalBus` and
// `Bridge` are decisions. Epoll registrations follow what the loop wants
// before each wait (`register`); the NATS socket is registered again
// whenever the driver's `generation` changes (a new connection).
import EventBusCommandLine
import EventBusLog
import EventBusNATS
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// How the loop reaches the bus.
package enum BusEndpoint: Sendable {
    /// The broker's socket path (eventbus-bridge).
    case path(String)
    /// `connect` gives a new connected, non-blocking socket each time it is
    /// called (eventbusd: one end of a socketpair whose other end its broker
    /// adopts); `name` is shown in logs and the status (`bus_path`).
    case connector(name: String, connect: @Sendable () throws(SystemError) -> FileDescriptor)

    /// What logs and the status call it.
    package var name: String {
        switch self {
        case .path(let path): path
        case .connector(let name, _): name
        }
    }

    func connect() throws(SystemError) -> FileDescriptor {
        switch self {
        case .path(let path): try FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: true)
        case .connector(_, let connect): try connect()
        }
    }
}

/// What stops the loop (none for a loop another loop turns: its owner calls `stop`).
package enum StopSource {
    /// SIGTERM or SIGINT on this signalfd (SIGHUP is logged and ignored).
    case signals(SignalDescriptor)
    /// `signal()` on this eventfd, from another thread; `run` then returns 0.
    case wakeup(Wakeup)

    var descriptor: FileDescriptor {
        switch self {
        case .signals(let signals): signals.descriptor
        case .wakeup(let wakeup): wakeup.descriptor
        }
    }
}

package final class BridgeLoop {
    private var bridge: Bridge
    private var bus: LocalBus
    private var nats: ClientDriver
    private let epoll: Epoll
    private let stopSource: StopSource?
    /// When the counters are next handed to `everySecond`.
    private var nextStatus: Int64 = 0
    private let endpoint: BusEndpoint
    private let logger: Logger

    /// Imports waiting for the bus socket above which NATS is not read, and below which it is read again.
    let importPauseBytes: Int
    let importResumeBytes: Int
    /// The NATS outbox bounds (exports pause at half, resume at a quarter).
    private let natsLimitBytes: Int
    private let natsLimitMessages: Int

    private static let signalToken: UInt64 = 0
    private static let busToken: UInt64 = 1
    private static let natsToken: UInt64 = 2
    private static let connectToken: UInt64 = 3

    // The bus socket.
    private var busSocket: FileDescriptor?
    private var busRegistered: EpollEvents?
    private let busBackoff = Backoff(initial: .milliseconds(50), maximum: .seconds(5))
    private var busFailures = 0
    private var busRetryAt: Int64 = 0
    private var splitter = FrameSplitter(maxFrameBytes: 256 << 20)
    private var readBuffer: [UInt8] = []
    private static let readBytes = 64 << 10
    /// Bytes taken from the session and not yet written.
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var busWritable: Bool { pendingOffset < pending.count }
    /// Whether the last `turn` wrote to the bus socket (the broker's loop
    /// then reads it in the same pass: BrokerServer+Attachments.swift).
    package private(set) var wroteToBus = false

    // The NATS socket's registration: the driver's generation and the events.
    private var natsRegistered: (generation: UInt64, events: EpollEvents)?

    /// Exports pause reading the bus: the bus session's flow state (it
    /// starts unpaused on each connection; `updateFlowControl` decides again).
    private(set) var exportsPaused: Bool {
        get { bus.session.flow.paused }
        set { bus.pauseReading(newValue) }
    }
    private(set) var importsPaused = false

    // Reused buffers of one turn.
    private var reports: [BusReport] = []
    private var effects: [Effect] = []

    /// - Throws: `SystemError` when epoll cannot be set up.
    /// - Parameter connectInBackground: NATS connects on a helper thread (a
    ///   loop another loop turns must not block; `BackgroundConnect`).
    package init(bridge: Bridge, endpoint: BusEndpoint, stop: StopSource?, logger: Logger, connectInBackground: Bool = false,
         importPauseBytes: Int = 4 << 20, importResumeBytes: Int = 1 << 20) throws(SystemError) {
        self.bridge = bridge
        self.logger = logger
        self.stopSource = stop
        self.endpoint = endpoint
        self.importPauseBytes = importPauseBytes
        self.importResumeBytes = importResumeBytes
        bus = LocalBus(path: endpoint.name, patterns: bridge.core.exports, servePatterns: bridge.requests.exports, watchPatterns: bridge.requests.imports, groups: bridge.groups.exports,
                      groupImports: bridge.groups.imports)
        let configuration = bridge.natsConfiguration
        natsLimitBytes = configuration.bufferLimitBytes
        natsLimitMessages = configuration.bufferLimitMessages
        nats = ClientDriver(configuration: configuration, background: connectInBackground ? try BackgroundConnect() : nil)
        epoll = try Epoll(maxEvents: 16)
        if let stop { try epoll.add(stop.descriptor, events: .readable, token: BridgeLoop.signalToken) }
        if let connected = nats.connectDescriptor { try epoll.add(connected, events: .readable, token: BridgeLoop.connectToken) }
        self.bridge.subscribe(&nats)
    }

    /// The counters now.
    package var status: BridgeStatus { bridge.status(nats: nats.state.statistics, bus: bus.status) }

    /// Connects both sides, then serves them until SIGTERM or SIGINT; calls
    /// `everySecond` with the counters once a second (and once at the start).
    /// - Returns: the signal that stopped it.
    package func run(_ everySecond: (BridgeStatus) -> Void) -> Int32 {
        start()
        while true {
            if let signal = turn(wait: true, everySecond) { return signal }
        }
    }

    /// Starts connecting both sides (`run` does it; a loop that drives the
    /// link itself calls it once, then `turn` whenever `descriptor` is
    /// readable or `nextDeadline` has come).
    package func start() {
        nats.start(&effects)
        handleEffects()
        connectBus()
    }

    /// The loop's epoll set: readable while a socket it waits on is ready, so
    /// another epoll loop can wait on it (level-triggered) and call `turn`.
    package var descriptor: FileDescriptor { epoll.descriptor }

    /// When `turn` must run even with nothing to read (monotonic ns): the
    /// status second, a bus reconnection, the NATS driver's next deadline.
    package var nextDeadline: Int64 {
        var deadline = nextStatus
        if busSocket == nil { deadline = min(deadline, busRetryAt) }
        if let natsDeadline = nats.nextDeadline { deadline = min(deadline, natsDeadline) }
        if let rewatch = bus.rewatchDeadline { deadline = min(deadline, rewatch) }  // (attacker6) a paced watch
        return deadline
    }

    /// One pass: timers, registrations, one epoll wait (until `nextDeadline`
    /// when `wait`, else none), reads, then both outboxes written.
    /// `busReadable` (the broker's loop wrote to the bus socket: its
    /// hand-over, issue 36): no epoll wait, the bus is read; what else is
    /// ready leaves the epoll set readable for the owner's next wait.
    /// - Returns: the stop signal (0 for a `.wakeup`), nil to go on.
    package func turn(wait: Bool, busReadable: Bool = false, _ everySecond: (BridgeStatus) -> Void) -> Int32? {
        wroteToBus = false
        var now = Clock.monotonicNanoseconds()
        if now >= nextStatus {
            bridge.everySecond(now: now)
            everySecond(status)
            nextStatus = now + 1_000_000_000
        }
        if busSocket == nil && now >= busRetryAt { connectBus() }
        updateFlowControl()
        register()
        var timeout: Int32 = 0
        if wait {
            now = Clock.monotonicNanoseconds()
            timeout = Int32(clamping: max(0, (nextDeadline - now + 999_999) / 1_000_000))
        }
        var busReady: EpollEvents = []
        var natsReady: EpollEvents = []
        var signalled = false
        var connectEnded = false
        if busReadable && busSocket != nil {
            busReady = .readable
        } else {
            do {
                try epoll.wait(timeoutMilliseconds: timeout) { token, events in
                    switch token {
                    case BridgeLoop.busToken: busReady = events
                    case BridgeLoop.natsToken: natsReady = events
                    case BridgeLoop.connectToken: connectEnded = true
                    default: signalled = true
                    }
                }
            } catch {
                usleep(10_000)  // epoll_wait fails only for bad arguments; do not spin
            }
        }
        if signalled, let stopSource {
            switch stopSource {
            case .signals(let signals):
                for signal in signals.readSignals() {
                    if signal == SIGHUP {
                        logger.notice("SIGHUP ignored: restart the bridge to read its settings again")
                    } else {
                        return signal
                    }
                }
            case .wakeup(let wakeup):
                wakeup.drain()
                return 0
            }
        }
        if connectEnded {
            nats.connectFinished(&effects)
            handleEffects()
        }
        if !busReady.isEmpty {
            let started = Clock.monotonicNanoseconds()
            readBus(hangup: !busReady.intersection([.hangup, .error]).isEmpty)
            let ended = Clock.monotonicNanoseconds()
            bus.paceRewatch(spent: ended - started, now: ended)  // (attacker6) a watch's list read: the next waits
        }
        if !natsReady.intersection([.readable, .hangup, .error]).isEmpty { readNATS() }
        bus.rewatchIfDue(now: Clock.monotonicNanoseconds())
        flushBus()
        flushNATS()
        nats.tick(&effects)
        handleEffects()
        return nil
    }

    /// Stops: the bus first (no new exports), then up to `flushTimeout` for
    /// NATS to take what is held, then NATS.
    package func stop(flushTimeout: Duration = .seconds(2)) {
        if let fd = busSocket {
            epoll.remove(fd)
            fd.close()
            busSocket = nil
            _ = bus.connectionClosed()
        }
        let deadline = Clock.monotonicNanoseconds() + flushTimeout.totalNanoseconds
        while nats.state.statistics.linkUp && nats.state.statistics.bufferedMessages > 0 && Clock.monotonicNanoseconds() < deadline {
            if let fd = nats.descriptor {
                var entries = [PollEntry(fd, events: nats.wantsWrite ? [.readable, .writable] : .readable)]
                _ = try? FileDescriptor.poll(&entries, timeoutMilliseconds: 10)
                if !entries[0].returned.intersection([.readable, .hangup, .error]).isEmpty { readNATS() }
            }
            flushNATS()
            nats.tick(&effects)
            handleEffects()
        }
        let held = nats.state.statistics.bufferedMessages
        if held > 0 { logger.warning("stopping with \(held) exported events not yet written to NATS: they are lost") }
        nats.close()
    }

    // MARK: Flow control and registrations

    private func updateFlowControl() {
        let statistics = nats.state.statistics
        if exportsPaused {
            if !statistics.linkUp || (statistics.bufferedBytes < natsLimitBytes / 4 && statistics.bufferedMessages < natsLimitMessages / 4) {
                exportsPaused = false
            }
        } else if statistics.linkUp && (statistics.bufferedBytes >= natsLimitBytes / 2 || statistics.bufferedMessages >= natsLimitMessages / 2) {
            exportsPaused = true
        }
        if importsPaused {
            if !bus.connected || bus.pendingBytes < importResumeBytes { importsPaused = false }
        } else if bus.connected && bus.pendingBytes >= importPauseBytes {
            importsPaused = true
        }
    }

    /// Brings the epoll registrations in line with what the loop wants now.
    private func register() {
        if let fd = busSocket {
            var wanted: EpollEvents = exportsPaused ? [] : .readable
            if busWritable { wanted.insert(.writable) }
            if busRegistered != wanted {
                do {
                    if busRegistered == nil { try epoll.add(fd, events: wanted, token: BridgeLoop.busToken) }
                    else { try epoll.modify(fd, events: wanted, token: BridgeLoop.busToken) }
                    busRegistered = wanted
                } catch {
                    busLost("epoll: \(error)")
                }
            }
        }
        if let fd = nats.descriptor {
            var wanted: EpollEvents = importsPaused ? [] : .readable
            if nats.wantsWrite { wanted.insert(.writable) }
            let generation = nats.generation
            if natsRegistered?.generation != generation || natsRegistered?.events != wanted {
                do {
                    if natsRegistered?.generation == generation {
                        try epoll.modify(fd, events: wanted, token: BridgeLoop.natsToken)
                    } else {
                        // A new connection (the old descriptor's registration went with its close).
                        do { try epoll.add(fd, events: wanted, token: BridgeLoop.natsToken) }
                        catch { try epoll.modify(fd, events: wanted, token: BridgeLoop.natsToken) }
                    }
                    natsRegistered = (generation, wanted)
                } catch {
                    logger.error("cannot poll the NATS socket: \(error)")
                }
            }
        } else {
            natsRegistered = nil
        }
    }

    // MARK: The bus socket

    private func connectBus() {
        do {
            let fd = try endpoint.connect()
            busSocket = fd
            busRegistered = nil
            splitter = FrameSplitter(maxFrameBytes: 256 << 20)
            pending = []
            pendingOffset = 0
            bus.connectionOpened()
        } catch {
            busFailures += 1
            bridge.handle(.attemptFailed(reason: error.description, failures: busFailures), path: bus.path, bus: &bus, nats: &nats)
            scheduleBusRetry()
        }
    }

    private func scheduleBusRetry() {
        let delay = busFailures == 0 ? 0 : busBackoff.delayNanoseconds(afterFailedPasses: busFailures, random: Double.random(in: 0..<1))
        busRetryAt = Clock.monotonicNanoseconds() + delay
    }

    private func busLost(_ reason: String) {
        guard let fd = busSocket else { return }
        epoll.remove(fd)
        fd.close()
        busSocket = nil
        busRegistered = nil
        pending = []
        pendingOffset = 0
        let (unconfirmed, wasGreeted) = bus.connectionClosed()
        bridge.handle(.down(reason: reason, unconfirmedImports: unconfirmed), path: bus.path, bus: &bus, nats: &nats)
        // A connection that got its hello answered was healthy: try again at once.
        busFailures = wasGreeted ? 0 : busFailures + 1
        scheduleBusRetry()
    }

    /// Reads the bus socket (a bounded number of reads, fewer once exports pause).
    private func readBus(hangup: Bool) {
        for _ in 0..<16 {
            guard let fd = busSocket else { return }
            if exportsPaused && !hangup { return }
            readBuffer.removeAll(keepingCapacity: true)
            let attempt = Result { () throws(SystemError) -> IOResult<Int> in try fd.read(appendingTo: &readBuffer, limit: BridgeLoop.readBytes) }
            switch attempt {
            case .failure(let error):
                busLost(error.errno == .connectionReset ? "the broker reset the connection" : error.description)
                return
            case .success(.wouldBlock):
                return
            case .success(.complete(0)):
                Self.finish(&splitter, &bus, &bridge, &nats, &reports)
                bus.endOfRead(&reports)
                handleReports()
                busLost("the broker closed the connection")
                return
            case .success(.complete(let count)):
                Self.feed(readBuffer.span.bytes, &splitter, &bus, &bridge, &nats, &reports)
                bus.endOfRead(&reports)
                handleReports()
                flushNATS()
                updateFlowControl()
                if count < BridgeLoop.readBytes { return }
            }
        }
    }

    // The frames of one read. (issue 36) The loop's parts are borrowed once
    // for the whole read and handed to each frame as `inout` arguments: each
    // use of a class's property is a run-time exclusivity check, and four
    // per frame cost about 400 instructions of a 4-5k export (callgrind).

    private static func feed(_ chunk: RawSpan, _ splitter: inout FrameSplitter, _ bus: inout LocalBus, _ bridge: inout Bridge,
                             _ nats: inout ClientDriver, _ reports: inout [BusReport]) {
        _ = splitter.feed(chunk) { piece in
            handle(piece, &bus, &bridge, &nats, &reports)
            return true
        }
    }

    private static func finish(_ splitter: inout FrameSplitter, _ bus: inout LocalBus, _ bridge: inout Bridge,
                               _ nats: inout ClientDriver, _ reports: inout [BusReport]) {
        splitter.finish { piece in
            handle(piece, &bus, &bridge, &nats, &reports)
            return true
        }
    }

    /// One frame from the bus: (issue 36) an event of the broker's plain
    /// shape is exported at once, written in place into the NATS outbox
    /// (`LocalBus.plainEvent`; the reports gathered before it are handled
    /// first, so the order holds); any other frame goes to the session.
    private static func handle(_ piece: SplitFrame, _ bus: inout LocalBus, _ bridge: inout Bridge,
                               _ nats: inout ClientDriver, _ reports: inout [BusReport]) {
        if case .frame(let bytes) = piece, bytes.withByteView({ frame in
            guard let event = bus.plainEvent(frame) else { return false }
            if bus.hasEvents || !reports.isEmpty {
                bus.endOfRead(&reports)
                handle(&reports, &bus, &bridge, &nats)
            }
            bridge.export(event, nats: &nats)
            return true
        }) { return }
        bus.handle(piece, &reports)
    }

    private static func handle(_ reports: inout [BusReport], _ bus: inout LocalBus, _ bridge: inout Bridge, _ nats: inout ClientDriver) {
        for report in reports { bridge.handle(report, path: bus.path, bus: &bus, nats: &nats) }
        reports.removeAll(keepingCapacity: true)
    }

    /// Writes what the session queued, as far as the socket takes it.
    private func flushBus() {
        guard let fd = busSocket else { return }
        while true {
            if pendingOffset >= pending.count {
                guard bus.hasBytesToTake else { break }
                bus.takeBytes(into: &pending)
                pendingOffset = 0
            }
            let unsent = pending  // a span of a class's property lives only during its access
            let attempt = Result { () throws(SystemError) -> IOResult<Int> in try fd.write(unsent.span.bytes.extracting(pendingOffset...)) }
            switch attempt {
            case .failure(let error):
                busLost(error.description)
                return
            case .success(.wouldBlock), .success(.complete(0)):
                bus.writerHolds(pending.count - pendingOffset)
                return
            case .success(.complete(let n)):
                pendingOffset += n
                wroteToBus = true
            }
        }
        pendingOffset = pending.count  // all written (the buffer is reused by the next take)
        bus.writerHolds(0)
    }

    private func handleReports() {
        Self.handle(&reports, &bus, &bridge, &nats)
    }

    // MARK: The NATS socket

    /// Reads NATS (a bounded number of reads, fewer once imports pause).
    private func readNATS() {
        for _ in 0..<16 {
            let more = nats.readAvailable(maxReads: 1, &effects)
            handleEffects()
            flushBus()
            updateFlowControl()
            if !more || importsPaused { return }
        }
    }

    private func flushNATS() {
        guard nats.wantsWrite else { return }
        nats.writeAvailable(&effects)
        handleEffects()
    }

    private func handleEffects() {
        guard !effects.isEmpty else { return }
        for effect in effects { bridge.handle(effect, bus: &bus, nats: &nats) }
        effects.removeAll(keepingCapacity: effects.capacity <= 4096)
    }
}
