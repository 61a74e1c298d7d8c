// A request read while its bytes arrive (issue 37): a large frame is
// validated, and its envelope's members collected, a read at a time as it
// comes in (the broker's splitter buffers it meanwhile), so the work left
// when its LF arrives is its last piece and the envelope's duplicate check,
// not a whole frame's parse: one turn of the broker's loop then costs a
// bounded number of bytes of parsing whatever a frame's size or shape
// (before, root's one-request-at-a-time client waited behind whole 1 MiB
// parses of another uid's frames).
//
// Before editing: the answer must be the same, byte for byte, as
// `RequestDecoder.decode` gives the whole frame: the validation is
// JSONScanner's (JSONStreamValidator.swift), the members go through the
// envelope's own code (`EnvelopeFields.take`), and `finish` ends in
// `RequestDecoder.decoded`, as `decode` does. `advance` leaves a trailing CR
// for later (the splitter drops a CR before the LF). Memory it holds
// (`heldBytes`) is charged to the connection's uid with the frame's bytes.

/// The scan of one frame, handed its bytes as they arrive.
@_spi(Package) public final class RequestScan {
    private var validator = JSONStreamValidator()
    private var fields: EnvelopeFields
    /// The envelope's value tokens (`KeyedTokens`' storage, for the frame's life).
    private let storage: TokenSlots<JSONToken>
    private let keys = EnvelopeKey.table.lookup
    /// A byte other than space, tab or CR was seen (a blank line is skipped
    /// by the splitter, never handed out).
    @_spi(Package) public private(set) var sawNonBlank = false
    /// Where the look for a non-blank byte goes on.
    private var blankUpTo = 0

    @_spi(Package) public init() {
        storage = TokenSlots.allocate(capacity: KeyedTokens<EnvelopeKey>.capacity)
        fields = EnvelopeFields(collectingInto: KeyedTokens(storage: storage))
    }

    deinit { storage.deallocate() }

    /// Bytes of the frame validated so far.
    @_spi(Package) public var scanned: Int { validator.position }

    /// Memory it holds (about): the envelope's token slots, the unknown keys
    /// collected, the validator's stack.
    @_spi(Package) public var heldBytes: Int {
        256 + KeyedTokens<EnvelopeKey>.capacity * MemoryLayout<JSONToken>.stride + fields.heldBytes + validator.heldBytes
    }

    /// `advance(_:)` of a span.
    @_spi(Package) public func advance(_ bytes: RawSpan) {
        // Local functions, not closures, so they can be forced inline (as
        // `Broker.handle` once did: a closure stayed a call of its own).
        @inline(__always) func body(_ bytes: ByteView) { advance(bytes) }
        bytes.withByteView(body)
    }

    /// `finish(_:)` of a span.
    @_spi(Package) public func finish(_ frame: RawSpan) -> DecodedFrame {
        @inline(__always) func body(_ frame: ByteView) -> DecodedFrame { finish(frame) }
        return frame.withByteView(body)
    }

    /// Validates the bytes not seen yet of `bytes`, the frame so far (without
    /// its LF), but for a last CR.
    func advance(_ bytes: ByteView) {
        var end = bytes.count
        if end > 0 && bytes[end - 1] == 0x0D { end -= 1 }
        while !sawNonBlank && blankUpTo < end {
            let b = bytes[blankUpTo]
            sawNonBlank = b != 0x20 && b != 0x09 && b != 0x0D
            blankUpTo += 1
        }
        run(bytes, end: end, final: false)
    }

    /// The whole frame (without its LF and a CR before it) arrived: the rest
    /// is validated and the request decoded.
    /// - Returns: what `RequestDecoder.decode(frame)` returns.
    func finish(_ frame: ByteView) -> DecodedFrame {
        run(frame, end: frame.count, final: true)
        if let error = validator.error {
            return DecodedFrame(req: nil, request: .failure(EnvelopeFields.frameError(.syntax(JSONObject.lineBreak(error, frame, true)))))
        }
        guard validator.topIsObject else { return DecodedFrame(req: nil, request: .failure(EnvelopeFields.frameError(.notAnObject))) }
        fields.finishMembers(in: frame)
        return RequestDecoder.decoded(frame, fields)
    }

    private func run(_ bytes: ByteView, end: Int, final: Bool) {
        let keys = keys
        validator.advance(bytes, end: end, final: final) { key, value in
            fields.take(key, value, in: bytes, keys: keys)
        }
    }
}
