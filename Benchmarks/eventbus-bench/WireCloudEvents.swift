// Case 9's NATS-alone rows that carry a header block (issue 36; docs/BENCHMARKS.md
// "Issue 36, third pass: what the wire costs"): NATS's own publisher sends
// each 64-byte message as an HPUB with the block eventbus's link writes for
// such an event, made by the link's own code (`CloudEventsHeaders.exportBlock`)
// so that the bytes stay the link's when the link changes; or, as a
// hypothetical eventbus does not send, a block of only CloudEvents' four
// required attributes. Also the subjects the link publishes on and
// subscribes to for `export = bench.>` / `import = bench.>` on node `a`.
//
// Before editing: the representative event is the one case 9's eventbus
// run exports: type `bench.t`, published without `source` or `id` (so the
// broker writes `pid/PID` and `INSTANCE-SEQ`) by a process of five pid
// digits and this process's uid and gid, at a seq of six digits as most of
// a 4-second flooding run's are. As root its block is 326 bytes; seq 1's,
// captured from a real link on this machine, was 311, every field of the
// same shape. A block is made once per run, never per message.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Glibc

/// Which header block a case-9 NATS publisher sends (`eventbus-bench pub --headers`).
enum NATSHeaderSet: String, CaseIterable {
    /// What the link sends for the event: `CloudEventsHeaders.exportBlock`, 13 headers.
    case link = "ce"
    /// Hypothetical, not what eventbus sends: `ce-specversion`, `ce-id`,
    /// `ce-source`, `ce-type` only (CloudEvents 1.0's required attributes),
    /// with the same values as `link`'s.
    case required = "ce4"

    /// The whole block, `NATS/1.0` CR LF ... CR LF CR LF.
    var block: [UInt8] {
        let event = LinkWire.representativeEvent()
        switch self {
        case .link:
            return CloudEventsHeaders.exportBlock(event, node: LinkWire.node, instance: LinkWire.instance)
        case .required:
            var block = HeaderBlockWriter()
            block.append(HeaderName.specVersion, "1.0")
            block.append(HeaderName.id, event.metadata.id)
            block.append(HeaderName.source, event.metadata.source)
            block.append(HeaderName.type, event.metadata.type)
            return block.finish()
        }
    }
}

/// The link's subjects and event for case 9 (scripts/lib/bench-brokers
/// `linked_start`: node `a` exports `bench.>`, node `b` imports `bench.>`).
enum LinkWire {
    static let node = NodeName("a")!
    /// A broker run's `instance` as eventbusd makes it: 16 hex digits.
    static let instance = "f711b1bed501c28c"
    /// The event type of every case.
    static let type = "bench.t"
    /// A seq with as many digits as most of a flooding run's.
    static let seq: UInt64 = 400_000
    /// A publisher's pid, of as many digits as this machine's.
    static let pid: Int32 = 30908

    /// `eventbus.evt.a.bench.t`: where the link on node `a` publishes `bench.t`.
    static var exportSubject: String {
        SubjectMapping(node: node).exportSubject(for: EventType(type)!).text
    }

    /// `eventbus.evt.*.bench.>`: what the link importing `bench.>` subscribes to.
    static var importSubject: String {
        SubjectMapping(node: NodeName("b")!).importSubject(for: Pattern("bench.>")!).text
    }

    /// The event as the broker hands it to the link (the payload is not part of the block).
    static func representativeEvent() -> RawEvent {
        let metadata = EventMetadata(
            type: type, seq: seq, time: "2026-12-06T01:48:25.670Z", source: "pid/\(pid)",
            id: "\(instance)-\(seq)", pid: pid, uid: getuid(), gid: getgid())
        return RawEvent(metadata: metadata, data: Payload.make(size: 64))
    }
}
