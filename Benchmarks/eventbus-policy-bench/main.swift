// Micro-benchmark of policy decisions (issue 16: "decisions cached so routing
// stays one lookup per event type"): ns per publish/receive decision with the
// shipped policy and with a large one, against a plain dictionary lookup of
// the type (the cost of the broker's own route cache), plus the one-off costs
// (compiling a view, a subscribe decision). Not part of the test suite.
//
// Before editing: run it from a release build on a quiet machine,
//   swift build -c release --product eventbus-policy-bench
//   .build/release/eventbus-policy-bench [config/policy.conf] [--compile-only]
// and keep every result feeding `sink`, or the optimiser deletes the loop.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

#if canImport(Glibc)
import Glibc
#endif

struct NoNames: PolicyNameResolver {
    func uid(ofUser name: String) -> UInt32? { nil }
    func gid(ofGroup name: String) -> UInt32? { nil }
}

func readFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, file)
        if n <= 0 { break }
        bytes += buffer[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

var sink = 0

/// Median ns per call of `body` over `rounds` rounds of `iterations` calls,
/// cycling through `inputs` (distinct inputs, so nothing can be hoisted out
/// of the loop).
@MainActor
func measure<Input>(_ name: String, _ inputs: [Input], iterations: Int = 2_000_000, rounds: Int = 7, _ body: (Input) -> Int) {
    var samples: [Double] = []
    let mask = inputs.count - 1
    precondition(inputs.count & mask == 0, "a power of two of inputs")
    for _ in 0..<rounds {
        let clock = ContinuousClock()
        let start = clock.now
        var acc = 0
        for i in 0..<iterations { acc &+= body(inputs[i & mask]) }
        let elapsed = clock.now - start
        sink &+= acc
        let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        samples.append(ns / Double(iterations))
    }
    samples.sort()
    let tenths = Int((samples[samples.count / 2] * 10).rounded())
    print("  \(name): \(tenths / 10).\(tenths % 10) ns")
}

let path = CommandLine.arguments.dropFirst().first { !$0.hasPrefix("--") } ?? "config/policy.conf"
guard let text = readFile(path) else {
    print("cannot read \(path)")
    exit(1)
}
let shipped = try AccessPolicy.load([PolicySource(path: path, text: text)], resolver: NoNames(), brokerUID: 999)
let alice = PolicyIdentity(uid: 1000, gid: 1000, supplementaryGroups: [27, 100])
let view = shipped.view(for: alice)

// A large policy: 400 services with a private publish prefix and a secret
// subtree, 40 groups that may read one secret subtree each.
var large = ["default subscribe deny", "allow subscribe >", "deny publish system.>", "allow publish system.> user=0"]
for i in 0..<400 { large.append("deny publish app\(i).>\nallow publish app\(i).> user=\(2000 + i)\ndeny subscribe app\(i).secret.>") }
for i in 0..<40 { large.append("allow subscribe app\(i).secret.> group=\(3000 + i)") }
let big = try AccessPolicy.load([PolicySource(path: "large.conf", text: large.joined(separator: "\n"))], resolver: NoNames(), brokerUID: 999)
let bigView = big.view(for: PolicyIdentity(uid: 2005, gid: 2005, supplementaryGroups: [3005]))

if CommandLine.arguments.contains("--compile-only") {
    // For profiling view compilation (perf record ... --compile-only).
    for uid in 0..<UInt32(200) { sink &+= Int(big.view(for: PolicyIdentity(uid: 7000 + uid, gid: 100)).connect.origin) }
    print("(sink \(sink % 10))")
    exit(0)
}

/// 1024 types of one shape: `template` with `#` replaced by 0...1023.
func family(_ template: String) -> [EventType] {
    (0..<1024).map { EventType(template.replacing("#", with: String($0)))! }
}

print("policy decisions, \(path), uid 1000 (median of 7 rounds, 1024 distinct types per shape)")
for template in ["bench.t#", "order.created.eu.v#", "system.reboot#", "user.1000.note#", "user.1001.note#"] {
    let types = family(template)
    var routes: [String: Int] = [:]
    var perType: [EventType: PolicyVerdict] = [:]
    for (i, t) in types.enumerated() {
        routes[t.name] = i
        perType[t] = view.publish(t)
    }
    print(template)
    measure("route-cache lookup, [String: Int]", types) { routes[$0.name] ?? 0 }
    measure("per-type cache, [EventType: PolicyVerdict]", types) { perType[$0].map { Int($0.origin) } ?? 0 }
    measure("view.publish", types) { Int(view.publish($0).origin) }
    measure("view.receive", types) { Int(view.receive($0).origin) }
}
print("large policy (\(big.rules.count) rules), uid 2005 in group 3005")
measure("publish(app#.secret.key)", family("app#.secret.key")) { Int(bigView.publish($0).origin) }
measure("receive(app#.secret.key)", family("app#.secret.key")) { Int(bigView.receive($0).origin) }
measure("publish(weather.city#)", family("weather.city#")) { Int(bigView.publish($0).origin) }

print("per subscribe and per connect")
let patterns = [">", "user.>", "user.1000.>", "order.*", "secrets.rotated", "a.b.c.d.>", "*.*", "user.*.note"].map { Pattern($0)! }
measure("view.subscribe (8 patterns, shipped policy)", patterns, iterations: 200_000) { view.subscribe($0) == .filtered ? 1 : 0 }
let bigPatterns = [">", "app7.>", "app7.secret.>", "app399.*.x", "weather.>", "*.secret.>", "app1.secret.k", "*.*"].map { Pattern($0)! }
measure("subscribe (8 patterns, large policy)", bigPatterns, iterations: 2_000) { bigView.subscribe($0) == .filtered ? 1 : 0 }
let identities = (0..<1024).map { PolicyIdentity(uid: UInt32(5000 + $0), gid: 100) }
measure("compile a view (shipped policy)", identities, iterations: 20_000) { Int(shipped.view(for: $0).connect.origin) }
measure("compile a view (large policy)", identities, iterations: 64, rounds: 3) { Int(big.view(for: $0).connect.origin) }
print("(sink \(sink % 10))")
