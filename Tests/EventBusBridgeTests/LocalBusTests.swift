// The bridge's bus session without a socket (LocalBus, moved into the
// EventBusBridge library for issue 36): what it writes on a new connection,
// what each broker frame becomes as a report, import batches closed by one
// `ping` whose answer confirms them, an import refused by the policy counted
// `denied`, and the imports a lost connection leaves unconfirmed.
@testable import EventBusBridge
@_spi(Package) import EventBusProtocol
import Testing

@Suite struct LocalBusTests {
    /// Feeds `line` (one broker frame, without LF) and returns the reports of that read.
    private func feed(_ bus: inout LocalBus, _ line: String) -> [BusReport] {
        var reports: [BusReport] = []
        bus.handle(.frame(Array(line.utf8).span.bytes), &reports)
        bus.endOfRead(&reports)
        return reports
    }

    private func written(_ bus: inout LocalBus) -> [String] {
        var buffer: [UInt8] = []
        bus.takeBytes(into: &buffer)
        return String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private static let hello = #"{"op":"ok","req":1,"server":"eventbusd","version":"1.3.0","protocol":1,"instance":"i1","conn":7,"pid":1,"features":["origin","flow"]}"#

    private func connected() -> LocalBus {
        var bus = LocalBus(path: "test", patterns: [Pattern("order.>")!, Pattern("order.created")!])
        bus.connectionOpened()
        return bus
    }

    @Test func aNewConnectionSaysHelloWithOverflowWaitAndSubscribesTheMinimalPatterns() {
        var bus = connected()
        let lines = written(&bus)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.contains(#""op":"hello""#) == true && lines.first?.contains(#""client":"eventbus-bridge""#) == true && lines.first?.contains(#""overflow":"wait""#) == true, "\(lines)")
        #expect(lines.last?.contains(#""op":"subscribe""#) == true && lines.last?.contains("order.>") == true, "order.created is inside order.>: \(lines)")
    }

    @Test func eventsOfOneReadAreOneBatchAndTheHelloIsUp() throws {
        var bus = connected()
        _ = written(&bus)
        let up = feed(&bus, Self.hello)
        guard case .up(let instance, let features, false) = try #require(up.first) else { Issue.record("\(up)"); return }
        #expect(instance == "i1" && features.contains("origin"))
        var reports: [BusReport] = []
        for seq in 1...3 {
            let frame = #"{"op":"event","seq":\#(seq),"type":"order.created","time":"2026-12-01T10:17:47.169Z","source":"s","id":"i1-\#(seq)","pid":2,"uid":3,"gid":4,"data":{"n":\#(seq)}}"#
            bus.handle(.frame(Array(frame.utf8).span.bytes), &reports)
        }
        bus.endOfRead(&reports)
        #expect(reports.count == 1)
        guard case .events(let events) = reports.first else { Issue.record("\(reports)"); return }
        #expect(events.map(\.metadata.seq) == [1, 2, 3])
    }

    @Test func importsAreConfirmedByTheirBatchPingAndARefusalIsCountedDenied() throws {
        var bus = connected()
        _ = written(&bus)
        _ = feed(&bus, Self.hello)
        let event = LocalPublish(type: EventType("order.created")!, data: nil, source: "s", id: "x", origin: Origin(node: "b"))
        let queued = bus.publish(event) && bus.publish(event) && bus.publish(event)
        #expect(queued)
        let lines = written(&bus)
        #expect(lines.count == 4 && lines.dropLast().allSatisfy { $0.contains(#""op":"publish""#) && !$0.contains(#""req""#) }, "\(lines)")
        let ping = try #require(lines.last)
        #expect(ping.contains(#""op":"ping""#), "one ping closes the batch: \(lines)")
        let req = try #require(ping.split(separator: ",").first { $0.contains(#""req""#) }?.split(separator: ":").last.map { String($0.filter(\.isNumber)) })
        let refused = feed(&bus, #"{"op":"error","code":"forbidden","message":"bridge denied for uid 4321"}"#)
        guard case .importRefused(.denied, let message) = refused.first else { Issue.record("\(refused)"); return }
        #expect(message.contains("bridge denied"))
        let confirmed = feed(&bus, #"{"op":"ok","req":\#(req)}"#)
        guard case .imported(let count) = confirmed.first else { Issue.record("\(confirmed)"); return }
        #expect(count == 2, "three imports, one refused")
    }

    @Test func aLostConnectionCountsTheUnconfirmedImportsAndRefusesNewOnes() {
        var bus = connected()
        _ = written(&bus)
        _ = feed(&bus, Self.hello)
        let event = LocalPublish(type: EventType("a.b")!, data: nil, source: nil, id: nil, origin: Origin(node: "b"))
        let queued = bus.publish(event) && bus.publish(event)
        _ = written(&bus)
        let third = bus.publish(event)
        #expect(queued && third)
        let (unconfirmed, wasGreeted) = bus.connectionClosed()
        #expect(unconfirmed == 3 && wasGreeted)
        let afterClose = bus.publish(event)
        #expect(!afterClose, "no connection: the caller counts it lost")
    }

    /// (issue 36) The request imports: a watch per pattern once the broker
    /// lists `servers`, its list reported, asked again on each `servers`
    /// frame; a broker without the feature: the whole pattern. A relayed
    /// `reply` goes without `req` (no `ok` to wake the bridge for).
    @Test func theRequestImportsWatchTheServingPatternsAndARelayHasNoReq() throws {
        var bus = LocalBus(path: "test", patterns: [], watchPatterns: [Pattern("svc.>")!])
        bus.connectionOpened()
        _ = written(&bus)
        let up = feed(&bus, Self.hello.replacingOccurrences(of: #""flow"]"#, with: #""flow","servers"]"#))
        #expect(up.count == 1, "\(up)")
        let watch = written(&bus)
        #expect(watch == [#"{"op":"subscribe","req":2,"type":"svc.>","servers":true}"#], "\(watch)")
        let listed = feed(&bus, #"{"op":"ok","req":2,"type":"svc.>","servers":["*.echo","svc.a"]}"#)
        guard case .serving(let pattern, let servers) = try #require(listed.first) else { Issue.record("\(listed)"); return }
        #expect(pattern.text == "svc.>" && servers.map(\.text) == ["*.echo", "svc.a"])
        // (attacker6) The loop's read of that list took 1 µs: the re-ask waits `rewatchPacing` µs more.
        bus.paceRewatch(spent: 1_000, now: 0)
        #expect(feed(&bus, #"{"op":"servers","type":"svc.>"}"#).isEmpty)
        #expect(bus.rewatchDeadline == 1_000 * LocalBus.rewatchPacing)
        bus.rewatchIfDue(now: 1_000 * LocalBus.rewatchPacing - 1)
        #expect(written(&bus).isEmpty, "paced")
        bus.rewatchIfDue(now: 1_000 * LocalBus.rewatchPacing)
        #expect(written(&bus) == [#"{"op":"subscribe","req":3,"type":"svc.>","servers":true}"#])
        #expect(bus.rewatchDeadline == nil)
        let refused = feed(&bus, #"{"op":"error","req":3,"code":"forbidden","message":"no bridge right"}"#)
        guard case .serving(_, let none) = try #require(refused.last) else { Issue.record("\(refused)"); return }
        #expect(none.isEmpty && refused.count == 2)
        bus.relay(.reply(to: "0123456789abcdef0123456789abcdef", data: .null))
        #expect(written(&bus) == [#"{"op":"reply","to":"0123456789abcdef0123456789abcdef","data":null}"#])
        // An older broker: the whole import pattern, no watch.
        var old = LocalBus(path: "test", patterns: [], watchPatterns: [Pattern("svc.>")!])
        old.connectionOpened()
        _ = written(&old)
        let oldUp = feed(&old, Self.hello)
        guard case .serving(let whole, let list) = try #require(oldUp.last) else { Issue.record("\(oldUp)"); return }
        #expect(whole.text == "svc.>" && list.map(\.text) == ["svc.>"] && written(&old).isEmpty)
    }

    /// A list read after a long round trip (a loaded machine: wall time) is
    /// asked again after at most `rewatchWaitLimit`, not 99x the round trip.
    @Test func aSlowListsReaskWaitsAtMostTheLimit() throws {
        var bus = LocalBus(path: "test", patterns: [], watchPatterns: [Pattern("svc.>")!])
        bus.connectionOpened()
        _ = written(&bus)
        _ = feed(&bus, Self.hello.replacingOccurrences(of: #""flow"]"#, with: #""flow","servers"]"#))
        _ = written(&bus)
        #expect(feed(&bus, #"{"op":"ok","req":2,"type":"svc.>","servers":["svc.a"]}"#).count == 1)
        bus.paceRewatch(spent: 1_000_000_000, now: 10_000_000_000)
        #expect(bus.rewatchAt == 10_000_000_000 + LocalBus.rewatchWaitLimit)
        #expect(LocalBus.rewatchWaitLimit < LocalBus.rewatchPacing * 1_000_000_000)
        #expect(feed(&bus, #"{"op":"servers","type":"svc.>"}"#).isEmpty)
        bus.rewatchIfDue(now: 10_000_000_000 + LocalBus.rewatchWaitLimit)
        #expect(written(&bus) == [#"{"op":"subscribe","req":3,"type":"svc.>","servers":true}"#])
    }

    /// (watchlist) A watch's list the same byte for byte as its last one
    /// (another uid's server that came and went before the re-ask) is not
    /// reported: its patterns are neither decoded nor minimised again. A
    /// changed one is, a refusal forgets the last list, and so does a new
    /// connection. The re-ask is paced by its whole round trip.
    @Test func aWatchsUnchangedListIsNotReportedAgain() throws {
        let spec = try #require(GroupSpec("work:job.>"))
        var bus = LocalBus(path: "test", patterns: [], watchPatterns: [Pattern("svc.>")!], groupImports: [spec])
        bus.connectionOpened()
        _ = written(&bus)
        let hello = Self.hello.replacingOccurrences(of: #""flow"]"#, with: #""flow","servers","group-servers"]"#)
        _ = feed(&bus, hello)
        _ = written(&bus)
        let list = #"{"op":"ok","req":2,"type":"svc.>","servers":["svc.a","svc.b"]}"#
        let members = #"{"op":"ok","req":3,"type":"job.>","group":"work","servers":["job.a"]}"#
        #expect(feed(&bus, list).count == 1 && feed(&bus, members).count == 1, "the first lists are reported")
        bus.paceRewatch(spent: 1_000, now: 0)
        /// Told of a change, asked again at `now` and answered with `answer` at `now + 5_000`: the reports.
        func relist(_ answer: String, group: Bool = false, at now: Int64, paced: Bool = true) -> [BusReport] {
            _ = feed(&bus, group ? #"{"op":"servers","type":"job.>","group":"work"}"# : #"{"op":"servers","type":"svc.>"}"#)
            bus.rewatchIfDue(now: now)
            #expect(written(&bus).count == 1, "asked again")
            let reports = feed(&bus, answer)
            bus.paceRewatch(spent: 1_000, now: now + 5_000)
            if paced { #expect(bus.rewatchAt == now + 5_000 + LocalBus.rewatchPacing * 5_000, "paced by the round trip, not the read's 1 µs") }
            return reports
        }
        #expect(relist(list.replacingOccurrences(of: #""req":2"#, with: #""req":4"#), at: 1_000_000).isEmpty, "the same list: no report")
        #expect(relist(members.replacingOccurrences(of: #""req":3"#, with: #""req":5"#), group: true, at: 2_000_000).isEmpty, "the same members: no report")
        let changed = relist(#"{"op":"ok","req":6,"type":"svc.>","servers":["svc.a"]}"#, at: 3_000_000)
        guard case .serving(_, let servers) = try #require(changed.first) else { Issue.record("\(changed)"); return }
        #expect(servers.map(\.text) == ["svc.a"])
        #expect(relist(#"{"op":"error","req":7,"code":"forbidden","message":"no"}"#, at: 4_000_000, paced: false).count == 2, "refused: reported empty")
        #expect(relist(#"{"op":"ok","req":8,"type":"svc.>","servers":["svc.a"]}"#, at: 5_000_000).count == 1, "after a refusal the list is new")
        // A new connection's first lists are reported whole, even the same.
        _ = bus.connectionClosed()
        bus.connectionOpened()
        let helloReq = try #require(written(&bus).first?.split(separator: ",")[1])  // `"req":N` of the new hello
        _ = feed(&bus, hello.replacingOccurrences(of: #""req":1"#, with: String(helloReq)))
        let asks = written(&bus).map { $0.split(separator: ",")[1] }  // `"req":N` of each watch, in order
        try #require(asks.count == 2, "\(asks)")
        #expect(feed(&bus, #"{"op":"ok",\#(asks[0]),"type":"svc.>","servers":["svc.a"]}"#).count == 1)
        #expect(feed(&bus, members.replacingOccurrences(of: #""req":3"#, with: String(asks[1]))).count == 1)
    }

    /// (issue 36) The group imports: a watch of the group's members per
    /// import once the broker lists `group-servers`, its list reported, asked
    /// again on a `servers` frame with that group (not on one without, nor
    /// on another group's); a broker without the feature: the whole pattern.
    @Test func theGroupImportsWatchTheGroupsMembers() throws {
        let spec = try #require(GroupSpec("work:job.>"))
        var bus = LocalBus(path: "test", patterns: [], groupImports: [spec, spec])
        bus.connectionOpened()
        _ = written(&bus)
        let up = feed(&bus, Self.hello.replacingOccurrences(of: #""flow"]"#, with: #""flow","servers","group-servers"]"#))
        #expect(up.count == 1, "\(up)")
        let watch = written(&bus)
        #expect(watch == [#"{"op":"subscribe","req":2,"type":"job.>","group":"work","servers":true}"#], "one watch per import: \(watch)")
        let listed = feed(&bus, #"{"op":"ok","req":2,"type":"job.>","group":"work","servers":["*.run","job.a"]}"#)
        guard case .members(let watched, let patterns) = try #require(listed.first) else { Issue.record("\(listed)"); return }
        #expect(watched == spec && patterns.map(\.text) == ["*.run", "job.a"])
        #expect(feed(&bus, #"{"op":"servers","type":"job.>"}"#).isEmpty && written(&bus).isEmpty, "the servers' watch is not this one")
        #expect(feed(&bus, #"{"op":"servers","type":"job.>","group":"other"}"#).isEmpty && written(&bus).isEmpty)
        #expect(feed(&bus, #"{"op":"servers","type":"job.>","group":"work"}"#).isEmpty)
        bus.rewatchIfDue(now: 0)  // (attacker6) no read was timed: due at once
        #expect(written(&bus) == [#"{"op":"subscribe","req":3,"type":"job.>","group":"work","servers":true}"#])
        let refused = feed(&bus, #"{"op":"error","req":3,"code":"forbidden","message":"no bridge right"}"#)
        guard case .members(_, let none) = try #require(refused.last) else { Issue.record("\(refused)"); return }
        #expect(none.isEmpty && refused.count == 2)
        // An older broker: the whole import pattern, no watch.
        var old = LocalBus(path: "test", patterns: [], groupImports: [spec])
        old.connectionOpened()
        _ = written(&old)
        let oldUp = feed(&old, Self.hello)
        guard case .members(let whole, let list) = try #require(oldUp.last) else { Issue.record("\(oldUp)"); return }
        #expect(whole == spec && list.map(\.text) == ["job.>"] && written(&old).isEmpty)
    }
}
