// Reading a JSON integer token (RFC 8259 section 6: no fraction, no
// exponent) as a fixed-width integer: the one way the broker (`req`), the
// library and the CLI (`seq`, `count`, `pid`, ...) read numbers.
//
// Before editing: tokens handed in were validated by `JSONScanner`, so an
// integer token is `-?(0|[1-9][0-9]*)`; overflow must give nil, never wrap.

@_spi(Package) public enum JSONInteger {
    /// A non-negative integer token as `UInt64`, e.g. `18446744073709551615`.
    /// - Returns: nil for a negative number (also `-0`), a fraction or
    ///   exponent, any other kind of token, or a value above `UInt64.max`.
    @inlinable
    @_spi(Package) public static func unsigned(_ bytes: RawSpan, _ token: JSONToken) -> UInt64? {
        bytes.withByteView { unsigned($0, token) }
    }

    /// An integer token as `Int64`, e.g. `-42`.
    /// - Returns: nil for a fraction or exponent, any other kind of token, or
    ///   a value outside `Int64.min...Int64.max`.
    @inlinable
    @_spi(Package) public static func signed(_ bytes: RawSpan, _ token: JSONToken) -> Int64? {
        bytes.withByteView { signed($0, token) }
    }

    // The same on a view of the bytes (ByteView.swift): what the span forms call.

    @inlinable
    static func unsigned(_ bytes: ByteView, _ token: JSONToken) -> UInt64? {
        guard case .number(integer: true) = token.kind, bytes[token.start] != 0x2D else { return nil }
        return magnitude(bytes, token.start, token.end)
    }

    @inlinable
    static func signed(_ bytes: ByteView, _ token: JSONToken) -> Int64? {
        guard case .number(integer: true) = token.kind else { return nil }
        let negative = bytes[token.start] == 0x2D
        guard let magnitude = magnitude(bytes, negative ? token.start + 1 : token.start, token.end) else { return nil }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return Int64(truncatingIfNeeded: 0 &- magnitude)
        }
        return Int64(exactly: magnitude)
    }

    /// The decimal digits `bytes[start..<end]` as `UInt64`, nil on overflow.
    @inlinable
    static func magnitude(_ bytes: ByteView, _ start: Int, _ end: Int) -> UInt64? {
        var value: UInt64 = 0
        var i = start
        if end - start < 20 {
            // Up to 19 digits cannot overflow.
            while i < end { value = value &* 10 &+ UInt64(bytes[i] &- 0x30); i += 1 }
            return value
        }
        while i < end {
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt64(bytes[i] &- 0x30))
            if o1 || o2 { return nil }
            value = sum
            i += 1
        }
        return value
    }
}
