// What the library makes of the wire codec (EventBusProtocol's
// `ClientRequest` and `BrokerFrame`): event data ready to publish, broker
// events as `RawEvent`, `error` replies as `EventBusError` (PROTOCOL.md
// "Requests", "Events", "Errors").
//
// Before editing: nothing here reads or writes frames; that is the codec's
// job, shared with the CLI. Keep this to turning its values into the library's.
import EventBusProtocol

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

extension RawEvent {
    /// The event of an `event` frame read by `BrokerFrame.read` from `frame`.
    /// Absent `time`, `source`, `id` are empty; `pid`, `uid`, `gid` that do
    /// not fit their types are 0; absent `data` is `null`.
    init(_ fields: EventFields, in frame: UnsafeRawBufferPointer) {
        func string(_ token: JSONToken?) -> String { token.map { JSONString.decode(frame, $0) } ?? "" }
        let metadata = EventMetadata(
            type: JSONString.decode(frame, fields.type), seq: fields.seq, time: string(fields.time),
            source: string(fields.source), id: string(fields.id),
            pid: fields.pid.flatMap { Int32(exactly: $0) } ?? 0,
            uid: fields.uid.flatMap { UInt32(exactly: $0) } ?? 0,
            gid: fields.gid.flatMap { UInt32(exactly: $0) } ?? 0,
            isRetained: fields.retained, isReplayed: fields.replayed
        )
        let data = fields.data.map { Array(UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end])) } ?? Array("null".utf8)
        self.init(metadata: metadata, data: data)
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
