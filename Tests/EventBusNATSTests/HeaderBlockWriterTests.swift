// `HeaderBlockWriter` writes exactly the block `Headers.encoded()` writes for
// the same fields: values percent-encoded (CR LF cannot start a line),
// numbers as plain digits, joined parts separated by `:`.
import EventBusNATS
import Testing

@Suite struct HeaderBlockWriterTests {
    @Test(arguments: [
        ("billing", UInt64(0)),
        ("billing\r\nInjected: yes", UInt64(42)),
        ("caf\u{e9} 100% \"q\"", UInt64.max),
        ("", UInt64(1_000_000_007)),
    ])
    func writesWhatHeadersEncodedWrites(value: String, number: UInt64) {
        var writer = HeaderBlockWriter(capacity: 16)
        writer.append("ce-source", value)
        writer.append("ce-ebseq", number)
        writer.append("Nats-Msg-Id", joining: "host-a", value, last: number)
        var headers = Headers()
        headers.append("ce-source", value)
        headers.append("ce-ebseq", String(number))
        headers.append("Nats-Msg-Id", "host-a:\(value):\(number)")
        let block = writer.finish()
        #expect(block == headers.encoded())
        #expect((try? Headers.parse(block.span.bytes)) == headers)
    }

    @Test func linesWrittenOnceAreTheFieldsWrittenInPlace() {
        let lines = HeaderBlockWriter.lines { block in
            block.append("ce-datacontenttype", "application/json")
            block.append("ce-ebinstance", "a b%")
        }
        var withLines = HeaderBlockWriter(capacity: 0)
        withLines.append("ce-id", "x-1")
        withLines.append(lines)
        withLines.append(lines)
        var inPlace = HeaderBlockWriter(capacity: 0)
        inPlace.append("ce-id", "x-1")
        for _ in 0..<2 {
            inPlace.append("ce-datacontenttype", "application/json")
            inPlace.append("ce-ebinstance", "a b%")
        }
        let block = withLines.finish()
        let expected = inPlace.finish()
        #expect(block == expected)
        #expect(String(decoding: block, as: UTF8.self).contains("ce-ebinstance: a%20b%25\r\n"))
    }
}
