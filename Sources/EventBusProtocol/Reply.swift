// An `ok` or `error` reply from the broker (PROTOCOL.md "Requests",
// "Errors"), its members readable by key: what `BrokerFrame.read` returns
// for both, owned, so it can be kept and handed across threads.
//
// Before editing: `members` are the frame's top-level members other than
// `op` and `req`, in the broker's order (`eventbus stats` prints them so);
// their tokens index into `bytes`, the frame as it arrived.

/// `{"op":"ok","req":7,"seq":42,"delivered":2}` or
/// `{"op":"error","req":7,"code":"bad_type","message":"..."}`.
@_spi(Package) public struct Reply: Sendable, Equatable {
    /// Whether `op` is `ok` (otherwise `error`).
    @_spi(Package) public let isOK: Bool
    /// The `req` echoed, when it is an integer; nil when absent (a failure the
    /// broker could not tie to a request, or a request sent without `req`).
    @_spi(Package) public let req: Int64?
    /// The frame's bytes; `members` index into them.
    @_spi(Package) public let bytes: [UInt8]
    /// Top-level members other than `op` and `req`, in order.
    @_spi(Package) public let members: [JSONMember]

    /// Copies `frame`, a validated JSON object whose `op` is `ok` or `error`.
    init(isOK: Bool, req: Int64?, frame: ByteView) {
        self.isOK = isOK
        self.req = req
        bytes = Array(frame)
        members = ((try? JSONObject.members(frame)) ?? []).filter { $0.key != "op" && $0.key != "req" }
    }

    /// The first member named `key`.
    @_spi(Package) public func member(_ key: String) -> JSONMember? { members.first { $0.key == key } }

    /// Calls `body` with the frame's bytes and the value of member `key`, nil when absent.
    @_spi(Package) public func withValue<R>(_ key: String, _ body: (RawSpan, JSONToken) -> R?) -> R? {
        guard let value = member(key)?.value else { return nil }
        return body(bytes.span.bytes, value)
    }

    /// The string member `key`, decoded: `reply.string("instance")`.
    @_spi(Package) public func string(_ key: String) -> String? {
        withValue(key) { bytes, value in value.isString ? JSONString.decode(bytes, value) : nil }
    }

    /// The non-negative integer member `key`: `reply.unsigned("seq")`.
    @_spi(Package) public func unsigned(_ key: String) -> UInt64? { withValue(key) { JSONInteger.unsigned($0, $1) } }

    /// The integer member `key`.
    @_spi(Package) public func signed(_ key: String) -> Int64? { withValue(key) { JSONInteger.signed($0, $1) } }

    /// The number member `key` as a `Double` (e.g. `uptime_s`).
    @_spi(Package) public func double(_ key: String) -> Double? {
        withValue(key) { _, value in
            guard case .number = value.kind else { return nil }
            return Double(String(decoding: bytes[value.start..<value.end], as: UTF8.self))
        }
    }

    /// The `true`/`false` member `key`: `reply.bool("removed")`.
    @_spi(Package) public func bool(_ key: String) -> Bool? {
        withValue(key) { _, value in value.kind == .true ? true : value.kind == .false ? false : nil }
    }

    /// The member `key` when it is an array of strings only: `reply.strings("features")`.
    @_spi(Package) public func strings(_ key: String) -> [String]? {
        guard let value = member(key)?.value, value.kind == .array else { return nil }
        return bytes.withByteView { bytes -> [String]? in
            var scanner = JSONScanner(bytes, maxDepth: ProtocolConstants.maxDepth)
            scanner.position = value.start
            var items: [String] = []
            var onlyStrings = true
            do {
                try scanner.scanElements(depth: 1) { item in
                    if item.isString { items.append(JSONString.decode(bytes, item)) } else { onlyStrings = false }
                }
            } catch {
                return nil
            }
            return onlyStrings ? items : nil
        }
    }

    /// The raw JSON text of member `key`, e.g. the object `me` of a `stats`
    /// reply or the array `clients` (1.1), for a JSON decoder.
    @_spi(Package) public func raw(_ key: String) -> [UInt8]? {
        member(key).map { Array(bytes[$0.value.start..<$0.value.end]) }
    }

    /// The `code` of an `error` reply, when this client knows it.
    @_spi(Package) public var errorCode: ErrorCode? { string("code").flatMap(ErrorCode.init(rawValue:)) }

    /// (1.1) The pattern of a subscription a policy reload removed: an `error`
    /// without `req` that names a `type` (PROTOCOL.md "Access policy").
    @_spi(Package) public var revokedPattern: String? { !isOK && req == nil ? string("type") : nil }
}
