// What `eventbus request` prints or exits with for each answer (EventBusCLI's
// `RequestOutcome`), without a broker: the answers go in as broker frames.
// The same outcomes against a real broker and CLI are in
// EventBusIntegrationTests (CLIRequestServeTests).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import Testing

/// The reply of the broker frame `text`.
private func reply(_ text: String) throws -> Reply {
    let bytes = Array(text.utf8)
    let frame = try Result { () throws(BrokerFrameError) in try BrokerFrame.read(bytes.span.bytes) }.get()
    return try #require(frame.reply)
}

/// What `outcome` makes of the frame `text`: the printed line, or the exit status and message.
private func result(_ outcome: RequestOutcome, _ text: String) throws -> String {
    do {
        return String(decoding: try outcome.output(for: try reply(text)), as: UTF8.self)
    } catch let error as CLIError {
        return "\(error.status): \(error.message ?? "")"
    }
}

private let plain = RequestOutcome(type: "thumb.make", json: false, timeoutMilliseconds: nil, timeoutText: "the broker's default (25s)")

@Suite("eventbus request's outcomes (RequestOutcome)")
struct RequestOutcomeTests {
    @Test("A reply prints its data, or with --format json who answered and the seq")
    func answered() throws {
        let ok = #"{"op":"ok","req":1,"seq":43,"reply":{"time":"2026-12-05T12:00:00.001Z","pid":811,"uid":0,"gid":0,"data":{"w":64}}}"#
        #expect(try result(plain, ok) == "{\"w\":64}\n")
        var json = plain
        json.json = true
        #expect(try result(json, ok) == #"{"seq":43,"time":"2026-12-05T12:00:00.001Z","pid":811,"uid":0,"gid":0,"data":{"w":64}}"# + "\n")
    }

    @Test("Each way of getting no answer has its status and words; the server's text is escaped for the terminal")
    func noAnswer() throws {
        #expect(try result(plain, #"{"op":"error","req":1,"code":"service_error","message":"no \u001b[31mfile","reply":{"pid":811,"uid":1000,"gid":0,"data":null}}"#)
                == #"2: the service for 'thumb.make' failed (pid 811, uid 1000): no \x1B[31mfile"#)
        #expect(try result(plain, #"{"op":"error","req":1,"code":"no_reply","message":"went away without replying"}"#)
                == "3: no reply to the request for 'thumb.make': went away without replying")
        #expect(try result(plain, #"{"op":"error","req":1,"code":"no_responders","message":"no connection serves thumb.make"}"#)
                == "67: no one serves 'thumb.make' (start a server: eventbus serve thumb.make -- COMMAND)")
        #expect(try result(plain, #"{"op":"error","req":1,"code":"no_responders","message":"on node host-b: no connection serves thumb.make"}"#)
                == "67: no one serves 'thumb.make': on node host-b: no connection serves thumb.make")
        #expect(try result(plain, #"{"op":"error","req":1,"code":"timeout","message":"m"}"#)
                == "124: timed out after the broker's default (25s) waiting for a reply to the request for 'thumb.make'")
    }

    @Test("A --timeout over the broker's maximum is a usage error naming the maximum; other refusals are the broker's")
    func refused() throws {
        let over = #"{"op":"error","req":1,"code":"bad_request","message":"timeout 90000 ms is over the broker's maximum of 60000 ms"}"#
        #expect(RequestOutcome.brokerTimeoutLimit(try reply(over)) == 60_000)
        let asked = RequestOutcome(type: "t", json: false, timeoutMilliseconds: 90_000, timeoutText: "90s")
        #expect(try result(asked, over).hasPrefix("64: --timeout 90s is over the broker's maximum of 1min (eventbusd --max-request-timeout)"))
        let forbidden = try result(asked, #"{"op":"error","req":1,"code":"forbidden","message":"not allowed"}"#)
        #expect(forbidden.hasPrefix("\(ExitStatus.noPermission.rawValue): ") && forbidden.contains("not allowed"), "\(forbidden)")
        #expect(RequestOutcome.brokerTimeoutLimit(try reply(#"{"op":"error","req":1,"code":"bad_request","message":"bad"}"#)) == nil)
    }
}
