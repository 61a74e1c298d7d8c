// The requests scenarios and the tests around them make of a `RawClient`:
// an `ok` or an `error` required, a publish's receipt, `stats.me`, the
// `clients` list, the events up to a sentinel. Shared by EventBusServerTests
// and EventBusIntegrationTests (each had its own copy before the scenarios).
//
// Before editing: helpers throw instead of recording issues, so a failing
// step stops the scenario at once and the harness attaches the broker's log.
import EventBusTestSupport
import Foundation

/// What a `publish` with `req` answered: `seq` and `delivered`.
package struct Receipt {
    package let seq: Int
    package let delivered: Int

    package init(seq: Int, delivered: Int) {
        self.seq = seq
        self.delivered = delivered
    }
}

extension RawClient {
    /// Sends `json` and requires an `ok` reply (returned).
    @discardableResult
    package func ok(_ json: String, timeout: Duration = RawClient.defaultTimeout) throws -> Frame {
        let reply = try request(json, timeout: timeout)
        guard reply.op == "ok" else { throw TestFailure("expected ok to \(json.prefix(200)), got \(reply.raw.prefix(300))") }
        return reply
    }

    /// Sends `json` and requires an `error` reply (returned).
    @discardableResult
    package func error(_ json: String, timeout: Duration = RawClient.defaultTimeout) throws -> Frame {
        let reply = try request(json, timeout: timeout)
        guard reply.op == "error" else { throw TestFailure("expected error to \(json.prefix(200)), got \(reply.raw.prefix(300))") }
        return reply
    }

    /// Subscribes to each pattern with a `req`, requiring `ok`s.
    package func subscribe(_ patterns: String...) throws {
        for (i, pattern) in patterns.enumerated() {
            try ok(#"{"op":"subscribe","type":"\#(pattern)","req":"sub-\#(i)"}"#)
        }
    }

    /// Publishes one event with `req` and returns the receipt.
    @discardableResult
    package func publish(_ type: String, data: String = "null", req: Int = 1) throws -> Receipt {
        let reply = try ok(#"{"op":"publish","type":"\#(type)","req":\#(req),"data":\#(data)}"#)
        guard let seq = reply.seq, let delivered = reply.int("delivered") else {
            throw TestFailure("publish ok lacks integer seq/delivered: \(reply.raw)")
        }
        return Receipt(seq: seq, delivered: delivered)
    }

    /// `me` of a `stats` reply.
    package func me() throws -> [String: Any] {
        guard let me = try stats().object("me") else { throw TestFailure("stats without me") }
        return me
    }

    /// The `clients` list this connection may see.
    package func clientList() throws -> [Frame] {
        let reply = try ok(#"{"op":"clients","req":"clients"}"#)
        guard let list = reply.array("clients") as? [[String: Any]] else { throw TestFailure("clients reply without a list: \(reply.raw)") }
        return try list.map { try Frame(line: Array(JSONSerialization.data(withJSONObject: $0))) }
    }

    /// Reads frames until an event of `type`; returns the types of the events up to it.
    package func eventTypes(until type: String) throws -> [String] {
        try readFrames(until: { $0.op == "event" && $0.type == type }).filter { $0.op == "event" }.compactMap(\.type)
    }
}

extension RawClient {
    /// Publishes `count` events of type `type` whose `data` is a string of
    /// `padding` bytes, each with `req` = its index, in batches of `batch`
    /// frames per write; reads every reply and returns the receipts in order.
    /// `afterBatch` runs after each write (e.g. to sample the broker's RSS).
    package func publishMany(
        _ type: String, count: Int, padding: Int, batch: Int = 64,
        timeout: Duration = .seconds(120), afterBatch: () throws -> Void = {}
    ) throws -> [Receipt] {
        let deadline = ContinuousClock.now + timeout
        let pad = String(repeating: "x", count: padding)
        var start = 0
        while start < count {
            var bytes: [UInt8] = []
            for i in start..<min(start + batch, count) {
                bytes += Array(#"{"op":"publish","type":"\#(type)","req":\#(i),"data":"\#(pad)"}"#.utf8)
                bytes.append(0x0A)
            }
            try sendBytes(bytes, timeout: max(deadline - ContinuousClock.now, .seconds(1)))
            try afterBatch()
            start += batch
        }
        let replies = try readFrames(count: count, timeout: max(deadline - ContinuousClock.now, .seconds(10)))
        return try replies.enumerated().map { i, reply in
            guard reply.op == "ok", reply.req == .integer(i), let seq = reply.seq, let delivered = reply.int("delivered") else {
                throw TestFailure("reply \(i) to a bulk publish is not ok with req \(i), seq, delivered: \(reply.raw.prefix(300))")
            }
            return Receipt(seq: seq, delivered: delivered)
        }
    }
}

/// `{"op":"ping","req":N,"x":"aaa…` of about `bytes` bytes without its end (an incomplete frame).
package func incompletePing(req: Int, bytes: Int) -> [UInt8] {
    Array(#"{"op":"ping","req":\#(req),"x":""#.utf8) + [UInt8](repeating: 0x61, count: bytes)
}
