// Table-driven tests of the client session (EventBusSession): a script of
// driver calls and broker frames in, a transcript of the frames written
// (`>`) and what each frame meant (`<`) out, like the Core's tests.
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

/// One step of a script.
enum Call: CustomStringConvertible, Sendable {
    case connect
    case lose
    case subscribe(String, last: Bool = false)
    case unsubscribe(String)
    /// (1.3) A serving or group subscription.
    case join(SubscriptionKey)
    case leave(SubscriptionKey)
    case request(ClientRequest, tag: String)
    case unnumbered(ClientRequest)
    case settle
    case frame(String)
    case release
    case start(StreamPosition, [String])

    var description: String {
        switch self {
        case .connect: "connect"
        case .lose: "lose"
        case .subscribe(let p, let last): "subscribe \(p)\(last ? " last" : "")"
        case .unsubscribe(let p): "unsubscribe \(p)"
        case .join(let k): "join \(k)"
        case .leave(let k): "leave \(k)"
        case .request(_, let tag): "request \(tag)"
        case .unnumbered: "unnumbered"
        case .settle: "settle"
        case .frame(let f): f
        case .release: "release"
        case .start(let p, _): "start \(p)"
        }
    }
}

/// Runs `calls` on `session`; the transcript of writes and meanings.
func run(_ session: inout BusSession<String>, _ calls: [Call]) -> [String] {
    var out: [String] = []
    func flush(_ session: inout BusSession<String>) {
        let bytes = session.takeOutput()
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") { out.append("> " + line) }
    }
    for call in calls {
        switch call {
        case .connect: session.connectionStarted()
        case .lose: out.append("lost " + session.connectionLost().joined(separator: ","))
        case .subscribe(let p, let last): session.subscribe(p, last: last, tag: last ? "last" : nil)
        case .unsubscribe(let p): session.unsubscribe(p)
        case .join(let k): session.subscribe(k, last: true, tag: "join")
        case .leave(let k): session.unsubscribe(k)
        case .request(let r, let tag): session.send(r, tag: tag)
        case .unnumbered(let r): session.sendUnnumbered(r)
        case .settle: session.settle()
        case .start(let p, let patterns): session.start(at: p, covering: patterns)
        case .release:
            while let event = session.takeReleased() { out.append("released \(event.fields.seq)") }
            out.append("at \(session.position.seq)")
        case .frame(let text):
            let line = describe(session.handle(Array(text.utf8).span.bytes))
            out.append("< " + line)
        }
        flush(&session)
    }
    return out
}

func describe(_ incoming: Incoming<String>) -> String {
    switch incoming {
    case .event(let f): "event \(f.seq)\(f.retained ? " retained" : "")\(f.replayed ? " replayed" : "")"
    case .held: "held"
    case .dropped(let count, let since): "dropped \(count) from \(since)"
    case .gap(let g): "gap \(g.pattern) \(g.sinceSeq)..\(g.firstSeq)\(g.previousRun.map { " after \($0.instance ?? "-"):\($0.seq)" } ?? "")\(g.firstOnConnection ? " first" : "")"
    case .greeted(let info, let again): "greeted \(info.instance)\(again ? " again" : "")"
    case .helloRefused(let r): "hello refused \(r.string("code") ?? "")"
    case .subscribed(let p, _, let tag): "subscribed \(p)\(tag.map { " " + $0 } ?? "")"
    case .subscribeRefused(let p, let r, _): "refused \(p) \(r.string("code") ?? "")"
    case .unsubscribed(let p, let r): "unsubscribed \(p)\(r.isOK ? "" : " error")"
    case .answered(let tag, let r): "answered \(tag)\(r.isOK ? "" : " " + (r.string("code") ?? ""))"
    case .settled(let ahead): "settled\(ahead.map { " ahead \($0.asked)>\($0.newest)" } ?? "")"
    case .revoked(let p, _): "revoked \(p)"
    case .error(let r): "error \(r.string("code") ?? "")"
    case .other: "other"
    case .unreadable: "unreadable"
    case .ignored: "ignored"
    case .request(let r): "request \(r.event.seq)"
    case .servers(let p, let g): "servers \(p)\(g.map { " group \($0)" } ?? "")"
    }
}

func ok(_ req: Int, _ fields: String = "") -> Call { .frame(#"{"op":"ok","req":\#(req)"# + (fields.isEmpty ? "" : "," + fields) + "}") }
func refused(_ req: Int?, _ code: String) -> Call {
    let number = req.map { #","req":\#($0)"# } ?? ""
    return .frame(#"{"op":"error""# + number + #","code":"\#(code)","message":"m"}"#)
}
func event(_ seq: UInt64, _ extra: String = "") -> Call {
    .frame(#"{"op":"event","seq":\#(seq),"type":"a.b","data":1\#(extra)}"#)
}
func hi(_ req: Int, _ instance: String, features: String = #"["history"]"#) -> Call {
    ok(req, #""instance":"\#(instance)","conn":3,"features":\#(features)"#)
}

struct Case: CustomStringConvertible, Sendable {
    let name: String
    let options: SessionOptions
    let calls: [Call]
    let transcript: [String]
    var description: String { name }
}

let plain = SessionOptions(hello: Hello(client: "t", echo: false, overflow: .dropNew))
let cli = SessionOptions(hello: Hello(client: "eventbus-listen"), ordered: true, firstReq: 0)
let bridge = SessionOptions(hello: Hello(client: "eventbus-bridge", echo: false, overflow: .wait), unnumberedErrors: .report)

let cases: [Case] = [
    Case(name: "hello first, then subscribes; nothing is sent while disconnected", options: plain,
         calls: [.subscribe("a.>"), .connect, .subscribe("a.>"), .subscribe("b"), hi(1, "r1"), ok(2), ok(3)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":2,"type":"a.>"}"#,
            #"> {"op":"subscribe","req":3,"type":"b"}"#,
            "< greeted r1", "< subscribed a.>", "< subscribed b",
         ]),
    Case(name: "a reconnect resubscribes acknowledged patterns with since the highest seq, plainly the others", options: plain,
         calls: [.connect, .subscribe("a"), .subscribe("b"), hi(1, "r1"), ok(2), event(9), event(7, #","replayed":true"#),
                 event(40, #","retained":true"#), .lose, .connect, .subscribe("a"), .subscribe("b"), hi(4, "r1")],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":2,"type":"a"}"#, #"> {"op":"subscribe","req":3,"type":"b"}"#,
            "< greeted r1", "< subscribed a", "< event 9", "< event 7 replayed", "< event 40 retained", "lost ",
            #"> {"op":"hello","req":4,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":5,"type":"a","since":9,"instance":"r1"}"#,
            #"> {"op":"subscribe","req":6,"type":"b"}"#,
            "< greeted r1 again",
         ]),
    Case(name: "a new broker run starts the count again; its first gap says which run it follows", options: plain,
         calls: [.connect, .subscribe("a"), hi(1, "r1"), ok(2), event(9), .lose, .connect, .subscribe("a"), hi(3, "r2"), ok(4),
                 .frame(#"{"op":"gap","type":"a","since_seq":0,"first_seq":1}"#), .frame(#"{"op":"gap","type":"b","since_seq":0,"first_seq":1}"#),
                 event(2), .lose, .connect, .subscribe("a")],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, #"> {"op":"subscribe","req":2,"type":"a"}"#,
            "< greeted r1", "< subscribed a", "< event 9", "lost ",
            #"> {"op":"hello","req":3,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":4,"type":"a","since":9,"instance":"r1"}"#,
            "< greeted r2 again", "< subscribed a", "< gap a 0..1 after r1:9 first", "< gap b 0..1 after r1:9", "< event 2", "lost ",
            #"> {"op":"hello","req":5,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":6,"type":"a","since":2,"instance":"r2"}"#,
         ]),
    Case(name: "replies are matched by req; unanswered requests come back oldest first when the connection ends", options: plain,
         calls: [.connect, .request(.ping, tag: "p1"), .request(.stats, tag: "s2"), .request(.ping, tag: "p3"), hi(1, "r"), ok(3), ok(9), refused(8, "limit"), .lose],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"ping","req":2}"#, #"> {"op":"stats","req":3}"#, #"> {"op":"ping","req":4}"#,
            "< greeted r", "< answered s2", "< other", "< error limit", "lost p1,p3",
         ]),
    Case(name: "an error without req answers the oldest request when its req could not be read", options: plain,
         calls: [.connect, hi(1, "r"), .request(.ping, tag: "p"), .request(.ping, tag: "q"), refused(nil, "frame_too_large"), refused(nil, "slow_consumer"),
                 .frame(#"{"op":"error","code":"forbidden","type":"a.>","message":"reload"}"#)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, "< greeted r",
            #"> {"op":"ping","req":2}"#, #"> {"op":"ping","req":3}"#,
            "< answered p frame_too_large", "< error slow_consumer", "< revoked a.>",
         ]),
    Case(name: "a bridge's errors without req are its imports', never a numbered request's", options: bridge,
         calls: [.connect, hi(1, "r"), .unnumbered(.publish(type: "x")), .request(.ping, tag: "batch"), refused(nil, "bad_request"), ok(2)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"eventbus-bridge","echo":false,"overflow":"wait"}"#, "< greeted r",
            #"> {"op":"publish","type":"x"}"#, #"> {"op":"ping","req":2}"#, "< error bad_request", "< answered batch",
         ]),
    Case(name: "a refused first subscribe is no longer subscribed, and its next one is plain", options: plain,
         calls: [.connect, hi(1, "r"), .subscribe("a"), refused(2, "forbidden"), .subscribe("a"), .unsubscribe("a"), .unsubscribe("a"), ok(4)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, "< greeted r",
            #"> {"op":"subscribe","req":2,"type":"a"}"#, "< refused a forbidden",
            #"> {"op":"subscribe","req":3,"type":"a"}"#, #"> {"op":"unsubscribe","req":4,"type":"a"}"#, "< unsubscribed a",
         ]),
    Case(name: "last is sent on request and handed back with its tag; a pattern subscribed already asks for no replay", options: plain,
         calls: [.connect, .subscribe("a", last: true), hi(1, "r"), ok(2, #""retained":1"#), event(5, #","retained":true"#), event(6),
                 .subscribe("a", last: true)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":2,"type":"a","last":true}"#, "< greeted r", "< subscribed a last", "< event 5 retained",
            "< event 6", #"> {"op":"subscribe","req":3,"type":"a","last":true}"#,
         ]),
    Case(name: "ordered: events wait for the sentinel, then come sorted without duplicates; the position ends at the sentinel's seq", options: cli,
         calls: [.start(StreamPosition(instance: "r1", seq: 4), ["a", "b"]), .connect, .subscribe("a"), .subscribe("b"), .settle,
                 hi(0, "r1"), ok(1), event(8, #","replayed":true"#), event(9), ok(2), event(6, #","replayed":true"#), event(8),
                 event(3, #","retained":true"#), ok(3, #""history_first_seq":1,"history_events":12"#), .release, event(13)],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#,
            #"> {"op":"subscribe","req":1,"type":"a","since":4,"instance":"r1"}"#,
            #"> {"op":"subscribe","req":2,"type":"b","since":4,"instance":"r1"}"#,
            #"> {"op":"stats","req":3}"#,
            "< greeted r1", "< subscribed a", "< held", "< held", "< subscribed b", "< held", "< held", "< event 3 retained", "< settled",
            "released 6", "released 8", "released 9", "at 12", "< event 13",
         ]),
    Case(name: "ordered: a connection lost mid-replay forgets what it held and the next asks again from the same position", options: cli,
         calls: [.start(StreamPosition(instance: "r1", seq: 4), ["a"]), .connect, .subscribe("a"), .settle, hi(0, "r1"), ok(1),
                 event(5, #","replayed":true"#), event(6, #","replayed":true"#), .lose, .connect, .subscribe("a"), .settle, hi(3, "r1"), ok(4),
                 event(5, #","replayed":true"#), ok(5, #""history_first_seq":1,"history_events":5"#), .release],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":1,"type":"a","since":4,"instance":"r1"}"#,
            #"> {"op":"stats","req":2}"#, "< greeted r1", "< subscribed a", "< held", "< held", "lost ",
            #"> {"op":"hello","req":3,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":4,"type":"a","since":4,"instance":"r1"}"#,
            #"> {"op":"stats","req":5}"#, "< greeted r1 again", "< subscribed a", "< held", "< settled", "released 5", "at 5",
         ]),
    Case(name: "ordered: lost before the sentinel, a bare --since asks again as it was, and a first connection again plainly", options: cli,
         calls: [.start(StreamPosition(instance: nil, seq: 5), ["a"]), .connect, .subscribe("a"), .settle, hi(0, "r1"), ok(1), event(7),
                 .lose, .connect, .subscribe("a")],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":1,"type":"a","since":5}"#,
            #"> {"op":"stats","req":2}"#, "< greeted r1", "< subscribed a", "< held", "lost ",
            #"> {"op":"hello","req":3,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":4,"type":"a","since":5}"#,
         ]),
    Case(name: "ordered: a --reconnect listener lost before its first sentinel subscribes plainly again", options: cli,
         calls: [.connect, .subscribe("a"), .settle, hi(0, "r1"), ok(1), .lose, .connect, .subscribe("a")],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":1,"type":"a"}"#,
            #"> {"op":"stats","req":2}"#, "< greeted r1", "< subscribed a", "lost ",
            #"> {"op":"hello","req":3,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":4,"type":"a"}"#,
         ]),
    Case(name: "ordered: a bare --since beyond the broker's newest seq is told once", options: cli,
         calls: [.start(StreamPosition(instance: nil, seq: 50), ["a"]), .connect, .subscribe("a"), .settle, hi(0, "r1"), ok(1),
                 ok(2, #""history_first_seq":1,"history_events":7"#), .release],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#,
            #"> {"op":"subscribe","req":1,"type":"a","since":50}"#, #"> {"op":"stats","req":2}"#,
            "< greeted r1", "< subscribed a", "< settled ahead 50>7", "at 7",
         ]),
    // 1.3: serving subscriptions, queue groups, requests answered out of order.
    Case(name: "serving and group subscriptions are their own, never replay, and are resubscribed as they were", options: plain,
         calls: [.connect, .subscribe("a"), .join(SubscriptionKey("a", serve: true)), .join(SubscriptionKey("a", group: "w")),
                 .join(SubscriptionKey("a", serve: true, group: "w")), hi(1, "r1"), ok(2), ok(3), ok(4, #""members":2"#), ok(5, #""members":1"#), event(9),
                 .lose, .connect, .subscribe("a"), .join(SubscriptionKey("a", serve: true)), .join(SubscriptionKey("a", group: "w")), hi(6, "r1")],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":2,"type":"a"}"#, #"> {"op":"subscribe","req":3,"type":"a","serve":true}"#,
            #"> {"op":"subscribe","req":4,"type":"a","group":"w"}"#, #"> {"op":"subscribe","req":5,"type":"a","serve":true,"group":"w"}"#,
            "< greeted r1", "< subscribed a", "< subscribed a serve join", "< subscribed a group=w join", "< subscribed a serve group=w join",
            "< event 9", "lost ",
            #"> {"op":"hello","req":6,"client":"t","echo":false,"overflow":"drop-new"}"#,
            #"> {"op":"subscribe","req":7,"type":"a","since":9,"instance":"r1"}"#,
            #"> {"op":"subscribe","req":8,"type":"a","serve":true}"#, #"> {"op":"subscribe","req":9,"type":"a","group":"w"}"#,
            "< greeted r1 again",
         ]),
    Case(name: "leaving a group names it; a refused first join is forgotten; a plain pattern's withdrawal leaves the others", options: plain,
         calls: [.connect, hi(1, "r"), .subscribe("a"), .join(SubscriptionKey("a", group: "w")), .join(SubscriptionKey("b", serve: true)), ok(2),
                 ok(3, #""members":1"#), refused(4, "forbidden"), .leave(SubscriptionKey("b", serve: true)), .unsubscribe("a"),
                 .leave(SubscriptionKey("a", group: "w")), .leave(SubscriptionKey("a", group: "w")), ok(5), ok(6, #""removed":true"#)],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, "< greeted r",
            #"> {"op":"subscribe","req":2,"type":"a"}"#, #"> {"op":"subscribe","req":3,"type":"a","group":"w"}"#,
            #"> {"op":"subscribe","req":4,"type":"b","serve":true}"#,
            "< subscribed a", "< subscribed a group=w join", "< refused b serve forbidden",
            #"> {"op":"unsubscribe","req":5,"type":"a"}"#, #"> {"op":"unsubscribe","req":6,"type":"a","group":"w"}"#,
            "< unsubscribed a", "< unsubscribed a group=w",
         ]),
    Case(name: "a request's answer may come after later answers; an error without req answers the oldest other request", options: plain,
         calls: [.connect, hi(1, "r"), .request(.request(type: "q", timeout: 500), tag: "q1"), .request(.ping, tag: "p"),
                 .request(.request(type: "q"), tag: "q2"), .request(.ping, tag: "p2"), ok(3),
                 refused(nil, "frame_too_large"), .frame(#"{"op":"error","req":4,"code":"no_responders","message":"m"}"#),
                 .frame(#"{"op":"ok","req":2,"seq":7,"reply":{"pid":1,"uid":0,"gid":0,"data":1}}"#), .request(.request(type: "q"), tag: "q3"), .lose],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, "< greeted r",
            #"> {"op":"request","req":2,"type":"q","timeout":500}"#, #"> {"op":"ping","req":3}"#,
            #"> {"op":"request","req":4,"type":"q"}"#, #"> {"op":"ping","req":5}"#,
            "< answered p", "< answered p2 frame_too_large", "< answered q2 no_responders", "< answered q1",
            #"> {"op":"request","req":6,"type":"q"}"#, "lost q3",
         ]),
    Case(name: "requests for a serving subscription go straight to the driver, never held and never moving the position", options: cli,
         calls: [.start(StreamPosition(instance: "r1", seq: 4), ["a"]), .connect, .subscribe("a"), .join(SubscriptionKey("s", serve: true)), .settle,
                 hi(0, "r1"), ok(1), ok(2), .frame(#"{"op":"request","seq":20,"type":"s","reply":"t1","timeout":900,"data":{}}"#),
                 event(6, #","replayed":true"#), ok(3, #""history_first_seq":1,"history_events":8"#), .release,
                 .request(.reply(to: "t1", data: .null), tag: "r"), ok(4, #""accepted":true"#)],
         transcript: [
            #"> {"op":"hello","req":0,"client":"eventbus-listen"}"#, #"> {"op":"subscribe","req":1,"type":"a","since":4,"instance":"r1"}"#,
            #"> {"op":"subscribe","req":2,"type":"s","serve":true}"#, #"> {"op":"stats","req":3}"#,
            "< greeted r1", "< subscribed a", "< subscribed s serve join", "< request 20", "< held", "< settled", "released 6", "at 8",
            #"> {"op":"reply","req":4,"to":"t1","data":null}"#, "< answered r",
         ]),
    Case(name: "dropped notices and unknown ops pass through; unreadable frames are said", options: plain,
         calls: [.connect, hi(1, "r"), .frame(#"{"op":"dropped","count":3,"since_seq":17}"#), .frame(#"{"op":"future"}"#), .frame("nope")],
         transcript: [
            #"> {"op":"hello","req":1,"client":"t","echo":false,"overflow":"drop-new"}"#, "< greeted r",
            "< dropped 3 from 17", "< ignored", "< unreadable",
         ]),
]

@Suite struct BusSessionTests {
    @Test(arguments: cases)
    func transcript(_ c: Case) {
        var session = BusSession<String>(c.options)
        #expect(run(&session, c.calls) == c.transcript)
    }

    @Test func theSavedPositionMovesOnlyOnceSettled() {
        var session = BusSession<String>(cli)
        session.start(at: StreamPosition(instance: "r1", seq: 4), covering: ["a"])
        _ = run(&session, [.connect, .subscribe("a"), .settle, hi(0, "r1"), ok(1), event(5)])
        #expect(session.takeMovedPosition() == nil, "a replay is under way")
        _ = run(&session, [ok(2, #""history_first_seq":1,"history_events":9"#), .release])
        #expect(session.takeMovedPosition() == StreamPosition(instance: "r1", seq: 9))
        #expect(session.takeMovedPosition() == nil)
        _ = run(&session, [event(10)])
        #expect(session.takeMovedPosition() == StreamPosition(instance: "r1", seq: 10))
    }

    @Test(arguments: [
        (nil, #"["flow"]"#, true), (OverflowPolicy.wait, #"["flow"]"#, true),
        (.dropNew, #"["flow"]"#, false), (nil, #"["history"]"#, false),
    ] as [(OverflowPolicy?, String, Bool)])
    func theBrokerHoldsPublishersOnlyWithFlowAndWait(overflow: OverflowPolicy?, features: String, holds: Bool) {
        var session = BusSession<String>(SessionOptions(hello: Hello(overflow: overflow)))
        _ = run(&session, [.connect, hi(1, "r", features: features)])
        #expect(session.flow.brokerHolds == holds)
        session.pauseReading(true)
        #expect(session.flow.paused)
        _ = run(&session, [.lose, .connect])
        #expect(!session.flow.brokerHolds && !session.flow.paused)
    }

    @Test func aFrameTheDriverWritesItselfGoesOutInOrderWithoutReq() {
        var session = BusSession<String>(bridge)
        session.connectionStarted()
        session.appendUnnumbered { ClientRequest.publish(type: "x").encode(req: nil, to: &$0) }
        session.send(.ping, tag: "batch")
        #expect(String(decoding: session.takeOutput(), as: UTF8.self).split(separator: "\n").dropFirst() == [
            #"{"op":"publish","type":"x"}"#, #"{"op":"ping","req":2}"#,
        ])
    }

    @Test func aPublishOkMovesThePositionAndAPatternWithdrawnWhileAwaySubscribesPlainly() {
        var session = BusSession<String>(plain)
        _ = run(&session, [.connect, .subscribe("a"), hi(1, "r"), ok(2)])
        session.published(seq: 30)
        let again = run(&session, [.lose, .unsubscribe("a"), .connect, .subscribe("a")])
        #expect(again.last == #"> {"op":"subscribe","req":4,"type":"a"}"#)
        #expect(session.position == StreamPosition(instance: "r", seq: 30))
    }
}

/// The position across connections (what the bridge's `BusPosition` was): a
/// `hello` naming a run, or an event read with a seq; after them, the
/// position and the run before a restart.
@Suite struct SessionPositionTests {
    enum Step: Sendable {
        case hello(String)
        case event(UInt64)
    }

    @Test(arguments: [
        ([], nil, nil),
        ([.hello("r1")], ("r1", 0), nil),
        ([.hello("r1"), .event(4), .event(9), .event(7)], ("r1", 9), nil),
        ([.hello("r1"), .event(9), .hello("r1"), .event(12)], ("r1", 12), nil),
        ([.hello("r1"), .event(9), .hello("r2")], ("r2", 0), ("r1", 9)),
        ([.hello("r1"), .event(9), .hello("r2"), .event(3), .hello("r2")], ("r2", 3), nil),
    ] as [([Step], (String, UInt64)?, (String, UInt64)?)])
    func resumesFromTheHighestSeqOfTheCurrentRun(steps: [Step], resume: (String, UInt64)?, previous: (String, UInt64)?) {
        var session = BusSession<String>(bridge)
        var req = 1
        for step in steps {
            switch step {
            case .hello(let instance):
                _ = session.connectionLost()
                _ = run(&session, [.connect, .subscribe("a"), hi(req, instance), ok(req + 1)])
                req += 2
            case .event(let seq):
                _ = run(&session, [event(seq)])
            }
        }
        _ = session.connectionLost()
        let next = run(&session, [.connect, .subscribe("a")]).last!
        if let resume {
            #expect(next.hasSuffix(#""type":"a","since":\#(resume.1),"instance":"\#(resume.0)"}"#), "\(next)")
        } else {
            #expect(next.hasSuffix(#""type":"a"}"#), "the first connection subscribes plainly: \(next)")
        }
        #expect(session.previousRun == previous.map { StreamPosition(instance: $0.0, seq: $0.1) })
    }
}
