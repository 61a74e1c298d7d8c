// What each of eventbusd's server options sets in a `ServerConfiguration`
// (issue 35: out of the executable, so that it is unit-tested): the limits
// and quotas, the timeouts and the state directory that BrokerInterface.swift
// declares. eventbusd's BrokerOptions applies the others (the bus and its
// socket mode, the log level, the policy, bridge and configuration files,
// the actions) and hands every option here first.
//
// Before editing: a new server option is one `OptionDeclaration` in
// `brokerInterface` and one `case` here (in `applyLimit` or `applyTime`);
// its errors name the option as the caller shows it (`--max-frame` on the
// command line, `max-frame` in eventbusd.conf).
import EventBusCommandLine

extension ServerConfiguration {
    /// Sets what option `name` (a long name of `brokerInterface`) with
    /// `value` sets, when it is a server option.
    /// - Parameter shownAs: the option's name in errors.
    /// - Returns: false when `name` is not a server option (nothing set).
    /// - Throws: `UsageError` for a malformed or out-of-range value.
    package mutating func apply(option name: String, _ value: String, shownAs: String) throws(UsageError) -> Bool {
        if try applyLimit(name, value, shownAs: shownAs) { return true }
        return try applyTime(name, value, shownAs: shownAs)
    }

    /// The sizes, counts and the state directory.
    private mutating func applyLimit(_ name: String, _ value: String, shownAs: String) throws(UsageError) -> Bool {
        func size(minimum: Int) throws(UsageError) -> Int {
            try parseValue(value, of: shownAs) { v throws(ValueError) in try parseSize(v, minimum: minimum) }
        }
        func count() throws(UsageError) -> Int { try parseValue(value, of: shownAs, parseCount) }
        switch name {
        case "max-frame": broker.maxFrameBytes = try size(minimum: 64)
        case "max-outbound": broker.maxOutboundBytes = try size(minimum: 1024)
        case "max-queued": broker.maxQueuedBytes = try size(minimum: 1024)
        case "max-connections": broker.maxConnections = try count()
        case "max-subscriptions": broker.maxSubscriptionsPerConnection = try count()
        case "history-events": broker.retention.historyEvents = value == "0" ? 0 : try count()
        case "history-bytes": broker.retention.historyBytes = try size(minimum: 0)
        case "state-dir":
            guard !value.isEmpty else { throw UsageError("\(shownAs) needs a directory") }
            stateDirectory = value
        case "max-connections-per-uid": broker.quotas.maxConnectionsPerUID = try count()
        case "max-subscriptions-per-uid": broker.quotas.maxSubscriptionsPerUID = try count()
        case "max-subscriptions-total": broker.quotas.maxSubscriptions = try count()
        case "max-inbound-per-uid": broker.quotas.maxInboundBytesPerUID = try size(minimum: 1024)
        case "max-inbound": broker.quotas.maxInboundBytes = try size(minimum: 1024)
        case "max-outbound-per-uid": broker.quotas.maxOutboundBytesPerUID = try size(minimum: 1024)
        case "max-retained": broker.quotas.maxRetainedEvents = try count()
        case "max-retained-bytes": broker.quotas.maxRetainedBytes = try size(minimum: 1024)
        case "max-retained-bytes-per-uid": broker.quotas.maxRetainedBytesPerUID = try size(minimum: 1024)
        case "max-pending-requests": broker.maxPendingRequestsPerConnection = try count()
        case "max-group-members": broker.quotas.maxGroupMembers = try count()
        default: return false
        }
        return true
    }

    /// The timeouts and time windows (DURATION values).
    private mutating func applyTime(_ name: String, _ value: String, shownAs: String) throws(UsageError) -> Bool {
        func nanoseconds(above minimum: Int64? = nil) throws(UsageError) -> Int64 {
            let nanoseconds = try parseValue(value, of: shownAs, parseDuration).totalNanoseconds
            if let minimum, nanoseconds <= minimum { throw UsageError("\(shownAs) must be more than 0") }
            return nanoseconds
        }
        switch name {
        case "frame-timeout": broker.quotas.frameTimeoutNanoseconds = try nanoseconds()
        case "stall-timeout": broker.stallTimeoutNanoseconds = try nanoseconds(above: 0)
        case "trusted-hold-window": broker.trustedHoldWindowNanoseconds = try nanoseconds(above: 0)
        case "max-request-timeout":
            let nanoseconds = try nanoseconds()
            guard nanoseconds >= 1_000_000 else { throw UsageError("--max-request-timeout must be at least 1ms") }
            broker.maxRequestTimeoutMilliseconds = UInt64(nanoseconds / 1_000_000)
            broker.defaultRequestTimeoutMilliseconds = min(broker.defaultRequestTimeoutMilliseconds, broker.maxRequestTimeoutMilliseconds)
        case "exit-idle-time":
            let nanoseconds = try nanoseconds()
            exitIdleNanoseconds = nanoseconds > 0 ? nanoseconds : nil
        case "shutdown-timeout": shutdownFlushNanoseconds = try nanoseconds()
        default: return false
        }
        return true
    }
}
