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
import Glibc

/// The ops a client may send, in the wire spelling of their case names.
enum RequestOp: Int, FrameKey {
    case hello, subscribe, unsubscribe, publish, ping, stats
    case clear, clients  // 1.1
    case types  // 1.2

    static let table = KeyTable(Self.self)
}

/// The envelope's top-level keys, in the wire spelling of their case names.
enum EnvelopeKey: Int, FrameKey {
    case op, req, type
    case data, source, id, retain, origin  // publish (retain, origin: 1.1)
    case client, echo, overflow  // hello
    case last, since, instance  // subscribe (1.1)
    case limit  // types (1.2)

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
            try JSONObject.scan(frame, lineSafe: true) { key, value in
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
/// bytes, in an open-addressing hash table of byte ranges (no allocation per
/// key; the hash is seeded per process, so no frame can be made to collide
/// on purpose): a frame of 85,000 keys costs 85,000 probes, not 85,000²
/// comparisons, and about 3 ms of broker CPU (issue 11: "a few microseconds
/// per kilobyte" for any input shape). Valid while the frame is.
struct UnknownKeys {
    private struct Entry {
        /// Where the key's decoded bytes are: in the frame, or in `decoded`.
        var start: Int32
        var count: Int32
        var inDecoded: Bool
        var hash: UInt64
    }

    private var entries: [Entry] = []
    /// Power-of-two slots holding an index into `entries`, -1 when empty; at
    /// most half full.
    private var slots: [Int32] = []
    /// Decoded bytes of keys written with escapes.
    private var decoded: [UInt8] = []

    /// Per-process random seed of `hash` (read once per frame).
    private static let processSeed = UInt64.random(in: 1 ... .max)
    private let seed = UnknownKeys.processSeed

    /// Adds a validated string token's decoded text.
    /// - Returns: false when the text was already there.
    mutating func insert(_ token: JSONToken, in frame: UnsafeRawBufferPointer) -> Bool {
        var entry: Entry
        if case .string(escaped: false) = token.kind {
            entry = Entry(start: Int32(token.start + 1), count: Int32(token.end - token.start - 2), inDecoded: false, hash: 0)
        } else {
            let bytes = JSONString.decodeBytes(frame, token)
            entry = Entry(start: Int32(decoded.count), count: Int32(bytes.count), inDecoded: true, hash: 0)
            decoded.append(contentsOf: bytes)
        }
        let seed = self.seed
        entry.hash = bytes(of: entry, frame) { SeededHash.hash($0, seed: seed) }
        if slots.isEmpty { slots = [Int32](repeating: -1, count: 64) }
        if (entries.count + 1) * 2 > slots.count { grow() }
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: entry.hash) & mask
        while slots[i] >= 0 {
            let other = entries[Int(slots[i])]
            if other.hash == entry.hash && other.count == entry.count
                && bytes(of: other, frame, { a in bytes(of: entry, frame) { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }) {
                if entry.inDecoded { decoded.removeLast(Int(entry.count)) }
                return false
            }
            i = (i + 1) & mask
        }
        slots[i] = Int32(entries.count)
        entries.append(entry)
        return true
    }

    private func bytes<R>(of entry: Entry, _ frame: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if entry.inDecoded {
            return decoded.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[Int(entry.start)..<Int(entry.start + entry.count)])) }
        }
        return body(UnsafeRawBufferPointer(rebasing: frame[Int(entry.start)..<Int(entry.start + entry.count)]))
    }

    /// Doubles the slots and places every entry again (the hashes are kept).
    private mutating func grow() {
        var bigger = [Int32](repeating: -1, count: slots.count * 2)
        let mask = bigger.count - 1
        for (index, entry) in entries.enumerated() {
            var i = Int(truncatingIfNeeded: entry.hash) & mask
            while bigger[i] >= 0 { i = (i + 1) & mask }
            bigger[i] = Int32(index)
        }
        slots = bigger
    }
}
