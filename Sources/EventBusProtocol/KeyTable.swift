// Recognising a fixed set of JSON names (the envelope's keys, the ops, the
// members of a broker frame) from their raw bytes, and holding the value token
// of each key found. Each set is one Swift enum, its table: the case names,
// in order, are the wire names (`sinceSeq` is spelled `since_seq` on the wire,
// STYLE.md "Naming"); a `KeyTable` built once from the enum finds a name with
// one multiply, one table load and one or two compares.
//
// Before editing: this is on the broker's per-frame path. Recognising an
// unescaped name must not allocate; `KeyTable.init` runs once per set.

/// A set of names: an enum whose cases, in declaration order, are the names
/// (`rawValue` is the position). Conforming types provide `static let table = KeyTable(Self.self)`.
protocol FrameKey: CaseIterable, RawRepresentable where RawValue == Int {
    /// The names of all cases, built once.
    static var table: KeyTable { get }
}

extension FrameKey {
    /// The wire name, e.g. `since_seq` for `sinceSeq`.
    var name: String { Self.table.names[rawValue] }

    /// The case whose name a validated string token decodes to, nil for any other text.
    @inline(__always)
    static func find(_ token: JSONToken, in bytes: ByteView) -> Self? {
        guard let position = Self.table.lookup.position(of: token, in: bytes) else { return nil }
        return Self(rawValue: position)
    }
}

/// The names of one `FrameKey` set, and the lookup that finds them.
struct KeyTable: Sendable {
    /// Wire names by position.
    let names: [String]
    /// Finds a name's position; trivially copyable, so a caller copies it out
    /// once per frame and pays no reference counting per key.
    let lookup: KeyLookup

    /// Builds the table of `Key`'s cases.
    /// - Precondition: the cases' raw values are 0, 1, 2, ... in order, there
    ///   are at most `KeyedTokens.capacity`, and each name is 1-16 bytes.
    init<Key: FrameKey>(_: Key.Type) {
        var names: [String] = []
        for (position, key) in Key.allCases.enumerated() {
            precondition(key.rawValue == position, "\(Key.self) cases must have raw values 0, 1, 2, ...")
            names.append(KeyTable.wireName(String(describing: key)))
        }
        precondition(names.count <= KeyedTokens<Key>.capacity, "\(Key.self) has more than \(KeyedTokens<Key>.capacity) cases")
        self.names = names
        lookup = KeyLookup(names)
    }

    /// `sinceSeq` -> `since_seq`.
    static func wireName(_ caseName: String) -> String {
        var out = ""
        for character in caseName {
            if character.isUppercase {
                out.append("_")
                out.append(contentsOf: character.lowercased())
            } else {
                out.append(character)
            }
        }
        return out
    }
}

/// A perfect hash over names of 1-16 bytes: a multiplier, chosen when the
/// lookup is built, that sends every name's first 8 bytes and length to a
/// slot of its own; the slot holds the whole name to compare.
struct KeyLookup: @unchecked Sendable {
    // @unchecked: `slots` is written once in `init` and never again, and
    // never freed (lookups are static tables that live as long as the process).
    private let slots: TokenSlots<Slot>
    private let multiplier: UInt64
    private let shift: UInt64

    private struct Slot {
        /// Bytes 0-7 and 8-15 of the name, little-endian, zero-padded (no name
        /// contains a NUL byte); `length` 0 marks an empty slot.
        var low: UInt64 = 0
        var high: UInt64 = 0
        var length: Int = 0
        var position: Int = 0
    }

    init(_ names: [String]) {
        let slots: [Slot] = names.enumerated().map { position, name in
            var bytes = Array(name.utf8)
            precondition((1...16).contains(bytes.count) && !bytes.contains(0), "names are 1-16 bytes without NUL: \(name)")
            let length = bytes.count
            bytes += repeatElement(0, count: 16 - length)
            return bytes.withByteView { raw in
                Slot(low: UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self)),
                     high: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                     length: length, position: position)
            }
        }
        var size = 16
        while size < 4 * names.count { size *= 2 }
        shift = UInt64(64 - size.trailingZeroBitCount)
        // Odd multipliers from a fixed sequence until no two names share a slot.
        var candidate: UInt64 = 0x9E37_79B9_7F4A_7C15
        var chosen: (UInt64, [Slot])? = nil
        for _ in 0..<100_000 {
            var table = [Slot](repeating: Slot(), count: size)
            var clash = false
            for slot in slots {
                let index = KeyLookup.hash(slot.low, slot.length, candidate, shift)
                if table[index].length != 0 { clash = true; break }
                table[index] = slot
            }
            if !clash { chosen = (candidate, table); break }
            candidate = candidate &* 0x5851_F42D_4C95_7F2D &+ 0x1405_7B7E_F767_814F | 1
        }
        guard let (multiplier, table) = chosen else { preconditionFailure("no perfect hash for \(names)") }
        self.multiplier = multiplier
        self.slots = .immortal(copying: table)
    }

    @inline(__always)
    static func hash(_ low: UInt64, _ length: Int, _ multiplier: UInt64, _ shift: UInt64) -> Int {
        Int(truncatingIfNeeded: ((low &+ UInt64(truncatingIfNeeded: length)) &* multiplier) &>> shift)
    }

    /// `count` bytes (at most 8) at `offset` of `bytes`, little-endian,
    /// zero-padded; the bytes up to the view's end may be read (at least `count`).
    @inline(__always)
    static func word(_ bytes: ByteView, at offset: Int, count: Int) -> UInt64 {
        if bytes.count &- offset >= 8 {
            let word = bytes.word(at: offset)
            return count >= 8 ? word : word & ((1 &<< (UInt64(truncatingIfNeeded: count) &* 8)) &- 1)
        }
        var word: UInt64 = 0
        for i in 0..<min(count, 8) {
            word |= UInt64(bytes[offset &+ i]) &<< (UInt64(truncatingIfNeeded: i) &* 8)
        }
        return word
    }

    /// The position of the name that the `count` bytes at `offset` of `bytes` spell, or nil.
    @inline(__always)
    func position(in bytes: ByteView, at offset: Int, count: Int) -> Int? {
        let low = KeyLookup.word(bytes, at: offset, count: count)
        let slot = slots[KeyLookup.hash(low, count, multiplier, shift)]
        guard slot.low == low && slot.length == count && count != 0 else { return nil }
        if count > 8 {
            guard KeyLookup.word(bytes, at: offset &+ 8, count: count &- 8) == slot.high else { return nil }
        }
        return slot.position
    }

    /// The position of the name a validated string token decodes to, or nil.
    /// Allocates only for a token with escapes (`"\u006fp"`), which is decoded first.
    @inline(__always)
    func position(of token: JSONToken, in bytes: ByteView) -> Int? {
        guard case .string(escaped: false) = token.kind else {
            let decoded = JSONString.decodeBytes(bytes, token)
            if decoded.isEmpty { return nil }
            return decoded.withByteView { position(in: $0, at: 0, count: $0.count) }
        }
        // Validated tokens lie inside `bytes`: no overflow checks needed.
        let start = token.start &+ 1
        return position(in: bytes, at: start, count: token.end &- start &- 1)
    }
}

/// The value token of each key of one `FrameKey` set found in an object; a
/// repeated key keeps its first value and is marked duplicated. The tokens
/// live on the stack of `withEmpty`'s caller: no allocation, no copying, and
/// a value must not outlive the `withEmpty` call that made it.
struct KeyedTokens<Key: FrameKey> {
    /// Room for this many keys per set.
    static var capacity: Int { 32 }

    /// `capacity` slots, each initialised once its bit in `present` is set.
    private let storage: TokenSlots<JSONToken>
    private var present: UInt32 = 0
    private var duplicates: UInt32 = 0

    /// A set whose `capacity` slots are at `storage` (which must outlive it):
    /// `withEmpty`'s, or a `RequestScan`'s for the life of a frame.
    init(storage: TokenSlots<JSONToken>) { self.storage = storage }

    /// Calls `body` with an empty set whose storage is on the stack for the
    /// call only. (A `Key` with more than `capacity` cases traps in
    /// `KeyTable.init`.)
    @inline(__always)
    static func withEmpty<R, E: Error>(_ body: (inout KeyedTokens) throws(E) -> R) throws(E) -> R {
        try TokenSlots.withTemporary(capacity: capacity) { (slots) throws(E) -> R in
            var tokens = KeyedTokens(storage: slots)
            return try body(&tokens)
        }
    }

    /// The value of `key`, nil when the object has no such member.
    @inline(__always)
    subscript(key: Key) -> JSONToken? {
        present & (1 &<< UInt32(truncatingIfNeeded: key.rawValue)) != 0 ? storage[key.rawValue] : nil
    }

    /// Whether `key` appeared more than once.
    func isDuplicated(_ key: Key) -> Bool { duplicates & (1 &<< UInt32(truncatingIfNeeded: key.rawValue)) != 0 }

    /// Records the value of the key at `position` (its `rawValue`, as
    /// `KeyTable.position` returns it).
    /// - Returns: false when that key was already recorded (the first value stays).
    @inline(__always)
    mutating func record(_ position: Int, _ value: JSONToken) -> Bool {
        let bit: UInt32 = 1 &<< UInt32(truncatingIfNeeded: position)
        if present & bit != 0 {
            duplicates |= bit
            return false
        }
        present |= bit
        storage[position] = value
        return true
    }

    /// Reads a whole frame, one JSON object, recording each member whose key is
    /// in `Key` (a repeated key keeps its first value); other members are skipped.
    /// - Throws: `JSONObject.ReadError`.
    mutating func scan(_ frame: ByteView) throws(JSONObject.ReadError) {
        let lookup = Key.table.lookup
        try JSONObject.scan(frame) { key, value in
            if let position = lookup.position(of: key, in: frame) { _ = record(position, value) }
        }
    }
}
