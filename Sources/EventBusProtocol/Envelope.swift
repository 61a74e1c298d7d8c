// The request envelope's tables (PROTOCOL.md "Requests"): the ops and the
// top-level keys, each spelled once, here, and read by the broker's
// `RequestDecoder` and written by the clients' `ClientRequest`. Then the
// broker's reading of one envelope: the value token of each known key, and
// duplicate keys found in time linear in the frame (PROTOCOL.md "Framing":
// duplicate envelope keys are `bad_request`).
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

    static let table = KeyTable(Self.self)
}

/// The envelope's top-level keys, in the wire spelling of their case names.
enum EnvelopeKey: Int, FrameKey {
    case op, req, type
    case data, source, id, retain, origin  // publish (retain, origin: 1.1)
    case client, echo, overflow  // hello
    case last, since, instance  // subscribe (1.1)

    static let table = KeyTable(Self.self)
}

/// The envelope's known members, with duplicate detection over all keys.
/// Valid only inside the `KeyedTokens.withEmpty` call that made its tokens.
struct EnvelopeFields {
    private var tokens: KeyedTokens<EnvelopeKey>
    /// The first key (in frame order) that appeared twice.
    private var firstDuplicate: JSONToken? = nil

    /// Reads the frame's top-level members into `tokens`.
    /// - Throws: `ProtocolError` `bad_frame` when the frame is not one JSON object.
    init(_ frame: UnsafeRawBufferPointer, into tokens: KeyedTokens<EnvelopeKey>) throws(ProtocolError) {
        self.tokens = tokens
        try scan(frame)
    }


    /// The value of `key`, nil when absent (the first value if repeated).
    @inline(__always)
    subscript(key: EnvelopeKey) -> JSONToken? { tokens[key] }

    /// Whether `key` appeared more than once.
    func duplicated(_ key: EnvelopeKey) -> Bool { tokens.isDuplicated(key) }

    /// The first key (in frame order) that appeared twice, decoded.
    func duplicateKey(in frame: UnsafeRawBufferPointer) -> String? {
        firstDuplicate.map { JSONString.decode(frame, $0) }
    }

    private mutating func scan(_ frame: UnsafeRawBufferPointer) throws(ProtocolError) {
        let keys = EnvelopeKey.table.lookup
        var unknown = UnknownKeys()
        do throws(JSONObject.ReadError) {
            try JSONObject.scan(frame) { key, value in
                if let position = keys.position(of: key, in: frame) {
                    if !tokens.record(position, value), firstDuplicate == nil { firstDuplicate = key }
                } else if !unknown.insert(key, in: frame), firstDuplicate == nil {
                    firstDuplicate = key
                }
            }
        } catch {
            switch error {
            case .notAnObject: throw ProtocolError(.badFrame, "frame must be a JSON object")
            case .syntax(let error): throw ProtocolError(.badFrame, "invalid JSON: \(error)")
            }
        }
    }
}

/// The keys of one frame that are not in `EnvelopeKey`, by their decoded
/// bytes, in a hash set (seeded by the standard library's per-process
/// SipHash, so no frame can be made to collide): a frame of 85,000 keys costs
/// 85,000 inserts, not 85,000² comparisons. Valid while the frame is.
struct UnknownKeys {
    /// Made at the first unknown key: most frames have none.
    private var keys: Set<Key>? = nil

    /// Adds a validated string token's decoded text.
    /// - Returns: false when the text was already there.
    mutating func insert(_ token: JSONToken, in frame: UnsafeRawBufferPointer) -> Bool {
        let key: Key
        if case .string(escaped: false) = token.kind {
            key = .inFrame(UnsafeRawBufferPointer(rebasing: frame[(token.start + 1)..<(token.end - 1)]))
        } else {
            key = .decoded(JSONString.decodeBytes(frame, token))
        }
        if keys == nil { keys = [] }
        return keys!.insert(key).inserted
    }

    /// A key's decoded bytes: a range of the frame, or decoded from escapes.
    private enum Key: Hashable {
        case inFrame(UnsafeRawBufferPointer)
        case decoded([UInt8])

        func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
            switch self {
            case .inFrame(let bytes): body(bytes)
            case .decoded(let bytes): bytes.withUnsafeBytes(body)
            }
        }

        func hash(into hasher: inout Hasher) {
            withBytes { hasher.combine(bytes: $0) }
        }

        static func == (a: Key, b: Key) -> Bool {
            a.withBytes { x in b.withBytes { y in x.elementsEqual(y) } }
        }
    }
}
