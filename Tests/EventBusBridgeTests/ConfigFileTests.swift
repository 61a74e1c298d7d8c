// /etc/eventbus/bridge.conf: every key, comments and blanks, repeated keys,
// errors naming file:line, overlaying flags on the file, defaults, and the
// NATS client configuration made from the result.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import Foundation
import Testing

@Suite struct ConfigFileTests {
    static let full = """
    # eventbus-bridge settings
    nats   = nats://127.0.0.1:4222, nats://127.0.0.1:4223
    nats   = 10.0.0.5
    node   = host-a
    export = order.>          # orders
    export = audit.*, billing.invoice
    import = order.>
    prefix = site.eb

    reconnect-initial = 100ms
    reconnect-max     = 1m
    buffer-bytes      = 4M
    buffer-events     = 500
    ping-interval     = 5s
    bus = system
    name = bridge#1
    status-file = /run/eb/a.json
    log-level = debug
    nats-user = bridge
    nats-password = se#cret
    nats-token = t
    """

    @Test func everyKeyIsRead() throws {
        let settings = try ConfigFile.parse(Self.full, file: "bridge.conf")
        #expect(settings.servers == ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223", "10.0.0.5"].map { ServerAddress(url: $0)! })
        #expect(settings.node == NodeName("host-a"))
        #expect(settings.exports?.map(\.text) == ["order.>", "audit.*", "billing.invoice"])
        #expect(settings.imports?.map(\.text) == ["order.>"])
        #expect(settings.prefix == SubjectPrefix("site.eb"))
        #expect(settings.reconnectInitial == .milliseconds(100) && settings.reconnectMaximum == .seconds(60))
        #expect(settings.bufferBytes == 4 << 20 && settings.bufferEvents == 500 && settings.pingInterval == .seconds(5))
        #expect(settings.bus == .system)
        #expect(settings.name == "bridge#1" && settings.password == "se#cret", "# inside a value is not a comment")
        #expect(settings.user == "bridge" && settings.token == "t")
        #expect(settings.statusFile == "/run/eb/a.json" && settings.logLevel == .debug)
    }

    @Test func theShippedExampleIsAllCommentsAndEverySettingInItIsValidOnceUncommented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("config/bridge.conf"), encoding: .utf8)
        #expect(try ConfigFile.parse(text, file: "bridge.conf") == BridgeSettings())
        // Uncomment `#key = value` lines (not prose); keys that repeat in the example may, the others appear once.
        let settingLines = text.split(separator: "\n").filter { $0.hasPrefix("#") && $0.contains(" = ") && !$0.hasPrefix("# ") }
        // (attacker6) The example's group user, thumbd, need not exist here: root does.
        var uncommented = settingLines.map { String($0.dropFirst()).replacingOccurrences(of: "@thumbd", with: "@root") }
        // One bus choice only: the example shows `socket`.
        uncommented.removeAll { $0.hasPrefix("bus ") }
        let settings = try ConfigFile.parse(uncommented.joined(separator: "\n"), file: "bridge.conf")
        let keys = Set(uncommented.map { String($0.prefix { $0 != " " }) })
        #expect(keys == Set(ConfigFile.keys).subtracting(["bus"]), "every key is shown in the example: missing \(Set(ConfigFile.keys).subtracting(keys))")
        #expect(settings.exports?.map(\.text) == ["order.>", "audit.*"])
        _ = try settings.resolved()
    }

    @Test func durationsReadAsSystemdDoes() throws {
        let settings = try ConfigFile.parse("reconnect-initial = 1.5\nreconnect-max = 1h 30min\nping-interval = 5m", file: "f")
        #expect(settings.reconnectInitial == .milliseconds(1500) && settings.reconnectMaximum == .seconds(5400) && settings.pingInterval == .seconds(300))
    }

    @Test func crlfLineEndsAndAnEmptyFileAreFine() throws {
        let settings = try ConfigFile.parse("node = n\r\nsocket = /tmp/s\r\n", file: "f")
        #expect(settings.node == NodeName("n") && settings.bus == .path("/tmp/s"))
        #expect(try ConfigFile.parse("", file: "f") == BridgeSettings())
        #expect(try ConfigFile.parse("# only\n\n   \n", file: "f") == BridgeSettings())
    }

    @Test(arguments: [
        ("node = a\nexprot = x.y", 2, "unknown setting \"exprot\"; did you mean \"export\"?"),
        ("node = a\nfrobnicate = x.y", 2, "unknown setting \"frobnicate\" (known: nats, node, export"),
        ("node = a\nnode = b", 2, "node is already set on line 1"),
        ("node host-a", 1, "expected 'key = value'"),
        ("\n\nnode =", 3, "node has no value"),
        ("node = host.a", 1, "node: \"host.a\" is not a node name"),
        ("export = order..x", 1, "export: \"order..x\" is not an eventbus pattern"),
        ("import = a.>.b", 1, "import: \"a.>.b\" is not an eventbus pattern"),
        ("nats = tls://h:1", 1, "nats: \"tls://h:1\" is not a NATS URL"),
        ("prefix = a.*", 1, "prefix: \"a.*\" is not a subject prefix"),
        ("reconnect-max = soon", 1, "invalid duration 'soon' for reconnect-max: no number before 'soon'"),
        ("reconnect-initial = 5 parsecs", 1, "invalid duration '5 parsecs' for reconnect-initial"),
        ("ping-interval = 0s", 1, "ping-interval: \"0s\" is not a duration above zero"),
        ("buffer-bytes = 8X", 1, "invalid size '8X' for buffer-bytes: unknown unit 'X'"),
        ("buffer-events = -3", 1, "invalid number '-3' for buffer-events: negative values are not allowed"),
        ("buffer-events = 0", 1, "invalid number '0' for buffer-events"),
        ("status-file = run/x", 1, "status-file: \"run/x\" is not an absolute path"),
        ("log-level = loud", 1, "log-level: \"loud\" is not error, warning"),
        ("user = bridge", 1, "unknown setting \"user\""),
        ("socket = relative/s", 1, "socket: \"relative/s\" is not an absolute path"),
        ("bus = session", 1, "bus: \"session\" is neither system nor user"),
        ("bus = user\nsocket = /s", 2, "give socket or bus, not both"),
    ])
    func badLinesAreErrorsNamingFileAndLine(text: String, line: Int, message: String) {
        do {
            _ = try ConfigFile.parse(text, file: "/etc/eventbus/bridge.conf")
            Issue.record("no error for \(text.debugDescription)")
        } catch {
            #expect(error.line == line && error.file == "/etc/eventbus/bridge.conf")
            #expect(error.description.hasPrefix("/etc/eventbus/bridge.conf:\(line): \(message)"), "\(error)")
        }
    }

    @Test func flagsOverlayTheFileAndListsAreReplacedWhole() throws {
        let file = try ConfigFile.parse("nats = a:1\nnode = n\nexport = x.>\nimport = y.>\nbuffer-events = 5", file: "f")
        var flags = BridgeSettings()
        try ConfigFile.apply("export", "z.*", to: &flags)
        try ConfigFile.apply("node", "m", to: &flags)
        let merged = file.overlaid(by: flags)
        #expect(merged.exports?.map(\.text) == ["z.*"] && merged.imports?.map(\.text) == ["y.>"])
        #expect(merged.node == NodeName("m") && merged.bufferEvents == 5 && merged.servers == [ServerAddress(url: "a:1")!])
    }

    @Test func resolvingFillsInTheDefaults() throws {
        let configuration = try ConfigFile.parse("nats = a:1\nnode = host-a\nimport = >", file: "f").resolved()
        #expect(configuration.prefix == .standard && configuration.exports.isEmpty)
        #expect(configuration.reconnectInitial == .milliseconds(250) && configuration.reconnectMaximum == .seconds(30))
        #expect(configuration.bufferBytes == 8 << 20 && configuration.bufferEvents == 10_000)
        #expect(configuration.pingInterval == .seconds(20) && configuration.name == "eventbus-bridge host-a" && configuration.bus == .automatic)
    }

    /// The link inside eventbusd runs its requests on the broker's loop and
    /// the rest on a thread (LinkInBroker.swift): each part keeps only its
    /// patterns and everything else (node, servers, prefix, limits).
    @Test func theLinkSplitsIntoARequestPartAndAnEventPart() throws {
        let both = try ConfigFile.parse("nats = a:1\nnode = host-a\nprefix = p\nexport = x.>\nimport = y.*\nexport-requests = svc.>\nimport-requests = api.*\nexport-group = g:job.>\nbuffer-events = 7", file: "f").resolved()
        let requests = try #require(both.requestPart)
        #expect(requests.requestExports.map(\.text) == ["svc.>"] && requests.requestImports.map(\.text) == ["api.*"])
        #expect(requests.exports.isEmpty && requests.imports.isEmpty && requests.groupExports.isEmpty && requests.groupImports.isEmpty)
        let events = try #require(both.eventPart)
        #expect(events.exports.map(\.text) == ["x.>"] && events.imports.map(\.text) == ["y.*"] && events.groupExports.count == 1)
        #expect(events.requestExports.isEmpty && events.requestImports.isEmpty)
        for part in [requests, events] {
            #expect(part.node == both.node && part.servers == both.servers && part.prefix == both.prefix && part.bufferEvents == 7 && part.name == both.name)
        }
        let requestsOnly = try ConfigFile.parse("nats = a:1\nnode = n\nimport-requests = svc.>", file: "f").resolved()
        #expect(requestsOnly.eventPart == nil && requestsOnly.requestPart == requestsOnly)
        let eventsOnly = try ConfigFile.parse("nats = a:1\nnode = n\nimport-group = g:job.>", file: "f").resolved()
        #expect(eventsOnly.requestPart == nil && eventsOnly.eventPart == eventsOnly)
    }

    @Test(arguments: [
        ("node = n\nexport = >", "no NATS server"),
        ("nats = a:1\nexport = >", "no node name"),
        ("nats = a:1\nnode = n", "nothing to bridge"),
        ("nats = a:1\nnode = n\nexport = >\nreconnect-initial = 1m\nreconnect-max = 1s", "reconnect-initial (60.0 seconds) is longer than reconnect-max (1.0 seconds)"),
    ])
    func resolvingNeedsServersANodeAndSomethingToDo(text: String, message: String) throws {
        let settings = try ConfigFile.parse(text, file: "f")
        #expect(throws: SettingsError.self) { try settings.resolved() }
        do { _ = try settings.resolved() } catch { #expect(error.description.hasPrefix(message), "\(error)") }
    }

    @Test func theNATSConfigurationCarriesTheBoundsTheHelloAndTheDropReport() throws {
        let configuration = try ConfigFile.parse(Self.full, file: "f").resolved()
        let bridge = BridgeCore(mapping: configuration.mapping, exports: configuration.exports, imports: configuration.imports, bridgeInstance: "b1")
        let nats = configuration.clientConfiguration(core: bridge) { "broker-7" }
        #expect(nats.servers.count == 3 && !nats.connect.echo && nats.connect.name == "bridge#1")
        #expect(nats.connect.user == "bridge" && nats.connect.password == "se#cret" && nats.connect.token == "t")
        #expect(nats.backoff == Backoff(initial: .milliseconds(100), maximum: .seconds(60)))
        #expect(nats.bufferLimitBytes == 4 << 20 && nats.bufferLimitMessages == 500 && nats.pingInterval == .seconds(5))
        #expect(nats.announcements == [bridge.hello])
        let report = try #require(nats.gapReport?(DropSummary(count: 2, firstTag: 9)))
        #expect(report.subject.text == "site.eb.ctl.host-a.dropped")
        #expect(String(decoding: report.payload, as: UTF8.self) == #"{"node":"host-a","bridge":"b1","instance":"broker-7","count":2,"since_seq":9}"#)
    }
}

/// (newuser2) The warning about a NATS server that asks for no credentials
/// names everything the link carries in from NATS: `import-group` too (an
/// open leaf node lets every local user hand events to this bus's group
/// members as the bridge's uid), and nothing for a link that only sends.
@Suite struct OpenNATSWarningTests {
    func configuration(_ text: String) throws -> BridgeConfiguration {
        try ConfigFile.parse("nats = 127.0.0.1:4222\nnode = n\n" + text, file: "bridge.conf").resolved()
    }

    @Test func importedGroupsAreNamed() throws {
        #expect(Bridge.carriedFromNATS(try configuration("import-group = work:job.>\n")) == "give events to the imported queue groups' members")
        #expect(Bridge.carriedFromNATS(try configuration("import = x.>\nimport-group = work:job.>\n"))
                == "publish the imported types and give events to the imported queue groups' members")
    }

    @Test func aLinkThatOnlySendsIsNotWarnedAbout() throws {
        #expect(Bridge.carriedFromNATS(try configuration("export = x.>\nexport-group = work:job.>\n")) == nil)
    }
}
