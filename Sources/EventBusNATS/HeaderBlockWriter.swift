// Writes a NATS header block straight into bytes, field by field, for the
// hot path of a bridge that sends a dozen headers per message: no `Headers`
// value, no String per field, numbers written as digits in place.
//
// Before editing: the output must be exactly what `Headers.encoded()` writes
// for the same fields (the tests compare the two), in particular every value
// goes through `Headers.appendPercentEncoded`, the header injection guard.

/// A header block being written: `NATS/1.0\r\n`, `Name: value\r\n` lines, `\r\n`.
/// Example: `HeaderBlockWriter()` then `append("ce-ebseq", 42)` and
/// `finish()` give `NATS/1.0\r\nce-ebseq: 42\r\n\r\n`.
public struct HeaderBlockWriter {
    private var bytes: [UInt8]

    /// Starts a block with room for `capacity` bytes.
    public init(capacity: Int = 512) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: "NATS/1.0\r\n".utf8)
    }

    /// `name: value`, the value percent-encoded.
    /// - Precondition: `name` is an RFC 9110 token (checked in debug builds).
    public mutating func append(_ name: String, _ value: String) {
        startField(name)
        Headers.appendPercentEncoded(value, to: &bytes)
        endField()
    }

    /// `name: digits`.
    public mutating func append(_ name: String, _ value: UInt64) {
        startField(name)
        appendDecimal(value)
        endField()
    }

    /// `name: a:b:c`: the parts percent-encoded, joined by `:` (e.g. `Nats-Msg-Id: NODE:INSTANCE:SEQ`).
    public mutating func append(_ name: String, joining parts: String..., last: UInt64) {
        startField(name)
        for part in parts {
            Headers.appendPercentEncoded(part, to: &bytes)
            bytes.append(0x3A)
        }
        appendDecimal(last)
        endField()
    }

    /// The block, closed by its empty line.
    public consuming func finish() -> [UInt8] {
        bytes.append(0x0D)
        bytes.append(0x0A)
        return bytes
    }

    @inline(__always)
    private mutating func startField(_ name: String) {
        assert(Headers.isToken(name), "header name \(name.debugDescription) is not an RFC 9110 token")
        bytes.append(contentsOf: name.utf8)
        bytes.append(0x3A)
        bytes.append(0x20)
    }

    @inline(__always)
    private mutating func endField() {
        bytes.append(0x0D)
        bytes.append(0x0A)
    }

    private mutating func appendDecimal(_ value: UInt64) {
        // At most 20 digits, written from the end of a stack buffer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            var rest = value
            repeat {
                start -= 1
                digits[start] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }
}
