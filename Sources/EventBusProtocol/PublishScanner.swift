// The broker's specialised reading of the frame it gets most: a `publish`
// in the shape the library, the CLI, bridges and the benchmark send
// (PROTOCOL.md "Requests"):
//   {"op":"publish","type":"order.created","data":{...}}
// with any of `req`, `source`, `id`, `retain`, `origin` too, members in any
// order, JSON whitespace anywhere between tokens. Keys are matched as whole
// 8-byte words, `op` against `"publish"` the same way, the type's extent
// by the SIMD string scan; every value is validated by `JSONScanner`'s quick form
// (JSONScanner+Quick.swift). Any
// frame outside that shape, and every frame with an error, is not read here
// (`scan` returns nil): the general `RequestDecoder.decode` decides it.
//
// Before editing: a frame `scan` accepts must decode to exactly what
// `RequestDecoder.decode` makes of it (same tokens; eventbus-fuzz checks it
// on every input, and that every frame of the shape is accepted). So `scan`
// accepts nothing the general decoder would reject or read differently: no
// escaped key or op, no unknown or repeated key, no escaped type. Both scan
// `lineSafe` (a raw CR, U+0085, U+2028, U+2029 is refused: PROTOCOL-NOTES.md
// "Framing"), checked on the whitespace and non-ASCII slow paths only.

/// The members of a `publish` frame in its common shape, as token ranges
/// into the frame (valid while the frame is).
@_spi(Package) public struct PublishTokens {
    /// A string or an integer within ±2^53, as `RequestDecoder` accepts it.
    @_spi(Package) public var req: JSONToken?
    /// The `type` string, without escapes; its bytes are not yet checked
    /// against the rules of an event type (`EventType.publishable`).
    @_spi(Package) public var type: JSONToken
    @_spi(Package) public var data: JSONToken?
    @_spi(Package) public var source: JSONToken?
    @_spi(Package) public var id: JSONToken?
    @_spi(Package) public var retain: Bool
    @_spi(Package) public var origin: JSONToken?

    /// No members yet (what `PublishScanner.scan(_:into:)` fills).
    @_spi(Package) public init() {
        self.init(req: nil, type: JSONToken(start: 0, end: 0, kind: .null), data: nil, source: nil, id: nil, retain: false, origin: nil)
    }

    init(req: JSONToken?, type: JSONToken, data: JSONToken?, source: JSONToken?, id: JSONToken?, retain: Bool, origin: JSONToken?) {
        self.req = req
        self.type = type
        self.data = data
        self.source = source
        self.id = id
        self.retain = retain
        self.origin = origin
    }

    /// The type's bytes, between its quotes.
    @inlinable
    func typeBytes(in frame: ByteView) -> ByteView {
        frame.extracting(typeRange)
    }

    /// The type's offsets in the frame, between its quotes (`typeBytes` as a range, for a span).
    @inlinable
    @_spi(Package) public var typeRange: Range<Int> { (type.start &+ 1)..<(type.end &- 1) }

    /// What `RequestDecoder.decode` makes of the frame, given the event type
    /// its type bytes are (valid and not reserved).
    @_spi(Package) public func decoded(type: EventType) -> DecodedFrame {
        DecodedFrame(req: req, request: .success(.publish(request(type: type))))
    }

    /// The request `RequestDecoder.decode` makes of the frame, given its type.
    @inlinable
    @_spi(Package) public func request(type: EventType) -> PublishRequest {
        PublishRequest(type: type, data: data, source: source, id: id, retain: retain, origin: origin)
    }
}

@_spi(Package) public enum PublishScanner {
    /// Reads a frame of the common publish shape.
    /// - Parameter frame: one frame, without its LF.
    /// - Returns: its members, or nil when the frame is of any other shape or
    ///   has any error (the general `RequestDecoder.decode` then decides it).
    @_spi(Package) public static func scan(_ frame: RawSpan) -> PublishTokens? {
        frame.withByteView { scan($0) }
    }

    /// `scan(_:)` on a view of the frame.
    static func scan(_ frame: ByteView) -> PublishTokens? {
        var tokens = PublishTokens()
        return scan(frame, into: &tokens) ? tokens : nil
    }

    /// `scan(_:into:)` of a span (the broker's frames).
    @inlinable @inline(__always)
    @_spi(Package) public static func scan(_ frame: RawSpan, into tokens: inout PublishTokens) -> Bool {
        // A local function, not a closure: forced inline (a closure left a call, +35 Ir a frame).
        @inline(__always) func body(_ raw: ByteView) -> Bool { scan(raw, into: &tokens) }
        return frame.withByteView(body)
    }

    /// `scan(_:)` into the caller's `tokens` (no copy of the result).
    /// - Returns: false when the frame is left to the general decoder
    ///   (`tokens` is then partly filled).
    @usableFromInline
    static func scan(_ frame: ByteView, into tokens: inout PublishTokens) -> Bool {
        let end = frame.count
        var s = JSONScanner(frame, maxDepth: ProtocolConstants.maxDepth, lineSafe: true)
        s.skipWhitespace()
        guard s.position < end, frame[s.position] == 0x7B else { return false }  // {
        s.position &+= 1
        s.skipWhitespace()
        var seen: UInt32 = 0
        // The opening the library, the CLI and the bench all write,
        // `{"op":"publish",`, at once as two words; the loop reads the rest.
        if s.position == 1 && end >= 24 && frame.word(at: 0) == Key.openingWords.0 && frame.word(at: 8) == Key.openingWords.1 {
            seen = Key.op.rawValue
            s.position = 16
            if frame[16] <= 0x20 { s.skipWhitespace() }
        }
        while true {
            // The key, as one word: in a frame of this shape at least 8 bytes
            // follow a key's opening quote (the shortest member left, `"id":""}`).
            let at = s.position
            guard end &- at >= 8 else { return false }
            guard let (key, length) = Key.match(frame.word(at: at)) else { return false }
            guard seen & key.rawValue == 0 else { return false }
            seen |= key.rawValue
            s.position = at &+ length
            guard expect(0x3A, &s, frame) else { return false }  // :
            if s.position < end && frame[s.position] <= 0x20 { s.skipWhitespace() }
            guard s.position < end else { return false }
            let start = s.position
            let first = frame[start]
            switch key {
            case .op:
                // "publish" and nothing else (escaped spellings go the general way).
                guard end &- start >= 9, frame.word(at: start) == Key.publishWord,
                      frame[start &+ 8] == 0x22 else { return false }
                s.position = start &+ 9
            case .type:
                guard first == 0x22 else { return false }
                let close = JSONScanner.plainRunEnd(frame, from: start &+ 1)
                guard close < end, frame[close] == 0x22 else { return false }
                s.position = close &+ 1
                tokens.type = JSONToken(start: start, end: s.position, kind: .string(escaped: false))
            case .source, .id:
                guard first == 0x22, let escaped = s.quickString() else { return false }
                let token = JSONToken(start: start, end: s.position, kind: .string(escaped: escaped))
                if key == .source { tokens.source = token } else { tokens.id = token }
            case .retain:
                if first == 0x74, end &- start >= 4, frame.loadUnaligned(fromByteOffset: start, as: UInt32.self) == Key.trueWord {
                    tokens.retain = true
                    s.position = start &+ 4
                } else if first == 0x66, end &- start >= 5, frame.loadUnaligned(fromByteOffset: start, as: UInt32.self) == Key.falsWord,
                          frame[start &+ 4] == 0x65 {
                    s.position = start &+ 5
                } else {
                    return false
                }
            case .req:
                guard let token = s.quickValue(depth: 1), RequestDecoder.isValidRequestID(frame, token) else { return false }
                tokens.req = token
            case .data:
                guard let token = s.quickValue(depth: 1) else { return false }
                tokens.data = token
            case .origin:
                guard first == 0x7B, let token = s.quickValue(depth: 1) else { return false }
                tokens.origin = token
            default:
                return false
            }
            if s.position < end && frame[s.position] <= 0x20 { s.skipWhitespace() }
            guard s.position < end else { return false }
            let separator = frame[s.position]
            s.position &+= 1
            if separator == 0x2C {  // ,
                if s.position < end && frame[s.position] <= 0x20 { s.skipWhitespace() }
                continue
            }
            guard separator == 0x7D else { return false }  // }
            break
        }
        s.skipWhitespace()
        guard s.position == end, seen & Key.required == Key.required else { return false }
        return true
    }

    /// Steps over `byte` at the scanner's position, after whitespace if any
    /// comes first (the compact frames clients send have none).
    @inline(__always)
    static func expect(_ byte: UInt8, _ s: inout JSONScanner, _ frame: ByteView) -> Bool {
        let end = s.bytes.count
        if s.position < end && frame[s.position] == byte {
            s.position &+= 1
            return true
        }
        s.skipWhitespace()
        guard s.position < end, frame[s.position] == byte else { return false }
        s.position &+= 1
        return true
    }

    /// The members this shape has, one bit each.
    struct Key: OptionSet {
        let rawValue: UInt32
        static let op = Key(rawValue: 1), type = Key(rawValue: 2), req = Key(rawValue: 4), data = Key(rawValue: 8)
        static let source = Key(rawValue: 16), id = Key(rawValue: 32), retain = Key(rawValue: 64), origin = Key(rawValue: 128)
        static let required: UInt32 = 3

        // The keys with their quotes as little-endian words (zero above the
        // key's length); PublishScannerTests checks them against the spellings.
        static let opWord: UInt64 = 0x2270_6F22  // "op"
        static let idWord: UInt64 = 0x2264_6922  // "id"
        static let reqWord: UInt64 = 0x22_7165_7222  // "req"
        static let typeWord: UInt64 = 0x2265_7079_7422  // "type"
        static let dataWord: UInt64 = 0x2261_7461_6422  // "data"
        static let sourceWord: UInt64 = 0x2265_6372_756F_7322  // "source"
        static let retainWord: UInt64 = 0x226E_6961_7465_7222  // "retain"
        static let originWord: UInt64 = 0x226E_6967_6972_6F22  // "origin"
        /// `{"op":"publish",` as two words.
        static let openingWords: (UInt64, UInt64) = (0x7022_3A22_706F_227B, 0x2C22_6873_696C_6275)
        /// `"publish` (the closing quote is the ninth byte).
        static let publishWord: UInt64 = 0x6873_696C_6275_7022
        static let trueWord: UInt32 = 0x6575_7274  // true
        static let falsWord: UInt32 = 0x736C_6166  // fals, then e

        /// The key a member starting with the 8 bytes `w` (its opening quote
        /// first) has, and its length with quotes; nil for any other key.
        @inline(__always)
        static func match(_ w: UInt64) -> (Key, Int)? {
            let four = w & 0xFFFF_FFFF, five = w & 0xFF_FFFF_FFFF, six = w & 0xFFFF_FFFF_FFFF
            switch (w &>> 8) & 0xFF {
            case 0x6F:  // o
                if four == opWord { return (.op, 4) }
                if w == originWord { return (.origin, 8) }
            case 0x74:  // t
                if six == typeWord { return (.type, 6) }
            case 0x64:  // d
                if six == dataWord { return (.data, 6) }
            case 0x72:  // r
                if five == reqWord { return (.req, 5) }
                if w == retainWord { return (.retain, 8) }
            case 0x73:  // s
                if w == sourceWord { return (.source, 8) }
            case 0x69:  // i
                if four == idWord { return (.id, 4) }
            default:
                break
            }
            return nil
        }
    }
}

extension EventType {
    /// The event type the bytes spell, when they are a valid type that a
    /// client may publish (not under the reserved `eventbus.`); nil otherwise.
    static func publishable(_ raw: ByteView) -> EventType? {
        guard isValid(raw: raw), !isReserved(raw: raw) else { return nil }
        return EventType(unchecked: String(decoding: raw, as: UTF8.self))
    }

    /// `publishable(_:)` of a span.
    @_spi(Package) public static func publishable(_ raw: RawSpan) -> EventType? {
        raw.withByteView { publishable($0) }
    }

    /// Whether the bytes start with `eventbus.` (PROTOCOL.md "Names and patterns").
    static func isReserved(raw: ByteView) -> Bool {
        guard raw.count >= 9 else { return false }
        return raw.word(at: 0) == 0x7375_6274_6E65_7665 && raw[8] == 0x2E  // eventbus.
    }
}

extension RequestDecoder {
    /// The specialised path alone, with the event type made from the frame's
    /// bytes: what `decode` makes of a frame of the common publish shape, or
    /// nil for any other frame (which only `decode` may answer).
    @_spi(Package) public static func decodeCommonPublish(_ frame: RawSpan) -> DecodedFrame? {
        frame.withByteView { decodeCommonPublish($0) }
    }

    /// `decodeCommonPublish(_:)` on a view of the frame.
    static func decodeCommonPublish(_ frame: ByteView) -> DecodedFrame? {
        guard let tokens = PublishScanner.scan(frame), let type = EventType.publishable(tokens.typeBytes(in: frame)) else { return nil }
        return tokens.decoded(type: type)
    }
}
