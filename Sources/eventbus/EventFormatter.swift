// Turns broker `event` frames into output lines for `listen` and `wait`
// (`--format json|pretty|data|cloudevents`, issue "eventbus CLI").
//
// Before editing: every format writes exactly one line per event, ending in
// LF, and the JSON ones are compact (no whitespace outside strings) so the
// output is JSON Lines, ready for `jq`.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Glibc

/// How `listen` and `wait` print an event.
enum OutputFormat: String, CaseIterable {
    /// The event frame as the broker sent it, compacted (default when stdout is not a terminal).
    case json
    /// `HH:MM:SS.mmm type data` in local time, coloured on a terminal (default on a terminal).
    case pretty
    /// Only the event's `data`, compacted.
    case data
    /// A CloudEvents 1.0 structured-mode JSON object (PROTOCOL.md "Events").
    case cloudevents

    /// The `--format` value, or the default for the standard output: `pretty`
    /// on a terminal, `json` otherwise.
    static func chosen(_ value: String?, command: String) throws(CLIError) -> OutputFormat {
        guard let value else { return isStandardOutputTerminal ? .pretty : .json }
        guard let format = OutputFormat(rawValue: value) else {
            throw .usage(command, "unknown format '\(value)'; use json, pretty, data or cloudevents")
        }
        return format
    }
}

var isStandardOutputTerminal: Bool { FileDescriptor.standardOutput.isTerminal }

/// Formats events in one `OutputFormat`.
struct EventFormatter {
    let format: OutputFormat
    /// ANSI colours in `pretty`: only on a terminal, never with `NO_COLOR`
    /// set and non-empty (no-color.org), never with `TERM=dumb`.
    let colour: Bool

    init(format: OutputFormat) {
        self.format = format
        colour = format == .pretty && isStandardOutputTerminal && EventFormatter.environmentAllowsColour()
    }

    static func environmentAllowsColour() -> Bool {
        if let noColour = ProcessEnvironment.value("NO_COLOR"), !noColour.isEmpty { return false }
        if ProcessEnvironment.value("TERM") == "dumb" { return false }
        return true
    }

    /// Appends the line for one `event` frame that `BrokerFrame.read` read
    /// (so validated) into `fields`.
    /// - Returns: true (a line was appended).
    @discardableResult
    func append(event frame: RawSpan, _ fields: EventFields, to out: inout [UInt8]) -> Bool {
        switch format {
        case .json:
            JSONObject.appendCompacted(frame, JSONToken(start: 0, end: frame.byteCount, kind: .object), to: &out)
        case .data:
            appendData(frame, fields.data, to: &out)
        case .pretty:
            appendPretty(frame, fields, to: &out)
        case .cloudevents:
            appendCloudEvent(frame, fields, to: &out)
        }
        out.append(0x0A)
        return true
    }

    private func appendData(_ frame: RawSpan, _ data: JSONToken?, to out: inout [UInt8]) {
        if let data {
            JSONObject.appendCompacted(frame, data, to: &out)
        } else {
            FrameEncoder.appendASCII("null", to: &out)
        }
    }

    /// `HH:MM:SS.mmm type data`: every field from the broker with its
    /// control characters escaped (`TerminalText`), so only our own colour
    /// sequences reach the terminal.
    private func appendPretty(_ frame: RawSpan, _ fields: EventFields, to out: inout [UInt8]) {
        let time = fields.time.map { JSONString.decode(frame, $0) } ?? ""
        if colour { FrameEncoder.appendASCII("\u{1B}[2m", to: &out) }
        if let local = LocalTime.clock(fromRFC3339: time) {
            out.append(contentsOf: local.utf8)
        } else {
            TerminalText.appendEscaped(time.utf8, to: &out)
        }
        if colour { FrameEncoder.appendASCII("\u{1B}[0m", to: &out) }
        out.append(0x20)
        if colour { FrameEncoder.appendASCII("\u{1B}[1;36m", to: &out) }
        TerminalText.appendEscaped(JSONString.decodeBytes(frame, fields.type), to: &out)
        if colour { FrameEncoder.appendASCII("\u{1B}[0m", to: &out) }
        out.append(0x20)
        var data: [UInt8] = []
        appendData(frame, fields.data, to: &data)
        TerminalText.appendEscaped(data, to: &out)
    }

    /// `{"specversion":"1.0","id":...,"source":...,"type":...,"time":...,
    /// "datacontenttype":"application/json","sequence":"00000000000000000042",
    /// "pid":1234,"uid":1000,"gid":1000,"data":...}`: CloudEvents 1.0 JSON format.
    /// `source` is made a valid URI-reference (RFC 3986) by percent-encoding;
    /// `sequence` follows the CloudEvents sequence extension (a string that
    /// orders lexicographically, so zero-padded to 20 digits); `pid`/`uid`/`gid`
    /// are Integer extensions (strings if beyond the 32-bit Integer range).
    private func appendCloudEvent(_ frame: RawSpan, _ fields: EventFields, to out: inout [UInt8]) {
        let seqText = String(fields.seq)
        FrameEncoder.appendASCII("{\"specversion\":\"1.0\",\"id\":", to: &out)
        let id = fields.id.map { JSONString.decode(frame, $0) } ?? ""
        JSONString.appendQuoted(id.isEmpty ? seqText : id, to: &out)
        FrameEncoder.appendASCII(",\"source\":", to: &out)
        var source = fields.source.map { JSONString.decode(frame, $0) } ?? ""
        if source.isEmpty { source = "pid/" + (fields.pid.map { String($0) } ?? "0") }
        JSONString.appendQuoted(URIReference.escape(source), to: &out)
        FrameEncoder.appendASCII(",\"type\":", to: &out)
        JSONString.appendQuoted(JSONString.decode(frame, fields.type), to: &out)
        if let time = fields.time {
            FrameEncoder.appendASCII(",\"time\":", to: &out)
            out.append(copying: frame.extracting(time.start..<time.end))
        }
        FrameEncoder.appendASCII(",\"datacontenttype\":\"application/json\",\"sequence\":\"", to: &out)
        out.append(contentsOf: repeatElement(0x30, count: max(0, 20 - seqText.utf8.count)))
        out.append(contentsOf: seqText.utf8)
        out.append(0x22)
        appendIntegerExtension("pid", fields.pid, to: &out)
        appendIntegerExtension("uid", fields.uid, to: &out)
        appendIntegerExtension("gid", fields.gid, to: &out)
        FrameEncoder.appendASCII(",\"data\":", to: &out)
        appendData(frame, fields.data, to: &out)
        out.append(0x7D)
    }

    /// `,"name":N` for a CloudEvents Integer (-2^31...2^31-1), `,"name":"N"` beyond.
    private func appendIntegerExtension(_ name: StaticString, _ value: Int64?, to out: inout [UInt8]) {
        guard let value else { return }
        out.append(0x2C); out.append(0x22)
        FrameEncoder.appendASCII(name, to: &out)
        out.append(0x22); out.append(0x3A)
        if value >= Int64(Int32.min) && value <= Int64(Int32.max) {
            FrameEncoder.appendInt(value, to: &out)
        } else {
            out.append(0x22)
            FrameEncoder.appendInt(value, to: &out)
            out.append(0x22)
        }
    }
}

/// Making arbitrary text a valid RFC 3986 URI-reference.
enum URIReference {
    /// Percent-encodes (as UTF-8) every byte that may not appear in a
    /// URI-reference, a `%` not followed by two hex digits, and the colons of
    /// a first path segment that does not start with a valid scheme (RFC 3986
    /// section 4.2: `1a:b` would otherwise not parse). `pid/1234`, `billing`
    /// and `https://example.com/x` come out unchanged.
    static func escape(_ text: String) -> String {
        let bytes = Array(text.utf8)
        let firstSlash = bytes.firstIndex(of: 0x2F) ?? bytes.count
        let firstColon = bytes.firstIndex(of: 0x3A)
        var colonsNeedEscaping = false
        if let firstColon, firstColon < firstSlash {
            colonsNeedEscaping = !isScheme(bytes[..<firstColon])
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for (i, b) in bytes.enumerated() {
            var keep = isAllowed(b)
            if b == 0x25 {
                keep = i + 2 < bytes.count && isHex(bytes[i + 1]) && isHex(bytes[i + 2])
            } else if b == 0x3A && colonsNeedEscaping && i < firstSlash {
                keep = false
            }
            if keep {
                out.append(b)
            } else {
                out.append(0x25); out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// unreserved / sub-delims / `:` `@` `/` `?` `#` (RFC 3986 section 2).
    static func isAllowed(_ b: UInt8) -> Bool {
        switch b {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39: return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): return true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
             UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            return true
        case UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"): return true
        default: return false
        }
    }

    static func isHex(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)
    }

    /// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`
    static func isScheme(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let first = bytes.first, (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first) else { return false }
        return bytes.allSatisfy { b in
            (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || b == 0x2B || b == 0x2D || b == 0x2E
        }
    }
}

/// Local wall-clock time for `--format pretty` (localtime_r(3), so `TZ` applies).
enum LocalTime {
    /// `2026-11-29T13:00:00.123Z` to `HH:MM:SS.mmm` in the local time zone;
    /// nil when the text is not in the broker's format.
    static func clock(fromRFC3339 text: String) -> String? {
        guard let parsed = parse(text) else { return nil }
        var seconds = time_t(parsed.seconds)
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return nil }
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))\(parsed.fraction)"
    }

    /// `2026-11-29T13:00:00.123Z` as whole seconds since the epoch (UTC); nil
    /// when the text is not in the broker's format.
    static func epochSeconds(fromRFC3339 text: String) -> Int? { parse(text)?.seconds }

    /// The same time in milliseconds (the fraction's first three digits).
    static func epochMilliseconds(fromRFC3339 text: String) -> Int64? {
        guard let (seconds, fraction) = parse(text) else { return nil }
        let digits = fraction.dropFirst()
        let milliseconds = (Int64(digits) ?? 0) * [1000, 100, 10, 1][digits.count]
        return Int64(seconds) * 1000 + milliseconds
    }

    /// The broker's timestamp as seconds since the epoch and its fraction as
    /// shown (`.123`, or empty).
    private static func parse(_ text: String) -> (seconds: Int, fraction: String)? {
        let b = Array(text.utf8)
        guard b.count >= 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month) else { return nil }
        var fraction = ""
        if b[19] == 0x2E {
            var i = 20
            while i < b.count && b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
            fraction = "." + String(decoding: b[20..<min(i, 23)], as: UTF8.self)
        }
        guard b.last == 0x5A else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return (days * 86_400 + hour * 3600 + minute * 60 + second, fraction)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
