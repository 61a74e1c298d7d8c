// What the library makes of the wire codec (EventBusProtocol's
// `ClientRequest` and `BrokerFrame`): event data ready to publish and
// `error` replies as `EventBusError` (PROTOCOL.md "Requests", "Errors");
// broker events become `RawEvent` in EventBusSession.
//
// Before editing: nothing here reads or writes frames; that is the codec's
// job, shared with the CLI. Keep this to turning its values into the library's.
@_spi(Package) import EventBusProtocol

/// Event `data` ready to splice into a publish frame.
enum OutgoingData {
    /// Validates `bytes` as one JSON value (RFC 8259) and returns it on one
    /// line: pretty-printed output has its insignificant whitespace removed,
    /// since a raw LF would end the frame (PROTOCOL.md "Framing").
    /// - Throws: `EventBusError.invalidJSON` with the scanner's reason.
    static func prepare(_ bytes: [UInt8]) throws(EventBusError) -> JSONText {
        do {
            return try JSONText(validating: bytes, layout: .asGiven)
        } catch {
            throw .invalidJSON(error.description)
        }
    }
}

extension EventBusError {
    /// The error an `error` reply reports: `.protocolError` with its code and
    /// message, or `.malformedFrame` for a code this client does not know.
    init(errorReply reply: Reply) {
        let code = reply.string("code") ?? ""
        let message = reply.string("message") ?? ""
        if let known = ErrorCode(rawValue: code) {
            self = .protocolError(code: known, message: message)
        } else {
            self = .malformedFrame("error with unknown code \"\(code)\": \(message)")
        }
    }
}
