// The set-up exchanges of every protocol, where speed does not matter:
// greeting the broker, subscribing and waiting for the confirmation, the
// sync marker that says "everything before this is handled", one-off
// publishes, and reading replies as text.
//
// Before editing: none of this runs per message; it may allocate freely.
// Every wait is bounded, and a refusal fails the run with the broker's text.
import EventBusSystem
import Glibc

/// Connects to the broker at `address` and completes the protocol's greeting:
/// nats reads the server's `INFO` line, sends `NATS.connect` (with
/// `natsHeaders`, `NATS.connectWithHeaders`) and a PING and waits for the
/// PONG; mqtt sends CONNECT and needs CONNACK with code 0.
/// - Returns: the connected, blocking descriptor.
func openClient(_ wire: Wire, _ address: String, natsHeaders: Bool = false) -> Int32 {
    let fd = connectBroker(address)
    greet(fd, wire, natsHeaders: natsHeaders)
    return fd
}

/// The greeting part of `openClient`, on a connected descriptor.
func greet(_ fd: Int32, _ wire: Wire, natsHeaders: Bool = false, timeoutMs: Int = 10_000) {
    switch wire {
    case .nats:
        readFrames(fd, .nats, timeoutMs: timeoutMs) { $0.hasPrefix("INFO ") }
        writeAll(fd, (natsHeaders ? NATS.connectWithHeaders : NATS.connect) + NATS.ping)
        readFrames(fd, .nats, timeoutMs: timeoutMs) { frame in
            if frame.hasPrefix("-ERR") { fail("nats-server refused CONNECT: \(frame)") }
            return frame == "PONG"
        }
    case .mqtt:
        let id = "eb\(getpid())-\(String(monotonicNanos(), radix: 16))"
        writeAll(fd, MQTT.connect(clientID: id))
        readFrames(fd, .mqtt, timeoutMs: timeoutMs) { frame in
            guard frame.hasPrefix("CONNACK") else { return false }
            if frame != "CONNACK 0" { fail("mqtt CONNECT refused: \(frame)") }
            return true
        }
    case .eventbus, .redis, .relay:
        break
    }
}

/// The marker a connection sends after its requests; the broker answers it
/// once every earlier request is handled (all of them handle a connection's
/// requests in order): eventbus `{"op":"ping","req":"sync"}`, redis and nats
/// `PING`, mqtt `PINGREQ`. The relay has none (empty).
func syncRequest(_ wire: Wire) -> [UInt8] {
    switch wire {
    case .eventbus: return Array(#"{"op":"ping","req":"sync"}"#.utf8) + [0x0A]
    case .redis: return respCommand(["PING"])
    case .nats: return NATS.ping
    case .mqtt: return MQTT.pingRequest
    case .relay: return []
    }
}

/// Whether a reply in `readFrames` text is the answer to `syncRequest` (for
/// the relay: its `OK` to `SUB`).
func isSyncReply(_ frame: String, _ wire: Wire) -> Bool {
    switch wire {
    case .eventbus: return frame.hasPrefix(#"{"op":"ok""#)
    case .redis: return frame.hasPrefix("+PONG") || frame.hasPrefix("pong")  // `pong` in subscribed mode
    case .nats: return frame == "PONG"
    case .mqtt: return frame == "PINGRESP"
    case .relay: return frame == "OK"
    }
}

/// Whether a reply in `readFrames` text says a request failed.
func isErrorReply(_ frame: String, _ wire: Wire) -> Bool {
    switch wire {
    case .eventbus: return frame.hasPrefix(#"{"op":"error""#)
    case .redis: return frame.hasPrefix("-")
    case .nats: return frame.hasPrefix("-ERR")
    case .mqtt: return frame.hasPrefix("SUBACK") && frame.split(separator: " ").contains("128")
    case .relay: return false
    }
}

/// Subscribes `fd` (greeted) to exact `types` and to `patterns` in eventbus
/// syntax (`*` one segment, `>` the rest), then sends the sync marker and
/// returns once the broker answered it; fails the run on any refusal.
/// - eventbus: one `{"op":"subscribe","type":T}` per entry, no `req`.
/// - redis: `SUBSCRIBE` for the types, `PSUBSCRIBE` for the patterns as globs
///   (`>` becomes `*`, the closest glob).
/// - nats: `SUB T sid` per entry (same wildcard syntax).
/// - mqtt: one `SUBSCRIBE` with every filter at QoS 0 (`MQTT.topic`).
/// - relay: `SUB`; it forwards everything to every subscriber, so it takes
///   no types and no patterns.
///
/// With `group` (issue 38, case 10) each subscription is a queue group
/// member: eventbus `"group":G`, NATS `SUB T G sid` (a queue group), MQTT
/// `$share/G/T` (a shared subscription, as mosquitto takes it at protocol
/// level 4 too); Redis and the relay have none.
func subscribe(_ fd: Int32, _ wire: Wire, types: [String], patterns: [String] = [], group: String? = nil, timeoutMs: Int = 30_000) {
    var request: [UInt8] = []
    if group != nil && (wire == .redis || wire == .relay) { fail("\(wire.rawValue) has no queue groups") }
    switch wire {
    case .eventbus:
        let member = group.map { #","group":"\#($0)""# } ?? ""
        for type in types + patterns { request += Array(#"{"op":"subscribe","type":"\#(type)"\#(member)}"#.utf8) + [0x0A] }
    case .redis:
        if !types.isEmpty { request += respCommand(["SUBSCRIBE"] + types) }
        if !patterns.isEmpty { request += respCommand(["PSUBSCRIBE"] + patterns.map { $0.replacingOccurrences(">", "*") }) }
    case .nats:
        for (index, subject) in (types + patterns).enumerated() {
            request += NATS.subscribe(subject: group.map { "\(subject) \($0)" } ?? subject, sid: index + 1)
        }
    case .mqtt:
        request += MQTT.subscribe(packetID: 1, filters: (types + patterns).map { MQTT.topic($0) }.map { topic in group.map { "$share/\($0)/\(topic)" } ?? topic })
    case .relay:
        guard patterns.isEmpty else { fail("the relay has no patterns") }
        request += Array("SUB\n".utf8)
    }
    request += syncRequest(wire)
    writeAll(fd, request)
    readFrames(fd, wire, timeoutMs: timeoutMs) { frame in
        if isErrorReply(frame, wire) { fail("subscribe refused: \(frame)") }
        return isSyncReply(frame, wire)
    }
}

/// Publishes one event of `type` with JSON `data` on a connection of its own
/// and returns once the broker handled it (the sync marker came back); the
/// relay is not waited for.
func publishOnce(_ wire: Wire, _ address: String, type: String, data: String) {
    let fd = openClient(wire, address)
    defer { close(fd) }
    writeAll(fd, publishFrame(wire, type: type, payload: Array(data.utf8)).bytes + syncRequest(wire))
    guard wire != .relay else { return }
    readFrames(fd, wire) { frame in
        if isErrorReply(frame, wire) { fail("publish refused: \(frame)") }
        return isSyncReply(frame, wire)
    }
}

/// Reads frames from a blocking descriptor until `done` returns true for one,
/// giving each frame as text (eventbus, nats, relay: the line without CR;
/// redis: the elements' bytes joined by spaces, e.g. `subscribe bench.t 1`,
/// `pong `, `-ERR ...`; mqtt: `CONNACK 0`, `SUBACK 0 0`, `PINGRESP`,
/// `PUBLISH bench/shell`). A NATS `PING` is answered here.
/// Setup-only: allocates per frame. Fails the process on EOF, and after
/// `timeoutMs` unless `failOnTimeout` is false.
/// - Returns: true when `done` accepted a frame, false on timeout.
@discardableResult
func readFrames(_ fd: Int32, _ wire: Wire, timeoutMs: Int = 10_000, failOnTimeout: Bool = true,
                until done: (String) -> Bool) -> Bool {
    let capacity = 1 << 20
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    defer { buffer.deallocate() }
    var used = 0
    let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
    while true {
        var pos = 0
        while let (text, next) = nextFrame(buffer, pos, used, wire) {
            pos = next
            if wire == .nats && text == "PING" { writeAll(fd, NATS.pong) }
            if done(text) { return true }
        }
        if pos > 0 {
            memmove(buffer, buffer + pos, used - pos)
            used -= pos
        }
        let left = Int((deadline - monotonicNanos()) / 1_000_000)
        if left <= 0 {
            if failOnTimeout { fail("timed out waiting for a reply from the broker") }
            return false
        }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&p, 1, Int32(min(left, 1000))) <= 0 { continue }
        switch systemCall(.retry, { read(fd, buffer + used, capacity - used) }) {
        case .failure(let e) where e == .wouldBlock: continue
        case .failure: fail("broker closed the connection during setup: \(errnoText())")
        case .success(0): fail("broker closed the connection during setup")
        case .success(let n): used += n
        }
    }
}

/// The next complete frame at `pos` as text, and the offset after it.
private func nextFrame(_ buffer: UnsafeMutablePointer<UInt8>, _ pos: Int, _ used: Int, _ wire: Wire) -> (String, Int)? {
    guard pos < used else { return nil }
    switch wire {
    case .eventbus, .nats, .relay:
        guard let lf = memchr(buffer + pos, 0x0A, used - pos) else { return nil }
        let next = UnsafeMutableRawPointer(buffer).distance(to: lf) + 1
        // Whitespace outside strings is allowed in frames (PROTOCOL.md "Framing");
        // setup checks compare compact prefixes, so drop it here.
        let line = UnsafeBufferPointer(start: buffer + pos, count: next - pos - 1)
        if wire != .eventbus {
            return (String(decoding: line.last == 0x0D ? line.dropLast() : line[...], as: UTF8.self), next)
        }
        return (String(decoding: line.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }, as: UTF8.self), next)
    case .redis:
        guard let frame = parseResp(buffer, pos, used) else { return nil }
        return (frameText(buffer, pos, frame), frame.end)
    case .mqtt:
        guard let packet = parseMQTT(buffer, pos, used) else { return nil }
        return (packetText(buffer, packet), packet.end)
    }
}

/// The text form of an MQTT packet used by `readFrames`.
private func packetText(_ p: UnsafePointer<UInt8>, _ packet: MQTTPacket) -> String {
    let body = UnsafeBufferPointer(start: p + packet.body, count: packet.end - packet.body)
    switch packet.first & 0xF0 {
    case 0x20: return "CONNACK \(body.count >= 2 ? body[1] : 255)"
    case 0x90: return (["SUBACK"] + body.dropFirst(2).map { String($0) }).joined(separator: " ")
    case 0xD0: return "PINGRESP"
    case 0x30:
        let length = body.count >= 2 ? Int(body[0]) << 8 | Int(body[1]) : 0
        return "PUBLISH " + String(decoding: body.dropFirst(2).prefix(length), as: UTF8.self)
    default: return "MQTT \(packet.first)"
    }
}

/// The text form of a RESP frame used by `readFrames`.
private func frameText(_ p: UnsafePointer<UInt8>, _ start: Int, _ frame: RespFrame) -> String {
    if frame.kind != 0x2A {
        return String(decoding: UnsafeBufferPointer(start: p + start, count: frame.end - start - 2), as: UTF8.self)
    }
    var parts: [String] = []
    var at = start
    // Re-walk the elements for their text (setup only).
    guard let header = memchr(p + at, 0x0A, frame.end - at) else { return "" }
    at = UnsafeRawPointer(p).distance(to: UnsafeRawPointer(header)) + 1
    while at < frame.end {
        guard let lf = memchr(p + at, 0x0A, frame.end - at) else { break }
        let lineEnd = UnsafeRawPointer(p).distance(to: UnsafeRawPointer(lf)) + 1
        if p[at] == 0x24 {
            let lengthText = String(decoding: UnsafeBufferPointer(start: p + at + 1, count: lineEnd - at - 3), as: UTF8.self)
            let length = max(Int(lengthText) ?? 0, 0)
            parts.append(String(decoding: UnsafeBufferPointer(start: p + lineEnd, count: length), as: UTF8.self))
            at = lineEnd + length + 2
        } else {
            parts.append(String(decoding: UnsafeBufferPointer(start: p + at + 1, count: lineEnd - at - 3), as: UTF8.self))
            at = lineEnd
        }
    }
    return parts.joined(separator: " ")
}
