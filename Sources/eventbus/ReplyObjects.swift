// The objects of an array in a broker reply (`clients`, `types`), read once
// for every command that lists them (PROTOCOL.md "Introspection (1.1)",
// "Per-type counters (1.2)").
@_spi(Package) import EventBusProtocol

/// One object of such an array: its bytes (within the reply) and its members.
typealias ReplyObject = (bytes: UnsafeRawBufferPointer, members: [JSONMember])

extension Reply {
    /// Calls `body` with the reply's bytes, the tokens of the objects in the
    /// array `key` and the objects read, all valid during the call only.
    /// - Returns: what `body` returns; nil when `key` is not an array or an
    ///   element is not valid JSON.
    func withObjects<T>(in key: String, _ body: (UnsafeRawBufferPointer, [JSONToken], [ReplyObject]) -> T) -> T? {
        guard let list = member(key)?.value, list.kind == .array else { return nil }
        return bytes.withUnsafeBytes { bytes -> T? in
            var tokens: [JSONToken] = []
            var scanner = JSONScanner(bytes, maxDepth: ProtocolConstants.maxDepth)
            scanner.position = list.start
            do {
                try scanner.scanElements(depth: 1) { item in if item.kind == .object { tokens.append(item) } }
            } catch {
                return nil
            }
            var objects: [ReplyObject] = []
            for token in tokens {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[token.start..<token.end])
                guard let members = try? JSONObject.members(slice) else { return nil }
                objects.append((slice, members))
            }
            return body(bytes, tokens, objects)
        }
    }
}
