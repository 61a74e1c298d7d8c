// Properties of `RequestDecoder.decode` on one frame: its verdict agrees with
// `JSONScanner.validate` (PROTOCOL.md "Framing": bad JSON is bad_frame, no
// req), every token it returns lies in the frame and is valid JSON of the
// right kind, and every reply or event the broker would build from it is one
// valid JSON object on one line.
//
// Before editing: a violated property must trap (`fuzzFailure`).
import EventBusProtocol

enum RequestProperties {
    static func check(_ frame: [UInt8]) {
        frame.withUnsafeBytes { bytes in
            let decoded = RequestDecoder.decode(bytes)
            let whole = Result { () throws(JSONSyntaxError) in try JSONScanner.validate(bytes) }

            // Verdict versus the validator.
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
            }

            // `req`: inside the frame, a string or an integer within ±2^53.
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

            switch decoded.request {
            case .failure(let error):
                var out: [UInt8] = []
                FrameEncoder.appendError(req: reqSlice, error, to: &out)
                checkOutgoing(out, what: "error reply")
            case .success(let request):
                checkRequest(request, frame: bytes, req: reqSlice)
            }
        }
    }

    static func checkRequest(_ request: Request, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?) {
        switch request {
        case .publish(let type, let data, let source, let id):
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
                    seq: 42, type: type.name, time: stampBytes, source: sourceSlice, defaultSource: "pid/1",
                    id: idSlice, instance: "0123456789abcdef", pid: 1, uid: 0, gid: 0, data: dataSlice), to: &event)
            }
            checkOutgoing(event, what: "event")
            // `data` is forwarded byte for byte, and the clients' reader finds it.
            let body = Array(event.dropLast())
            let read = body.withUnsafeBytes { try? BrokerFrame.read($0) }
            guard case .event(let fields)? = read, let token = fields.data, token.end == body.count - 1 else {
                fuzzFailure("the client reader finds no event whose last member is data in \(FuzzInput.preview(event))")
            }
            let forwarded = Array(body[token.start..<token.end])
            let expected = dataSlice.map { Array($0) } ?? Array("null".utf8)
            if forwarded != expected {
                fuzzFailure("data not forwarded byte for byte: \(FuzzInput.preview(forwarded)) vs \(FuzzInput.preview(expected))")
            }
            if fields.seq != 42 || body.withUnsafeBytes({ JSONString.decode($0, fields.type) }) != type.name {
                fuzzFailure("the client reader reads seq/type \(fields.seq) wrong in \(FuzzInput.preview(event))")
            }
        case .subscribe(let pattern), .unsubscribe(let pattern):
            if Pattern(pattern.text) == nil { fuzzFailure("decoder made an invalid pattern \(pattern.text)") }
            var out: [UInt8] = []
            FrameEncoder.appendOK(req: req, to: &out) { FrameEncoder.appendField("type", string: pattern.text, to: &$0) }
            checkOutgoing(out, what: "subscribe reply")
        case .hello(let client, _, _):
            if let client, !RequestDecoder.isValidClientName(client) { fuzzFailure("hello accepted client \(client)") }
            var out: [UInt8] = []
            FrameEncoder.appendOK(req: req, to: &out) { FrameEncoder.appendField("server", string: client ?? "", to: &$0) }
            checkOutgoing(out, what: "hello reply")
        case .ping, .stats:
            var out: [UInt8] = []
            FrameEncoder.appendOK(req: req, to: &out)
            checkOutgoing(out, what: "ok reply")
        }
    }

    /// The token lies inside the frame and is, on its own, one valid JSON value.
    @discardableResult
    static func checkToken(_ token: JSONToken, in frame: UnsafeRawBufferPointer, what: String) -> UnsafeRawBufferPointer {
        guard token.start >= 0, token.start < token.end, token.end <= frame.count else {
            fuzzFailure("\(what) token \(token.start)..<\(token.end) outside the frame of \(frame.count) bytes")
        }
        let slice = UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end])
        do {
            let again = try JSONScanner.validate(slice)
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
                let token = try JSONScanner.validate(bytes)
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
