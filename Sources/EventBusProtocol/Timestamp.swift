// RFC 3339 UTC timestamps with millisecond precision for the event `time`
// field (PROTOCOL.md "Events"), computed without Foundation or the C library.
//
// Before editing: the civil-date conversion is Howard Hinnant's
// days_from_civil inverse; it is exact for the proleptic Gregorian calendar.

/// Formats wall-clock times as `2026-11-29T13:00:00.123Z`, caching the
/// per-second prefix so consecutive events cost only the millisecond digits,
/// and (`bytes`) the whole timestamp of the last millisecond.
@_spi(Package) public struct TimestampFormatter {
    var cachedSecond: Int64 = .min
    var prefix: [UInt8] = []  // "YYYY-MM-DDTHH:MM:SS."
    /// The millisecond `cachedBytes` is of (ms since the epoch, floor).
    @usableFromInline var cachedMillisecond: Int64 = .min
    @usableFromInline var cachedBytes = TimestampBytes()

    @_spi(Package) public init() {}

    /// The 24-byte timestamp for `nanosecondsSinceEpoch`, as a value: the
    /// broker's per-event call, which formats anything only when the
    /// millisecond changed.
    @inlinable
    @_spi(Package) public mutating func bytes(nanosecondsSinceEpoch ns: Int64) -> TimestampBytes {
        var millisecond = ns / 1_000_000
        if ns % 1_000_000 < 0 { millisecond -= 1 }
        if millisecond == cachedMillisecond { return cachedBytes }
        return formatBytes(nanosecondsSinceEpoch: ns, millisecond: millisecond)
    }

    @usableFromInline
    mutating func formatBytes(nanosecondsSinceEpoch ns: Int64, millisecond: Int64) -> TimestampBytes {
        var out: [UInt8] = []
        format(nanosecondsSinceEpoch: ns, into: &out)
        let stamp = out.withByteView { TimestampBytes($0) }
        cachedMillisecond = millisecond
        cachedBytes = stamp
        return stamp
    }

    /// Writes the 24-byte timestamp for `nanosecondsSinceEpoch` into `out`
    /// (replacing its contents).
    @_spi(Package) public mutating func format(nanosecondsSinceEpoch ns: Int64, into out: inout [UInt8]) {
        // Floor division without overflow: `ns - 999_999_999` would trap near Int64.min.
        var second = ns / 1_000_000_000
        var rest = ns % 1_000_000_000
        if rest < 0 {
            second -= 1
            rest += 1_000_000_000
        }
        let millis = Int(rest / 1_000_000)
        if second != cachedSecond {
            cachedSecond = second
            prefix = TimestampFormatter.prefix(forSecond: second)
        }
        out.removeAll(keepingCapacity: true)
        out.append(contentsOf: prefix)
        out.append(0x30 + UInt8(millis / 100))
        out.append(0x30 + UInt8(millis / 10 % 10))
        out.append(0x30 + UInt8(millis % 10))
        out.append(0x5A)
    }

    /// The timestamp as a `String`.
    @_spi(Package) public mutating func string(nanosecondsSinceEpoch ns: Int64) -> String {
        var out: [UInt8] = []
        format(nanosecondsSinceEpoch: ns, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func prefix(forSecond second: Int64) -> [UInt8] {
        let days = second >= 0 ? second / 86_400 : (second - 86_399) / 86_400
        let secondOfDay = Int(second - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func two(_ v: Int) { out.append(0x30 + UInt8(v / 10)); out.append(0x30 + UInt8(v % 10)) }
        let y = Int(year)
        out.append(0x30 + UInt8(y / 1000 % 10)); out.append(0x30 + UInt8(y / 100 % 10))
        two(y % 100)
        out.append(0x2D); two(month); out.append(0x2D); two(day)
        out.append(0x54)
        two(secondOfDay / 3600); out.append(0x3A); two(secondOfDay / 60 % 60); out.append(0x3A); two(secondOfDay % 60)
        out.append(0x2E)
        return out
    }

    /// Days since 1970-01-01 to (year, month 1-12, day 1-31).
    static func civil(fromDays z0: Int64) -> (Int64, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, Int(m), Int(d))
    }
}

/// One timestamp, `2026-11-29T13:00:00.123Z`, held in 24 bytes of a value
/// (no heap storage to count references to).
@_spi(Package) public struct TimestampBytes {
    @usableFromInline var words: (UInt64, UInt64, UInt64) = (0, 0, 0)

    @inlinable @_spi(Package) public init() {}

    /// The first 24 bytes of `bytes` (which holds at least 24).
    @inlinable
    @_spi(Package) public init(_ bytes: ByteView) {
        precondition(bytes.count >= 24, "a timestamp is 24 bytes")
        words = (bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                 bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
    }

    /// Calls `body` with a view of the 24 bytes, valid during the call only.
    @inlinable
    @_spi(Package) public func withByteView<R>(_ body: (ByteView) -> R) -> R {
        EventBusProtocol.withByteView(of: words, body)
    }
}
