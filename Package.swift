// swift-tools-version:6.0
// eventbus: a cross-process event broker for Linux.
//
// Targets import only targets listed above them (see "How it is built" in README.md):
// Protocol -> Policy -> Core, Log -> System, CommandLine, then Server and the
// executables; the clients' Session sits on Protocol, under the CLI's library,
// the Swift library and the bridge. Last come the targets only tests,
// benchmarks and fuzzing use, in folders that say so (Tests/, Benchmarks/,
// fuzz/). libsystemd sits behind CSystemd/EventBusSystemd so everything else
// builds without it.
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

// The broker's own targets (never part of the EventBus library product) skip
// run-time exclusivity checks in release builds: measured again for issue 25,
// they double the broker's instructions per delivery in case 1 (callgrind,
// 2,290 without them, 4,525 with: swift_beginAccess and its access set on
// every `Broker`/`Connection` property access; docs/BENCHMARKS.md). Debug
// builds, and so every test run, keep them.
let brokerHotPath: [SwiftSetting] = strict + [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "eventbus",
    products: [
        .executable(name: "eventbusd", targets: ["eventbusd"]),
        .executable(name: "eventbus", targets: ["eventbus"]),
        .executable(name: "eventbus-bridge", targets: ["eventbus-bridge"]),
        .executable(name: "eventbus-manual", targets: ["eventbus-manual"]),
        .library(name: "EventBus", targets: ["EventBus", "EventBusClient"]),
    ],
    targets: [
        // Header-only bridge to the Linux APIs Swift's Glibc module lacks
        // (epoll, signalfd, eventfd, accept4, struct ucred).
        .systemLibrary(name: "CEventBusShims"),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // Protocol's shared declarations are `@_spi(Package) public`, not
        // `package` (the other targets import it with `@_spi(Package)`): the
        // compiler's default cross-module optimisation inlines only public
        // functions, and the broker's per-event path crosses into the codec
        // (callgrind case 1: 2,659 Ir/delivery with `package`, 2,373 with SPI,
        // 2,375 before either). Users see neither (docs/CLIENT.md, scripts/public-api).
        .target(name: "EventBusProtocol", swiftSettings: strict),
        // Access policy (PROTOCOL.md "Access policy (1.1)"): parsing and
        // decisions, pure like Protocol; Core applies it.
        .target(name: "EventBusPolicy", dependencies: ["EventBusProtocol"], swiftSettings: brokerHotPath),
        .target(name: "EventBusCore", dependencies: ["EventBusProtocol", "EventBusPolicy", "CEventBusShims"], swiftSettings: brokerHotPath),
        // The logging seam (levels, `LogSink`, `Logger`): no I/O, no dependency.
        .target(name: "EventBusLog", swiftSettings: strict),
        .target(name: "EventBusSystem", dependencies: ["CEventBusShims", "EventBusLog"], swiftSettings: strict),
        .target(name: "EventBusSystemd", dependencies: ["CSystemd", "EventBusLog", "EventBusSystem"], swiftSettings: strict),
        // The executables' shared command-line parsing (options, DURATION, SIZE, N)
        // and their declarations, from which --help, the man pages and the
        // shell completions are rendered (issue 33).
        .target(name: "EventBusCommandLine", swiftSettings: strict),
        .target(
            name: "EventBusServer",
            dependencies: ["EventBusCore", "EventBusPolicy", "EventBusLog", "EventBusSystem", "EventBusProtocol", "EventBusCommandLine"],
            swiftSettings: brokerHotPath
        ),
        // The client session (hello, subscribe and resume, req matching, the
        // stream position), pure like Protocol; the library, the CLI and the
        // bridge drive it (issue 26).
        .target(name: "EventBusSession", dependencies: ["EventBusProtocol"], swiftSettings: strict),
        // The CLI's logic that needs no process (issue 35): its error type,
        // what `listen` and `wait` make of each frame (`SubscriberFeed`) and
        // the lines they write on stderr; unit-tested by EventBusCLITests.
        .target(name: "EventBusCLI", dependencies: ["EventBusSession", "EventBusProtocol", "EventBusCommandLine"], swiftSettings: strict),
        // The Swift library (product `EventBus`, module `EventBus`, issue 34).
        .target(
            name: "EventBus",
            dependencies: ["EventBusSession", "EventBusProtocol", "EventBusSystem"],
            swiftSettings: strict
        ),
        // The library's module name before issue 34: re-exports `EventBus`
        // for one release (deprecated, docs/CLIENT.md).
        .target(name: "EventBusClient", dependencies: ["EventBus"], swiftSettings: strict),
        // NATS client (text protocol, failover, reconnect forever) and the
        // bridge's pure logic (issue 13; docs in the target folders' file comments).
        .target(name: "EventBusNATS", dependencies: ["EventBusProtocol", "EventBusSystem"], swiftSettings: strict),
        .target(name: "EventBusBridge", dependencies: ["EventBusNATS", "EventBusSession", "EventBusProtocol", "EventBusLog", "EventBusSystem", "EventBusCommandLine"], swiftSettings: strict),
        // The generated man pages and shell completions of the three programs
        // (issue 33): rendered from their declarations, written by eventbus-manual.
        .target(name: "EventBusManual", dependencies: ["EventBusCommandLine", "EventBusServer", "EventBusBridge"], swiftSettings: strict),
        .executableTarget(
            name: "eventbusd",
            dependencies: ["EventBusServer", "EventBusBridge", "EventBusPolicy", "EventBusSystemd", "EventBusProtocol", "EventBusLog", "EventBusSystem", "EventBusCommandLine"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "eventbus",
            dependencies: ["EventBusCLI", "EventBusSession", "EventBusProtocol", "EventBusSystem", "EventBusCommandLine"],
            swiftSettings: strict
        ),
        // The bridge between the local bus and a NATS cluster (issue 13; docs/BRIDGE.md).
        .executableTarget(
            name: "eventbus-bridge",
            dependencies: ["EventBusBridge", "EventBusSession", "EventBusNATS", "EventBusProtocol", "EventBusLog", "EventBusSystem", "EventBusSystemd", "EventBusCommandLine"],
            swiftSettings: strict
        ),
        // Writes man/ and completions/ from EventBusManual (not installed).
        .executableTarget(
            name: "eventbus-manual",
            dependencies: ["EventBusManual", "EventBusSystem"],
            swiftSettings: strict
        ),
        // Examples (docs/CLIENT.md): two programs that talk through the bus.
        .executableTarget(
            name: "settings-service",
            dependencies: ["EventBus"],
            path: "Examples/SettingsService",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "dashboard",
            dependencies: ["EventBus"],
            path: "Examples/Dashboard",
            swiftSettings: strict
        ),
        // The Swift example of README.md, compiled so it cannot rot (DocSnippetTests
        // checks the README's code block is this file; ReadmeExampleTests runs it).
        .executableTarget(
            name: "readme-example",
            dependencies: ["EventBus"],
            path: "Examples/ReadmeExample",
            swiftSettings: strict
        ),
        // An actor as an observer (docs/CLIENT.md), run by ActorObserverTests.
        .executableTarget(
            name: "actor-observer",
            dependencies: ["EventBus"],
            path: "Examples/ActorObserver",
            swiftSettings: strict
        ),
        // Below: what only tests, benchmarks and fuzzing use (no product, not installed).
        // The benchmark tool (docs/BENCHMARKS.md; scripts/bench and scripts/profile
        // build it with `--product eventbus-bench`). The bridge's code only for
        // the header block the link writes (case 9's NATS rows that carry it).
        .executableTarget(
            name: "eventbus-bench",
            dependencies: ["CEventBusShims", "EventBusSystem", "EventBusBridge", "EventBusNATS", "EventBusSession", "EventBusProtocol"],
            path: "Benchmarks/eventbus-bench",
            swiftSettings: strict
        ),
        // Micro-benchmark of policy decisions (not part of the test suite).
        .executableTarget(
            name: "eventbus-policy-bench",
            dependencies: ["EventBusPolicy"],
            path: "Benchmarks/eventbus-policy-bench",
            swiftSettings: strict
        ),
        // libFuzzer target (scripts/fuzz builds it with -DEVENTBUS_FUZZER and
        // --sanitize=fuzzer); a plain build gets its replay driver instead.
        .executableTarget(
            name: "eventbus-fuzz",
            dependencies: ["EventBusProtocol", "EventBusCore"],
            path: "fuzz/eventbus-fuzz",
            swiftSettings: strict
        ),
        .target(
            name: "EventBusTestSupport",
            dependencies: ["EventBusSystem"],
            path: "Tests/EventBusTestSupport",
            swiftSettings: strict
        ),
        // Test helper for EventBusSystemdTests (not installed): runs the
        // EventBusSystemd calls in a process of its own environment.
        .executableTarget(
            name: "eventbus-systemd-probe",
            dependencies: ["EventBusLog", "EventBusSystem", "EventBusSystemd"],
            path: "Tests/EventBusSystemdProbe",
            swiftSettings: strict
        ),
        // The other process of EventBusClientTests' cross-process scenarios.
        .executableTarget(
            name: "eventbus-client-peer",
            dependencies: ["EventBus"],
            path: "Tests/EventBusClientPeer",
            swiftSettings: strict
        ),
        // The other process of the per-uid tests: connects as the uid setpriv
        // gave it and passes the sockets back (EventBusTestSupport `connectAs`).
        .executableTarget(
            name: "eventbus-uid-peer",
            dependencies: ["EventBusTestSupport"],
            path: "Tests/EventBusUIDPeer",
            swiftSettings: strict
        ),
        // The per-uid rules written once as scenarios over a "bus with uids"
        // (`UIDBus`), run in process by EventBusServerTests (no root) and
        // against eventbusd with setpriv'd clients by EventBusIntegrationTests.
        .target(
            name: "EventBusScenarios",
            dependencies: ["EventBusTestSupport"],
            path: "Tests/EventBusScenarios",
            swiftSettings: strict
        ),
        .testTarget(name: "EventBusProtocolTests", dependencies: ["EventBusProtocol", "EventBusTestSupport"], swiftSettings: strict),
        .testTarget(name: "EventBusPolicyTests", dependencies: ["EventBusPolicy", "EventBusProtocol", "EventBusTestSupport"], swiftSettings: strict),
        .testTarget(name: "EventBusCoreTests", dependencies: ["EventBusCore", "EventBusPolicy", "EventBusTestSupport"], swiftSettings: strict),
        .testTarget(name: "EventBusSystemTests", dependencies: ["EventBusSystem", "EventBusTestSupport"], swiftSettings: strict),
        // EventBusServer's per-uid rules (policy, quotas, the fair-share
        // scheduler) with a server run in the test process and clients handed
        // to it with made-up uids (ConnectionHandoff): no root needed (issue 35).
        .testTarget(
            name: "EventBusServerTests",
            dependencies: ["EventBusServer", "EventBusCore", "EventBusPolicy", "EventBusLog", "EventBusSystem", "EventBusCommandLine", "EventBusTestSupport", "EventBusScenarios"],
            swiftSettings: strict
        ),
        .testTarget(name: "EventBusSessionTests", dependencies: ["EventBusSession", "EventBusProtocol"], swiftSettings: strict),
        .testTarget(name: "EventBusCommandLineTests", dependencies: ["EventBusCommandLine"], swiftSettings: strict),
        .testTarget(name: "EventBusCLITests", dependencies: ["EventBusCLI", "EventBusSession", "EventBusProtocol"], swiftSettings: strict),
        .testTarget(
            name: "EventBusSystemdTests",
            dependencies: ["EventBusLog", "EventBusSystemd", "EventBusTestSupport", "eventbus-systemd-probe", "eventbusd"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EventBusClientTests",
            dependencies: ["EventBus", "EventBusClient", "EventBusTestSupport", "eventbusd", "settings-service", "dashboard", "eventbus-client-peer", "readme-example", "actor-observer"],
            swiftSettings: strict
        ),
        .testTarget(name: "EventBusNATSTests", dependencies: ["EventBusNATS", "EventBusProtocol", "EventBusTestSupport"], swiftSettings: strict),
        .testTarget(name: "EventBusBridgeTests", dependencies: ["EventBusBridge", "EventBusSession", "EventBusNATS", "EventBusProtocol"], swiftSettings: strict),
        .testTarget(
            name: "EventBusBridgeIntegrationTests",
            dependencies: ["EventBusTestSupport", "eventbusd", "eventbus-bridge"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EventBusIntegrationTests",
            dependencies: ["EventBusTestSupport", "EventBusScenarios", "EventBusProtocol", "EventBusCommandLine", "EventBusManual", "EventBusServer", "EventBusBridge", "eventbusd", "eventbus", "eventbus-bridge", "eventbus-uid-peer"],
            swiftSettings: strict
        ),
    ]
)
