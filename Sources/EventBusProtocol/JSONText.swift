// One validated JSON value on one line: what a client splices into a request
// as `data` or `origin` (PROTOCOL.md "Framing": a frame is one line, and the
// broker forwards `data` byte for byte, so clients send it as they mean it).
//
// Before editing: `bytes` is always one valid JSON value (RFC 8259, nesting
// within `ProtocolConstants.maxDepth`) without LF or CR; every initialiser
// validates or builds it so, and `ClientRequest.encode` splices it
// unchecked. Nor a raw U+0085, U+2028 or U+2029 (the broker refuses them,
// PROTOCOL-NOTES.md "Framing"): compacting writes them as `\u` escapes.

import Glibc

/// One JSON value without line breaks, e.g. `{"code":"EUR"}`.
@_spi(Package) public struct JSONText: Hashable, Sendable, CustomStringConvertible {
    /// The value's bytes: valid JSON, no LF, no CR.
    @_spi(Package) public let bytes: [UInt8]

    /// What `init(validating:layout:)` does with insignificant whitespace.
    @_spi(Package) public enum Layout: Sendable {
        /// A value already on one line, with nothing around it, is kept byte
        /// for byte; anything else is compacted (the library's choice).
        case asGiven
        /// Always compacted: no whitespace outside strings (the CLI's choice).
        case compact
    }

    /// Validates `bytes` as one JSON value (whitespace around it allowed).
    /// - Throws: `JSONSyntaxError` with the reason and byte offset.
    @_spi(Package) public init(validating bytes: [UInt8], layout: Layout = .asGiven) throws(JSONSyntaxError) {
        let result: Result<[UInt8], JSONSyntaxError> = bytes.withByteView { raw in
            // The usual value (one line, nothing around it, no raw CR or
            // separator: what a `lineSafe` scan accepts) in one pass, kept as given.
            if layout == .asGiven, let token = JSONScanner.validateQuickly(raw, maxDepth: ProtocolConstants.maxDepth, lineSafe: true),
               token.start == 0, token.end == raw.count, raw.firstIndex(of: 0x0A) == nil {
                return .success(bytes)
            }
            do throws(JSONSyntaxError) {
                let token = try JSONScanner.validate(raw, maxDepth: ProtocolConstants.maxDepth)
                if layout == .asGiven && token.start == 0 && token.end == raw.count && !raw.contains(0x0A) && !raw.contains(0x0D)
                    && !JSONObject.containsLineSeparator(raw) {
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
    @_spi(Package) public init(quoting text: String) {
        var out: [UInt8] = []
        JSONString.appendQuoted(text, to: &out)
        bytes = out
    }

    private init(trusted bytes: [UInt8]) { self.bytes = bytes }

    /// `null`.
    @_spi(Package) public static let null = JSONText(trusted: Array("null".utf8))

    @_spi(Package) public var description: String { String(decoding: bytes, as: UTF8.self) }
}

extension JSONText {
    /// Builds a flat JSON object member by member, valid by construction: keys
    /// and string values are escaped by `JSONString.appendQuoted`, integers
    /// written in decimal; no validation pass is needed afterwards.
    /// `{"node":"host-b","seq":9123}` from `add("node", "host-b")`, `add("seq", 9123)`.
    @_spi(Package) public struct ObjectWriter: Sendable {
        private var bytes: [UInt8] = [0x7B]

        @_spi(Package) public init() {}

        /// Appends `"key":"value"`.
        @_spi(Package) public mutating func add(_ key: String, _ value: String) {
            separate(key)
            JSONString.appendQuoted(value, to: &bytes)
        }

        /// Appends `"key":123`.
        @_spi(Package) public mutating func add(_ key: String, _ value: Int64) {
            separate(key)
            FrameEncoder.appendInt(value, to: &bytes)
        }

        /// Appends `"key":123`.
        @_spi(Package) public mutating func add(_ key: String, _ value: UInt64) {
            separate(key)
            FrameEncoder.appendInt(value, to: &bytes)
        }

        private mutating func separate(_ key: String) {
            if bytes.count > 1 { bytes.append(0x2C) }
            JSONString.appendQuoted(key, to: &bytes)
            bytes.append(0x3A)
        }

        /// The object so far, closed.
        @_spi(Package) public var text: JSONText { JSONText(trusted: bytes + [0x7D]) }
    }
}
