// Options of an `EventBus`: which socket, the `hello` fields, reconnect
// backoff, what publishing does while disconnected, local buffering.
//
// Before editing: `ReconnectPolicy.delay(afterFailures:random:)` is pure so it
// can be tested; the reader thread (BusCore.swift) is its only runtime caller.
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Foundation

extension EventBus {
    /// How an `EventBus` connects and behaves. Every field has a default.
    public struct Configuration: Sendable {
        /// Which socket: `.path(P)` (`--socket`), `.system`, `.user`, or
        /// `.automatic`: `$EVENTBUS_SOCKET`, else the user bus when
        /// `XDG_RUNTIME_DIR` is set and the process is not root, else the
        /// system bus (PROTOCOL.md "Transport").
        public var bus: BusSelection
        /// The `hello` `client` name (1-64 bytes of `A-Z a-z 0-9 _ . - :`),
        /// shown as the `source` of events that set none. Default: the process
        /// name with other bytes removed.
        public var clientName: String?
        /// The `hello` `overflow` option: what the broker does when this
        /// connection falls 8 MiB (its `--max-outbound`) behind. nil (the
        /// default) sends none, so the broker's default applies: (1.2)
        /// `wait`, flow control: a publisher of this uid is held until this
        /// connection has room, so an observer that keeps up on average
        /// loses nothing, and one that reads steadily but slower than the
        /// publisher slows it to its pace (PROTOCOL.md "Flow control (1.2)";
        /// a 1.1 broker applies `drop-new`). `.dropOld` suits a monitor
        /// that prefers the newest events to slowing anyone down.
        public var overflow: OverflowPolicy?
        /// When and how often to reconnect after the broker goes away.
        public var reconnect: ReconnectPolicy
        /// What `publish` does while there is no connection.
        public var whileDisconnected: DisconnectedPublishing
        /// (1.2) Events all local observers and streams of this bus together
        /// may have waiting (an event queued for two registrations counts
        /// twice). When reached, the bus stops reading its socket until they
        /// are down to half: the broker then holds the publishers (flow
        /// control) instead of this process's memory growing. Nothing is
        /// dropped locally for a registration that keeps taking events; the
        /// buffer may pass the limit by the events of one 64 KiB read.
        public var bufferLimit: Int
        /// (1.2) Bytes all waiting events together may take, counted as
        /// `data` plus 128 bytes each; as `bufferLimit`, whichever is reached first.
        public var bufferLimitBytes: Int
        /// (1.2) How long a local observer or stream may take nothing while
        /// the buffer is full before it is *behind*: its queue stops counting
        /// (the bus reads on for the others) and it loses new events until it
        /// has taken every queued one; then one `BusNotice.droppedLocally`
        /// reports the count. The broker's `--stall-timeout` plays the same
        /// part between connections (PROTOCOL.md "Flow control (1.2)").
        public var localStallTimeout: Duration
        /// How often the reader looks for observers that were deallocated
        /// without cancelling, to unsubscribe their patterns at the broker.
        public var sweepInterval: Duration
        /// Largest incoming frame in bytes; longer ones are skipped. Events may
        /// exceed the broker's 1 MiB request limit by their envelope, so the
        /// default is 64 MiB.
        public var maxIncomingFrameBytes: Int
        /// (Issue 34) Events `EventBus.enqueue` may have waiting for the
        /// bus's writer (while the broker holds this connection); past it,
        /// `enqueue` throws `.unavailable` instead of queueing more.
        public var maxEnqueued: Int
        /// (1.3) Requests one serving registration may have waiting for its
        /// handler; past it a request is answered at once with a
        /// `service_error` ("busy") instead of waiting for its deadline.
        public var maxQueuedRequests: Int
        /// Encodes typed payloads. Output is compacted onto one line if it is not.
        public var encoder: JSONEncoder
        /// Decodes typed payloads.
        public var decoder: JSONDecoder
        /// The environment used to resolve `.automatic` (default: this process's).
        public var environment: [String: String]

        /// - Parameters: see the properties; all have defaults.
        public init(
            bus: BusSelection = .automatic,
            clientName: String? = Configuration.defaultClientName(),
            overflow: OverflowPolicy? = nil,
            reconnect: ReconnectPolicy = .standard,
            whileDisconnected: DisconnectedPublishing = .wait(upTo: .seconds(5), maxWaiting: 1000),
            bufferLimit: Int = 10_000,
            bufferLimitBytes: Int = 16 << 20,
            localStallTimeout: Duration = .seconds(1),
            sweepInterval: Duration = .milliseconds(250),
            maxIncomingFrameBytes: Int = 64 << 20,
            maxEnqueued: Int = 10_000,
            maxQueuedRequests: Int = 1024,
            encoder: JSONEncoder = JSONEncoder(),
            decoder: JSONDecoder = JSONDecoder(),
            environment: [String: String] = ProcessEnvironment.variables()
        ) {
            self.bus = bus
            self.clientName = clientName
            self.overflow = overflow
            self.reconnect = reconnect
            self.whileDisconnected = whileDisconnected
            self.bufferLimit = bufferLimit
            self.bufferLimitBytes = bufferLimitBytes
            self.localStallTimeout = localStallTimeout
            self.sweepInterval = sweepInterval
            self.maxIncomingFrameBytes = maxIncomingFrameBytes
            self.maxEnqueued = maxEnqueued
            self.maxQueuedRequests = maxQueuedRequests
            self.encoder = encoder
            self.decoder = decoder
            self.environment = environment
        }

        /// The process name reduced to the bytes a `client` name allows,
        /// at most 64; nil if nothing is left.
        public static func defaultClientName() -> String? {
            let name = ProcessInfo.processInfo.processName
            let kept = name.utf8.filter { EventType.isSegmentByte($0) || $0 == 0x2E }.prefix(64)
            return kept.isEmpty ? nil : String(decoding: kept, as: UTF8.self)
        }
    }

    /// Reconnecting with exponential backoff: after the n-th failed attempt in
    /// a row, wait `initialDelay * multiplier^(n-1)`, capped at `maximumDelay`,
    /// each delay shortened by up to `jitter` (a fraction) at random so many
    /// clients do not return in step when a broker restarts.
    public struct ReconnectPolicy: Equatable, Sendable {
        /// Whether to reconnect at all; false closes the bus on the first loss.
        public var enabled: Bool
        /// Wait before the first attempt after a loss.
        public var initialDelay: Duration
        /// The longest wait between attempts.
        public var maximumDelay: Duration
        /// Growth of the wait per failed attempt (at least 1).
        public var multiplier: Double
        /// Fraction 0...1 of each wait that is taken off at random.
        public var jitter: Double
        /// Failed attempts in a row before giving up and closing; nil: never give up.
        public var maxAttempts: Int?

        /// - Parameters: see the properties; `multiplier` is raised to at least
        ///   1 and `jitter` clamped to 0...1.
        public init(enabled: Bool = true, initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(5), multiplier: Double = 2, jitter: Double = 0.2, maxAttempts: Int? = nil) {
            self.enabled = enabled
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.multiplier = max(1, multiplier)
            self.jitter = min(1, max(0, jitter))
            self.maxAttempts = maxAttempts
        }

        /// 50 ms, doubling, at most 5 s, 20 % jitter, forever.
        public static let standard = ReconnectPolicy()
        /// Do not reconnect: the first connection loss closes the bus.
        public static let never = ReconnectPolicy(enabled: false)

        /// The wait before attempt number `failures + 1` (attempt 1 follows the loss).
        /// - Parameters:
        ///   - failures: attempts that failed in a row so far (0 right after the loss).
        ///   - random: a number in 0...1 that picks how much jitter is taken off.
        package func delay(afterFailures failures: Int, random: Double) -> Duration {
            let initial = initialDelay.seconds
            let cap = maximumDelay.seconds
            var seconds = initial
            var step = 0
            while step < failures && seconds < cap {
                seconds *= multiplier
                step += 1
            }
            seconds = min(seconds, cap)
            seconds -= seconds * jitter * min(1, max(0, random))
            return .nanoseconds(Int64(seconds * 1e9))
        }
    }

    /// What `publish` does while the bus has no connection.
    public enum DisconnectedPublishing: Equatable, Sendable {
        /// Throw `EventBusError.unavailable` at once.
        case fail
        /// Wait for the reconnect at most `upTo`, with at most `maxWaiting`
        /// publishes waiting; beyond either, throw `EventBusError.unavailable`.
        case wait(upTo: Duration, maxWaiting: Int)
    }
}

extension Duration {
    /// The duration in seconds as a `Double`.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded up, clamped to `Int32` for poll(2).
    var pollMilliseconds: Int32 {
        let ms = (seconds * 1000).rounded(.up)
        return ms >= Double(Int32.max) ? Int32.max : Int32(max(0, ms))
    }
}
