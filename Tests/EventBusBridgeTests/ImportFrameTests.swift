// An import's `publish` frame as the bridge writes it (LocalPublish.appendFrame)
// is the frame ClientRequest would encode for it, escapes and absent members included.
import EventBusBridge
@_spi(Package) import EventBusProtocol
import Testing

@Suite struct ImportFrameTests {
    static let cases: [LocalPublish] = [
        LocalPublish(type: EventType("order.created")!, data: try! JSONText(validating: Array(#"{"n":1, "s":"caf\u00e9"}"#.utf8), layout: .asGiven),
                     source: "billing", id: "de393f76f0118fbf-4",
                     origin: Origin(node: "host-a", instance: "de393f76f0118fbf", seq: 4, time: "2026-12-01T10:17:47.166Z", pid: 811, uid: 1000, gid: 1000)),
        LocalPublish(type: EventType("a.b")!, data: nil, source: nil, id: nil, origin: Origin(node: "n")),
        LocalPublish(type: EventType("a.b")!, data: nil, source: "billing\r\nInjected: \"yes\" \\ é\u{1}", id: "x\ty",
                     origin: Origin(node: "n", instance: "i\"", seq: UInt64.max, time: "t", pid: -1, uid: UInt64.max, gid: 0)),
        // Line separators the broker refuses raw (PROTOCOL-NOTES "Framing"): escaped.
        LocalPublish(type: EventType("a.b")!, data: nil, source: "line\u{2028}sep\u{2029}next\u{85}", id: "é",
                     origin: Origin(node: "n\u{2028}")),
    ]

    @Test(arguments: cases) func theFrameIsWhatClientRequestEncodes(_ event: LocalPublish) {
        var fast: [UInt8] = []
        event.appendFrame(to: &fast)
        let expected = ClientRequest.publish(type: event.type.name, source: event.source, id: event.id, origin: event.origin.json, data: event.data).encoded(req: nil)
        #expect(String(decoding: fast, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
        let raw = String(decoding: fast.dropLast(), as: UTF8.self)
        #expect(!raw.unicodeScalars.contains { $0 == "\u{2028}" || $0 == "\u{2029}" || $0 == "\u{85}" || $0 == "\r" || $0 == "\n" }, "\(raw)")
    }
}
