// (issue 36) The broker's `event` frame read by position for the export, as
// the import reads the export's own header block by position
// (`CloudEventsHeaders.importExportBlock`): a frame of exactly the shape
// the broker writes for a plain local event (FrameEncoder.writeEvent),
// `{"op":"event","seq":42,"type":"t","time":"...","source":"s","id":"i","pid":1,"uid":0,"gid":0,"data":...}`,
// whose strings are bytes a NATS header carries as themselves, is read in
// one pass into views of the frame: no member scan, String or array. The
// bridge then writes its NATS message from the views straight into the
// outbox (`CloudEventsHeaders.writeExport`). Anything else is nil and goes
// the general way (`BusSession.handle`, `RawEvent`, `BridgeCore.export`),
// which writes the same bytes (`ExportFrameTests` compare the two): `key`,
// `origin` (a bridged event: not exported), `retained`, `replayed`,
// `redelivered`, a group's mark, a member in another place, a string with
// an escape or a byte the header percent-encodes (space, `%`, non-ASCII),
// a number out of its field's range, blanks.
//
// Before editing: the views are valid only while the frame's bytes are
// (`RawSpan.withByteView`, during the splitter's call: BridgeLoop), so an
// `ExportFrame` is used at once and never kept. The general path turns
// `pid`/`uid`/`gid` out of range into 0 and percent-encodes values; this
// reader refuses those, so every view it returns is written as is.
@_spi(Package) import EventBusProtocol
import EventBusNATS

/// An `event` frame of the broker's plain shape, as views of its bytes.
struct ExportFrame {
    let seq: UInt64
    /// The digits of `seq`, `type`, `time`, `source`, `id` (without quotes),
    /// `pid`, `uid`, `gid` (digits), and `data` (the JSON value as sent).
    let seqDigits: ByteView
    let type: ByteView
    let time: ByteView
    let source: ByteView
    let id: ByteView
    let pid: ByteView
    let uid: ByteView
    let gid: ByteView
    let data: ByteView

    /// Reads `frame` (the bytes before its LF); nil when it is not exactly the plain shape.
    init?(_ frame: ByteView) {
        var p = 0
        guard Self.expect("{\"op\":\"event\",\"seq\":", frame, &p), let seq = Self.number(frame, &p, max: UInt64.max),
              Self.expect(",\"type\":\"", frame, &p), let type = Self.string(frame, &p),
              Self.expect(",\"time\":\"", frame, &p), let time = Self.string(frame, &p),
              Self.expect(",\"source\":\"", frame, &p), let source = Self.string(frame, &p),
              Self.expect(",\"id\":\"", frame, &p), let id = Self.string(frame, &p),
              Self.expect(",\"pid\":", frame, &p), let pid = Self.number(frame, &p, max: UInt64(Int32.max)),
              Self.expect(",\"uid\":", frame, &p), let uid = Self.number(frame, &p, max: UInt64(UInt32.max)),
              Self.expect(",\"gid\":", frame, &p), let gid = Self.number(frame, &p, max: UInt64(UInt32.max)),
              Self.expect(",\"data\":", frame, &p), frame.count > p + 1, frame[frame.count - 1] == 0x7D else { return nil }
        // `data` runs to the frame's closing brace when nothing follows it:
        // exactly one JSON value with no blank around it (a member after it,
        // such as `"replayed":true` or a group's mark, makes it not one value).
        let data = frame.extracting(p..<(frame.count - 1))
        guard let token = data.withSpan({ JSONScanner.validateQuickly($0) }), token.start == 0, token.end == data.count else { return nil }
        self.seq = seq.value
        seqDigits = seq.digits
        self.type = type
        self.time = time
        self.source = source
        self.id = id
        self.pid = pid.digits
        self.uid = uid.digits
        self.gid = gid.digits
        self.data = data
    }

    /// Whether `text` comes next at `p` (then past it).
    @inline(__always)
    private static func expect(_ text: StaticString, _ frame: ByteView, _ p: inout Int) -> Bool {
        guard frame.hasBytes(text, at: p) else { return false }
        p += text.utf8CodeUnitCount
        return true
    }

    /// The string whose opening quote is just before `p`, up to its closing
    /// quote (then past it), when every byte is one a header value carries as
    /// itself (`Headers.isPlain`: printable ASCII but space, `"`, `%`) and no
    /// escape (`\`). Eight bytes at a time while none of them is another
    /// byte (`special`), then byte by byte: a byte loop with the table test
    /// cost about 20 instructions a byte, 1.4k of a 6k export (callgrind).
    @inline(__always)
    private static func string(_ frame: ByteView, _ p: inout Int) -> ByteView? {
        let start = p
        let n = frame.count
        var i = start
        while i &+ 8 <= n {
            let found = special(frame.word(at: i))
            if found != 0 {
                // The first byte marked is one (see `special`): the string ends there, or it is not plain.
                i &+= found.trailingZeroBitCount &>> 3
                guard frame[i] == 0x22 else { return nil }
                p = i + 1
                return frame.extracting(start..<i)
            }
            i &+= 8
        }
        while i < n {
            let b = frame[i]
            if b == 0x22 {
                p = i + 1
                return frame.extracting(start..<i)
            }
            guard Headers.isPlain(b), b != 0x5C else { return nil }
            i &+= 1
        }
        return nil
    }

    /// The eight bytes of `w` (the first in the lowest) that are not bytes
    /// `string` takes as they are: below 0x21, above 0x7E, `"`, `%` or `\`,
    /// each marked by its high bit (bit tricks on the whole word). The first
    /// byte marked is always such a byte; a byte after it may be marked
    /// wrongly (a borrow or carry from it), which `string` never looks at.
    @inline(__always)
    static func special(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZero(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & high }
        let below = (w &- ones &* 0x21) & ~w & high
        let above = (w &+ ones | w) & high
        return below | above | hasZero(w ^ (ones &* 0x22)) | hasZero(w ^ (ones &* 0x25)) | hasZero(w ^ (ones &* 0x5C))
    }

    /// The decimal digits at `p` (then past them): no sign, no leading zero,
    /// at most `max` (as the general reader's value, which the header's
    /// digits would then be).
    @inline(__always)
    private static func number(_ frame: ByteView, _ p: inout Int, max: UInt64) -> (value: UInt64, digits: ByteView)? {
        let start = p
        let n = Swift.min(frame.count, start &+ 20)
        var value: UInt64 = 0
        var i = start
        // Up to 19 digits cannot overflow; a 20th is added with the check.
        while i < n {
            let d = frame[i] &- 0x30
            guard d < 10 else { break }
            if i &- start == 19 {
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(d))
                guard !o1, !o2 else { return nil }
                value = sum
            } else {
                value = value &* 10 &+ UInt64(d)
            }
            i &+= 1
        }
        guard i > start, i &- start == 1 || frame[start] != 0x30, value <= max else { return nil }
        p = i
        return (value, frame.extracting(start..<i))
    }
}
