// Writes a NATS header block straight into bytes, field by field, for the
// hot path of a bridge that sends a dozen headers per message: no `Headers`
// value, no String per field, numbers written as digits in place, and lines
// that are the same in every message (`Lines`) encoded once and copied.
//
// Before editing: the output must be exactly what `Headers.encoded()` writes
// for the same fields (the tests compare the two), in particular every value
// goes through `Headers.appendPercentEncoded`, the header injection guard.
// Measured on the bridge's export path (callgrind): appending a String's
// `utf8` view to an array costs about 160 instructions a call, so names and
// values are copied from their contiguous storage instead.

/// A header block being written: `NATS/1.0\r\n`, `Name: value\r\n` lines, `\r\n`.
/// Example: `HeaderBlockWriter()` then `append("ce-ebseq", 42)` and
/// `finish()` give `NATS/1.0\r\nce-ebseq: 42\r\n\r\n`.
/// Noncopyable: it owns the buffer it writes into (plain stores through a
/// pointer; `finish` copies the block into an array once).
///
/// Raw memory (issue 35): one of the files that own memory. Invariant:
/// `base` holds `capacity` bytes of which the first `count` are initialised;
/// every write goes through `reserve` first, and the encoders write into
/// the free part only as an `OutputSpan` (`write`), never by pointer.
/// An array instead, written a field at a time through
/// `append(addingCapacity:)`'s `OutputSpan` and handed over by `finish`
/// without a copy, measured (callgrind, eventbus-bridge under scripts/bridge-cpu,
/// inclusive Ir of `CloudEventsHeaders.exportBlock` per event) 5,003 against
/// this writer's 4,630 (+8 %; 5,406 with `utf8Span`, whose getter is a call).
package struct HeaderBlockWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    /// Whole `Name: value\r\n` lines written once (by `HeaderBlockWriter.lines`)
    /// and copied into each block by `append(_:)`: the fields that are the
    /// same in every message.
    package struct Lines: Equatable, Sendable {
        fileprivate let bytes: [UInt8]
    }

    /// Starts a block with room for `capacity` bytes (it grows when needed).
    package init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        base = UnsafeMutablePointer<UInt8>.allocate(capacity: self.capacity)
        put(StaticString("NATS/1.0\r\n"))
    }

    private init(linesOnly: Void) {
        capacity = 256
        base = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// The lines `write` appends, to copy into many blocks later.
    package static func lines(_ write: (inout HeaderBlockWriter) -> Void) -> Lines {
        var writer = HeaderBlockWriter(linesOnly: ())
        write(&writer)
        return Lines(bytes: Array(UnsafeBufferPointer(start: writer.base, count: writer.count)))
    }

    /// Appends lines made by `lines(_:)`.
    package mutating func append(_ lines: Lines) {
        lines.bytes.withUnsafeBytes { put($0) }
    }

    /// `name: value`, the value percent-encoded.
    /// - Precondition: `name` is an RFC 9110 token (checked in debug builds).
    package mutating func append(_ name: String, _ value: String) {
        startField(name)
        appendEncoded(value)
        endField()
    }

    /// `name: digits`.
    package mutating func append(_ name: String, _ value: UInt64) {
        startField(name)
        putDecimal(value)
        endField()
    }

    /// `name: a:b:c`: the parts percent-encoded, joined by `:` (e.g. `Nats-Msg-Id: NODE:INSTANCE:SEQ`).
    package mutating func append(_ name: String, joining parts: String..., last: UInt64) {
        startField(name)
        for part in parts {
            appendEncoded(part)
            put(0x3A)
        }
        putDecimal(last)
        endField()
    }

    /// The block, closed by its empty line.
    package consuming func finish() -> [UInt8] {
        put(0x0D)
        put(0x0A)
        return Array(UnsafeBufferPointer(start: base, count: count))
    }

    // MARK: Writing into the buffer

    @inline(__always)
    private mutating func reserve(_ more: Int) {
        guard count + more > capacity else { return }
        let grown = max(capacity * 2, count + more)
        let new = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        new.initialize(from: base, count: count)
        base.deallocate()
        base = new
        capacity = grown
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    private mutating func put(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + count).initialize(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    private mutating func put(_ text: StaticString) {
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    private mutating func startField(_ name: String) {
        assert(Headers.isToken(name), "header name \(name.debugDescription) is not an RFC 9110 token")
        var name = name
        name.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        put(0x3A)
        put(0x20)
    }

    /// Lets `body` append at most `room` bytes, as an `OutputSpan` over the free capacity.
    @inline(__always)
    private mutating func write(room: Int, _ body: (inout OutputSpan<UInt8>) -> Void) {
        reserve(room)
        let free = UnsafeMutableBufferPointer(start: base + count, count: room)
        var out = OutputSpan(buffer: free, initializedCount: 0)
        body(&out)
        count += out.finalize(for: free)
    }

    @inline(__always)
    private mutating func appendEncoded(_ value: String) {
        var value = value
        value.withUTF8 { bytes in
            write(room: 3 * bytes.count) { Headers.percentEncode(RawSpan(_unsafeElements: bytes), into: &$0) }
        }
    }

    @inline(__always)
    private mutating func endField() {
        put(0x0D)
        put(0x0A)
    }

    private mutating func putDecimal(_ value: UInt64) {
        write(room: 20) { Encoder.writeDecimal(value, into: &$0) }
    }
}
