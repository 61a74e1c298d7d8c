// The name tables (KeyTable.swift, Envelope.swift, BrokerFrame.swift): the
// wire spelling of every op and key, each found from its bytes (escaped too)
// and nothing else found, and the envelope's duplicate-key check on frames
// with very many keys (issue 11: it used to be quadratic).
import Testing
@_spi(Package) @testable import EventBusProtocol

@Suite("Key tables")
struct KeyTableTests {
    @Test func theWireNamesAreTheProtocols() {
        #expect(EnvelopeKey.table.names == ["op", "req", "type", "data", "source", "id", "retain", "origin", "client", "echo", "overflow", "last", "since", "instance", "limit",
                                            "serve", "group", "key", "timeout", "to", "error", "fallback", "code", "servers", "uid"])
        #expect(RequestOp.table.names == ["hello", "subscribe", "unsubscribe", "publish", "ping", "stats", "clear", "clients", "types", "request", "reply"])
        #expect(BrokerOp.table.names == ["ok", "error", "event", "dropped", "gap", "request", "servers"])
        #expect(BrokerFrameKey.table.names == ["op", "req", "seq", "type", "time", "source", "id", "pid", "uid", "gid", "data", "retained", "replayed", "origin", "count", "since_seq", "first_seq",
                                               "key", "redelivered", "reply", "timeout", "group"])
        #expect(KeyTable.wireName("queuedBytes") == "queued_bytes" && KeyTable.wireName("op") == "op")
    }

    /// `text` (JSON string syntax, quotes included) as a token of its own bytes.
    private func position(_ text: String, _ table: KeyTable) -> Int? {
        let bytes = utf8(text)
        return bytes.withByteView { raw in
            let token = try! JSONScanner.validate(raw)
            return table.lookup.position(of: token, in: raw)
        }
    }

    @Test func everyNameIsFoundPlainOrEscaped() {
        for table in [EnvelopeKey.table, RequestOp.table, BrokerOp.table, BrokerFrameKey.table] {
            for (index, name) in table.names.enumerated() {
                #expect(position("\"\(name)\"", table) == index, "\(name)")
                let escaped = "\"\\u00" + String(name.utf8.first!, radix: 16) + name.dropFirst() + "\""
                #expect(position(escaped, table) == index, "\(escaped)")
            }
        }
    }

    @Test("text that is not a name is not found", arguments: [
        #""""#, #""o""#, #""opx""#, #""Op""#, #""op ""#, #""o\u0000""#, #""op\u0000""#, #""datum""#,
        #""overflow_""#, #""overflo""#, #""instancex""#, #""instanc""#, #""since_se""#, #""since_seq_""#,
        #""since_sez""#, #""first_seqq""#, #""a very long key indeed, longer than sixteen bytes""#, #""é""#,
    ])
    func otherTextIsNotFound(_ text: String) {
        for table in [EnvelopeKey.table, RequestOp.table, BrokerOp.table, BrokerFrameKey.table] {
            #expect(position(text, table) == nil, "\(text) in \(table.names)")
        }
    }

    @Test func shortKeysAtTheEndOfABufferAreReadSafely() {
        // Fewer than 8 bytes from the key to the end of the buffer.
        for text in [#""op""#, #""id""#, #""req""#, #""x""#] {
            let expected = EnvelopeKey.table.names.firstIndex(of: String(text.dropFirst().dropLast()))
            #expect(position(text, EnvelopeKey.table) == expected, "\(text)")
        }
    }

    /// `{"k0":1,...,"k<n-1>":1,"op":"ping","req":1}` plus `tail`.
    private func manyKeys(_ n: Int, tail: String = "") -> [UInt8] {
        var text = "{"
        for i in 0..<n { text += "\"k\(i)\":1," }
        return utf8(text + #""op":"ping","req":1"# + tail + "}")
    }

    @Test func aFrameOf85000UnknownKeysIsAnsweredAsItsOp() {
        let frame = manyKeys(85_000)
        #expect(frame.count > 900_000 && frame.count < ProtocolConstants.defaultMaxFrameBytes)
        let d = Decoded(bytes: frame)
        #expect(d.error == nil && d.req == "1")
        guard case .ping = d.request else { Issue.record("got \(String(describing: d.request))"); return }
    }

    @Test func aDuplicateAmong85000UnknownKeysIsFound() {
        let plain = Decoded(bytes: manyKeys(85_000, tail: #","k84999":2"#))
        #expect(plain.code == .badRequest && plain.req == "1")
        #expect(plain.error?.message == #"duplicate key "k84999" in frame"#)
        let escaped = Decoded(bytes: manyKeys(85_000, tail: #","\u006b0":2"#))
        #expect(escaped.error?.message == #"duplicate key "k0" in frame"#)
    }
}
