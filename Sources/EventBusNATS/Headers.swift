// The NATS header block (nats-io/nats-architecture-and-design ADR-4, carried by
// HPUB/HMSG): `NATS/1.0[ status[ description]]\r\n`, then `Name: Value\r\n`
// lines, then an empty line. Names keep their case and may repeat.
//
// Before editing: every value is percent-encoded when written (CloudEvents'
// rule for header values: space, `"`, `%` and every byte outside 0x21...0x7E
// become `%XX`), and percent-decoded when read. So no value can ever carry a
// CR or LF onto the wire, whatever the caller passes: this is the header
// injection guard. Names are checked instead (RFC 9110 `token`), because they
// are chosen by code, never by a publisher. Blocks are read as `RawSpan`s
// (the search by memchr is Protocol's ByteView.swift); values are
// encoded into an `OutputSpan` (HeaderBlockWriter owns the memory behind it).

@_spi(Package) import EventBusProtocol

/// An ordered list of header fields, as the application sees them (values
/// decoded). Example on the wire: `NATS/1.0\r\nce-id: a%0D%0Ab\r\n\r\n` holds
/// the field `("ce-id", "a\r\nb")`.
package struct Headers: Equatable, Sendable {
    /// The fields in order; names as written, values decoded.
    package private(set) var fields: [(name: String, value: String)] = []
    /// The status code of the version line (`NATS/1.0 503`), nil when absent.
    /// Only servers send statuses; `encoded()` never writes one.
    package internal(set) var status: Int? = nil
    /// The text after the status code, if any (`No Responders`).
    package internal(set) var statusDescription: String? = nil

    package init() {}

    /// No fields yet, with room for `capacity` of them.
    package init(capacity: Int) {
        fields.reserveCapacity(capacity)
    }

    /// Appends a field.
    /// - Precondition: `name` is a non-empty RFC 9110 token (letters, digits,
    ///   ``!#$%&'*+-.^_`|~``), since names come from code, never from input.
    package mutating func append(_ name: String, _ value: String) {
        // Checked in debug builds only: names are constants of the calling code,
        // and this runs a dozen times per exported event.
        assert(Headers.isToken(name), "header name \(name.debugDescription) is not an RFC 9110 token")
        fields.append((name, value))
    }

    /// The first value of the field called `name` (ASCII case-insensitive), or nil.
    package func first(_ name: String) -> String? {
        fields.first { Headers.sameName($0.name, name) }?.value
    }

    package static func == (a: Headers, b: Headers) -> Bool {
        a.status == b.status && a.statusDescription == b.statusDescription
            && a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    // MARK: Wire form

    /// The header block: `NATS/1.0\r\n`, one `Name: %-encoded value\r\n` per
    /// field, `\r\n`. Its byte count is HPUB's `#header bytes`.
    package func encoded() -> [UInt8] { encoded(withStatus: false) }

    /// The header block as a server writes it: with the status code and
    /// description on the version line (`NATS/1.0 503 No Responders\r\n`).
    func encoded(withStatus: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(fields.reduce(12) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + 32)
        out.append(contentsOf: "NATS/1.0".utf8)
        if withStatus, let status {
            out.append(contentsOf: " \(status)".utf8)
            if let statusDescription { out.append(contentsOf: " \(statusDescription)".utf8) }
        }
        out.append(contentsOf: "\r\n".utf8)
        for (name, value) in fields {
            out.append(contentsOf: name.utf8)
            out.append(0x3A)
            out.append(0x20)
            Headers.appendPercentEncoded(value, to: &out)
            out.append(0x0D)
            out.append(0x0A)
        }
        out.append(0x0D)
        out.append(0x0A)
        return out
    }

    /// Parses a header block as HMSG delivers it (the first `#header bytes`
    /// of the message). Values are trimmed of spaces and tabs and percent-decoded
    /// (`%XX` with two hex digits; any other `%` stays as it is).
    /// - Throws: `HeaderError` when the block does not start with `NATS/1.0`,
    ///   does not end with an empty line, or has a line without `:` or with
    ///   a name that is not a token.
    package static func parse(_ block: RawSpan) throws(HeaderError) -> Headers {
        var headers = Headers()
        headers.fields.reserveCapacity(16)
        try walk(block, versionLine: { line throws(HeaderError) in try parseVersionLine(line, into: &headers) }) { name, value in
            headers.fields.append((String(decodingUTF8: name), percentDecoded(value)))
            return true
        }
        return headers
    }

    /// Calls `body` with each field's name and value bytes, in order, as
    /// `parse` reads them (the value trimmed of spaces and tabs but still
    /// percent-encoded: `percentDecoded(into:)` decodes it), without making
    /// any String: for hot paths that look at a few known fields. `body`
    /// returns false to stop early (the rest of the block is then not checked).
    /// - Throws: `HeaderError` as `parse` does (the status is checked, not returned).
    package static func forEachField(_ block: RawSpan, _ body: (_ name: RawSpan, _ value: RawSpan) -> Bool) throws(HeaderError) {
        try walk(block, versionLine: { line throws(HeaderError) in
            // The usual line, `NATS/1.0` alone, without the general parse's allocations.
            if line.byteCount == 8 && line.unsafeLoadUnaligned(as: UInt64.self) == 0x302E_312F_5354_414E { return }
            var ignored = Headers()
            try parseVersionLine(line, into: &ignored)
        }, body)
    }

    /// The one reader of the block's lines: the version line, then every field, then the empty line.
    /// CRs are found by memchr (this walk is on every import's path: slices
    /// and a byte-by-byte search made it 4,000 instructions a block).
    @inline(__always)
    private static func walk(_ block: RawSpan, versionLine: (RawSpan) throws(HeaderError) -> Void,
                             _ field: (RawSpan, RawSpan) -> Bool) throws(HeaderError) {
        let n = block.byteCount
        let p = Span<UInt8>(_bytes: block)
        guard n >= 4, p[n - 4] == 0x0D, p[n - 3] == 0x0A, p[n - 2] == 0x0D, p[n - 1] == 0x0A else { throw .notTerminated }
        var start = 0
        var firstLine = true
        var i = 0
        while i + 1 < n {
            guard let cr = block.firstOffset(of: 0x0D, in: i..<(n - 1)) else { break }
            i = cr
            guard p[i + 1] == 0x0A else {
                i += 1
                continue
            }
            if firstLine {
                firstLine = false
                try versionLine(block.extracting(start..<i))
            } else if i == start {
                // The empty line: the end, when it is the block's last.
                guard i + 2 == n else { throw .malformedField("") }
                return
            } else {
                let (name, value) = try splitField(p, start..<i)
                if !field(block.extracting(name), block.extracting(value)) { return }
            }
            i += 2
            start = i
        }
        throw .notTerminated
    }

    /// One `Name: value` line (`line` of `p`): the name's and the trimmed value's offsets.
    @inline(__always)
    private static func splitField(_ p: Span<UInt8>, _ line: Range<Int>) throws(HeaderError) -> (Range<Int>, Range<Int>) {
        var colon = line.lowerBound
        while colon < line.upperBound && isTokenByte(p[colon]) { colon += 1 }
        guard colon > line.lowerBound, colon < line.upperBound, p[colon] == 0x3A else {
            var text: [UInt8] = []
            for i in line { text.append(p[i]) }
            throw .malformedField(String(decoding: text, as: UTF8.self))
        }
        var valueStart = colon + 1
        var valueEnd = line.upperBound
        while valueStart < valueEnd && (p[valueStart] == 0x20 || p[valueStart] == 0x09) { valueStart += 1 }
        while valueEnd > valueStart && (p[valueEnd - 1] == 0x20 || p[valueEnd - 1] == 0x09) { valueEnd -= 1 }
        return (line.lowerBound..<colon, valueStart..<valueEnd)
    }

    private static func parseVersionLine(_ span: RawSpan, into headers: inout Headers) throws(HeaderError) {
        let line = Array(copying: span)
        let version = Array("NATS/1.0".utf8)
        guard line.count >= version.count, line.prefix(version.count).elementsEqual(version) else {
            throw .badVersionLine(String(decoding: line, as: UTF8.self))
        }
        let rest = line.dropFirst(version.count)
        guard !rest.isEmpty else { return }
        guard rest.first == 0x20 || rest.first == 0x09 else { throw .badVersionLine(String(decoding: line, as: UTF8.self)) }
        let text = String(decoding: rest, as: UTF8.self).trimmingSpaces()
        guard !text.isEmpty else { return }
        let code = text.prefix { $0 != " " && $0 != "\t" }
        guard code.count == 3, let number = Int(code) else { throw .badVersionLine(String(decoding: line, as: UTF8.self)) }
        headers.status = number
        let description = String(text.dropFirst(code.count)).trimmingSpaces()
        headers.statusDescription = description.isEmpty ? nil : description
    }

    // MARK: Percent coding

    /// Whether `b` is written as itself: printable ASCII except `"` and `%`.
    @inlinable @inline(__always) package static func isPlain(_ b: UInt8) -> Bool {
        // Bit b of the 128-bit set 0x21...0x7E without 0x22 and 0x25.
        b < 64 ? (0xFFFF_FFDA_0000_0000 as UInt64) &>> b & 1 == 1 : b < 128 && (0x7FFF_FFFF_FFFF_FFFF as UInt64) &>> (b &- 64) & 1 == 1
    }

    static func appendPercentEncoded(_ value: String, to out: inout [UInt8]) {
        value.withUTF8Bytes { appendPercentEncoded($0, to: &out) }
    }

    /// Appends `bytes` percent-encoded (one append for the usual value, which
    /// has no byte to encode).
    static func appendPercentEncoded(_ bytes: RawSpan, to out: inout [UInt8]) {
        let p = Span<UInt8>(_bytes: bytes)
        var plain = 0
        while plain < p.count && isPlain(p[plain]) { plain += 1 }
        if plain == p.count {
            out.append(copying: bytes)
            return
        }
        out.append(addingCapacity: 3 * p.count) { percentEncode(bytes, into: &$0) }
    }

    /// Appends `bytes` percent-encoded to `out`, which has room for
    /// `3 * bytes.byteCount`; the one encoder of header values.
    @inline(__always)
    static func percentEncode(_ bytes: RawSpan, into out: inout OutputSpan<UInt8>) {
        let p = Span<UInt8>(_bytes: bytes)
        for i in p.indices {
            let b = p[i]
            if isPlain(b) {
                out.append(b)
            } else {
                out.append(0x25)
                out.append(hexDigit(b >> 4))
                out.append(hexDigit(b & 0x0F))
            }
        }
    }

    /// The upper-case hex digit of `nibble` (0...15).
    @inline(__always) static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 &+ nibble : 0x37 &+ nibble }

    /// `value` percent-encoded as `encoded()` writes it.
    package static func percentEncoded(_ value: String) -> String {
        var out: [UInt8] = []
        appendPercentEncoded(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `%XX`; a `%` not followed by two hex digits is kept. Invalid
    /// UTF-8 after decoding becomes U+FFFD.
    package static func percentDecoded(_ bytes: RawSpan) -> String {
        guard bytes.firstOffset(of: 0x25) != nil else { return String(decodingUTF8: bytes) }
        var out: [UInt8] = []
        percentDecoded(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the bytes `bytes` percent-decode to (`%XX`; any other `%` kept) to `out`.
    package static func percentDecoded(_ span: RawSpan, into out: inout [UInt8]) {
        let bytes = Span<UInt8>(_bytes: span)
        out.reserveCapacity(out.count + bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0x25, i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x41...0x46: b - 0x41 + 10
        case 0x61...0x66: b - 0x61 + 10
        default: nil
        }
    }

    /// RFC 9110 `token`: 1 or more of letters, digits and ``!#$%&'*+-.^_`|~``.
    package static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isTokenByte)
    }

    @inline(__always) static func isTokenByte(_ b: UInt8) -> Bool {
        // Bit b of the 128-bit set: digits, letters and !#$%&'*+-.^_`|~.
        b < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) &>> b & 1 == 1 : b < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) &>> (b &- 64) & 1 == 1
    }

    /// ASCII case-insensitive equality of two header names.
    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { lower($0) == lower($1) }
    }

    @inline(__always) static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
}

/// Why a header block could not be read.
package enum HeaderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The first line is not `NATS/1.0[ NNN[ text]]`.
    case badVersionLine(String)
    /// The block does not end with an empty line (`\r\n\r\n`).
    case notTerminated
    /// A field line without `:` or with a name that is not a token.
    case malformedField(String)

    package var description: String {
        switch self {
        case .badVersionLine(let line): "header block starts with \(line.prefix(80).debugDescription), not NATS/1.0"
        case .notTerminated: "header block does not end with an empty line"
        case .malformedField(let line): "malformed header line \(line.prefix(80).debugDescription)"
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
