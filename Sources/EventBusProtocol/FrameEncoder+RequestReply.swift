// The broker's frames of request/reply (PROTOCOL.md "Request/reply (1.3)"):
// a request as a server gets it (the event frame of the request, its op
// `request`, with the reply token and the time left), and the answer the
// requester gets (`ok` with `reply`, or `service_error`).
//
// Before editing: like FrameEncoder.swift, spliced values (the event frame,
// `data`, the `error` text, `req`) are tokens the scanner validated and are
// not validated again; every function appends one whole frame with its LF.

extension FrameEncoder {
    /// Appends a request frame made from `event`, an event frame written by
    /// `writeEvent` (LF included):
    /// `{"op":"request","seq":..,...,"data":..,"reply":"<token>","timeout":<ms>}\n`.
    /// - Parameters:
    ///   - token: appends the token's text (no escaping needed: hex digits).
    ///   - timeoutMilliseconds: the time left until the request's deadline.
    @_spi(Package) public static func appendRequest(event: RawSpan, token: (inout [UInt8]) -> Void, timeoutMilliseconds: UInt64, to out: inout [UInt8]) {
        let head = "{\"op\":\"event\"".utf8.count
        let count = event.byteCount
        precondition(count > head + 2 && event.unsafeLoad(fromByteOffset: count - 1, as: UInt8.self) == 0x0A
                     && event.unsafeLoad(fromByteOffset: count - 2, as: UInt8.self) == 0x7D, "an event frame ends with }\\n")
        appendASCII("{\"op\":\"request\"", to: &out)
        out.append(copying: event.extracting(head..<(count - 2)))
        appendASCII(",\"reply\":\"", to: &out)
        token(&out)
        appendASCII("\",\"timeout\":", to: &out)
        appendInt(timeoutMilliseconds, to: &out)
        out.append(0x7D)
        out.append(0x0A)
    }

    /// Appends the answer to a request:
    /// `{"op":"ok","req":7,"seq":42,"reply":{"time":"...","pid":1,"uid":0,"gid":0,"data":...}}\n`,
    /// or with `serviceError`
    /// `{"op":"error","req":7,"code":"service_error","message":"<text>","reply":{...}}\n`.
    /// - Parameters:
    ///   - req: the raw `req` token of the request.
    ///   - seq: the request's seq.
    ///   - time: when the reply was received.
    ///   - identity: the server's `,"pid":P,"uid":U,"gid":G` (`EventStamp.identity`).
    ///   - data: the reply's raw `data` token, nil for null.
    ///   - serviceError: the reply's raw `error` string token, nil for none.
    ///   - code: the error's code with `serviceError` (issue 36: a bridge
    ///     relays `no_responders`, `no_reply`, `timeout`, `limit`); ASCII.
    @_spi(Package) public static func appendAnswer(req: RawSpan, seq: UInt64, time: TimestampBytes, identity: RawSpan,
                                    data: RawSpan?, serviceError: RawSpan?, code: String = "service_error",
                                    to out: inout [UInt8]) {
        if let serviceError {
            appendReplyHead("error", req: req, to: &out)
            appendASCII(",\"code\":\"", to: &out)
            out.append(contentsOf: code.utf8)
            appendASCII("\",\"message\":", to: &out)
            out.append(copying: serviceError)
        } else {
            appendReplyHead("ok", req: req, to: &out)
            appendField("seq", int: seq, to: &out)
        }
        appendASCII(",\"reply\":{\"time\":\"", to: &out)
        time.withByteView { out.append(copying: $0) }
        out.append(0x22)
        out.append(copying: identity)
        appendASCII(",\"data\":", to: &out)
        if let data { out.append(copying: data) } else { appendASCII("null", to: &out) }
        appendASCII("}}", to: &out)
        out.append(0x0A)
    }
}
