// The typed-event side of the client: the `BusEvent` protocol user types
// conform to, the metadata the broker stamps on every event, and `RawEvent`,
// an event whose `data` is still the JSON bytes the publisher sent.
//
// Before editing: `data` is kept byte-for-byte as it came off the wire
// (PROTOCOL.md "Events": the broker forwards it unchanged); decoding into a
// user type happens per receiving registration, outside every lock.
@_spi(Package) import EventBusProtocol
import EventBusSession
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
    /// "Names and patterns"). An invalid name is reported where the type is
    /// used, never a trap: publishing throws `EventBusError.invalidName`, a
    /// stream throws it, an observer's registration ends at once with a
    /// `BusNotice.subscriptionRefused`.
    static var eventType: String { get }
}

/// What the broker says about an event besides its data (PROTOCOL.md
/// "Events"); one type with the CLI's and the bridge's (EventBusSession).
public typealias EventMetadata = EventBusSession.EventMetadata
/// An event whose `data` is still the JSON text the publisher sent (EventBusSession).
public typealias RawEvent = EventBusSession.RawEvent

extension EventMetadata {
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

extension RawEvent {
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
    /// `eventType` validated.
    /// - Throws: `.invalidName` when it is not a valid, unreserved type name.
    static func validatedEventType() throws(EventBusError) -> EventType {
        guard let type = EventType(eventType), !type.isReserved else { throw .invalidName(eventType) }
        return type
    }
}
