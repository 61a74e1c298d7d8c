// One validated JSON value on one line: what a client splices into a request
// as `data` or `origin` (PROTOCOL.md "Framing": a frame is one line, and the
// broker forwards `data` byte for byte, so clients send it as they mean it).
//
// Before editing: `bytes` is always one valid JSON value (RFC 8259, nesting
// within `ProtocolConstants.maxDepth`) without LF or CR; every initialiser
// validates or builds it so, and `RequestEncoder` splices it unchecked.

/// One JSON value without line breaks, e.g. `{"code":"EUR"}`.
public struct JSONText: Hashable, Sendable, CustomStringConvertible {
    /// The value's bytes: valid JSON, no LF, no CR.
    public let bytes: [UInt8]

    /// What `init(validating:layout:)` does with insignificant whitespace.
    public enum Layout: Sendable {
        /// A value already on one line, with nothing around it, is kept byte
        /// for byte; anything else is compacted (the library's choice).
        case asGiven
        /// Always compacted: no whitespace outside strings (the CLI's choice).
        case compact
    }

    /// Validates `bytes` as one JSON value (whitespace around it allowed).
    /// - Throws: `JSONSyntaxError` with the reason and byte offset.
    public init(validating bytes: [UInt8], layout: Layout = .asGiven) throws(JSONSyntaxError) {
        let result: Result<[UInt8], JSONSyntaxError> = bytes.withUnsafeBytes { raw in
            do throws(JSONSyntaxError) {
                let token = try JSONScanner.validate(raw, maxDepth: ProtocolConstants.maxDepth)
                if layout == .asGiven && token.start == 0 && token.end == raw.count && !raw.contains(0x0A) && !raw.contains(0x0D) {
                    return .success(bytes)
                }
                var out: [UInt8] = []
                out.reserveCapacity(token.count)
                JSONObject.appendCompacted(raw, token, to: &out)
                return .success(out)
            } catch {
                return .failure(error)
            }
        }
        self.bytes = try result.get()
    }

    /// `text` as a JSON string, e.g. `"a \"quoted\" word"`.
    public init(quoting text: String) {
        var out: [UInt8] = []
        JSONString.appendQuoted(text, to: &out)
        bytes = out
    }

    private init(trusted bytes: [UInt8]) { self.bytes = bytes }

    /// `null`.
    public static let null = JSONText(trusted: Array("null".utf8))

    public var description: String { String(decoding: bytes, as: UTF8.self) }
}
