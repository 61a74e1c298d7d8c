// The request envelope's tables (PROTOCOL.md "Requests"): the ops and the
// top-level keys, each spelled once, here, and read by the broker's
// `RequestDecoder` and written by the clients' `ClientRequest`. Then the
// broker's reading of one envelope: the value token of each known key, and
// duplicate keys found in time linear in the frame (PROTOCOL.md "Framing":
// duplicate envelope keys are `bad_request`; the other keys' check is
// UnknownKeys.swift).
//
// Before editing: a new key is one `case` line in `EnvelopeKey` plus its
// handling in `RequestDecoder` (and, for clients, its place in
// `ClientRequest`); a new op is one `case` in `RequestOp` plus the same.
// `EnvelopeFields.scan` is the broker's per-frame path: no allocation for a
// frame of known keys.

/// The ops a client may send, in the wire spelling of their case names.
enum RequestOp: Int, FrameKey {
    case hello, subscribe, unsubscribe, publish, ping, stats
    case clear, clients  // 1.1
    case types  // 1.2
    case request, reply  // 1.3

    static let table = KeyTable(Self.self)
}

/// The envelope's top-level keys, in the wire spelling of their case names.
enum EnvelopeKey: Int, FrameKey {
    case op, req, type
    case data, source, id, retain, origin  // publish (retain, origin: 1.1)
    case client, echo, overflow  // hello
    case last, since, instance  // subscribe (1.1)
    case limit  // types (1.2)
    case serve, group, key, timeout, to, error  // subscribe, publish, request, reply (1.3)
    case fallback, code  // subscribe, reply: a bridge's requests across machines (issue 36)
    case servers  // subscribe, unsubscribe: a bridge's watch of the serving patterns (issue 36)
    case uid  // subscribe, unsubscribe, publish with group: the one uid's group that crosses machines (attacker6)

    static let table = KeyTable(Self.self)
}

/// The envelope's known members, with duplicate detection over all keys.
/// Valid only inside the `KeyedTokens.withEmpty` call that made its tokens.
struct EnvelopeFields {
    private var tokens: KeyedTokens<EnvelopeKey>
    /// The first key (in frame order) that appeared twice.
    private var firstDuplicate: JSONToken? = nil
    /// The keys not in `EnvelopeKey`, for the duplicate check.
    private var unknown = UnknownKeys()

    /// Reads the frame's top-level members into `tokens`.
    /// - Throws: `ProtocolError` `bad_frame` when the frame is not one JSON object.
    init(_ frame: ByteView, into tokens: KeyedTokens<EnvelopeKey>) throws(ProtocolError) {
        self.tokens = tokens
        try scan(frame)
    }

    /// Empty, for members handed in one at a time (`take`, then
    /// `finishMembers`): a frame read as it arrives (RequestScan.swift).
    init(collectingInto tokens: KeyedTokens<EnvelopeKey>) {
        self.tokens = tokens
    }

    /// Bytes it holds beyond its own size (the unknown keys collected).
    var heldBytes: Int { unknown.heldBytes }

    /// The `bad_frame` error for a frame that is not one JSON object.
    static func frameError(_ error: JSONObject.ReadError) -> ProtocolError {
        switch error {
        case .notAnObject: ProtocolError(.badFrame, "frame must be a JSON object")
        case .syntax(let error): ProtocolError(.badFrame, "invalid JSON: \(error)")
        }
    }


    /// The value of `key`, nil when absent (the first value if repeated).
    @inline(__always)
    subscript(key: EnvelopeKey) -> JSONToken? { tokens[key] }

    /// Whether `key` appeared more than once.
    func duplicated(_ key: EnvelopeKey) -> Bool { tokens.isDuplicated(key) }

    /// The first key (in frame order) that appeared twice, decoded.
    func duplicateKey(in frame: ByteView) -> String? {
        firstDuplicate.map { JSONString.decode(frame, $0) }
    }

    private mutating func scan(_ frame: ByteView) throws(ProtocolError) {
        let keys = EnvelopeKey.table.lookup
        do throws(JSONObject.ReadError) {
            try JSONObject.scan(frame, lineSafe: true) { key, value in take(key, value, in: frame, keys: keys) }
        } catch {
            throw EnvelopeFields.frameError(error)
        }
        finishMembers(in: frame)
    }

    /// Takes one top-level member (the frame's bytes up to its end at least).
    /// - Parameter keys: `EnvelopeKey.table.lookup`, copied out once per frame.
    @inline(__always)
    mutating func take(_ key: JSONToken, _ value: JSONToken, in frame: ByteView, keys: KeyLookup) {
        let position: Int
        if case .string(escaped: false) = key.kind {
            guard let known = keys.position(of: key, in: frame) else { return unknown.insertPlain(key, in: frame) }
            position = known
        } else {
            // Decoded once: to tell a known key, and to keep an unknown one.
            guard let known = unknown.insertEscaped(key, in: frame, known: { name in
                keys.position(in: name, at: 0, count: name.count)
            }) else { return }
            position = known
        }
        if !tokens.record(position, value), firstDuplicate == nil { firstDuplicate = key }
    }

    /// After the last member: the duplicate check of the other keys.
    mutating func finishMembers(in frame: ByteView) {
        // The earliest repeat in frame order, of a known key or of another.
        if let repeated = unknown.firstDuplicate(in: frame), firstDuplicate.map({ repeated.start < $0.start }) ?? true {
            firstDuplicate = repeated
        }
    }
}
