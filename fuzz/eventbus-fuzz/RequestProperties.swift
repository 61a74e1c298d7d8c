// Properties of `RequestDecoder.decode` on one frame: its verdict agrees with
// `JSONScanner.validate` (PROTOCOL.md "Framing": bad JSON is bad_frame, no
// req), every token it returns lies in the frame and is valid JSON of the
// right kind, every reply or event the broker would build from it is one
// valid JSON object on one line that the clients' reader reads back, the
// repeated top-level key it names is the model's, and the clients' encoder
// writes the request so that it decodes the same again.
//
// Before editing: a violated property must trap (`fuzzFailure`).
@_spi(Package) import EventBusProtocol

enum RequestProperties {
    static func check(_ frame: [UInt8]) {
        frame.withUnsafeBytes { bytes in
            let decoded = RequestDecoder.decode(bytes.bytes)
            // The requests' grammar: no raw CR, U+0085, U+2028, U+2029 (lineSafe).
            let whole = Result { () throws(JSONSyntaxError) in try JSONScanner.validate(bytes.bytes, lineSafe: true) }
            checkVerdict(whole, decoded, bytes)
            let reqSlice = checkReq(decoded, in: bytes)

            switch decoded.request {
            case .failure(let error):
                var out: [UInt8] = []
                appendErrorReply(req: reqSlice, error, to: &out)
                checkOutgoing(out, what: "error reply")
            case .success(let request):
                checkRequest(request, frame: bytes, req: reqSlice)
                checkRoundTrip(request, frame: bytes)
            }
        }
    }

    /// The decoder's verdict versus the validator's (PROTOCOL.md "Framing").
    static func checkVerdict(_ whole: Result<JSONToken, JSONSyntaxError>, _ decoded: DecodedFrame, _ bytes: UnsafeRawBufferPointer) {
        switch whole {
        case .failure(let error):
            guard case .failure(let refusal) = decoded.request, refusal.code == .badFrame, decoded.req == nil else {
                fuzzFailure("validator rejects the frame (\(error)) but the decoder answered \(describe(decoded))")
            }
        case .success(let token) where token.kind != .object:
            guard case .failure(let refusal) = decoded.request, refusal.code == .badFrame else {
                fuzzFailure("frame is JSON but not an object, decoder answered \(describe(decoded))")
            }
        case .success:
            if case .failure(let refusal) = decoded.request, refusal.code == .badFrame {
                fuzzFailure("validator accepts the object but the decoder says bad_frame: \(refusal.message)")
            }
            checkDuplicateKeys(bytes, decoded)
        }
    }

    /// `req`: inside the frame, a string or an integer within ±2^53.
    /// - Returns: its bytes, to echo.
    static func checkReq(_ decoded: DecodedFrame, in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var reqSlice: UnsafeRawBufferPointer? = nil
        if let req = decoded.req {
            let slice = checkToken(req, in: bytes, what: "req")
            switch req.kind {
            case .string: break
            case .number(integer: true):
                // Compare decimal text: no floating-point rounding.
                let text = String(decoding: slice, as: UTF8.self)
                let digits = text.hasPrefix("-") ? String(text.dropFirst()) : text
                let limit = "9007199254740992"
                if digits.count > limit.count || (digits.count == limit.count && digits > limit) {
                    fuzzFailure("req \(text) echoed although it is beyond ±2^53")
                }
            default:
                fuzzFailure("req of kind \(req.kind) echoed")
            }
            reqSlice = slice
        }
        return reqSlice
    }

    /// A publish's tokens lie in the frame, and the event the broker would
    /// build from it is one valid line that the clients' reader reads back,
    /// `data` byte for byte.
    static func checkPublish(_ publish: PublishRequest, frame: UnsafeRawBufferPointer) {
        let (type, data, source, id) = (publish.type, publish.data, publish.source, publish.id)
        if let origin = publish.origin {
            checkToken(origin, in: frame, what: "origin")
            guard case .object = origin.kind else { fuzzFailure("non-object origin accepted") }
        }
        if !EventType.isValid(type.name.utf8) || type.isReserved { fuzzFailure("publish accepted type \(type.name)") }
        if Pattern(type.name) == nil { fuzzFailure("valid type \(type.name) is not a valid pattern") }
        let dataSlice = data.map { checkToken($0, in: frame, what: "data") }
        let sourceSlice = source.map { checkToken($0, in: frame, what: "source") }
        let idSlice = id.map { checkToken($0, in: frame, what: "id") }
        if let source, !source.isString { fuzzFailure("non-string source accepted") }
        if let id, !id.isString { fuzzFailure("non-string id accepted") }
        var time = TimestampFormatter()
        var stamp: [UInt8] = []
        time.format(nanosecondsSinceEpoch: 1_764_421_200_123_000_000, into: &stamp)
        var event: [UInt8] = []
        stamp.withUnsafeBytes { stampBytes in
            FrameEncoder.appendEvent(FrameEncoder.EventParts(
                seq: 42, type: type.name, time: ByteView(unsafe: stampBytes), source: sourceSlice.map(ByteView.init(unsafe:)), defaultSource: "pid/1",
                id: idSlice.map(ByteView.init(unsafe:)), instance: "0123456789abcdef", pid: 1, uid: 0, gid: 0, data: dataSlice.map(ByteView.init(unsafe:))), to: &event)
        }
        checkOutgoing(event, what: "event")
        // `data` is forwarded byte for byte, and the clients' reader finds it.
        let body = Array(event.dropLast())
        let read = try? BrokerFrame.read(body.span.bytes)
        guard case .event(let fields)? = read, let token = fields.data, token.end == body.count - 1 else {
            fuzzFailure("the client reader finds no event whose last member is data in \(FuzzInput.preview(event))")
        }
        let forwarded = Array(body[token.start..<token.end])
        let expected = dataSlice.map { Array($0) } ?? Array("null".utf8)
        if forwarded != expected {
            fuzzFailure("data not forwarded byte for byte: \(FuzzInput.preview(forwarded)) vs \(FuzzInput.preview(expected))")
        }
        if fields.seq != 42 || body.withUnsafeBytes({ JSONString.decode($0.bytes, fields.type) }) != type.name {
            fuzzFailure("the client reader reads seq/type \(fields.seq) wrong in \(FuzzInput.preview(event))")
        }
    }

    static func checkRequest(_ request: Request, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?) {
        switch request {
        case .publish(let publish):
            checkPublish(publish, frame: frame)
        case .publishToGroup(let publish, let group, let uid):  // (issue 36; uid: attacker6)
            checkPublish(publish, frame: frame)
            if !RequestDecoder.isValidClientName(group) || publish.retain || uid == UInt32.max { fuzzFailure("a group publish accepted group \(group), retain \(publish.retain), uid \(String(describing: uid))") }
        case .clear(let type):
            if !EventType.isValid(type.name.utf8) || type.isReserved { fuzzFailure("clear accepted type \(type.name)") }
        case .subscribe(let subscribe):
            checkPattern(subscribe.pattern, req: req)
        case .unsubscribe(let unsubscribe):
            checkPattern(unsubscribe.pattern, req: req)
        case .request(let request):
            if !EventType.isValid(request.publish.type.name.utf8) || request.publish.type.isReserved { fuzzFailure("request accepted type \(request.publish.type.name)") }
            if req == nil { fuzzFailure("request accepted without req") }
        case .reply(let reply):
            if !reply.to.isString { fuzzFailure("reply accepted a \"to\" that is not a string") }
        case .hello(let hello):
            let client = hello.client
            if let client, !RequestDecoder.isValidClientName(client) { fuzzFailure("hello accepted client \(client)") }
            var out: [UInt8] = []
            appendOKReply(req: req, to: &out) { FrameEncoder.appendField("server", string: client ?? "", to: &$0) }
            checkOutgoing(out, what: "hello reply")
        case .ping, .stats, .clients, .types:
            var out: [UInt8] = []
            appendOKReply(req: req, to: &out)
            checkOutgoing(out, what: "ok reply")
        }
    }

    /// The duplicate-key verdict against a plain model (PROTOCOL.md
    /// "Framing": a repeated top-level key is `bad_request`): the first key,
    /// in frame order, equal (decoded) to an earlier one is the one named,
    /// and a frame without one is not refused for it. (A bad or repeated
    /// `req` is told first.)
    static func checkDuplicateKeys(_ frame: UnsafeRawBufferPointer, _ decoded: DecodedFrame) {
        guard let members = try? JSONObject.members(frame.bytes) else { fuzzFailure("the decoder's object has no members") }
        var seen = Set<String>()
        let repeated = members.first { !seen.insert($0.key).inserted }?.key
        let message: String
        if case .failure(let refusal) = decoded.request { message = refusal.message } else { message = "" }
        if message.hasPrefix("req must") { return }
        if let repeated {
            guard message == "duplicate key \(JSONString.quoted(repeated)) in frame" else {
                fuzzFailure("the first repeated key is \(JSONString.quoted(repeated)), the decoder answered \(describe(decoded))")
            }
        } else if message.hasPrefix("duplicate key") {
            fuzzFailure("no key repeats, the decoder answered \(message)")
        }
    }

    static func checkPattern(_ pattern: Pattern, req: UnsafeRawBufferPointer?) {
            if Pattern(pattern.text) == nil { fuzzFailure("decoder made an invalid pattern \(pattern.text)") }
            var out: [UInt8] = []
            appendOKReply(req: req, to: &out) { FrameEncoder.appendField("type", string: pattern.text, to: &$0) }
            checkOutgoing(out, what: "subscribe reply")
    }

    /// The clients' encoder (`ClientRequest`) writes the request so that the
    /// broker decodes it to the same request again: both sides spell every
    /// name from the tables in Envelope.swift, and strings survive escaping.
    static func checkRoundTrip(_ request: Request, frame: UnsafeRawBufferPointer) {
        guard let client = clientRequest(for: request, frame: frame) else { return }
        var encoded = client.encoded(req: 1)
        guard encoded.popLast() == 0x0A, !encoded.contains(0x0A) else { fuzzFailure("encoded request is not one line: \(FuzzInput.preview(encoded))") }
        encoded.withUnsafeBytes { again in
            let decoded = RequestDecoder.decode(again.bytes)
            guard case .success(let back) = decoded.request else {
                fuzzFailure("the broker refuses the clients' encoding \(FuzzInput.preview(encoded)): \(describe(decoded))")
            }
            if !isSame(request, back, frame, again) { fuzzFailure("round trip changed \(request) into \(back) via \(FuzzInput.preview(encoded))") }
        }
    }

    /// The clients' encoding of `request` (`ClientRequest`), or nil for one the clients' encoder does not spell yet.
    static func clientRequest(for request: Request, frame: UnsafeRawBufferPointer) -> ClientRequest? {
        switch request {
        case .hello(let hello): return .hello(client: hello.client, echo: hello.echo, overflow: hello.overflow)
        case .subscribe(let subscribe):
            guard !subscribe.serve else { return nil }  // (1.3) not in the clients' encoder yet
            return .subscribe(pattern: subscribe.pattern.text, last: subscribe.last ? true : nil, since: subscribe.since, instance: subscribe.instance,
                              servers: subscribe.servers ? true : nil)  // (issue 36) a bridge's watch
        // (1.3) `group` is left out until the clients' codec spells it (its own branch).
        case .unsubscribe(let unsubscribe):
            guard !unsubscribe.serve else { return nil }  // (1.3) not in the clients' encoder yet
            return .unsubscribe(pattern: unsubscribe.pattern.text)
        case .request, .reply: return nil  // (1.3) not in the clients' encoder yet
        case .publishToGroup: return nil  // (issue 36) a bridge's: not in the clients' encoder
        case .clear(let type): return .clear(type: type.name)
        case .clients: return .clients
        case .types(let limit): return .types(limit: limit)
        case .ping: return .ping
        case .stats: return .stats
        case .publish(let publish):
            let raw = publish.data.map { Array(frame[$0.start..<$0.end]) } ?? Array("null".utf8)
            guard let text = try? JSONText(validating: raw) else { fuzzFailure("data does not validate on its own: \(FuzzInput.preview(raw))") }
            let origin = publish.origin.flatMap { try? JSONText(validating: Array(frame[$0.start..<$0.end])) }
            return .publish(type: publish.type.name, source: string(publish.source, frame), id: string(publish.id, frame),
                            retain: publish.retain ? true : nil, origin: origin, data: text)
        }
    }

    /// Whether `back` (decoded from `again`) is `request` (from `frame`) again.
    static func isSame(_ request: Request, _ back: Request, _ frame: UnsafeRawBufferPointer, _ again: UnsafeRawBufferPointer) -> Bool {
        switch (request, back) {
        case (.hello(let h1), .hello(let h2)): return h1 == h2
        case (.subscribe(var s1), .subscribe(let s2)): s1.group = nil; return s1 == s2
        case (.unsubscribe(let p1), .unsubscribe(let p2)): return p1.pattern == p2.pattern
        case (.clear(let t1), .clear(let t2)): return t1 == t2
        case (.ping, .ping), (.stats, .stats), (.clients, .clients): return true
        case (.types(let l1), .types(let l2)): return l1 == l2
        case (.publish(let p1), .publish(let p2)):
            return p1.type == p2.type && p1.retain == p2.retain
                && string(p1.source, frame) == string(p2.source, again) && string(p1.id, frame) == string(p2.id, again)
                && compact(p1.data, frame) == compact(p2.data, again) && (p1.origin == nil) == (p2.origin == nil)
                && (p1.origin == nil || compact(p1.origin, frame) == compact(p2.origin, again))
        default: return false
        }
    }

    static func string(_ token: JSONToken?, _ bytes: UnsafeRawBufferPointer) -> String? { token.map { JSONString.decode(bytes.bytes, $0) } }

    /// The token's value in compact layout (`null` when absent).
    static func compact(_ token: JSONToken?, _ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        let raw = token.map { Array(bytes[$0.start..<$0.end]) } ?? Array("null".utf8)
        return (try? JSONText(validating: raw, layout: .compact))?.bytes
    }

    /// The token lies inside the frame and is, on its own, one valid JSON value.
    @discardableResult
    static func checkToken(_ token: JSONToken, in frame: UnsafeRawBufferPointer, what: String) -> UnsafeRawBufferPointer {
        guard token.start >= 0, token.start < token.end, token.end <= frame.count else {
            fuzzFailure("\(what) token \(token.start)..<\(token.end) outside the frame of \(frame.count) bytes")
        }
        let slice = UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end])
        let rescanned = Result { () throws(JSONSyntaxError) in try ByteView(unsafe: slice).withSpan { (span) throws(JSONSyntaxError) in try JSONScanner.validate(span) } }
        do {
            let again = try rescanned.get()
            if again.start != 0 || again.end != slice.count || again.kind != token.kind {
                fuzzFailure("\(what) token rescans as \(again), was \(token)")
            }
        } catch {
            fuzzFailure("\(what) token is not valid JSON on its own: \(error)")
        }
        return slice
    }

    /// An outgoing frame is one JSON object followed by exactly one LF.
    static func checkOutgoing(_ out: [UInt8], what: String) {
        guard out.last == 0x0A, out.firstIndex(of: 0x0A) == out.count - 1 else {
            fuzzFailure("\(what) is not one line: \(FuzzInput.preview(out))")
        }
        out.dropLast().withUnsafeBytes { bytes in
            do {
                // lineSafe: nothing a line reader would split (PROTOCOL-NOTES.md "Framing").
                let token = try JSONScanner.validate(bytes.bytes, lineSafe: true)
                if token.kind != .object { fuzzFailure("\(what) is not an object") }
            } catch {
                fuzzFailure("\(what) is not valid JSON (\(error)): \(FuzzInput.preview(out))")
            }
        }
    }

    static func describe(_ decoded: DecodedFrame) -> String {
        switch decoded.request {
        case .success(let request): "success(\(request)), req \(String(describing: decoded.req))"
        case .failure(let error): "failure(\(error)), req \(String(describing: decoded.req))"
        }
    }
}

/// `FrameEncoder.appendOK` with the `req` slice this fuzzer keeps (the
/// encoder takes it as a span).
private func appendOKReply(req: UnsafeRawBufferPointer?, to out: inout [UInt8], fields: (inout [UInt8]) -> Void = { _ in }) {
    if let req { FrameEncoder.appendOK(req: req.bytes, to: &out, fields: fields) } else { FrameEncoder.appendOK(req: nil, to: &out, fields: fields) }
}

/// `FrameEncoder.appendError` with the `req` slice this fuzzer keeps.
private func appendErrorReply(req: UnsafeRawBufferPointer?, _ error: ProtocolError, to out: inout [UInt8]) {
    if let req { FrameEncoder.appendError(req: req.bytes, error, to: &out) } else { FrameEncoder.appendError(req: nil, error, to: &out) }
}
