// One line of `eventbus serve --json`'s standard input (issue 35: out of
// the executable, unit-tested by EventBusCLITests): `{"to":"<token>",
// "data":..}` or `{"to":"<token>","error":"text"}`, the reply to the request
// whose `reply` token is `to`. A bad line is reported on stderr and skipped;
// serve goes on.
//
// Before editing: the words are what a program serving through the pipes
// reads when it gets a reply wrong (docs/CLI.md "serve").
@_spi(Package) import EventBusProtocol

/// A reply read from a line: to whom, and the data or the error text.
package struct ServeReplyLine: Equatable {
    /// The request's `reply` token.
    package var to: String
    package var data: JSONText?
    package var error: String?

    /// Reads `bytes` (one line without its LF).
    /// - Returns: nil for a blank line; else the reply, or why the line is
    ///   none (`line N: ` is the caller's).
    package static func read(_ bytes: RawSpan) -> Result<ServeReplyLine, ServeLineError>? {
        let line = Span<UInt8>(_bytes: bytes)
        if line.indices.allSatisfy({ line[$0] == 0x20 || line[$0] == 0x09 }) { return nil }
        guard let members = try? JSONObject.members(bytes) else {
            return .failure(ServeLineError("not a JSON object; a reply is {\"to\":\"<the request's reply token>\",\"data\":...} or with \"error\":\"text\""))
        }
        func value(_ key: String) -> JSONToken? { members.first { $0.key == key }?.value }
        guard let to = value("to"), to.isString else { return .failure(ServeLineError("no string \"to\" (the request's \"reply\" token)")) }
        var reply = ServeReplyLine(to: JSONString.decode(bytes, to), data: nil, error: nil)
        if let token = value("data") {
            guard let text = try? JSONText(validating: Array(copying: bytes.extracting(token.start..<token.end)), layout: .compact) else {
                return .failure(ServeLineError("\"data\" is not valid JSON"))
            }
            reply.data = text
        }
        if let token = value("error") {
            guard token.isString else { return .failure(ServeLineError("\"error\" must be a string")) }
            reply.error = JSONString.decode(bytes, token)
        }
        return .success(reply)
    }
}

/// Why a line of `serve --json`'s input is no reply.
package struct ServeLineError: Error, Equatable {
    package var message: String
    package init(_ message: String) { self.message = message }
}
