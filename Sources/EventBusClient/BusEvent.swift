// The typed-event side of the client: the `BusEvent` protocol user types
// conform to, the metadata the broker stamps on every event, and `RawEvent`,
// an event whose `data` is still the JSON bytes the publisher sent.
//
// Before editing: `data` is kept byte-for-byte as it came off the wire
// (PROTOCOL.md "Events": the broker forwards it unchanged); decoding into a
// user type happens per receiving registration, outside every lock.
import EventBusProtocol
import Foundation

/// A typed event: a `Codable` payload with a fixed event type name.
///
/// The payload becomes the event's `data` through `JSONEncoder`; receivers
/// decode it with `JSONDecoder`. Example:
/// ```swift
/// struct CurrencyChanged: BusEvent {
///     static let eventType = "currency.changed"
///     var code: String
/// }
/// ```
/// On the wire: `{"op":"publish","type":"currency.changed","data":{"code":"EUR"}}`.
public protocol BusEvent: Codable, Sendable {
    /// The event type: 1 to 255 bytes of `.`-separated segments of
    /// `A-Z a-z 0-9 _ - :`, not starting with `eventbus.` (PROTOCOL.md
    /// "Names and patterns"). An invalid name is a programming error and traps
    /// where the type is first used.
    static var eventType: String { get }
}

/// What the broker says about an event besides its data (PROTOCOL.md "Events").
public struct EventMetadata: Hashable, Sendable {
    /// The event type, e.g. `order.created`.
    public var type: String
    /// Broker-wide sequence number, increasing within one broker run.
    public var seq: UInt64
    /// When the broker received it: RFC 3339 UTC with milliseconds,
    /// `2026-11-29T13:00:00.123Z`.
    public var time: String
    /// The publisher's `source`, or its client name, or `pid/<pid>`.
    public var source: String
    /// The publisher's `id`, or `<instance>-<seq>`.
    public var id: String
    /// The publisher's process id (`SO_PEERCRED`, so it cannot be forged).
    public var pid: Int32
    /// The publisher's user id (`SO_PEERCRED`).
    public var uid: UInt32
    /// The publisher's group id (`SO_PEERCRED`).
    public var gid: UInt32
    /// True when this process published the event and the library delivered
    /// it in-process (the broker does not echo a connection's own events,
    /// PROTOCOL.md "Semantics"); `time` is then this process's clock when the
    /// broker's `ok` arrived, and `seq` the one in that `ok`.
    public var isLocal: Bool
    /// (1.1) The retained event of its type, sent as the current value
    /// (`initial: .last`, `current(_:)`) rather than as it happened; `seq`
    /// and `time` are those of its publication.
    public var isRetained: Bool
    /// (1.1) Replayed from the broker's history after a reconnect: it was
    /// published while this process was not connected.
    public var isReplayed: Bool
    /// (1.1) Set on the first event a registration gets after a reconnect
    /// that could not recover everything: events before this one may have
    /// been missed (also reported once as `BusNotice.gap`).
    public var gap: BusGap?

    /// Metadata as an event frame carries it (for tests and custom decoding).
    public init(type: String, seq: UInt64, time: String, source: String, id: String, pid: Int32, uid: UInt32, gid: UInt32, isLocal: Bool = false,
                isRetained: Bool = false, isReplayed: Bool = false, gap: BusGap? = nil) {
        self.type = type
        self.seq = seq
        self.time = time
        self.source = source
        self.id = id
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.isLocal = isLocal
        self.isRetained = isRetained
        self.isReplayed = isReplayed
        self.gap = gap
    }

    /// `time` as a `Date`, or nil if it is not RFC 3339 with milliseconds.
    public var date: Date? {
        try? Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

/// A decoded event with its metadata, as yielded by `EventBus.events(of:)`.
public struct Delivery<Event: Sendable>: Sendable {
    /// The decoded payload.
    public var event: Event
    /// seq, time, source, id, pid, uid, gid of the event.
    public var metadata: EventMetadata

    /// Pairs a decoded payload with its metadata.
    public init(event: Event, metadata: EventMetadata) {
        self.event = event
        self.metadata = metadata
    }
}

extension Delivery: Equatable where Event: Equatable {}

/// An event whose `data` is still the JSON text the publisher sent, as yielded
/// by `EventBus.events(matching:)`.
public struct RawEvent: Hashable, Sendable {
    /// seq, type, time, source, id, pid, uid, gid.
    public var metadata: EventMetadata
    /// The `data` value exactly as published: UTF-8 JSON, `null` when absent.
    public var data: [UInt8]

    /// - Parameter data: one JSON value, UTF-8.
    public init(metadata: EventMetadata, data: [UInt8]) {
        self.metadata = metadata
        self.data = data
    }

    /// The event type, e.g. `order.created`.
    public var type: String { metadata.type }

    /// `data` as a string (valid UTF-8: the broker validated it).
    public var dataString: String { String(decoding: data, as: UTF8.self) }

    /// Decodes `data` as `T` with `decoder`.
    /// - Throws: `EventBusError.decodingFailed(type:reason:)` naming the event type.
    public func decode<T: Decodable>(_: T.Type = T.self, using decoder: JSONDecoder = JSONDecoder()) throws(EventBusError) -> T {
        do {
            return try decoder.decode(T.self, from: Data(data))
        } catch {
            throw .decodingFailed(type: metadata.type, reason: Self.describe(error))
        }
    }

    /// A one-line reason for a Foundation coding error: its debug description
    /// and coding path rather than the multi-line dump.
    static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return keys.isEmpty ? "" : " (at \(keys.joined(separator: ".")))"
        }
        if let error = error as? DecodingError {
            switch error {
            case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
                return c.debugDescription + path(c)
            @unknown default:
                return "\(error)"
            }
        }
        if let error = error as? EncodingError, case .invalidValue(_, let c) = error {
            return c.debugDescription
        }
        return "\(error)"
    }
}

extension BusEvent {
    /// `eventType` validated. Traps with a clear message when it is not a
    /// valid, unreserved type name: a programming error in the conforming type.
    static var validatedEventType: EventType {
        guard let type = EventType(eventType), !type.isReserved else {
            preconditionFailure("\(Self.self).eventType \"\(eventType)\" is not a valid event type (PROTOCOL.md \"Names and patterns\")")
        }
        return type
    }
}
