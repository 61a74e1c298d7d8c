// RequestDecoder (PROTOCOL.md "Framing", "Requests"): every op, the `req`
// rules (string, integer within ±2^53, anything else is bad_request answered
// without req), duplicate keys including escaped-equal ones, unknown and
// missing op, and the error each broken field gets.
@_spi(Package) @testable import EventBusProtocol
import Testing

/// A decoded frame with its tokens turned into text, for easy comparison.
struct Decoded {
    var req: String?
    var request: Request?
    var error: ProtocolError?
    var frame: [UInt8]

    init(_ text: String) {
        self.init(bytes: utf8(text))
    }

    init(bytes: [UInt8]) {
        frame = bytes
        let decoded = bytes.withByteView { RequestDecoder.decode($0) }
        req = decoded.req.map { String(decoding: bytes[$0.start..<$0.end], as: UTF8.self) }
        switch decoded.request {
        case .success(let r): request = r
        case .failure(let e): error = e
        }
    }

    func text(_ token: JSONToken?) -> String? {
        token.map { String(decoding: frame[$0.start..<$0.end], as: UTF8.self) }
    }

    var code: ErrorCode? { error?.code }
}

@Suite("Request decoder")
struct RequestDecoderTests {
    // MARK: every op

    @Test func helloWithDefaults() {
        let d = Decoded(#"{"op":"hello"}"#)
        guard case .hello(let hello) = d.request, case let (client, echo, overflow) = (hello.client, hello.echo, hello.overflow) else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(client == nil && echo == false && overflow == .wait)  // (1.2) the new default
    }

    @Test("hello reads client, echo and overflow", arguments: OverflowPolicy.allCases)
    func helloWithEveryOption(_ policy: OverflowPolicy) {
        let d = Decoded(#"{"op":"hello","client":"billing.v2:worker-1_a","echo":true,"overflow":"\#(policy.rawValue)","req":1}"#)
        guard case .hello(let hello) = d.request, case let (client, echo, overflow) = (hello.client, hello.echo, hello.overflow) else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(client == "billing.v2:worker-1_a" && echo && overflow == policy)
        #expect(d.req == "1")
    }

    @Test func publishReadsRetainAndOrigin() {
        let d = Decoded(#"{"op":"publish","type":"a.b","retain":true,"origin":{"node":"n","seq":1},"data":2}"#)
        guard case .publish(let pub) = d.request else { Issue.record("got \(String(describing: d.error))"); return }
        #expect(pub.retain && d.text(pub.origin) == #"{"node":"n","seq":1}"# && d.text(pub.data) == "2")
        guard case .publish(let plain) = Decoded(#"{"op":"publish","type":"a.b"}"#).request else { Issue.record("refused"); return }
        #expect(!plain.retain && plain.origin == nil)
    }

    @Test func subscribeReadsLastSinceAndInstance() {
        let d = Decoded(#"{"op":"subscribe","type":"a.>","last":true,"since":18446744073709551615,"instance":"9f2c"}"#)
        guard case .subscribe(let sub) = d.request else { Issue.record("got \(String(describing: d.error))"); return }
        #expect(sub == SubscribeRequest(pattern: Pattern("a.>")!, last: true, since: UInt64.max, instance: "9f2c"))
        guard case .subscribe(let plain) = Decoded(#"{"op":"subscribe","type":"a"}"#).request else { Issue.record("refused"); return }
        #expect(plain == SubscribeRequest(pattern: Pattern("a")!, last: false, since: nil, instance: nil))
    }

    /// (issue 36) A bridge's watch of the serving patterns: `servers` alone.
    @Test func subscribeAndUnsubscribeReadServers() {
        guard case .subscribe(let watch) = Decoded(#"{"op":"subscribe","type":"svc.>","servers":true,"req":1}"#).request else { Issue.record("refused"); return }
        #expect(watch == SubscribeRequest(pattern: Pattern("svc.>")!, servers: true))
        guard case .unsubscribe(let end) = Decoded(#"{"op":"unsubscribe","type":"svc.>","servers":true}"#).request else { Issue.record("refused"); return }
        #expect(end == UnsubscribeRequest(pattern: Pattern("svc.>")!, servers: true))
        // With `group`: the watch of that group's members (`group-servers`).
        guard case .subscribe(let members) = Decoded(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","req":1}"#).request else { Issue.record("refused"); return }
        #expect(members == SubscribeRequest(pattern: Pattern("job.>")!, group: "work", servers: true))
        guard case .unsubscribe(let endMembers) = Decoded(#"{"op":"unsubscribe","type":"job.>","servers":true,"group":"work"}"#).request else { Issue.record("refused"); return }
        #expect(endMembers == UnsubscribeRequest(pattern: Pattern("job.>")!, group: "work", servers: true))
        for frame in [#"{"op":"subscribe","type":"a","servers":true,"serve":true}"#, #"{"op":"subscribe","type":"a","servers":true,"group":"g","serve":true}"#,
                      #"{"op":"subscribe","type":"a","servers":true,"group":"g","fallback":true}"#, #"{"op":"subscribe","type":"a","servers":true,"group":"bad group"}"#,
                      #"{"op":"subscribe","type":"a","servers":true,"last":true}"#, #"{"op":"subscribe","type":"a","servers":true,"fallback":false}"#,
                      #"{"op":"unsubscribe","type":"a","servers":true,"serve":true}"#, #"{"op":"subscribe","type":"a","servers":1}"#] {
            #expect(Decoded(frame).code == .badRequest, "\(frame)")
        }
    }

    /// (attacker6) `uid`: the one uid's group across machines, on a fallback
    /// membership, a watch of a group's members (and its end) and a group publish.
    @Test func uidNamesTheGroupAcrossMachinesOnly() {
        guard case .subscribe(let fallback) = Decoded(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"uid":0,"req":1}"#).request else { Issue.record("refused"); return }
        #expect(fallback == SubscribeRequest(pattern: Pattern("job.>")!, group: "work", fallback: true, groupUID: 0))
        guard case .subscribe(let watch) = Decoded(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","uid":4294967294}"#).request else { Issue.record("refused"); return }
        #expect(watch == SubscribeRequest(pattern: Pattern("job.>")!, group: "work", servers: true, groupUID: 4_294_967_294))
        guard case .unsubscribe(let end) = Decoded(#"{"op":"unsubscribe","type":"job.>","servers":true,"group":"work","uid":7}"#).request else { Issue.record("refused"); return }
        #expect(end == UnsubscribeRequest(pattern: Pattern("job.>")!, group: "work", servers: true, groupUID: 7))
        guard case .publishToGroup(_, let group, let uid) = Decoded(#"{"op":"publish","type":"job.a","group":"work","uid":5}"#).request else { Issue.record("refused"); return }
        #expect(group == "work" && uid == 5)
        for frame in [#"{"op":"subscribe","type":"a","group":"g","uid":0}"#, #"{"op":"subscribe","type":"a","group":"g","fallback":false,"uid":0}"#,
                      #"{"op":"subscribe","type":"a","servers":true,"uid":0}"#, #"{"op":"subscribe","type":"a","serve":true,"fallback":true,"uid":0}"#,
                      #"{"op":"unsubscribe","type":"a","group":"g","uid":0}"#,
                      #"{"op":"subscribe","type":"a","group":"g","fallback":true,"uid":4294967295}"#, #"{"op":"publish","type":"a","group":"g","uid":-1}"#,
                      #"{"op":"publish","type":"a","group":"g","uid":"0"}"#] {
            #expect(Decoded(frame).code == .badRequest, "\(frame)")
        }
    }

    /// The text of a request with `origin` says what is true since issue 36.
    @Test func aRequestWithOriginIsRefusedWithTheReason() {
        let d = Decoded(#"{"op":"request","type":"svc.x","origin":{"node":"b","seq":1},"req":1}"#)
        #expect(d.code == .badRequest)
        #expect(d.error?.message.contains("a bridge carries one to another machine by asking there itself") == true, "\(String(describing: d.error))")
        #expect(d.error?.message.contains("do not cross") == false)
    }

    @Test func clearReadsAnEventTypeAndClientsTakesNoField() {
        guard case .clear(let type) = Decoded(#"{"op":"clear","type":"currency.changed"}"#).request else { Issue.record("refused"); return }
        #expect(type.name == "currency.changed")
        guard case .clients = Decoded(#"{"op":"clients","req":1}"#).request else { Issue.record("refused"); return }
    }

    @Test("1.1 fields of the wrong shape are refused", arguments: [
        (#"{"op":"publish","type":"a","retain":1}"#, ErrorCode.badRequest),
        (#"{"op":"publish","type":"a","retain":"yes"}"#, .badRequest),
        (#"{"op":"publish","type":"a","origin":"host-b"}"#, .badRequest),
        (#"{"op":"publish","type":"a","origin":[1]}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","last":null}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","since":-1}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","since":1.5}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","since":18446744073709551616}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","since":"3"}"#, .badRequest),
        (#"{"op":"subscribe","type":"a","instance":7}"#, .badRequest),
        (#"{"op":"clear"}"#, .badRequest),
        (#"{"op":"clear","type":"a.*"}"#, .badType),
        (#"{"op":"clear","type":"eventbus.x"}"#, .forbidden),
    ])
    func badOneOneFields(_ frame: String, _ code: ErrorCode) {
        #expect(Decoded(frame).code == code)
    }

    @Test("hello refuses bad option values with bad_request", arguments: [
        #"{"op":"hello","client":""}"#,
        #"{"op":"hello","client":"\#(String(repeating: "c", count: 65))"}"#,
        #"{"op":"hello","client":"has space"}"#,
        #"{"op":"hello","client":"slash/x"}"#,
        #"{"op":"hello","client":"é"}"#,
        #"{"op":"hello","client":7}"#,
        #"{"op":"hello","client":null}"#,
        #"{"op":"hello","echo":"true"}"#,
        #"{"op":"hello","echo":1}"#,
        #"{"op":"hello","echo":null}"#,
        #"{"op":"hello","overflow":"drop_new"}"#,
        #"{"op":"hello","overflow":"DROP-NEW"}"#,
        #"{"op":"hello","overflow":true}"#,
    ])
    func helloRefusesBadOptions(_ frame: String) {
        let d = Decoded(frame)
        #expect(d.code == .badRequest)
    }

    @Test func helloClientNameOf64BytesIsAccepted() {
        let name = String(repeating: "c", count: 64)
        guard case .hello(let hello) = Decoded(#"{"op":"hello","client":"\#(name)"}"#).request else {
            Issue.record("refused a 64-byte client name")
            return
        }
        #expect(hello.client == name)
    }

    @Test func subscribeAndUnsubscribeCarryTheirPattern() {
        guard case .subscribe(let s) = Decoded(#"{"op":"subscribe","type":"order.>"}"#).request, case let p = s.pattern,
              case .unsubscribe(let q) = Decoded(#"{"op":"unsubscribe","type":"*.created"}"#).request else {
            Issue.record("did not decode")
            return
        }
        #expect(p.text == "order.>" && q.pattern.text == "*.created")
    }

    @Test("subscribe and unsubscribe refuse bad patterns with bad_type", arguments: ["subscribe", "unsubscribe"], [
        "", "a..b", "a.>.b", "a*", "é", String(repeating: "a", count: 256),
    ])
    func subscribeRefusesBadPatterns(_ op: String, _ pattern: String) {
        #expect(Decoded(#"{"op":"\#(op)","type":"\#(pattern)"}"#).code == .badType)
    }

    @Test("subscribe and unsubscribe without a string type are bad_request", arguments: ["subscribe", "unsubscribe"], [
        "", #","type":1"#, #","type":null"#, #","type":["a"]"#,
    ])
    func subscribeWithoutTypeIsBadRequest(_ op: String, _ extra: String) {
        #expect(Decoded(#"{"op":"\#(op)"\#(extra)}"#).code == .badRequest)
    }

    @Test func publishKeepsDataSourceAndIdAsExactBytes() {
        let d = Decoded(#"{"op":"publish","type":"order.created","data": { "b" : [1, 2.50e1], "a":"\u00e9" } ,"source":"bill\"ing","id":"x-1"}"#)
        guard case .publish(let pub) = d.request, case let (type, data, source, id) = (pub.type, pub.data, pub.source, pub.id) else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(type.name == "order.created")
        #expect(d.text(data) == #"{ "b" : [1, 2.50e1], "a":"\u00e9" }"#)
        #expect(d.text(source) == #""bill\"ing""#)
        #expect(d.text(id) == #""x-1""#)
    }

    @Test func publishWithoutDataHasNoDataToken() {
        guard case .publish(let pub) = Decoded(#"{"op":"publish","type":"a"}"#).request, case let (data, source, id) = (pub.data, pub.source, pub.id) else {
            Issue.record("did not decode")
            return
        }
        #expect(data == nil && source == nil && id == nil)
    }

    @Test("publish accepts any JSON value as data", arguments: ["null", "0", "-1.5e300", "\"s\"", "[]", "{}", "true", "1e400"])
    func publishAcceptsAnyData(_ value: String) {
        let d = Decoded(#"{"op":"publish","type":"a","data":\#(value)}"#)
        guard case .publish(let pub) = d.request, case let data = pub.data else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(d.text(data) == value)
    }

    @Test func duplicateKeysInsideDataAreThePublishersBusiness() {
        let d = Decoded(#"{"op":"publish","type":"a","data":{"k":1,"k":2,"op":"x"}}"#)
        guard case .publish(let pub) = d.request, case let data = pub.data else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(d.text(data) == #"{"k":1,"k":2,"op":"x"}"#)
    }

    @Test("publish refuses bad fields", arguments: [
        (#"{"op":"publish"}"#, ErrorCode.badRequest),
        (#"{"op":"publish","type":7}"#, .badRequest),
        (#"{"op":"publish","type":null}"#, .badRequest),
        (#"{"op":"publish","type":""}"#, .badType),
        (#"{"op":"publish","type":"a..b"}"#, .badType),
        (#"{"op":"publish","type":"order.*"}"#, .badType),
        (#"{"op":"publish","type":"order.>"}"#, .badType),
        (#"{"op":"publish","type":">"}"#, .badType),
        (#"{"op":"publish","type":"eventbus.started"}"#, .forbidden),
        (#"{"op":"publish","type":"a","source":1}"#, .badRequest),
        (#"{"op":"publish","type":"a","source":null}"#, .badRequest),
        (#"{"op":"publish","type":"a","id":2}"#, .badRequest),
        (#"{"op":"publish","type":"a","id":{}}"#, .badRequest),
    ])
    func publishRefusesBadFields(_ frame: String, _ code: ErrorCode) {
        #expect(Decoded(frame).code == code)
    }

    @Test func publishOfAPatternSaysPatternsAreNotAllowed() {
        let error = Decoded(#"{"op":"publish","type":"order.*"}"#).error
        #expect(error?.message.contains("patterns are not allowed") == true)
    }

    @Test func escapedTypeIsDecodedBeforeValidation() {
        guard case .publish(let pub) = Decoded(#"{"op":"publish","type":"order\u002ecreated"}"#).request, case let type = pub.type else {
            Issue.record("did not decode")
            return
        }
        #expect(type.name == "order.created")
    }

    @Test func pingAndStatsTakeNoFields() {
        guard case .ping = Decoded(#"{"op":"ping"}"#).request, case .stats = Decoded(#"{"op":"stats","req":"s"}"#).request else {
            Issue.record("did not decode")
            return
        }
    }

    @Test func unknownFieldsAreIgnored() {
        let d = Decoded(#"{"op":"ping","future":{"x":[1]},"req":3,"zzz":null}"#)
        guard case .ping = d.request else {
            Issue.record("got \(String(describing: d.error))")
            return
        }
        #expect(d.req == "3")
    }

    @Test func escapedOpIsDecoded() {
        guard case .ping = Decoded(#"{"\u006fp":"p\u0069ng"}"#).request else {
            Issue.record("did not decode an escaped op")
            return
        }
    }

    // MARK: op

    @Test func unknownOpIsUnknownOpAndKeepsReq() {
        let d = Decoded(#"{"op":"frobnicate","req":"r1"}"#)
        #expect(d.code == .unknownOp)
        #expect(d.req == #""r1""#)
    }

    @Test("op names are case-sensitive and exact", arguments: ["PING", "Ping", "ping ", "", "event", "ok", "error"])
    func opNamesAreExact(_ op: String) {
        #expect(Decoded(#"{"op":"\#(op)"}"#).code == .unknownOp)
    }

    @Test func missingOpIsBadRequestAndKeepsReq() {
        let d = Decoded(#"{"req":9,"type":"a"}"#)
        #expect(d.code == .badRequest)
        #expect(d.req == "9")
        #expect(Decoded("{}").code == .badRequest)
    }

    @Test("a non-string op is bad_request", arguments: ["1", "null", "true", "[\"ping\"]", "{}"])
    func nonStringOpIsBadRequest(_ op: String) {
        #expect(Decoded(#"{"op":\#(op)}"#).code == .badRequest)
    }

    // MARK: req

    @Test("req values within the rules are echoed exactly", arguments: [
        #""abc""#, #""""#, #""\u00e9 \"x\"""#, "0", "7", "-7", "-0",
        "9007199254740992", "-9007199254740992", "9007199254740991",
    ])
    func validReqIsEchoed(_ req: String) {
        let d = Decoded(#"{"op":"ping","req":\#(req)}"#)
        #expect(d.error == nil)
        #expect(d.req == req)
    }

    @Test("req outside the rules is bad_request without req", arguments: [
        "9007199254740993", "-9007199254740993", "10000000000000000", "99999999999999999999",
        "1" + String(repeating: "0", count: 400), "1.0", "7.5", "1e3", "-0.0", "true", "false", "null", "[]", "{}", "[1]",
    ])
    func invalidReqIsBadRequestWithoutReq(_ req: String) {
        let d = Decoded(#"{"op":"ping","req":\#(req)}"#)
        #expect(d.code == .badRequest)
        #expect(d.req == nil)
    }

    @Test func badReqWinsOverEveryOtherError() {
        // The req is checked before op, fields and duplicate keys.
        for frame in [#"{"op":"nope","req":1.5}"#, #"{"req":null}"#, #"{"op":"publish","type":"a..b","req":true}"#,
                      #"{"op":"ping","op":"ping","req":{}}"#] {
            let d = Decoded(frame)
            #expect(d.code == .badRequest, "\(frame)")
            #expect(d.req == nil, "\(frame)")
        }
    }

    @Test func brokenJSONIsBadFrameWithoutReq() {
        for frame in [#"{"op":"ping","req":1"#, #"{"op":"ping","req":1,}"#, #"{"op":"ping","req":01}"#, "[1]", "\"req\"", "7", "null", ""] {
            let d = Decoded(frame)
            #expect(d.code == .badFrame, "\(frame)")
            #expect(d.req == nil, "\(frame)")
        }
    }

    @Test func invalidUTF8AnywhereIsBadFrame() {
        let frame = utf8(#"{"op":"publish","type":"a","data":""#) + [0xC0, 0xAF] + utf8(#"","req":1}"#)
        let d = Decoded(bytes: frame)
        #expect(d.code == .badFrame)
        #expect(d.req == nil)
    }

    @Test func nestingBeyond512IsBadFrame() {
        // The envelope is level 1, so data may nest 511 more.
        let ok = #"{"op":"publish","type":"a","data":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"
        let deep = #"{"op":"publish","type":"a","data":"# + String(repeating: "[", count: 512) + String(repeating: "]", count: 512) + "}"
        #expect(Decoded(ok).error == nil)
        #expect(Decoded(deep).code == .badFrame)
    }

    // MARK: duplicate keys

    @Test("duplicate envelope keys are bad_request", arguments: [
        #"{"op":"ping","op":"ping"}"#,
        #"{"op":"ping","\u006fp":"ping"}"#,
        #"{"\u006f\u0070":"ping","op":"stats"}"#,
        #"{"op":"publish","type":"a","type":"b"}"#,
        #"{"op":"publish","type":"a","data":1,"data":2}"#,
        #"{"op":"publish","type":"a","d\u0061ta":1,"data":2}"#,
        #"{"op":"hello","echo":true,"echo":false}"#,
        #"{"op":"ping","x":1,"x":2}"#,
        #"{"op":"ping","x":1,"\u0078":2}"#,
        #"{"op":"ping","":1,"":2}"#,
        #"{"op":"ping","é":1,"\u00e9":2}"#,
        #"{"op":"ping","overflowing":1,"overflowing":2}"#,
        #"{"op":"publish","type":"a","retain":true,"retain":false}"#,
        #"{"op":"subscribe","type":"a","since":1,"since":2}"#,
        #"{"op":"subscribe","type":"a","instance":"i","inst\u0061nce":"j"}"#,
    ])
    func duplicateKeysAreBadRequest(_ frame: String) {
        #expect(Decoded(frame).code == .badRequest)
    }

    @Test func duplicateKeyErrorKeepsAValidReq() {
        let d = Decoded(#"{"op":"ping","req":5,"op":"ping"}"#)
        #expect(d.code == .badRequest)
        #expect(d.req == "5")
        #expect(d.error?.message.contains("\"op\"") == true)
    }

    @Test func duplicatedReqIsBadRequestWithoutReq() {
        for frame in [#"{"op":"ping","req":1,"req":1}"#, #"{"op":"ping","req":1,"r\u0065q":2}"#] {
            let d = Decoded(frame)
            #expect(d.code == .badRequest, "\(frame)")
            #expect(d.req == nil, "\(frame)")
        }
    }

    @Test func keysThatOnlyLookAlikeAreNotDuplicates() {
        // "op" vs "Op", "op " and "o\u0070x" are different keys.
        let d = Decoded(#"{"op":"ping","Op":1,"op ":2,"o\u0070x":3,"opp":4}"#)
        #expect(d.error == nil)
    }
}
