// Measures the broker CPU time (user + system, from /proc/PID/schedstat) that
// tearing down subscriptions costs (issue 10):
//   exact N   N connections, each subscribed to the one exact type
//             `teardown.one`, all closed at once (the 1,000 vs 18,000 case);
//   wild K    K connections, each with 4,096 wildcard patterns of ~250 bytes
//             (`c0i7.*.y.*.y…>`), all closed at once.
// Starts its own broker on a temporary socket (--max-connections 20000), waits
// until `stats` shows the connections gone, prints one line. No timing is
// asserted; run it on a quiet machine and compare runs side by side.
//
//   swiftc -O scripts/teardown-cost.swift -o .build/teardown-cost
//   .build/teardown-cost .build/release/eventbusd exact 18000
//
// Before editing: standalone (Foundation + Glibc only), like scripts/soak.swift;
// the caller's descriptor limit must allow N + 10 (it raises the soft limit).
import Foundation
import Glibc

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("teardown-cost: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3, let count = Int(arguments[2]), ["exact", "wild"].contains(arguments[1]) else {
    fail("usage: teardown-cost BROKER exact N | wild K")
}
let (broker, mode) = (arguments[0], arguments[1])

var limit = rlimit()
getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("teardown-\(getpid())").path
try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let path = directory + "/eb.sock"
let process = Process()
process.executableURL = URL(fileURLWithPath: broker)
process.arguments = ["--socket", path, "--max-connections", "20000", "--log-level", "warning"]
do { try process.run() } catch { fail("cannot start \(broker): \(error)") }
defer { try? FileManager.default.removeItem(atPath: directory) }

/// A blocking Unix stream connection with a line reader.
final class Client {
    let fd: CInt
    var buffer: [UInt8] = []

    init?() {
        fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { fail("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if connected != 0 { Glibc.close(fd); return nil }
    }

    func send(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { fail("write: errno \(errno)") }
            bytes = bytes.dropFirst(n)
        }
    }

    func readLine() -> String {
        while true {
            if let lf = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<lf], as: UTF8.self)
                buffer.removeSubrange(...lf)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { fail("the broker closed a connection") }
            buffer += chunk[..<n]
        }
    }

    func close() { Glibc.close(fd) }
}

func field(_ line: String, _ key: String) -> Int {
    guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
          let value = object[key] as? Int else { fail("no \(key) in \(line)") }
    return value
}

func cpuNanoseconds() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/schedstat", encoding: .utf8),
          let first = text.split(separator: " ").first, let value = Int(first) else { fail("cannot read schedstat") }
    return value
}

var control: Client? = nil
for _ in 0..<1000 {
    if let client = Client() { control = client; break }
    usleep(10_000)
}
guard let control else { fail("the broker did not start listening on \(path)") }
func stats(_ key: String) -> Int {
    control.send(#"{"op":"stats","req":1}"# + "\n")
    return field(control.readLine(), key)
}

var clients: [Client] = []
var patternBytes = 0
if mode == "exact" {
    for _ in 0..<count {
        guard let client = Client() else { fail("connect: errno \(errno)") }
        client.send(#"{"op":"subscribe","type":"teardown.one","req":1}"# + "\n")
        clients.append(client)
    }
    for client in clients { _ = client.readLine() }
} else {
    for k in 0..<count {
        guard let client = Client() else { fail("connect: errno \(errno)") }
        var frames = ""
        for i in 0..<4096 {
            var pattern = "c\(k)i\(i)"
            while pattern.utf8.count < 246 { pattern += ".*.y" }
            pattern += ".>"
            patternBytes = pattern.utf8.count
            frames += #"{"op":"subscribe","type":""# + pattern + #""}"# + "\n"
        }
        client.send(frames + #"{"op":"ping","req":1}"# + "\n")
        _ = client.readLine()
        clients.append(client)
    }
}
let subscriptions = stats("subscriptions")
guard stats("connections") == clients.count + 1 else { fail("not every connection was admitted") }

let before = cpuNanoseconds()
for client in clients { client.close() }
while stats("connections") != 1 { usleep(2_000) }
let after = cpuNanoseconds()
process.terminate()
process.waitUntilExit()

let what = mode == "exact" ? "\(count) connections on one exact type" : "\(count) connection(s) with 4096 wildcard patterns of \(patternBytes) bytes"
print(String(format: "%@ (%d subscriptions): broker CPU for the teardown %.1f ms", what, subscriptions, Double(after - before) / 1e6))
