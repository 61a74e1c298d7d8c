// The objects of an array in a broker reply (`clients`, `types`), read once
// for every command that lists them (PROTOCOL.md "Introspection (1.1)",
// "Per-type counters (1.2)").
@_spi(Package) import EventBusProtocol

/// One object of such an array: a copy of its bytes and its members (tokens into those bytes).
struct ReplyObject {
    let bytes: [UInt8]
    let members: [JSONMember]
}

extension Reply {
    /// Calls `body` with the reply's bytes, the tokens of the objects in the
    /// array `key` and the objects read.
    /// - Returns: what `body` returns; nil when `key` is not an array or an
    ///   element is not valid JSON.
    func withObjects<T>(in key: String, _ body: (RawSpan, [JSONToken], [ReplyObject]) -> T) -> T? {
        guard let list = member(key)?.value, list.kind == .array else { return nil }
        let span = bytes.span.bytes
        guard let items = try? JSONArray.elements(span, list) else { return nil }
        let tokens = items.filter { $0.kind == .object }
        var objects: [ReplyObject] = []
        for token in tokens {
            let object = Array(copying: span.extracting(token.start..<token.end))
            guard let members = try? JSONObject.members(object.span.bytes) else { return nil }
            objects.append(ReplyObject(bytes: object, members: members))
        }
        return body(span, tokens, objects)
    }
}
