// What eventbusd's server options set (ServerConfiguration+Options.swift,
// issue 35): each kind of option reaches its field, a bad value is the
// option's own error, and an option that is not the server's sets nothing.
// The whole command line and eventbusd.conf are tested against the real
// eventbusd in EventBusIntegrationTests.
import EventBusCommandLine
import EventBusServer
import Testing

@Suite("Server options (ServerConfiguration.apply)")
struct ServerOptionsTests {
    /// The configuration after `options` (name, value) in order.
    func applied(_ options: [(String, String)]) throws(UsageError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        for (name, value) in options { _ = try configuration.apply(option: name, value, shownAs: "--" + name) }
        return configuration
    }

    /// The message of the error `name value` throws, nil when it throws none.
    func failure(_ name: String, _ value: String) -> String? {
        var configuration = ServerConfiguration()
        do { _ = try configuration.apply(option: name, value, shownAs: name) } catch { return error.message }
        return nil
    }

    @Test("Sizes, counts, quotas and the state directory reach their fields")
    func limits() throws {
        let c = try applied([("max-frame", "2K"), ("max-connections", "7"), ("history-events", "0"), ("history-bytes", "1M"),
                             ("max-retained-bytes-per-uid", "4K"), ("max-pending-requests", "3"), ("state-dir", "/var/lib/x")])
        #expect(c.broker.maxFrameBytes == 2048)
        #expect(c.broker.maxConnections == 7)
        #expect(c.broker.retention.historyEvents == 0)
        #expect(c.broker.retention.historyBytes == 1 << 20)
        #expect(c.broker.quotas.maxRetainedBytesPerUID == 4096)
        #expect(c.broker.maxPendingRequestsPerConnection == 3)
        #expect(c.stateDirectory == "/var/lib/x")
    }

    @Test("Durations: timeouts in ns, exit-idle-time 0 is never, max-request-timeout caps the default")
    func times() throws {
        let c = try applied([("stall-timeout", "250ms"), ("frame-timeout", "0"), ("exit-idle-time", "0"), ("shutdown-timeout", "3s"),
                             ("max-request-timeout", "2s")])
        #expect(c.broker.stallTimeoutNanoseconds == 250_000_000)
        #expect(c.broker.quotas.frameTimeoutNanoseconds == 0)
        #expect(c.exitIdleNanoseconds == nil)
        #expect(c.shutdownFlushNanoseconds == 3_000_000_000)
        #expect(c.broker.maxRequestTimeoutMilliseconds == 2000)
        #expect(c.broker.defaultRequestTimeoutMilliseconds == 2000)
        #expect(try applied([("exit-idle-time", "1min")]).exitIdleNanoseconds == 60_000_000_000)
    }

    @Test("A bad value is the option's own error, named as the caller shows it")
    func errors() {
        #expect(failure("max-frame", "10")?.contains("max-frame") == true)
        #expect(failure("max-connections", "many")?.contains("max-connections") == true)
        #expect(failure("stall-timeout", "0") == "stall-timeout must be more than 0")
        #expect(failure("trusted-hold-window", "0") == "trusted-hold-window must be more than 0")
        #expect(failure("max-request-timeout", "500us") == "--max-request-timeout must be at least 1ms")
        #expect(failure("state-dir", "") == "state-dir needs a directory")
        #expect(failure("max-frame", "64") == nil)
    }

    @Test("An option that is not the server's sets nothing and says so")
    func notAServerOption() throws {
        var configuration = ServerConfiguration()
        for name in ["socket", "mode", "log-level", "policy", "bridge", "config", "help"] {
            #expect(try configuration.apply(option: name, "x", shownAs: name) == false)
        }
        #expect(configuration.broker.maxFrameBytes == ServerConfiguration().broker.maxFrameBytes)
        #expect(try configuration.apply(option: "max-queued", "1K", shownAs: "--max-queued") == true)
    }
}
