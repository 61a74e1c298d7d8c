// (issue 36) The import reads a block of exactly the shape its own export
// writes by position (`CloudEventsHeaders.importExportBlock`), and any other
// block by the general walk: both must give the same result. A block read
// the general way here is the same bytes with one header name's case
// changed (`ce-id` -> `CE-ID`), which the general walk matches and the
// positional reader does not. Also: the instance and source Strings reused
// from the last import are replaced when the next one differs.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

@Suite struct ExportBlockImportTests {
    static func event(source: String = "billing", id: String = "3f9a1c07-42", pid: Int32 = 1234, seq: UInt64 = 42) -> RawEvent {
        RawEvent(metadata: EventMetadata(type: "order.created", seq: seq, time: "2026-11-29T13:00:00.123Z", source: source, id: id,
                                         pid: pid, uid: 1000, gid: 1001), data: bytes("1"))
    }

    /// The block with `ce-id`'s name upper-cased: read by the general walk.
    static func otherCase(_ block: [UInt8]) -> [UInt8] {
        let text = String(decoding: block, as: UTF8.self)
        let changed = text.replacing("\r\nce-id:", with: "\r\nCE-ID:")
        #expect(changed != text)
        return Array(changed.utf8)
    }

    static func imported(_ block: [UInt8], type: String = "order.created") -> (CloudEventsHeaders.Imported?, String?) {
        var problem: String?
        var recent = CloudEventsHeaders.RecentValues()
        let result = CloudEventsHeaders.import(block, node: node("host-a"), type: EventType(type)!, recent: &recent, problem: &problem)
        return (result, problem)
    }

    @Test(arguments: [
        event(), event(source: "a b"), event(source: " lead"), event(source: "100%"), event(id: "line\r\nbreak"),
        event(id: "caf\u{E9}"), event(seq: 0),
    ])
    func anExportedBlockImportsAsTheGeneralWalkReadsIt(_ raw: RawEvent) throws {
        let block = CloudEventsHeaders.exportBlock(raw, node: node("host-a"), instance: "broker-9")
        let (fast, fastProblem) = Self.imported(block)
        let (general, generalProblem) = Self.imported(Self.otherCase(block))
        #expect(fastProblem == nil && generalProblem == nil)
        let result = try #require(fast)
        #expect(result == general)
        #expect(result.id == raw.metadata.id && result.source == raw.metadata.source)
        #expect(result.origin == Origin(node: "host-a", instance: "broker-9", seq: raw.metadata.seq, time: raw.metadata.time,
                                        pid: Int64(raw.metadata.pid), uid: 1000, gid: 1001))
    }

    @Test func aRefusedValueIsRefusedAlikeBothWays() {
        // The type of the subject differs from ce-type: refused, same text.
        let block = CloudEventsHeaders.exportBlock(Self.event(), node: node("host-a"), instance: "broker-9")
        let (fast, fastProblem) = Self.imported(block, type: "order.deleted")
        let (general, generalProblem) = Self.imported(Self.otherCase(block), type: "order.deleted")
        #expect(fast == nil && general == nil)
        #expect(fastProblem != nil && fastProblem == generalProblem)
        // A seq that is not a number, in the export's shape.
        let text = String(decoding: block, as: UTF8.self).replacing("ce-ebseq: 42", with: "ce-ebseq: 4x")
        let (bad, badProblem) = Self.imported(Array(text.utf8))
        let (badGeneral, badGeneralProblem) = Self.imported(Self.otherCase(Array(text.utf8)))
        #expect(bad == nil && badGeneral == nil)
        #expect(badProblem?.contains("ce-ebseq") == true && badProblem == badGeneralProblem)
        // A negative pid (written as the broker sent it, refused on import).
        let negative = CloudEventsHeaders.exportBlock(Self.event(pid: -5), node: node("host-a"), instance: "broker-9")
        let (pid, pidProblem) = Self.imported(negative)
        let (pidGeneral, pidGeneralProblem) = Self.imported(Self.otherCase(negative))
        #expect(pid == nil && pidGeneral == nil)
        #expect(pidProblem?.contains("ce-ebpid") == true && pidProblem == pidGeneralProblem)
    }

    @Test func theInstanceAndSourceOfTheLastImportAreReplacedWhenTheNextDiffers() throws {
        var recent = CloudEventsHeaders.RecentValues()
        var problem: String?
        for (instance, source) in [("broker-9", "billing"), ("broker-9", "billing"), ("broker-10", "shipping"), ("broker-9", "billing")] {
            let block = CloudEventsHeaders.exportBlock(Self.event(source: source), node: node("host-a"), instance: instance)
            let result = try #require(CloudEventsHeaders.import(block, node: node("host-a"), type: EventType("order.created")!, recent: &recent, problem: &problem))
            #expect(result.origin.instance == instance && result.source == source)
        }
    }
}
