// What `eventbus serve --json` makes of a line of its standard input
// (EventBusCLI's `ServeReplyLine`), without a broker: a reply to a token with
// data or an error text, nothing for a blank line, and the reason a line is
// no reply. serve --json against a real broker is in EventBusIntegrationTests.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol
import Testing

/// What `text` reads as: "to data error", "blank", or "bad: reason".
private func read(_ text: String) -> String {
    let bytes = Array(text.utf8)
    return switch ServeReplyLine.read(bytes.span.bytes) {
    case nil: "blank"
    case .failure(let error)?: "bad: " + error.message
    case .success(let reply)?: "\(reply.to) \(reply.data.map { String(decoding: $0.bytes, as: UTF8.self) } ?? "-") \(reply.error ?? "-")"
    }
}

@Suite("serve --json's reply lines (ServeReplyLine)")
struct ServeReplyLineTests {
    @Test("A reply names its token and carries data (compacted) or an error text")
    func replies() {
        #expect(read(#"{"to":"r-1","data":{ "w" : 64 }}"#) == #"r-1 {"w":64} -"#)
        #expect(read(#"{"to":"r\u002d2","error":"no such file"}"#) == "r-2 - no such file")
        #expect(read(#"{"to":"r-3"}"#) == "r-3 - -")
        #expect(read(" \t ") == "blank")
    }

    @Test("A line that is no reply says why")
    func badLines() {
        #expect(read("hello").hasPrefix("bad: not a JSON object"))
        #expect(read(#"{"data":1}"#) == #"bad: no string "to" (the request's "reply" token)"#)
        #expect(read(#"{"to":1}"#) == #"bad: no string "to" (the request's "reply" token)"#)
        #expect(read(#"{"to":"t","error":5}"#) == #"bad: "error" must be a string"#)
    }
}
