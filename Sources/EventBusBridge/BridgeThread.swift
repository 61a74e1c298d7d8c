// The bridge on a thread of its own inside another process: eventbusd with
// `--bridge FILE` (issue 36) runs the same `BridgeLoop` as eventbus-bridge
// for the link's events and groups on this thread (its requests run on the
// broker's own loop: LinkInBroker.swift), reaching its own broker through the `BusEndpoint` it is
// given (a socketpair the broker adopts with the bridge user's credentials)
// and stopped by an eventfd instead of signals. The status file is written
// once a second as eventbus-bridge writes it (`StatusWriter`), so
// `eventbus-bridge --status` reads both kinds alike.
//
// Before editing: the loop is built and run on the new thread, so nothing but
// Sendable settings crosses threads; `stop` is called once, from the thread
// that started it, and returns when the loop has stopped (it flushes NATS for
// up to two seconds, `BridgeLoop.stop`).
import EventBusLog
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem

package final class BridgeThread: Sendable {
    private let stopRequest: Wakeup
    private let finished: Wakeup

    /// Starts the bridge described by `configuration` on a new thread.
    /// - Parameters:
    ///   - bridgeInstance: its id in hellos (`randomInstance()`; the same for
    ///     the parts of one link, LinkInBroker.swift, so they are not duplicates).
    ///   - statusPath: where to write the counters every second (nil: nowhere).
    ///   - amend: changes the counters before each write, on the bridge's thread
    ///     (the request part's counters, LinkInBroker.swift).
    ///   - warnFor: see `Bridge.init` (the whole link's settings for a part of it).
    /// - Throws: `SystemError` when the eventfds cannot be made.
    package init(configuration: BridgeConfiguration, bridgeInstance: String = BridgeThread.randomInstance(), endpoint: BusEndpoint,
                logger: Logger, statusPath: String?, warnFor: BridgeConfiguration?? = nil,
                amend: @escaping @Sendable (inout BridgeStatus) -> Void = { _ in }) throws(SystemError) {
        let stopRequest = try Wakeup()
        let finished = try Wakeup()
        self.stopRequest = stopRequest
        self.finished = finished
        SystemThread.detach {
            defer { finished.signal() }
            let loop: BridgeLoop
            do {
                let bridge = Bridge(configuration: configuration, bridgeInstance: bridgeInstance, logger: logger, warnFor: warnFor)
                loop = try BridgeLoop(bridge: bridge, endpoint: endpoint, stop: .wakeup(stopRequest), logger: logger)
            } catch {
                logger.error("the bridge could not start: \(error)")
                return
            }
            var writer = StatusWriter(path: statusPath, logger: logger)
            _ = loop.run { status in
                var status = status
                amend(&status)
                _ = writer.write(status)
            }
            loop.stop()
            writer.remove()
        }
    }

    /// Stops the loop (exports held for NATS get up to two seconds) and waits for it.
    package func stop() {
        stopRequest.signal()
        var entries = [PollEntry(finished.descriptor, events: .readable)]
        while (try? FileDescriptor.poll(&entries, timeoutMilliseconds: 10_000)) == 0 {}
    }

    /// A bridge process's (or thread's) random id: 16 hex digits.
    package static func randomInstance() -> String {
        let instance = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return String(repeating: "0", count: 16 - instance.count) + instance
    }
}

/// Writes the counters to the status file (docs/BRIDGE.md "Counters"), with
/// this process's pid and the time; a failure is logged once until a write works.
package struct StatusWriter {
    package let path: String?
    let logger: Logger
    private var timestamps = TimestampFormatter()
    private var failed = false

    package init(path: String?, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Stamps `status` with the pid and the time, writes it, and returns it.
    package mutating func write(_ status: BridgeStatus) -> BridgeStatus {
        var status = status
        status.pid = ProcessIdentity.current.pid
        status.updated = timestamps.string(nanosecondsSinceEpoch: Clock.wallNanoseconds())
        guard let path else { return status }
        do {
            try StatusFile.write(status.json, to: path)
            failed = false
        } catch {
            if !failed { logger.warning("failed to write the status file \(path): \(error); retrying every second") }
            failed = true
        }
        return status
    }

    /// Removes the file (a clean stop).
    package func remove() {
        if let path { StatusFile.remove(path) }
    }
}
